"""The suite's `regulator` starts through a fork server: one process per test worker imports what
every start of the script imports, then forks a fresh process for each command line; that process
runs the script's own entry point (controlroom.cli.start.run) with the command line, environment,
working folder and standard streams it was given, and its exit code comes back (docs/decisions.md
D-326).

Only stdlib here: run as a script, this file is the server; imported, it is the client (`run`, and
`spawn` for a `regulator serve` the test signals: a second server per worker, profile "serve", holds
what serve imports as it runs, the mcp SDK and uvicorn among it).
A command line a fork could start otherwise than an executed script (`serves`: another value of
what a process or interpreter reads as it starts, a umask, file limit or ignored signal changed
since the server started, an absent working folder) is not served: the caller executes the script
as before, and REGULATOR_TEST_EXEC=1 executes every command line so."""

from __future__ import annotations

import os
import socket
import struct
import sys

# what changes how a process or an interpreter starts, or what a module reads as it is imported
# (TYPER_*; OpenSSL's and cryptography's, read by the C library as cryptography loads it; the serve
# profile's pydantic plugins and OpenTelemetry's context): a command line whose environment differs
# here from the server's is executed
_STARTUP = (
    "PYTHON",
    "LANG",
    "LC_",
    "LD_",
    "MALLOC_",
    "GLIBC_TUNABLES",
    "TYPER_",
    "PYDANTIC_",
    "OTEL_",
    "OPENSSL_",
    "CRYPTOGRAPHY_",
)
_HEADER = struct.Struct("!I")


def _startup(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_STARTUP)}


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = conn.recv(size - len(data))
        if not piece:
            raise EOFError
        data += piece
    return data


# ---- the server ----------------------------------------------------------------------------


def _command(script: str, request: dict, fds: list[int]) -> None:
    """In the forked process: become the command's process, then run the script's entry point."""
    import atexit
    import threading
    import time

    try:
        os.chdir(request["cwd"])
    except OSError as err:
        os.write(fds[2], f"forkserver: cannot enter {request['cwd']}: {err}\n".encode())
        os._exit(127)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    if request.get("session"):
        os.setsid()  # start_new_session=True, as subprocess does it in its child
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = [script, *request["args"]]
    code: int = 0
    interrupted = False
    try:
        from controlroom.cli import start

        start.run()
    except KeyboardInterrupt:  # as the interpreter ends on one: its traceback, then death by SIGINT
        import traceback

        traceback.print_exc()
        code, interrupted = 1, True
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            sys.stderr.write(f"{stop.code}\n")
            code = 1
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's end: threads, then atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = 120 if code == 0 else code
    if interrupted:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


def _serve_one(listener: socket.socket, conn: socket.socket, script: str) -> None:
    import json
    import signal

    head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    try:
        (size,) = _HEADER.unpack(head + _recv_exact(conn, _HEADER.size - len(head)))
        request = json.loads(_recv_exact(conn, size))
    except (EOFError, ValueError, struct.error):
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    if os.fork() != 0:  # the server goes back to accepting
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    # the waiter: forks the command, says its pid, waits, says its exit code; the command is left
    # unreaped (its pid still its own, as a Popen's child is until its owner waits) until the client
    # has read the code and closed the connection, or ended
    listener.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _command(script, request, fds)
    try:
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):  # only the command is signalled
            signal.signal(sig, signal.SIG_IGN)
        for fd in fds:
            os.close(fd)
        conn.sendall(_HEADER.pack(pid))
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        assert ended is not None
        code = ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status
        conn.sendall(struct.pack("!i", code))
        while conn.recv(64):
            pass
    except BaseException:  # noqa: BLE001, S110 - nothing of the waiter's may run the server's loop
        pass
    finally:
        try:
            os.waitpid(pid, 0)
        finally:
            os._exit(0)


