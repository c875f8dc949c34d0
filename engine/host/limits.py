"""What one caller may take of `serve` (design §22; docs/operations.md lists the defaults): open
connections per peer and in all, kept well below the process's open-file limit so the stores and
their locks always have room; how long a connection may take to send its request; and how much a
lease may write per minute (a token bucket of writes and one of bytes).

The connection counts live on the event loop (no lock); the write budget is taken from the loop too,
but is locked so a tool (or a test) may use it from any thread.
"""

from __future__ import annotations

import resource
import threading
import time

import msgspec

MAX_CONNECTIONS = 1024  # open door connections in all, at most (lower where the fd limit is low)
PER_PEER = 64  # open connections of one peer: a uid on a Unix socket (SO_PEERCRED), an address on TCP
RESERVED_FDS = 64  # at least this many files kept for the stores, locks, logs and git
READ_DEADLINE_S = 10.0  # a connection that has not sent its whole request by then is closed
LEASE_RUNNING = 2  # calls of one lease in progress at once (its calls take turns on its door anyway)
LEASE_WAITING = 16  # calls of one lease waiting for those; more are answered 429 at once
WRITES_PER_MINUTE = 60  # write calls of one lease (reports, questions, memory, results)
WRITE_BYTES_PER_MINUTE = 4 * 1024 * 1024  # bytes of arguments of one lease's write calls


def raise_open_files() -> int:
    """The soft open-file limit raised to the hard one (where that is finite); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_caps(open_files: int) -> tuple[int, int]:
    """(in all, per peer) for a process allowed `open_files` files: a quarter of them (at least
    RESERVED_FDS) stays for everything but connections."""
    room = open_files - max(RESERVED_FDS, open_files // 4)
    total = max(4, min(MAX_CONNECTIONS, room))
    return total, max(2, min(PER_PEER, total // 4))


class ConnectionCaps:
    """Open connections counted per peer and in all (the event loop's thread only)."""

    def __init__(self, total: int, per_peer: int) -> None:
        self.total, self.per_peer = total, per_peer
        self.open = 0
        self._peers: dict[str, int] = {}

    def admit(self, peer: str) -> bool:
        mine = self._peers.get(peer, 0)
        if self.open >= self.total or mine >= self.per_peer:
            return False
        self._peers[peer] = mine + 1
        self.open += 1
        return True

    def release(self, peer: str) -> None:
        left = self._peers.get(peer, 0) - 1
        if left > 0:
            self._peers[peer] = left
        else:
            self._peers.pop(peer, None)
        self.open = max(0, self.open - 1)


class _Bucket(msgspec.Struct):
    writes: float
    size: float
    at: float


class WriteBudget:
    """Per lease: `writes` calls and `size` bytes of arguments a minute, each a token bucket as
    full as a minute's worth (a burst of a minute's budget, then the rate)."""

    def __init__(self, writes: int = WRITES_PER_MINUTE, size: int = WRITE_BYTES_PER_MINUTE) -> None:
        self.writes, self.size = writes, size
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def charge(self, lease: str, size: int, now: float | None = None) -> str | None:
        """Take one write of `size` bytes from the lease's budget; None when taken, else why not
        (nothing taken)."""
        moment = time.monotonic() if now is None else now
        with self._lock:
            bucket = self._buckets.get(lease)
            if bucket is None:
                bucket = self._buckets[lease] = _Bucket(float(self.writes), float(self.size), moment)
            elapsed = max(0.0, moment - bucket.at)
            bucket.writes = min(float(self.writes), bucket.writes + elapsed * self.writes / 60)
            bucket.size = min(float(self.size), bucket.size + elapsed * self.size / 60)
            bucket.at = moment
            if len(self._buckets) > 10_000:  # full buckets are the default: forget them
                for key in [k for k, b in self._buckets.items() if b.writes >= self.writes and k != lease]:
                    del self._buckets[key]
            if size > self.size:
                return (
                    f"this write is {size} bytes, more than a lease may write in a minute "
                    f"({self.size} bytes: serve's --unit-write-bytes)"
                )
            if bucket.writes < 1:
                return (
                    f"write budget spent: at most {self.writes} writes a minute per lease "
                    "(serve's --unit-writes); try again later"
                )
            if bucket.size < size:
                return (
                    f"write budget spent: at most {self.size} bytes of writes a minute per lease "
                    "(serve's --unit-write-bytes); try again later"
                )
            bucket.writes -= 1
            bucket.size -= size
            return None
