"""git as a person's process runs it: no hook, no fsmonitor, no filter driver of the repository's
(a unit that can write `.git/` must not get code run where the person's key or agent is)."""

from __future__ import annotations

import subprocess
from pathlib import Path

SAFE = [
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "gpg.ssh.program=ssh-keygen",
    "-c", "commit.gpgsign=false", "-c", "core.sshCommand=ssh",
]  # fmt: skip


class UnsafeConfig(Exception):
    """A filter driver `-c` cannot empty (its name holds `=`): git is not run at all."""


def no_filters(root: Path) -> list[str]:
    """Every filter driver the repository configures, emptied: writing the index re-hashes racily
    clean files, and `status` or `ls-files` may refresh it, which would run a clean filter a unit
    planted in .git/config. UnsafeConfig for a driver whose name `-c` cannot carry."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "config", "--name-only", "--get-regexp", r"^filter\."],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = {
        line.split(".", 1)[1].rsplit(".", 1)[0] for line in done.stdout.splitlines() if line.count(".") >= 2
    }
    if any("=" in name for name in names):  # `-c filter.a=b.clean=` would set `filter.a`
        raise UnsafeConfig(f"a filter driver named {sorted(n for n in names if '=' in n)[0]!r}")
    return [flag for name in sorted(names) for part in ("clean", "smudge", "process")
            for flag in ("-c", f"filter.{name}.{part}=")]  # fmt: skip


def safe_git(
    root: Path,
    *args: str,
    timeout: float = 30,
    filters: bool = True,
    env: dict[str, str] | None = None,
    data: bytes | None = None,
) -> subprocess.CompletedProcess:
    """`git -C root ARGS` as a person's process runs it: text out, or bytes where `data` goes in; a
    git that cannot be run, or a configuration that cannot be made safe, answers like a failed
    command (exit 127). Without `filters`, for a git command that reads the index and hashes no
    file (`ls-files` with no option that stats the tree), the filter drivers are not looked up: one
    git process, not two."""
    command = ["git", "-C", str(root), *SAFE]
    try:
        if filters:
            command += no_filters(root)
        return subprocess.run(
            [*command, *args], capture_output=True, input=data, env=env, text=data is None, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired, UnsafeConfig) as exc:
        return subprocess.CompletedProcess(command, 127, "", str(exc))