# what the server imports before it forks: what every start imports, then the modules most command
# lines import as they run (the engine's reads, writes and trust, the policies, the registers, the
# command groups), none of which reads the environment, the clock or a file as it is imported
ENTRY = ("controlroom.cli.root", "controlroom.cli.start", "engine.base.leaving")
PACKAGES = (
    "engine.base",
    "engine.checkout",
    "engine.commands",
    "engine.doors",
    "engine.host",
    "engine.log",
    "engine.read",
    "engine.trust",
    "identity",
    "registry",
    "controlroom.cli",
)
THIRD_PARTY = ("yaml", "cryptography.hazmat.primitives.serialization.ssh", "typer._click.decorators")
# `controlroom --once`, the room's text without Textual (190 command lines of the suite)
ONCE = ("controlroom.once", "controlroom.readmodel", "controlroom.views", "controlroom.header", "rich.text")
# never imported by the server: they read settings from the environment as they are imported
# (textual.constants, GitPython's refresh), hold a per-process secret (engine.log.pg.store's cut
# marker), or are a command's own heavy dependency (the SDK's, PostgreSQL's)
NOT_PRELOADED = (
    "textual",
    "git",
    "mcp",
    "uvicorn",
    "starlette",
    "anyio",
    "httpx",
    "psycopg",
    "pydantic",
    "watchfiles",
    "engine.log.pg",
)


# the serve profile: what `regulator serve` imports as it starts and as its door answers a unit's
# first calls (controlroom.door_http's lazy SDK, D-248), none of which reads the environment as it is
# imported but for pydantic's plugins and OpenTelemetry's context (_STARTUP)
SERVE = (
    "uvicorn",
    "uvicorn.protocols.http.h11_impl",
    "controlroom.door_http",
    "controlroom.mcp_server",
    "mcp.server.streamable_http_manager",
    "mcp.server.mcpserver.tools.base",
    "mcp.shared._context_streams",
    "mcp.shared.message",
)
PROFILES: dict[str, tuple[str, ...]] = {"command": (), "serve": SERVE}
# never imported by the serve profile: the room's toolkit and GitPython (as above), the PostgreSQL
# backend (its per-process marker; psycopg reads PSYCOPG_IMPL as it is imported)
SERVE_NOT_PRELOADED = ("textual", "git", "psycopg", "engine.log.pg")


def _excluded(name: str, tops: tuple[str, ...] = NOT_PRELOADED) -> bool:
    return any(name == top or name.startswith(top + ".") for top in tops)


def preload(profile: str = "command") -> None:
    import importlib
    import pkgutil

    def walk(package: str) -> None:
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__, package + "."):
            if _excluded(info.name) or info.name.endswith("__main__"):
                continue
            if info.ispkg:
                walk(info.name)
            else:
                importlib.import_module(info.name)

    for name in ENTRY:
        importlib.import_module(name)
    for package in PACKAGES:
        walk(package)
    for name in THIRD_PARTY + ONCE:
        importlib.import_module(name)
    if profile == "serve":
        import uvicorn.server

        exit_handler = uvicorn.server.Server.handle_exit
    for name in PROFILES[profile]:
        importlib.import_module(name)
    if profile == "serve":
        # sse_starlette (the SDK's) replaces it as it is imported; an executed serve binds its
        # signals before its door's first call imports the SDK, so to uvicorn's own
        uvicorn.server.Server.handle_exit = exit_handler  # type: ignore[method-assign]


def serve(path: str, script: str, profile: str = "command") -> None:
    import gc
    import signal
    import threading

    parent = os.getppid()
    gc.disable()  # as the script's entry point does while it imports (D-194)
    sys.argv = [script]
    sys.path[0] = os.path.dirname(script)  # the script's own first path entry
    preload(profile)
    gc.freeze()  # what the imports built is shared by every fork, never walked by its collector
    if path == "--modules":  # tests/test_forkserver.py: what the server holds, and its threads
        sys.stdout.write("\n".join([*sorted(sys.modules), f"threads={threading.active_count()}"]) + "\n")
        return
    if threading.active_count() != 1:  # a fork copies one thread: an import that started one is refused
        sys.stdout.write("not ready: an import started a thread\n")
        return

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while os.getppid() == parent:  # the worker that started it may die without a word: so does it
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        _serve_one(listener, conn, script)


# ---- the client ----------------------------------------------------------------------------

_SERVERS: dict[str, dict[str, object]] = {}  # by profile
_STARTING = __import__("threading").Lock()
_RESTORED = ("SIGPIPE", "SIGXFZ", "SIGXFSZ")  # set back to default by subprocess in its child


