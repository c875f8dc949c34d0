"""A child forked with a pipe to its parent: the one way the engine hands work to a second core
(engine.commands.verification's checks, engine.read.prejudge's signatures)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from engine.base.gcpause import gc_paused


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


def beside_json(work: Callable[[], Any], nice: int = 0) -> Child:
    """`work` in a forked child while this process goes on, for work whose answer is JSON (lists,
    dicts, texts, numbers, None): the answer the child sent (through its pipe, the child keeping no
    other descriptor of the parent's), or the work done here when the child cannot be forked or
    fails. `nice`: the child yields the cores to its parent by that much
    (engine.commands.verification.begin)."""
    import json

    def here() -> Any:
        with gc_paused():  # every line's event may be kept until the routings are judged
            return work()

    parent = os.getpid()
    forked = fork_with_pipe()
    if forked is None:
        return Child(here, None, None)
    pid, fd = forked
    if pid == 0:  # the child: never returns
        write, code = fd, 1
        try:
            keep_only(write)
            die_with(parent)
            if nice:
                os.nice(nice)
            data = json.dumps(here()).encode()
            with os.fdopen(write, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    return Child(here, pid, fd)


def die_with(parent: int) -> None:
    """In a forked child: be killed when the parent dies (Linux's PR_SET_PDEATHSIG), so that a
    --once or verify killed alone leaves no child reading the stores on; where that cannot be
    asked, the child still ends when it is done."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before it was asked
        os._exit(1)


class Child:
    """A forked child's answer, asked for once (`beside_json`); `cancel` ends a child whose
    answer is no longer wanted."""

    def __init__(self, here: Callable[[], Any], pid: int | None, read: int | None) -> None:
        self.here, self.pid, self.read = here, pid, read

    def __call__(self) -> Any:
        import json

        if self.pid is None or self.read is None:
            return self.here()
        with os.fdopen(self.read, "rb") as handle:
            data = handle.read()
        _, status = os.waitpid(self.pid, 0)
        self.pid = self.read = None
        if status != 0:
            return self.here()
        return json.loads(data)

    def cancel(self) -> None:
        import signal

        if self.pid is None or self.read is None:
            return
        os.close(self.read)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        self.pid = self.read = None
