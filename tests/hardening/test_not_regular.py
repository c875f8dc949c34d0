"""A FIFO, socket or device at any file regulator reads (design §26, issue 28): governed files, the
generated views, the trunk's config, `.git/HEAD`. Each is refused in one line (exit 3) and never
waited on: every command runs as a real process under a hard timeout and must finish."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests import scratch
from tests.helpers import REGULATOR, Workspace, one_line

PATHS = [
    "regulator/config.yaml",
    "FINDINGS.md",
    "regulator/identity/invariants.md",
    "regulator/policy/routing.yaml",
    ".git/HEAD",
]
COMMANDS = [("identity", "verify"), ("controlroom", "--once"), ("registry", "views", "--check")]  # issue 28's


def replace(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        folder = Path(tempfile.mkdtemp(dir=scratch.root()))  # a socket path holds ~107 bytes at most
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(folder / "s"))  # the path stays a socket after the process closes it
        server.close()
        (folder / "s").rename(path)
        folder.rmdir()
    else:
        path.symlink_to("/dev/zero")  # a device that never ends


def bounded(ws: Workspace, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [REGULATOR, *args], cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"regulator {' '.join(args)} waited on it") from None


@pytest.mark.parametrize("relative", PATHS)
def test_a_fifo_where_regulator_reads_is_refused_never_waited_on(ws: Workspace, relative: str) -> None:
    replace(ws.root / relative, "fifo")
    before = ws.digest()
    for command in COMMANDS:
        done = bounded(ws, *command)
        # a command that never reads that file may pass; none waits, none writes, none crashes
        if done.returncode == 3:
            assert "is not a regular file" in one_line(done), (command, done.stderr)
        else:
            assert "Traceback" not in done.stderr, (command, done.stderr)
    assert ws.digest() == before


@pytest.mark.parametrize("relative", PATHS)
def test_the_commands_that_read_it_refuse_it(ws: Workspace, relative: str) -> None:
    """The ones issue 28 saw hang: identity verify, --once and views --check, on the file they read."""
    replace(ws.root / relative, "fifo")
    reads = {
        "regulator/config.yaml": ("controlroom", "--once"),
        "FINDINGS.md": ("registry", "views", "--check"),
        "regulator/identity/invariants.md": ("identity", "verify"),
        "regulator/policy/routing.yaml": ("identity", "verify"),
        ".git/HEAD": ("registry", "lint"),
    }[relative]
    done = bounded(ws, *reads)
    assert done.returncode == 3 and "is not a regular file" in one_line(done), done.stderr


@pytest.mark.parametrize("kind", ["socket", "device"])
def test_a_socket_or_a_device_is_refused_as_a_fifo_is(ws: Workspace, kind: str) -> None:
    for relative in ("regulator/identity/invariants.md", "FINDINGS.md"):
        replace(ws.root / relative, kind)
    for command in (("identity", "verify"), ("registry", "views", "--check")):
        done = bounded(ws, *command)
        assert done.returncode == 3 and "is not a regular file" in one_line(done), (command, done.stderr)


def test_a_file_read_with_a_limit_is_never_read_whole_past_it(tmp_path: Path) -> None:
    """A sparse file of a terabyte takes no disk: a read with a limit refuses it by its size, at once."""
    from identity import regular

    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as handle:
        handle.truncate(1 << 40)
    with pytest.raises(ValueError, match="longer than 65536 bytes"):
        regular.read_bytes(sparse, limit=65536)
    small = tmp_path / "small"
    small.write_bytes(b"x" * 65536)
    assert regular.read_bytes(small, limit=65536) == b"x" * 65536