def _process_state() -> tuple[object, ...]:
    """What an executed command inherits from the test process and a forked one from the server:
    the umask, the resource limits, the blocked signals, and which signals are ignored. A test that changed one since
    the server started has its command lines executed."""
    import resource
    import signal

    mask = os.umask(0o022)
    os.umask(mask)
    limits = tuple(
        resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_")
    )
    blocked = tuple(sorted(int(sig) for sig in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    ignored = []
    for name in dir(signal):
        if name.startswith("SIG") and not name.startswith("SIG_") and name not in _RESTORED:
            number = getattr(signal, name)
            try:
                if signal.getsignal(number) is signal.SIG_IGN:
                    ignored.append(int(number))
            except (ValueError, TypeError, OSError):
                continue
    return mask, limits, blocked, tuple(sorted(set(ignored)))


def _server(script: str, profile: str = "command") -> str | None:
    """This process's server of `profile`: its socket, started at the first call (or again, if it
    ended); None where none can start."""
    import atexit
    import subprocess
    import tempfile

    from tests import scratch

    with _STARTING:
        known = _SERVERS.setdefault(profile, {})
        proc = known.get("proc")
        if known.get("pid") == os.getpid() and isinstance(proc, subprocess.Popen) and proc.poll() is None:
            return known["path"]  # type: ignore[return-value]
        folder = tempfile.mkdtemp(prefix="rfs-", dir=scratch.root())  # short: a socket path holds ~107 bytes
        path = os.path.join(folder, "s")
        env = dict(os.environ)
        state = _process_state()
        started = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), path, script, profile],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=env,
            process_group=0,  # a Ctrl-C at the terminal reaches the tests and their commands, not it
        )
        assert started.stdout is not None
        if started.stdout.readline() != b"ready\n":
            started.kill()
            started.wait()
            return None
        owner = os.getpid()
        known.update(pid=owner, path=path, proc=started, startup=_startup(env), state=state)

        def stop() -> None:
            if os.getpid() != owner:  # a forked child of the test ending: the server is not its own
                return
            started.kill()
            started.wait()
            import shutil

            shutil.rmtree(folder, ignore_errors=True)

        atexit.register(stop)
        return path


def serves(script: str, env: dict[str, str], cwd: str, profile: str = "command") -> bool:
    """Whether this command line may start through the server rather than by executing `script`:
    not where the folder is absent, the test process's stdin closed (a new socket would take its
    place), or a PYTHONPATH entry is relative or empty (read against the command's folder as the
    interpreter starts)."""
    if os.environ.get("REGULATOR_TEST_EXEC") == "1" or not os.path.isdir(cwd):
        return False
    try:
        os.fstat(0)
    except OSError:
        return False
    if any(not os.path.isabs(entry) for entry in env.get("PYTHONPATH", "/").split(os.pathsep)):
        return False
    if _server(script, profile) is None:
        return False
    known = _SERVERS[profile]
    return _startup(env) == known["startup"] and _process_state() == known["state"]


def _as_process_sees(text: object) -> str:
    """A string (or path) as it reaches a process's argv or environment: what subprocess encodes
    with the file system's encoding, raising where it cannot."""
    return os.fsdecode(os.fsencode(text))  # type: ignore[arg-type]


