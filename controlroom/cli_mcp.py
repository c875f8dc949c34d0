"""`regulator mcp --lease FILE [--print-config]`: the agent's door (SPEC §17). The MCP SDK is
imported only when the server runs, so every other command starts without it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from controlroom import cli
from controlroom.cli import app
from controlroom.text import escape
from engine.errors import BadInput

MISSING_EXTRA = "regulator mcp needs the optional extra: pip install 'regulator[mcp]' (the mcp SDK)"


def lease_option(given: Path | None) -> Path:
    """The lease the host names: `--lease FILE` (read here or lifted by the root command line).
    Never found by walking up from the current folder: the host chooses it, not the unit."""
    lifted = cli.GLOBAL.get("lease")
    chosen = given or (Path(lifted) if lifted else None)
    if chosen is None:
        raise BadInput(
            "regulator mcp needs --lease FILE: the host launches one server per unit, naming its lease"
        )
    if cli.GLOBAL.get("root"):
        raise BadInput("regulator mcp takes no --root: the workspace is the one the lease names")
    return chosen.absolute()


def command_line() -> tuple[str, list[str]]:
    """How to start this regulator again: the `regulator` script that runs now, else the one on PATH,
    else this Python running the CLI module."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name.startswith("regulator") and script.is_file():
        return str(script.resolve()), []
    found = shutil.which("regulator")
    if found:
        return str(Path(found).resolve()), []
    return sys.executable, ["-c", "from controlroom.cli import run; run()"]


def server_config(unit: str, lease: Path) -> dict[str, Any]:
    """What an agent host needs to launch this unit's server (SPEC §17)."""
    command, prefix = command_line()
    return {
        "mcpServers": {
            f"regulator-{unit}": {"command": command, "args": [*prefix, "mcp", "--lease", str(lease)]}
        }
    }


def demo_config_line(root: Path, unit: str) -> str:
    """The demo's line for an agent host: the `--print-config` JSON of the unit's server (SPEC §17)."""
    from controlroom.demo import worktree_of
    from engine.workspace import LEASE_FILE

    lease = worktree_of(root, unit) / LEASE_FILE
    config = json.dumps(server_config(unit, lease.absolute()))
    return f"{unit}'s MCP server (`regulator mcp --lease {escape(lease)} --print-config`): {config}"


@app.command("mcp")
def mcp_command(
    lease: Annotated[
        Path | None, typer.Option("--lease", help="The unit's lease file (the host names it).")
    ] = None,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the mcpServers JSON for an agent host, then exit.")
    ] = False,
) -> None:
    """Run an MCP server on stdio for the unit holding this lease (tools: report_intelligence,
    remember, context, obligations, status, propose_identity_change)."""
    from engine.api import UnitDoor

    path = lease_option(lease)
    door = UnitDoor(path)  # a lease that is not the unit's current one is refused here (exit 3)
    if print_config:
        sys.stdout.write(json.dumps(server_config(door.unit, path)) + "\n")
        return
    try:
        from controlroom.mcp_server import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("mcp", "mcp_types", "anyio"):
            sys.stderr.write(f"regulator: {MISSING_EXTRA}\n")
            raise typer.Exit(2) from None
        raise
    serve(door)
