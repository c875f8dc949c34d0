"""The `mcpServers` entry an agent host needs to launch a unit's `regulator mcp` (design §17). No
MCP SDK here: a host can print the config where the server's extra is not installed."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from engine.base.text import escape


def command_line() -> tuple[str, list[str]]:
    """How to start this regulator again: the `regulator` script that runs now, else the one on PATH,
    else this Python running the CLI module."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name.startswith("regulator") and script.is_file():
        return str(script.resolve()), []
    found = shutil.which("regulator")
    if found:
        return str(Path(found).resolve()), []
    return sys.executable, ["-c", "from controlroom.cli.root import run; run()"]


def server_name(unit: str) -> str:
    """`regulator-<unit>`, the `/` of a brief in a stream written `_` (never in a unit id, so two
    units never share a name): hosts allow only letters, digits, `-` and `_` in a server's name."""
    return "regulator-" + unit.replace("/", "_")


def server_config(unit: str, lease: Path) -> dict[str, Any]:
    """`{"mcpServers": {"regulator-<unit>": {"command", "args"[, "env"]}}}` for the unit holding
    `lease` (`env` carries REGULATOR_STORE when it is set, design §18)."""
    import os

    command, prefix = command_line()
    server: dict[str, Any] = {"command": command, "args": [*prefix, "mcp", "--lease", str(lease)]}
    store = os.environ.get("REGULATOR_STORE")
    if store:  # hosts pass servers only a few variables (HOME, PATH, ...): carry the store choice
        server["env"] = {"REGULATOR_STORE": store}
    return {"mcpServers": {server_name(unit): server}}


def demo_config_line(root: Path, unit: str) -> str:
    """The demo's line for an agent host: the `--print-config` JSON of the unit's server."""
    from controlroom.demo import worktree_of
    from engine.checkout.workspace import LEASE_FILE

    lease = (worktree_of(root, unit) / LEASE_FILE).absolute()
    config = json.dumps(server_config(unit, lease))
    return f"{unit}'s MCP server (`regulator mcp --lease {escape(lease)} --print-config`): {config}"
