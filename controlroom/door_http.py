"""serve's door over HTTP (SPEC §22): the tools of controlroom.mcp_server with the mcp SDK's
Streamable HTTP transport at `/mcp` (stateless, JSON responses), behind a bearer lease token, and
`GET /healthz`. Served by uvicorn on a Unix socket (mode 0666: the token, not the file mode, is the
lock) or a TCP port.

Imported only by `regulator serve` (it needs the optional extra `regulator[mcp]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from controlroom.mcp_server import SHIPPED_SEVERITIES, _call, instructions_for, server_for
from engine.base.errors import RegulatorError
from engine.doors.client import HEALTH_PATH, MCP_PATH, UNAUTHORIZED
from engine.host.door import HostDoor, Session, Unavailable
from engine.host.loop import Host

CURRENT: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "regulator_door_session", default=None
)
THREADS = 64  # engine calls at once (reads of different units; writes take turns on the write lock)


@dataclass(frozen=True)
class Listen:
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


def build_app(host: Host, door: HostDoor) -> Callable[..., Any]:
    """The door's ASGI application (lifespan included: the session manager runs inside it)."""
    limiter = anyio.CapacityLimiter(THREADS)

    async def invoke(name: str, args: dict[str, Any], read_only: bool) -> tuple[dict[str, Any], str]:
        session = CURRENT.get()
        if session is None:  # never: the door lets no request without a lease this far
            from engine.base.errors import Refused

            raise Refused(UNAUTHORIZED)

        def run() -> tuple[dict[str, Any], str]:
            if read_only:
                with session.lock:
                    return _call(session.door, name, args)
            with door.write_lock, session.lock:
                return _call(session.door, name, args)

        try:
            return await anyio.to_thread.run_sync(run, limiter=limiter)
        finally:
            if not read_only:
                host.poke()  # a report or a question: routed now, not at the next watch event

    server = server_for("regulator", instructions_for(None), _severities(door), invoke)
    manager = StreamableHTTPSessionManager(server, stateless=True, json_response=True)

    async def mcp_endpoint(scope: dict[str, Any], receive: Any, send: Any) -> None:
        token = _bearer(scope)
        try:
            session = await anyio.to_thread.run_sync(door.authenticate, token, limiter=limiter)
        except Unavailable as exc:
            await _json(send, 503, {"error": f"the stores cannot be read now: {exc}"})
            return
        if session is None:
            await _json(
                send, 401, {"error": UNAUTHORIZED}, [(b"www-authenticate", b'Bearer realm="regulator"')]
            )
            return
        CURRENT.set(session)
        await manager.handle_request(scope, receive, send)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(manager, receive, send)
            return
        if kind != "http":
            return
        path = scope.get("path", "")
        if path == HEALTH_PATH and scope.get("method") == "GET":
            await _json(send, 200, host.health())
        elif path in (MCP_PATH, MCP_PATH + "/"):
            await mcp_endpoint(scope, receive, send)
        else:
            await _json(send, 404, {"error": f"no such path {path!r}: the door is at {MCP_PATH}"})

    return app


async def _lifespan(manager: StreamableHTTPSessionManager, receive: Any, send: Any) -> None:
    """ASGI lifespan: the session manager runs from startup to shutdown."""
    message = await receive()
    if message["type"] != "lifespan.startup":
        return
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(manager.run())
        except Exception as exc:  # noqa: BLE001
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.startup.complete"})
        while (await receive())["type"] != "lifespan.shutdown":
            pass
    await send({"type": "lifespan.shutdown.complete"})


def _server_class() -> type:
    import signal
    import threading

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, whose SIGINT/SIGTERM stops serving and returns (uvicorn raises the
        signal again after its shutdown, which would kill serve before it cleans up)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return Server


def run(host: Host, door: HostDoor, listen: Listen, on_ready: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM; `on_ready(url)` once the door listens (serve.json)."""
    import uvicorn

    _Server = _server_class()
    config = uvicorn.Config(
        build_app(host, door),
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
    server = _Server(config)

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

    from controlroom.mcp_server import error_result
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
