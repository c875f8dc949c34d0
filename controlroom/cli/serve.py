"""`regulator serve` (the host: the S3 loop and the units' door) and `regulator door stdio|call`
(a unit's way to the door from stdio or a shell), design §22. The MCP SDK and uvicorn are imported
only when a door runs, so every other command starts without them."""

from __future__ import annotations

import gc
import ipaddress
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from controlroom import printing
from controlroom.cli.common import (
    emit_json,
    global_options,
    host_workspace,
    our_import,
    read_json_input,
    sdk_failed,
)
from engine.base.errors import BadInput

app = typer.Typer()
door_app = typer.Typer(no_args_is_help=True, help="A unit's way to serve's door: from stdio or a shell.")
app.add_typer(door_app, name="door")

MISSING_EXTRA = "{command} needs the optional extra mcp (the mcp SDK and uvicorn): pip install -e '.[mcp]' from a checkout"
# the top-level modules of the extra: the mcp SDK and what its distribution requires (a module of
# each; tests/test_packaging.py checks the list against the installed SDK's requirements), all present
# before serve starts, since serve imports the SDK itself only on its door's first call (D-248)
EXTRA_MODULES = (
    "mcp",
    "mcp_types",
    "uvicorn",
    "anyio",
    "starlette",
    "sse_starlette",
    "httpx2",
    "jsonschema",
    "opentelemetry",
    "pydantic",
    "jwt",
    "python_multipart",
    "typing_extensions",
    "typing_inspection",
)


def parse_listen(value: str | None, ws: Any, tls_cert: str | None, tls_key: str | None) -> Any:
    """--listen unix:PATH | HOST:PORT (loopback only, unless TLS is given); default the socket of
    engine.host.instance.default_socket."""
    from controlroom.door_http import Listen
    from engine.host.instance import check_socket_path, default_socket

    if (tls_cert is None) != (tls_key is None):
        raise BadInput("--tls-cert and --tls-key go together")
    if value is None or value.startswith("unix:"):
        if tls_cert:
            raise BadInput("--tls-cert/--tls-key serve TCP only; a Unix socket needs none")
        path = Path(value[5:]) if value else default_socket(ws)
        return Listen(path=check_socket_path(path))
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not _address(host) or not port_text.isdigit() or int(port_text) > 65535:
        raise BadInput(
            f"--listen {value!r}: malformed; expected unix:PATH or 127.0.0.1:PORT (an IP address or "
            "localhost, then the port)"
        )
    if not _loopback(host) and tls_cert is None:
        raise BadInput(
            f"--listen {value}: TCP only on loopback (127.0.0.1, ::1) unless --tls-cert and --tls-key are given"
        )
    for name, given in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if given is not None and not Path(given).is_file():
            raise BadInput(f"{name} {given}: no such file")
    return Listen(host=host, port=int(port_text), tls_cert=tls_cert, tls_key=tls_key)


def _address(host: str) -> bool:
    """An IP address or localhost (never a scheme such as `tcp`, nor a name to resolve)."""
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command("serve")
@global_options
def serve_command(
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            metavar="unix:PATH|HOST:PORT",
            help="Where the door listens (default: a Unix socket under $XDG_RUNTIME_DIR or /tmp).",
        ),
    ] = None,
    once_tick: Annotated[
        bool, typer.Option("--once-tick", help="Run one tick and exit 0 (cron, tests).")
    ] = False,
    tls_cert: Annotated[
        str | None, typer.Option("--tls-cert", metavar="FILE", help="TLS certificate (TCP).")
    ] = None,
    tls_key: Annotated[
        str | None, typer.Option("--tls-key", metavar="FILE", help="TLS private key (TCP).")
    ] = None,
    unit_writes: Annotated[
        int | None,
        typer.Option(
            "--unit-writes", metavar="N", help="Write calls a lease may make a minute (default 60)."
        ),
    ] = None,
    unit_write_bytes: Annotated[
        int | None,
        typer.Option(
            "--unit-write-bytes",
            metavar="BYTES",
            help="Bytes of write calls' arguments a lease may send a minute (default 4194304).",
        ),
    ] = None,
) -> None:
    """The host: route within moments of every append, run the timed duties every 10 s, and serve
    the units' door (MCP over Streamable HTTP at /mcp, bearer lease tokens; GET /healthz)."""
    from engine.host import instance as host_instance

    ws = host_workspace()
    if once_tick:
        try:
            instance = host_instance.claim(ws)  # one serve per workspace per host
        except host_instance.AlreadyRunning as running:
            # a cron job beside a running serve (D-160): that serve runs the duties; nothing to do
            printing.say(
                f"regulator: serve (pid {running.pid or 'unknown'}) is running for this workspace and "
                "runs the duties every 10 s; this tick wrote nothing\n"
            )
            return
        try:
            from engine.base.confine import stop_on_signals
            from engine.host.loop import once_tick as run_once

            stop_on_signals()  # cron's or systemd's SIGTERM: no notify left running (D-247)
            run_once(ws)
        finally:
            instance.release()
        return
    _check_extra()  # before --listen is read: its Listen lives in the door's module, which needs it
    target = parse_listen(listen, ws, tls_cert, tls_key)
    budget = write_budget(unit_writes, unit_write_bytes)
    instance = host_instance.claim(ws)
    try:
        _serve(ws, target, instance, budget)
    finally:
        instance.release()


