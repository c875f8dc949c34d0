"""What git and the tracked tree say about this checkout: git config values, the configured trunk."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine.checkout.workspace import Workspace
from identity import regular

CONFIG = "regulator/config.yaml"  # the tracked file that names the trunk (init --trunk)


def git_config(root: Path, key: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "config", "--get", key], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value or None


def trunk_of(ws: Workspace) -> str:
    try:
        for line in regular.read_text(ws.root / CONFIG).splitlines():
            if line.startswith("trunk:"):
                return line.split(":", 1)[1].strip() or "main"
    except FileNotFoundError:
        pass
    return "main"
