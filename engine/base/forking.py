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


def keep_only(keep: int) -> None:
    """In a forked child: keep the descriptor `keep` (its pipe) and nothing else the parent had
    open: not its standard streams (a caller reading them to their end would wait for the child),
    not a lock's descriptor (a lock is let go when its last descriptor closes: the child would
    hold the parent's decide lock for as long as it runs)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, max(keep + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024))
