"""`regulator mcp --lease FILE [--print-config]`: the agent's door (design §17). The MCP SDK is
imported only when the server runs, so every other command starts without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from controlroom import printing
from controlroom.cli.common import OPTIONS, our_import, sdk_failed
from engine.base.errors import BadInput

app = typer.Typer()

MISSING_EXTRA = (
    "regulator mcp needs the optional extra: pip install -e '.[mcp]' from a checkout (the mcp SDK)"
)


def lease_path(given: str | None) -> Path:
    """The lease the host names with `--lease FILE` (among the command's options or before it).
    Never found by walking up from the current folder: the host chooses it, not the unit."""
    chosen = given or OPTIONS.lease
    if chosen is None:
        raise BadInput(
            "regulator mcp needs --lease FILE: the host launches one server per unit, naming its lease"
        )
    if OPTIONS.root is not None:
        raise BadInput("regulator mcp takes no --root: the workspace is the one the lease names")
    from engine.checkout.workspace import acting_lease

    acting_lease(Path(chosen), Path.cwd())  # refused to a process `unit run` started (D-218)
    return Path(chosen).absolute()


def refuse_on_a_server(path: Path) -> None:
    """On a PostgreSQL store the stdio door would need database credentials in the unit's process
    tree: refused (exit 3), pointing at `serve` (design §22). On files it stays."""
    from engine.base.errors import Refused
    from engine.checkout.workspace import Workspace, read_lease

    lease = read_lease(path)
    if Workspace(lease.workspace.resolve()).url is not None:
        raise Refused(
            "this workspace's stores are on PostgreSQL: the stdio door would need database credentials "
            "in the unit's process tree; run `regulator serve` on the host and connect the unit through its "
            "door (`regulator door stdio`, or `regulator unit run`)"
        )


@app.command("mcp")
def mcp_command(
    lease: Annotated[
        str | None,
        typer.Option("--lease", metavar="FILE", help="The unit's lease file (required: the host names it)."),
    ] = None,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the mcpServers JSON for an agent host, then exit.")
    ] = False,
) -> None:
    """Run an MCP server on stdio for the unit holding --lease FILE (tools: report_intelligence,
    remember, context, obligations, status, propose_identity_change)."""
    from engine.doors.api import UnitDoor

    path = lease_path(lease)
    refuse_on_a_server(path)
    door = UnitDoor(path)  # a lease that is not the unit's current one is refused here (exit 3)
    if print_config:
        import importlib.util

        from controlroom.mcp_config import server_config

        if importlib.util.find_spec("mcp") is None:  # the config would launch a server that cannot start
            printing.say(f"regulator: {MISSING_EXTRA}\n")
            raise typer.Exit(2)

        printing.write(json.dumps(server_config(door.unit, path)) + "\n")
        return
    import gc

    gc.disable()  # the SDK builds thousands of pydantic models on import: no collection meanwhile
    try:
        from controlroom.mcp_server import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("mcp", "mcp_types", "anyio"):
            printing.say(f"regulator: {MISSING_EXTRA}\n")
            raise typer.Exit(2) from None
        if our_import(exc):
            raise
        raise sdk_failed("regulator mcp", exc) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a broken install's import (even SystemExit), said in one line
        raise sdk_failed("regulator mcp", exc) from None
    finally:
        gc.enable()
    gc.freeze()  # and none rescans them for as long as the server runs
    serve(door)
