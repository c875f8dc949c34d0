"""A child forked with a pipe to its parent: the one way the engine hands work to a second core
(engine.commands.verification's checks, engine.read.prejudge's signatures)."""

from __future__ import annotations

import os


def fork_with_pipe() -> tuple[int, int] | None:
    """Fork with a pipe from the child to the parent: (child's pid, the read end) in the parent,
    (0, the write end) in the child, each end closed where it is not used; None where this system
    cannot fork or the fork fails (the caller does the work itself)."""
    if not hasattr(os, "fork"):
        return None
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:
        os.close(read)
        return 0, write
    os.close(write)
    return pid, read
