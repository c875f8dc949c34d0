"""Heartbeats (design §22, §23): every door call is one. Kept in serve's memory only, never in a
store, so they never grow the log: when each lease was last seen, by its hash.

Other code calls `beat(lease_hash)` (a harness that heartbeats a lease) and reads `seen` or
`last_seen()`; `on_beat(callback)` adds a callback run on every beat (e.g. to record it on
PostgreSQL). Lease expiry itself is decided elsewhere (§23), from what is kept here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

from engine.base import clock

_LOCK = threading.Lock()
_SEEN: dict[str, tuple[datetime, float]] = {}  # lease hash -> (host time, monotonic seconds)
_CALLBACKS: list[Callable[[str, datetime], None]] = []


def beat(lease_hash: str) -> None:
    """The lease with this hash was seen now."""
    now = clock.now()
    with _LOCK:
        _SEEN[lease_hash] = (now, time.monotonic())
        callbacks = list(_CALLBACKS)
    for callback in callbacks:
        try:
            callback(lease_hash, now)
        except Exception:  # noqa: BLE001 - a callback's failure never fails the call it rides on
            pass


def seen(lease_hash: str) -> datetime | None:
    """When the lease was last seen by this process (None: never since it started)."""
    with _LOCK:
        found = _SEEN.get(lease_hash)
    return found[0] if found else None


def idle_seconds(lease_hash: str) -> float | None:
    """Seconds since the lease was last seen (monotonic), or None: never seen."""
    with _LOCK:
        found = _SEEN.get(lease_hash)
    return None if found is None else time.monotonic() - found[1]


def last_seen() -> dict[str, datetime]:
    """Every lease seen, by hash."""
    with _LOCK:
        return {key: value[0] for key, value in _SEEN.items()}


def forget(lease_hash: str) -> None:
    with _LOCK:
        _SEEN.pop(lease_hash, None)


def on_beat(callback: Callable[[str, datetime], None]) -> None:
    """Run `callback(lease_hash, at)` on every beat from now on."""
    with _LOCK:
        _CALLBACKS.append(callback)
