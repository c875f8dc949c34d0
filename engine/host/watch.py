"""Being told that a store was appended to: an inotify watch of `.regulator/` on files (watchfiles,
a 30 ms debounce), LISTEN on PostgreSQL. serve's watcher pokes its router with it; `unit run`
beats its lease at once when units.ndjson changes (a demote, a lease released or expired: D-336)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable

from engine.checkout.workspace import Workspace

WATCH_DEBOUNCE_MS = 30
WATCH_STEP_MS = 10


def watch_files(
    ws: Workspace,
    poke: Callable[[], None],
    stop: threading.Event,
    stores: Iterable[str] = (),
    idle: bool = False,
) -> None:
    """Call `poke` after each batch of changes to the stores' files (every store's where `stores` is
    empty) until `stop` is set; with `idle`, also after each second without one (what was appended
    before the watch was armed, which inotify never reports). Raises where the watch cannot be made
    (inotify's limits)."""
    from watchfiles import watch

    names = frozenset(f"{store}.ndjson" for store in stores)

    def wanted(_change: object, path: str) -> bool:
        return os.path.basename(path) in names if names else path.endswith(".ndjson")

    for _ in watch(
        str(ws.state_dir),
        watch_filter=wanted,
        debounce=WATCH_DEBOUNCE_MS,
        step=WATCH_STEP_MS,
        rust_timeout=1000,
        yield_on_timeout=idle,
        stop_event=stop,
        raise_interrupt=False,
    ):
        poke()
