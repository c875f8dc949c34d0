"""Signed person lines judged in a forked child while this process parses the stores (design
§15.1, D-180).

A cold read of a large log parses every line, then checks the signatures of its person events
(engine.read.fold.check_ahead) while the fold waits: about 85 ms of a 0.75 s load at 100,000
obligations. Started before the parse, a child finds the lines that carry a signature by their
bytes (`"sig":`), judges each with the fold's own judge (the same function, on the same bytes,
under the same policy), and hands the verdicts back through a pipe; the fold takes those it asks
for and checks any other person event itself, as before. A line the child judged that is no
person event is never asked for.

Only a read of at least MIN_BYTES, and only where this process runs one thread (a fork copies the
calling thread alone, and a lock another thread held would stay held in the child): the room's
live refreshes, which run beside the event loop, check in threads as before. A child that fails,
or has not a store's verdicts ready when the fold asks for them (within GRACE_S), is killed and
changes nothing: those verdicts are then made here, as without it. The child keeps no descriptor
of the parent's but its pipe, and ends itself after LIFETIME_S.
"""

from __future__ import annotations

import mmap
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from engine.base.forking import fork_with_pipe

MIN_BYTES = 4 << 20  # REGULATOR_PREJUDGE_BYTES sets it (as REGULATOR_CHECKPOINT_BYTES sets the checkpoint's)
MARK = b'"sig":'
GRACE_S = 0.1  # how long the fold waits for a store's verdicts it asks for before judging them here
LIFETIME_S = 120  # the child ends itself after this, whatever became of the process that forked it

Verdicts = dict[
    str, list[tuple[int, Any, str | None]]
]  # store -> (reference, event id, why it counts for nothing)
# (store name, path, byte offset to read from) -> the verdicts of the lines at these references
Judge = Callable[[str, Path, list[int]], list[tuple[int, Any, str | None]]]


def signed_lines(path: Path, offset: int, index: int) -> list[int]:
    """The references (offset << 2 | index) of the lines at or after `offset` holding MARK."""
    found: list[int] = []
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= offset:
            return found
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(MARK, offset)
            while at != -1:
                start = data.rfind(b"\n", offset, at) + 1 or offset
                found.append(start << 2 | index)
                end = data.find(b"\n", at)
                at = -1 if end == -1 else data.find(MARK, end + 1)
    return found


def _threshold() -> int:
    try:
        return max(0, int(os.environ.get("REGULATOR_PREJUDGE_BYTES", MIN_BYTES)))
    except ValueError:
        return MIN_BYTES


class Prejudged:
    """The child's verdicts, a frame per store in the fold's order (8 bytes of length, then the
    store's verdicts in JSON): the fold takes each store's when it has parsed that store, while
    the child goes on with the next."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.buffer = b""
        self.ready: dict[str, dict[int, tuple[Any, str | None]]] = {}
        self.deadline = 0.0

    def verdicts(self, name: str) -> dict[int, tuple[Any, str | None]]:
        """The child's verdicts for this store's signed lines, if it has them ready (or within
        GRACE_S); else none, and the child is stopped: a child behind the fold (a store full of
        signed lines, or of lines that only look signed) never makes it wait longer than this."""
        self.deadline = time.monotonic() + GRACE_S
        while name not in self.ready and self.fd >= 0:
            frame = self._frame()
            if frame is None:
                break
            try:
                store, found = msgspec.json.decode(frame, type=tuple[str, list[tuple[int, Any, str | None]]])
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.close()
                break
            self.ready[store] = {at: (event_id, reason) for at, event_id, reason in found}
        return self.ready.get(name, {})

    def _frame(self) -> bytes | None:
        """The next frame, or None (the child is done, failed or behind: it is stopped)."""
        need = 8
        while True:
            if len(self.buffer) >= need:
                if need == 8:
                    need = 8 + int.from_bytes(self.buffer[:8], "little")
                    continue
                frame, self.buffer = self.buffer[8:need], self.buffer[need:]
                return frame
            left = self.deadline - time.monotonic()
            try:
                ready = left > 0 and select.select([self.fd], [], [], left)[0]
                chunk = os.read(self.fd, 1 << 20) if ready else b""
            except OSError:
                chunk = b""
            if not chunk:
                self.close()
                return None
            self.buffer += chunk

    def close(self) -> None:
        """Done with it (the fold ended, or the child failed or is late): a child still running is
        stopped and reaped, its pipe closed. A frame read before stays good: each was whole."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _only(keep: int) -> None:
    """The child keeps its pipe and nothing else the parent had open: not its standard streams (a
    caller reading them to their end would wait for the child), not a lock's descriptor."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, max(keep + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024))


def start(stores: list[tuple[str, Path, int, int]], judge: Judge) -> Prejudged | None:
    """A child judging the signed lines of these stores ((name, path, offset, index) each), or None
    where it is not worth one or not safe to fork."""
    if threading.active_count() != 1:
        return None
    unread = 0
    for _, path, offset, _ in stores:
        try:
            unread += max(0, path.stat().st_size - offset)
        except OSError:
            return None
    if unread < _threshold():
        return None
    forked = fork_with_pipe()
    if forked is None:
        return None
    pid, fd = forked
    if pid == 0:  # the child: never returns
        write, code = fd, 1
        try:
            signal.alarm(LIFETIME_S)  # orphaned (the parent killed), it still ends
            _only(write)
            with os.fdopen(write, "wb") as pipe:
                for name, path, offset, index in stores:  # in the fold's order, each as soon as done
                    frame = msgspec.json.encode((name, judge(name, path, signed_lines(path, offset, index))))
                    pipe.write(len(frame).to_bytes(8, "little") + frame)
                    pipe.flush()
            code = 0
        finally:
            os._exit(code)
    return Prejudged(pid, fd)
