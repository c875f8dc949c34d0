"""Signed person lines judged in a forked child while this process parses the stores (design
§15.1, D-180).

A cold read of a large log parses every line, then checks the signatures of its person events
(engine.read.persons.check_ahead) while the fold waits: about 85 ms of a 0.75 s load at 100,000
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from engine.base.forking import fork_with_pipe, keep_only

MIN_BYTES = 4 << 20  # REGULATOR_PREJUDGE_BYTES sets it (as REGULATOR_CHECKPOINT_BYTES sets the checkpoint's)
MARK = b'"sig":'
GRACE_S = 0.1  # how long the fold waits in all for verdicts it asks for before judging them here
PIECE = 1 << 20  # the child sends its verdicts a piece of a store at a time, the fold takes them so
LIFETIME_S = 120  # the child ends itself after this, whatever became of the process that forked it

Verdicts = dict[
    str, list[tuple[int, Any, str | None]]
]  # store -> (reference, event id, why it counts for nothing)
# (store name, path, byte offset to read from) -> the verdicts of the lines at these references
Judge = Callable[[str, Path, list[int]], list[tuple[int, Any, str | None]]]


def signed_pieces(path: Path, offset: int, index: int, piece: int = PIECE) -> Iterator[tuple[int, list[int]]]:
    """The store from `offset` a piece at a time (about `piece` bytes, ending at a line's end):
    (where the piece ends, the references (offset << 2 | index) of its lines holding MARK)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= offset:
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            begin = offset
            while begin < size:
                end = data.find(b"\n", min(begin + piece, size) - 1)
                end = size if end == -1 else end + 1
                found: list[int] = []
                at = data.find(MARK, begin, end)
                while at != -1:
                    ends = data.find(b"\n", at, end)
                    if ends == -1:  # a line still being written: judged by the fold, once whole
                        break
                    start = data.rfind(b"\n", offset, at) + 1 or offset
                    found.append(start << 2 | index)
                    at = data.find(MARK, ends + 1, end)
                yield end, found
                begin = end


def signed_lines(path: Path, offset: int, index: int) -> list[int]:
    """The references (offset << 2 | index) of the lines at or after `offset` holding MARK."""
    return [ref for _, found in signed_pieces(path, offset, index) for ref in found]


def _threshold() -> int:
    try:
        return max(0, int(os.environ.get("REGULATOR_PREJUDGE_BYTES", MIN_BYTES)))
    except ValueError:
        return MIN_BYTES


class Prejudged:
    """The child's verdicts, a frame per piece of each store in the fold's order (8 bytes of
    length, then in JSON the store, where the piece ends (-1: the store is done) and its lines'
    verdicts): the fold, reading a store a piece at a time too, takes what it needs as it goes,
    while the child goes on ahead."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.buffer = b""
        self.ready: dict[str, dict[int, tuple[Any, str | None]]] = {}
        self.covered: dict[str, int] = {}  # store -> where the child's last piece of it ended
        self.done: set[str] = set()
        self.deadline = 0.0
        self.budget = GRACE_S

    def verdicts(self, name: str, upto: int) -> dict[int, tuple[Any, str | None]]:
        """The child's verdicts for this store's signed lines, at least those before byte `upto`
        if it has them ready (or within what is left of GRACE_S); else no more, and the child is
        stopped: a child behind the fold (a store full of signed lines, or of lines that only look
        signed) never makes it wait longer than GRACE_S in all."""
        began = time.monotonic()
        self.deadline = began + self.budget
        while name not in self.done and self.covered.get(name, -1) < upto and self.fd >= 0:
            frame = self._frame()
            if frame is None:
                break
            try:
                store, end, found = msgspec.json.decode(
                    frame, type=tuple[str, int, list[tuple[int, Any, str | None]]]
                )
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.close()
                break
            self.ready.setdefault(store, {}).update(
                (at, (event_id, reason)) for at, event_id, reason in found
            )
            if end < 0:
                self.done.add(store)
            else:
                self.covered[store] = end
        self.budget = max(0.0, self.budget - (time.monotonic() - began))
        return self.ready.get(name, {})

    def alive(self, name: str) -> bool:
        """Whether the child may still answer for this store (running, or done with it)."""
        return self.fd >= 0 or name in self.done

    def verdict(self, name: str, at: int) -> tuple[Any, str | None] | None:
        """The child's verdict on the line at this reference (event id, why it counts for nothing),
        waiting (within what is left of GRACE_S) until the child has come past it; None where it
        has none: no signature there, the child stopped, or the line is past what it read."""
        ready = self.ready.get(name)
        found = ready.pop(at, None) if ready else None
        if found is None and self.fd >= 0 and name not in self.done and self.covered.get(name, -1) <= at >> 2:
            found = self.verdicts(name, (at >> 2) + 1).pop(at, None)
        return found

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
            left = max(0.0, self.deadline - time.monotonic())  # 0: only what is there already
            try:
                ready = select.select([self.fd], [], [], left)[0]
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


def _send(pipe: Any, frame: object) -> None:
    data = msgspec.json.encode(frame)
    pipe.write(len(data).to_bytes(8, "little") + data)
    pipe.flush()


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
            keep_only(write)
            with os.fdopen(write, "wb") as pipe:
                for name, path, offset, index in stores:  # in the fold's order, a piece as soon as done
                    for end, found in signed_pieces(path, offset, index):
                        _send(pipe, (name, end, judge(name, path, found)))
                    _send(pipe, (name, -1, []))
            code = 0
        finally:
            os._exit(code)
    return Prejudged(pid, fd)
