"""serve's door over HTTP (design §22): the tools of controlroom.mcp_server with the mcp SDK's
Streamable HTTP transport at `/mcp` (stateless, JSON responses), behind a bearer lease token, and
`GET /healthz`. Served by uvicorn on a Unix socket (mode 0666: the token, not the file mode, is the
lock) or a TCP port.

What one caller may take (engine.host.limits): open connections per peer (its uid on the Unix
socket, by SO_PEERCRED; its address on TCP) and in all, below the open-file limit; a request not
sent whole within READ_DEADLINE_S is closed; a lease's calls pass a gate on the event loop (a few
at once, a few waiting, 429 beyond) before any thread is taken, and its writes a budget; tokens are
checked on threads of their own. An accept that fails for want of files is one log line a minute.

Imported only by `regulator serve` (it needs the optional extra `regulator[mcp]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import gc
import json
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from engine.base.errors import RegulatorError
from engine.commands.actors import lease_hash
from engine.doors.client import HEALTH_PATH, MCP_PATH, UNAUTHORIZED
from engine.host import limits
from engine.host.door import HostDoor, Session, Unavailable, plausible
from engine.host.loop import Host

CURRENT: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "regulator_door_session", default=None
)
# engine calls at once: reads of different units, and writes, which take turns on the write lock
# anyway (a write waiting there holds a thread, so writes have threads of their own and never keep a
# read waiting). A call beyond them waits in the event loop, which costs nothing; 64 threads all
# wanting the interpreter's lock kept the event loop waiting for it (door_call_ms's p99 a little
# lower with 8, docs/performance.md's nineteenth session)
THREADS = 8
WRITE_THREADS = 4
AUTH_THREADS = 16  # token checks at once, on threads of their own (never behind the calls)
LOG_EVERY_S = 60.0  # a repeated door error (out of files, connections refused) logged once this often


class Listen(msgspec.Struct, frozen=True):
    """Where the door listens: a Unix socket path, or a TCP host and port (TLS where given)."""

    path: Path | None = None
    host: str | None = None
    port: int | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    def url(self, port: int | None = None) -> str:
        if self.path is not None:
            return f"unix:{self.path}"
        scheme = "https" if self.tls_cert else "http"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{scheme}://{host}:{port if port is not None else self.port}"


def _severities(door: HostDoor) -> tuple[str, ...]:
    from controlroom.mcp_server import SHIPPED_SEVERITIES

    try:
        return tuple(door.ws.routing().severities)
    except RegulatorError:
        return SHIPPED_SEVERITIES


def _bearer(scope: dict[str, Any]) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == b"authorization":
            text = value.decode("latin-1")
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


async def _json(
    send: Any, status: int, data: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(data).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Head(msgspec.Struct):
    """What the door reads of a JSON-RPC message before the SDK does (the rest skipped)."""

    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET


class _Fraction(str):
    """A JSON number with a fraction or an exponent, as `_HEAD` reads it: never an id (and never
    out of a float's range, so `1e400` is read, not refused)."""


_HEAD = msgspec.json.Decoder(_Head, float_hook=_Fraction)
INVALID_ID = "Invalid Request: a request's id is a string or an integer (JSON-RPC 2.0, MCP)"


def invalid_id(body: bytes) -> bool:
    """A request (it names a method) whose `id` is neither text nor an integer (an object, a
    float, `1e400`, true): the SDK reads such a message as a notification and answers 202 with
    nothing, leaving the call unanswered (an adversarial review). Anything that is not one JSON
    object is left to the SDK, which answers it."""
    try:  # one pass in C, whatever the body: no second reading of it on the event loop (a review)
        head = _HEAD.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return False  # no JSON object (or nested past any reader's depth): the SDK answers it
    method, ident = head.method, head.id
    if method is msgspec.UNSET or ident is msgspec.UNSET:
        return False  # a notification, a response: the SDK's
    return not (type(ident) is str or type(ident) is int)


PEEK_BYTES = 4 << 20  # the SDK's own body limit (413 beyond): a body past it is left to the SDK


def _declared(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _peek(receive: Any) -> tuple[list[dict[str, Any]], bytes | None]:
    """The request's messages read to its body's end, and the body where it is whole and within
    PEEK_BYTES (else None: a client that broke off, a body too large, which the SDK answers as
    before, given the same messages again by `_replaying`)."""
    messages: list[dict[str, Any]] = []
    size = 0
    while True:
        message: dict[str, Any] = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        size += len(message.get("body", b""))
        if size > PEEK_BYTES:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def _replaying(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A `receive` that gives the messages read already, then whatever the connection says next."""
    waiting = list(reversed(messages))

    async def again() -> dict[str, Any]:
        if waiting:
            return waiting.pop()
        message: dict[str, Any] = await receive()
        return message

    return again


class _Gate:
    """One lease's calls: LEASE_RUNNING at once, the rest of `holders` waiting."""

    def __init__(self) -> None:
        self.running = asyncio.Semaphore(limits.LEASE_RUNNING)
        self.holders = 0


class _Sdk:
    """The mcp SDK's session manager, built on the door's first call from a known lease and run
    until the door stops (D-248). Importing the SDK costs about half a second of CPU (it builds its
    pydantic models), which a host whose units have not called yet need not pay before its duties
    start; a token the door does not know never makes it pay. The import runs on a daemon thread of
    its own, so /healthz and the host's duties go on meanwhile, every call that arrives meanwhile
    waits for it, and a stop never waits for an import that hangs. An SDK that fails to load or to
    run refuses every call (503) and says why on stderr, once a minute while calls come."""

    STOPPING = "serve is stopping: call again once it is back"
    FAILED = "the door cannot answer: its mcp SDK failed to load (see serve's log)"

    def __init__(self, log: Throttled) -> None:
        self.build: Callable[[], Any] | None = None  # set by build_app
        self._log = log
        self._wanted = asyncio.Event()
        self._ready = asyncio.Event()
        self._closing = False  # serve's stop has begun: no call waits for the SDK any more
        self._stopping = asyncio.Event()  # the door's last call is done: the manager stops
        self._task: asyncio.Task[None] | None = None
        self.manager: Any = None
        self.error: str | None = None

    def start(self) -> None:
        """At the door's startup (the ASGI lifespan): the keeper waits until a call wants it."""
        self._task = asyncio.get_running_loop().create_task(self._keep())

    def _failed(self, exc: BaseException) -> None:
        self.error = f"{type(exc).__name__}: {exc}"
        self._log.say("sdk failed to load", error=self.error)

    async def _built(self) -> Any:
        """The manager, or what its build raised (SystemExit too: a unit's call never ends serve)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        build = self.build
        assert build is not None

        def work() -> None:
            try:
                result: Any = build()
            except BaseException as exc:  # noqa: BLE001 - handed to the loop, never raised on this thread
                result = exc

            def hand_over() -> None:
                if not done.done():
                    done.set_result(result)

            with contextlib.suppress(RuntimeError):  # the loop is gone: serve stopped meanwhile
                loop.call_soon_threadsafe(hand_over)

        threading.Thread(target=work, name="regulator-sdk-import", daemon=True).start()
        return await done

    async def _keep(self) -> None:
        try:
            await self._wanted.wait()
            built = await self._built()
            if isinstance(built, BaseException):
                self._failed(built)
                return
            _sdk_logs_to(self._log)
            try:
                async with built.run():
                    self.manager = built
                    self._ready.set()
                    await self._stopping.wait()
            except Exception as exc:  # noqa: BLE001 - the manager could not run: every call refused, said
                self._failed(exc)
        finally:
            self.manager = None
            self._ready.set()

    async def get(self) -> tuple[Any, str]:
        """(the running manager, "") once it is built, building it first if no call has wanted it
        yet; (None, why) where it cannot answer. A running manager answers until the door's last
        call is done, serve's stop begun or not."""
        if self.manager is None and not self._closing:
            self._wanted.set()
            await self._ready.wait()
        if self.manager is not None:
            return self.manager, ""
        if self._closing:
            return None, self.STOPPING
        if self.error is not None:
            self._log.say("sdk failed to load", error=self.error)
        return None, self.FAILED

    def closing(self) -> None:
        """serve's stop begins (before uvicorn waits for the calls in flight): calls still waiting
        for the SDK are answered now (503), not cancelled when the stop's grace runs out; a running
        manager goes on answering the calls in flight."""
        self._closing = True
        self._ready.set()

    async def stop(self) -> None:
        """The lifespan's shutdown, once the calls in flight are done: the running manager stops; a
        build under way is left to its daemon thread."""
        self.closing()
        self._stopping.set()
        if self._task is None:
            return
        if self.manager is None:
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _sdk_logs_to(log: Throttled) -> None:
    """The SDK's own log (a client that hung up mid-body, a malformed request: a traceback each, as
    often as any lease's holder likes) as serve's other door lines: one line a minute per kind, the
    message without its traceback."""
    _logs_to(log, "mcp", "sdk error")


def _logs_to(log: Throttled, name: str, kind: str) -> None:
    """Logger `name`'s warnings and errors as serve's door lines of `kind` (Throttled: one a minute,
    the message and its exception on one line each, never a traceback)."""
    import logging

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            error = record.exc_info[1] if record.exc_info else None
            said = {"error": f"{type(error).__name__}: {error}"[:300]} if error is not None else {}
            log.say(kind, message=record.getMessage()[:300], **said)

    logger = logging.getLogger(name)
    logger.handlers[:] = [Handler(logging.WARNING)]
    logger.propagate = False


class Throttled:
    """One line on stderr per kind of trouble, at most once every LOG_EVERY_S (never a traceback
    per connection)."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._missed: dict[str, int] = {}

    def say(self, kind: str, **fields: Any) -> None:
        from engine.base import clock

        moment = time.monotonic()
        last = self._last.get(kind)
        if last is not None and moment - last < LOG_EVERY_S:
            self._missed[kind] = self._missed.get(kind, 0) + 1
            return
        self._last[kind] = moment
        line = {"at": clock.iso(clock.now()), "door": kind, **fields, "since": self._missed.pop(kind, 0)}
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(json.dumps(line) + "\n")
            sys.stderr.flush()


def build_app(
    host: Host, door: HostDoor, budget: limits.WriteBudget | None = None, sdk: _Sdk | None = None
) -> Callable[..., Any]:
    """The door's ASGI application (lifespan included: the SDK's session manager runs inside it,
    from the first call a known lease makes: _Sdk)."""
    limiter = anyio.CapacityLimiter(THREADS)
    write_limiter = anyio.CapacityLimiter(WRITE_THREADS)
    auth_limiter = anyio.CapacityLimiter(AUTH_THREADS)
    gates: dict[str, _Gate] = {}
    spend = budget or limits.WriteBudget()

    async def invoke(name: str, args: dict[str, Any], read_only: bool) -> tuple[dict[str, Any], str]:
        session = CURRENT.get()
        if session is None:  # never: the door lets no request without a lease this far
            from engine.base.errors import Refused

            raise Refused(UNAUTHORIZED)

        if not read_only:
            size = len(json.dumps(args, separators=(",", ":"), default=str).encode())
            refusal = spend.charge(session.lease_hash, size)
            if refusal is not None:
                from engine.base.errors import Refused

                raise Refused(refusal)

        from controlroom.mcp_server import _call

        def run() -> tuple[dict[str, Any], str]:
            if read_only:
                with session.lock:
                    return _call(session.door, name, args)
            with door.write_lock, session.lock:
                return _call(session.door, name, args)

        try:
            return await anyio.to_thread.run_sync(run, limiter=limiter if read_only else write_limiter)
        finally:
            if not read_only:
                host.poke()  # a report or a question: routed now, not at the next watch event

    def build_manager() -> Any:
        gc.disable()  # the SDK builds thousands of pydantic models on import
        try:
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from controlroom.mcp_server import instructions_for, server_for
        finally:
            gc.enable()
        server = server_for("regulator", instructions_for(None), _severities(door), invoke)
        return StreamableHTTPSessionManager(server, stateless=True, json_response=True)

    sdk = sdk or _Sdk(Throttled())
    sdk.build = build_manager

    async def unauthorized(send: Any) -> None:
        await _json(send, 401, {"error": UNAUTHORIZED}, [(b"www-authenticate", b'Bearer realm="regulator"')])

    async def mcp_endpoint(scope: dict[str, Any], receive: Any, send: Any) -> None:
        token = _bearer(scope)
        if not plausible(token):
            await unauthorized(send)
            return
        assert token is not None
        hashed = lease_hash(token)
        gate = gates.get(hashed)
        if gate is None:
            gate = gates[hashed] = _Gate()
        if gate.holders >= limits.LEASE_RUNNING + limits.LEASE_WAITING:
            await _json(
                send,
                429,
                {
                    "error": f"too many calls of this lease at once (at most {limits.LEASE_RUNNING} "
                    f"running and {limits.LEASE_WAITING} waiting): wait for the ones in flight"
                },
                [(b"retry-after", b"1")],
            )
            return
        gate.holders += 1
        try:
            async with gate.running:
                try:
                    session = await anyio.to_thread.run_sync(door.authenticate, token, limiter=auth_limiter)
                except Unavailable as exc:
                    await _json(send, 503, {"error": f"the stores cannot be read now: {exc}"})
                    return
                if session is None:
                    await unauthorized(send)
                    return
                manager, why = await sdk.get()
                if manager is None:
                    await _json(send, 503, {"error": why})
                    return
                declared = _declared(scope)
                if scope.get("method") == "POST" and (declared is None or declared <= PEEK_BYTES):
                    messages, body = await _peek(receive)
                    if body is not None and invalid_id(body):
                        error = {"code": -32600, "message": INVALID_ID}
                        await _json(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})
                        return
                    receive = _replaying(messages, receive)
                CURRENT.set(session)
                await manager.handle_request(scope, receive, send)
        finally:
            gate.holders -= 1
            if gate.holders == 0:
                gates.pop(hashed, None)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(sdk, receive, send)
            return
        if kind != "http":
            return
        path = scope.get("path", "")
        if path == HEALTH_PATH and scope.get("method") == "GET":
            health = host.health()
            if sdk.error is not None:  # its duties run, but every unit's call is refused (503): said
                health["doorError"] = (
                    f"the mcp SDK failed to load ({sdk.error}): every unit's call is refused"
                )
            await _json(send, 200, health)
        elif path in (MCP_PATH, MCP_PATH + "/"):
            await mcp_endpoint(scope, receive, send)
        else:
            await _json(send, 404, {"error": f"no such path {path!r}: the door is at {MCP_PATH}"})

    return app


async def _lifespan(sdk: _Sdk, receive: Any, send: Any) -> None:
    """ASGI lifespan: the SDK's keeper from startup to shutdown (its session manager runs from the
    first call that wants it)."""
    message = await receive()
    if message["type"] != "lifespan.startup":
        return
    sdk.start()
    await send({"type": "lifespan.startup.complete"})
    try:
        while (await receive())["type"] != "lifespan.shutdown":
            pass
    finally:
        await sdk.stop()
    await send({"type": "lifespan.shutdown.complete"})


def _server_class() -> type:
    import signal
    import threading

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, whose SIGINT/SIGTERM/SIGHUP stops serving and returns (uvicorn raises the
        signal again after its shutdown, which would kill serve before it cleans up), and tells the
        door's SDK keeper as its stop begins (calls waiting for the SDK answered, not cancelled)."""

        sdk: _Sdk | None = None

        async def shutdown(self, sockets: Any = None) -> None:
            if self.sdk is not None:
                self.sdk.closing()
            await super().shutdown(sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # a closed terminal stops it too
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return Server


def _peer(transport: Any) -> str:
    """Who is at the other end: a uid on a Unix socket (the kernel's SO_PEERCRED, which a client
    cannot choose), an address on TCP."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return f"uid:{struct.unpack('3i', raw)[1]}"
        except OSError:
            return "uid:?"
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        return f"ip:{peer[0]}"
    return "?"


_REFUSED_BODY = b'{"error": "too many open connections: close some, then retry"}'
REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    + b"content-length: %d\r\n\r\n" % len(_REFUSED_BODY)
    + _REFUSED_BODY
)


def _protocol_class(caps: limits.ConnectionCaps, log: Throttled, deadline: float) -> type:
    """uvicorn's h11 protocol, with the connection caps and the request read deadline."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class DoorProtocol(H11Protocol):
        _peer_key: str | None = None
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            peer = _peer(transport)
            if not caps.admit(peer):
                log.say("refused", reason="too many open connections", peer=peer, open=caps.open)
                transport.write(REFUSED)
                transport.close()
                return
            self._peer_key = peer
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(deadline, self._read_expired)

        def _read_expired(self) -> None:
            """Closed when its request is not in whole by now (its headers or its body)."""
            self._deadline = None
            if self.transport.is_closing():
                return
            reading = self.conn.their_state is h11.SEND_BODY or (
                self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
            )
            if reading:
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._peer_key is None:
                return  # refused at the door: never counted, nothing started
            caps.release(self._peer_key)
            self._peer_key = None
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

    return DoorProtocol


def _quiet_accept_errors(log: Throttled, caps: limits.ConnectionCaps) -> None:
    """An accept that fails for want of files (or memory) is one line a minute, not a traceback
    a connection; every other loop error goes to asyncio's handler as before."""
    loop = asyncio.get_running_loop()
    scarce = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in scarce:
            log.say("accept", error=exc.strerror or str(exc), open=caps.open)
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def run(
    host: Host,
    door: HostDoor,
    listen: Listen,
    on_ready: Callable[[str], None],
    budget: limits.WriteBudget | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM; `on_ready(url)` once the door listens (serve.json)."""
    import uvicorn

    _Server = _server_class()
    total, per_peer = limits.connection_caps(limits.raise_open_files())
    caps = limits.ConnectionCaps(total, per_peer)
    log = Throttled()
    sdk = _Sdk(log)
    config = uvicorn.Config(
        build_app(host, door, budget, sdk),
        http=_protocol_class(caps, log, limits.READ_DEADLINE_S),
        uds=str(listen.path) if listen.path is not None else None,
        host=listen.host or "127.0.0.1",
        port=listen.port or 0,
        ssl_certfile=listen.tls_cert,
        ssl_keyfile=listen.tls_key,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    # uvicorn's own log (set up by Config: a traceback for each request h11 cannot parse, a line
    # for each malformed request line, as often as any local account likes, no token needed) as
    # serve's door lines: one a minute, without the traceback
    _logs_to(log, "uvicorn", "http error")
    _logs_to(log, "uvicorn.error", "http error")
    server = _Server(config)
    server.sdk = sdk

    async def ready() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.01)
        port = None
        if listen.path is not None:
            os.chmod(listen.path, 0o666)
        else:
            for found in server.servers:
                for sock in found.sockets or []:
                    port = sock.getsockname()[1]
                    break
        on_ready(listen.url(port))

    async def main() -> None:
        _quiet_accept_errors(log, caps)
        watcher = asyncio.ensure_future(ready())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    asyncio.run(main())


def stdio_forward(url: str, token: str) -> None:
    """`regulator door stdio`: an MCP server on stdio whose every tool call and tool listing is
    forwarded to the door at `url` with `token` (for harnesses that speak only stdio)."""
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from controlroom.mcp_server import error_result, instructions_for
    from engine.base.text import escape
    from engine.doors.client import DoorClient

    client = DoorClient(url, token)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        try:
            listed = await anyio.to_thread.run_sync(client.tools)
        except RegulatorError:
            listed = []
        return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in listed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, dict(params.arguments or {})
        try:
            raw = await anyio.to_thread.run_sync(lambda: client.call_raw(name, args))
        except RegulatorError as exc:
            return error_result(exc.exit_code, escape(str(exc)))
        return types.CallToolResult.model_validate(raw)

    server = Server(
        "regulator",
        version="0.1.0",
        instructions=instructions_for(None),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