def run(
    script: str,
    args: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    input: str | bytes | None,
    text: bool,
    timeout: float,
) -> tuple[int, str | bytes, str | bytes]:
    """`subprocess.run([script, *args], capture_output=True, ...)` through the server: the exit code
    (negative for a signal), stdout and stderr, decoded as subprocess decodes text."""
    import locale
    import selectors
    import subprocess
    import time

    # everything subprocess would refuse is refused before anything starts
    encoding = locale.getpreferredencoding(False)
    data = input.encode(encoding) if isinstance(input, str) else input
    request = _request(args, cwd, env, session=False)
    deadline = time.monotonic() + timeout
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if data is not None else (0, -1)
    mine = [out_r, err_r] + ([in_w] if in_w >= 0 else [])
    selector = selectors.DefaultSelector()
    proc: Forked | None = None
    try:
        try:
            proc = _start(script, args, request, [in_r, out_w, err_w], "command")
        finally:
            for fd in (out_w, err_w) + ((in_r,) if data is not None else ()):
                os.close(fd)
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        selector.register(out_r, selectors.EVENT_READ)
        selector.register(err_r, selectors.EVENT_READ)
        offset = 0
        if data is not None:
            if data:
                os.set_blocking(in_w, False)
                selector.register(in_w, selectors.EVENT_WRITE)
            else:
                os.close(in_w)
                mine.remove(in_w)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired([script, *args], timeout)
            for key, _ in selector.select(left):
                fd = key.fd
                if fd == in_w:
                    assert data is not None
                    try:
                        offset += os.write(fd, data[offset : offset + 65536])
                    except BrokenPipeError:
                        offset = len(data)
                    if offset >= len(data):
                        selector.unregister(fd)
                        os.close(fd)
                        mine.remove(fd)
                    continue
                piece = os.read(fd, 65536)
                if piece:
                    chunks[fd].append(piece)
                else:
                    selector.unregister(fd)
        try:
            code = proc.wait(max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            raise subprocess.TimeoutExpired([script, *args], timeout) from None
    except BaseException:
        if proc is not None:
            try:  # unreaped while its connection is open: the pid is still the command's
                proc.kill()
            except OSError:  # its waiter gone without a word: nothing left to kill through it
                pass
        raise
    finally:
        selector.close()
        for fd in mine:
            os.close(fd)
        if proc is not None:
            proc.close()
    out, err = b"".join(chunks[out_r]), b"".join(chunks[err_r])
    if not text:
        return code, out, err
    return code, _translate(out, encoding), _translate(err, encoding)


class Forked:
    """A command the server started (`run`'s, or a `regulator serve` started by `spawn`): what the
    suite asks of a subprocess.Popen (pid, poll, wait, returncode, send_signal, terminate, kill).
    Its exit code comes from its waiter, which leaves it unreaped until this has read the code (as
    a Popen's child, a zombie until its owner waits), so its pid is its own while this has not seen
    it end."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._conn = conn

    def _ended(self, code: bytes) -> int:
        (self.returncode,) = struct.unpack("!i", code)
        self.close()
        return self.returncode

    def close(self) -> None:
        """Done with it: its waiter reaps it (a command not yet ended is reaped as it ends)."""
        self._conn.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._conn.setblocking(False)
            try:
                code = self._conn.recv(4, socket.MSG_PEEK)
            except BlockingIOError:
                return None
            if code == b"":
                raise ChildProcessError(
                    f"the fork server's waiter of pid {self.pid} ended without its exit code"
                )
            if len(code) == 4:
                return self._ended(self._conn.recv(4))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        if self.returncode is None and timeout is not None and timeout <= 0 and self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                return self._ended(_recv_exact(self._conn, 4))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            except EOFError:
                raise ChildProcessError(
                    f"the fork server's waiter of pid {self.pid} ended without its exit code"
                ) from None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # as Popen: it ended meanwhile
                pass

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


def spawn(
    script: str,
    args: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdout: int,
    stderr: int,
    start_new_session: bool,
    profile: str = "serve",
) -> Forked:
    """`subprocess.Popen([script, *args], stdout=..., stderr=..., ...)` through the server of
    `profile` (the caller asked `serves` first): stdin is the test process's own, as Popen's."""
    request = _request(args, cwd, env, session=start_new_session)
    return _start(script, args, request, [0, stdout, stderr], profile)


def _request(args: list[str], cwd: str, env: dict[str, str], session: bool) -> bytes:
    """A command line as the server takes it, everything subprocess would refuse refused here,
    before anything starts; a relative folder is the caller's, as subprocess takes it (symlinks
    followed), not the server's."""
    import json

    argv = [_as_process_sees(arg) for arg in args]
    environment = {_as_process_sees(k): _as_process_sees(v) for k, v in env.items()}
    folder = os.path.join(os.getcwd(), cwd)
    return json.dumps({"args": argv, "cwd": folder, "env": environment, "session": session}).encode()


def _start(script: str, args: list[str], request: bytes, fds: list[int], profile: str) -> Forked:
    """Hand `request` and the three descriptors (stdin, stdout, stderr) to the server of `profile`:
    the command, once its waiter has said its pid."""
    path = _server(script, profile)
    assert path is not None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        socket.send_fds(conn, [_HEADER.pack(len(request))], fds)
        conn.sendall(request)
        (pid,) = _HEADER.unpack(_recv_exact(conn, _HEADER.size))
    except BaseException:
        conn.close()
        raise
    return Forked([script, *args], conn, pid)


def _translate(data: bytes, encoding: str) -> str:
    """What subprocess does to a text stream it captured (Popen._translate_newlines)."""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    serve(*sys.argv[1:4])
