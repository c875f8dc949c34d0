"""One git process and its answer: the call every reader of the repository's history makes
(registry.history, registry.trunkwalk), in a module of its own so that a command that needs one
git answer does not import the history readers."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(
    root: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """git's answer; a git that cannot be run answers like a failed command (exit 127)."""
    command = ["git", "-C", str(root), *args]
    try:
        return subprocess.run(command, input=input, capture_output=True, env=env)
    except OSError as exc:
        return subprocess.CompletedProcess(command, 127, b"", str(exc).encode())