def _no_confined_unit_started(ws: Any, target: Any) -> None:
    """A plain TCP door is anyone's to take while serve is stopped, so no confined unit may be in
    progress (or lost, its processes perhaps alive) when serve starts on one: a unit's account
    could bind the port and read the other units' tokens (D-259; `unit run --user` refuses such a
    door as it starts)."""
    from engine.base.errors import Refused
    from engine.read.load import load
    from engine.read.queries import confined

    state = load(ws)
    started = sorted(unit.id for unit in state.units.values() if confined(state, unit))
    if started:
        shown = ", ".join(started[:5]) + (", …" if len(started) > 5 else "")
        raise Refused(
            f"--listen {target.host}:{target.port}: confined units are started ({shown}): their accounts could "
            "take a plain TCP port while serve is stopped and read the other units' tokens; serve on a Unix "
            "socket (the default) or with --tls-cert/--tls-key, or close or demote them first (D-259)"
        )


def write_budget(writes: int | None, size: int | None) -> Any:
    """Each lease's write budget (engine.host.limits.WriteBudget); positive numbers only."""
    from engine.host import limits

    for name, given in (("--unit-writes", writes), ("--unit-write-bytes", size)):
        if given is not None and given < 1:
            raise BadInput(f"{name} {given}: give a positive number")
    return limits.WriteBudget(
        writes if writes is not None else limits.WRITES_PER_MINUTE,
        size if size is not None else limits.WRITE_BYTES_PER_MINUTE,
    )


def _serve(ws: Any, target: Any, instance: Any, budget: Any = None) -> None:
    """The loop's threads, and the door until SIGINT or SIGTERM."""
    from controlroom.door_http import run
    from engine.host import instance as host_instance
    from engine.host.door import HostDoor
    from engine.host.loop import Host

    if target.path is not None:
        host_instance.prepare_socket_folder(target.path)
    elif target.tls_cert is None:
        _no_confined_unit_started(ws, target)
    host = Host(ws)
    door = HostDoor(ws, host.write_lock)

    def ready(url: str) -> None:
        instance.write(url)
        printing.say(json.dumps({"at": instance_time(), "serve": "listening", "door": url}) + "\n")

    host.start()
    try:
        run(host, door, target, ready, budget)
    finally:
        host.stop()
        if target.path is not None:
            try:
                os.unlink(target.path)
            except OSError:
                pass
            host_instance.release_socket_folder(ws, target.path)
        printing.say(json.dumps({"at": instance_time(), "serve": "stopped"}) + "\n")  # said and flushed


def instance_time() -> str:
    from engine.base import clock

    return clock.iso(clock.now())


def _check_extra(command: str = "regulator serve", sdk: bool = False) -> None:
    """Every module of the extra found, the door's module and uvicorn imported, and with `sdk` the
    mcp SDK too, or one line naming the extra to install or the import's failure (exit 2, as
    `regulator mcp`): never a traceback. `serve` imports the SDK on its door's first call instead
    (controlroom.door_http._Sdk, D-248)."""
    import importlib.util

    missing = BadInput(MISSING_EXTRA.format(command=command))
    for module in EXTRA_MODULES:
        if importlib.util.find_spec(module) is None:
            raise missing
    gc.disable()  # the SDK builds thousands of pydantic models on import
    try:
        import uvicorn  # noqa: F401

        import controlroom.door_http  # noqa: F401

        if sdk:
            import controlroom.mcp_server  # noqa: F401
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in EXTRA_MODULES:
            raise missing from None
        if our_import(exc):
            raise
        raise sdk_failed(command, exc) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a broken install's import (even SystemExit), said in one line
        raise sdk_failed(command, exc) from None
    finally:
        gc.enable()


def _door_env() -> tuple[str, str]:
    from engine.checkout.workspace import DOOR_ENV, TOKEN_ENV
    from engine.doors.client import check_door_url

    url, token = os.environ.get(DOOR_ENV), os.environ.get(TOKEN_ENV)
    if not url or not token:
        raise BadInput(
            f"set {DOOR_ENV} (unix:/PATH or http://127.0.0.1:PORT) and {TOKEN_ENV} (the lease token): "
            "`regulator unit run` gives a unit both"
        )
    return check_door_url(url), token


@door_app.command("stdio")
def door_stdio() -> None:
    """An MCP server on stdio forwarding every request to the door ($REGULATOR_DOOR, with the
    token in $REGULATOR_DOOR_TOKEN), for agent harnesses that speak only stdio."""
    url, token = _door_env()
    _check_extra("regulator door stdio", sdk=True)
    from controlroom.door_http import stdio_forward

    gc.freeze()
    stdio_forward(url, token)


@door_app.command("call")
def door_call(
    tool: Annotated[
        str, typer.Argument(metavar="TOOL", help="A door tool: status, context, report_intelligence, …")
    ],
    json_input: Annotated[
        str | None,
        typer.Option(
            "--json-input", metavar="FILE|-", help="The tool's arguments: one JSON object (default {})."
        ),
    ] = None,
) -> None:
    """Call one door tool as the unit of $REGULATOR_DOOR_TOKEN and print its JSON result (exit 2
    bad input, 3 refused, as the CLI)."""
    from engine.doors.client import DoorClient

    url, token = _door_env()
    arguments = read_json_input(json_input) if json_input is not None else {}
    emit_json(DoorClient(url, token).call(tool, arguments))
