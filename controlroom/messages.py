"""What the control room's workers tell its UI (typed Textual messages), what the operator set on
each view, and how a view's rows are filtered and sorted (on the UI thread for a few, in a worker
for many)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from textual.message import Message

from controlroom import readmodel
from controlroom.prepare import Content
from controlroom.views import Key


class Abandoned(Exception):
    """The room closed while a worker waited for another writer: nothing was written."""


class ViewState(msgspec.Struct):
    """What the operator set on one view, kept when they switch away and back."""

    filter: str = ""
    cursor: Key | None = None
    sort: int = 0
    show_all: bool = False  # `a`: resolved or retracted rows too


class Synced(Message):
    """A fold finished on `snap` (the room's state, updated under its lock)."""

    def __init__(self, snap: readmodel.Snapshot, changed: bool, routed: int) -> None:
        super().__init__()
        self.snap, self.changed, self.routed = snap, changed, routed


class Ticked(Message):
    """The clock moved (the header counted again in the worker): the UI redraws."""

    def __init__(self, snap: readmodel.Snapshot) -> None:
        super().__init__()
        self.snap = snap


class Reloaded(Message):
    """A whole new snapshot, read in a worker: the UI swaps it in."""

    def __init__(self, snap: readmodel.Snapshot) -> None:
        super().__init__()
        self.snap = snap


class Checked(Message):
    """Lint, identity verify and store verify, computed on a copy: the UI applies them."""

    def __init__(self, snap: readmodel.Snapshot, checks: readmodel.Checks, seq: int) -> None:
        super().__init__()
        self.snap, self.checks, self.seq = snap, checks, seq


class WriterWait(Message):
    """Another process holds the decide lock (True), or this room got its turn (False)."""

    def __init__(self, waiting: bool) -> None:
        super().__init__()
        self.waiting = waiting


class Written(Message):
    """An operator's write finished: `ok` and what to tell the operator."""

    def __init__(self, ok: bool, text: str) -> None:
        super().__init__()
        self.ok, self.text = ok, text


class Arranged(Message):
    """A view's rows filtered and sorted in a worker."""

    def __init__(self, request: Arrangement, keys: list[Key]) -> None:
        super().__init__()
        self.request, self.keys = request, keys


class Arrangement(msgspec.Struct, frozen=True):
    """What a view's rows are filtered and sorted by, and which state they were read from."""

    view: str
    needle: str
    sort: str
    show_all: bool
    snap: int
    generation: int
    plain: bool  # no filter, the first sort: the keys as the view lists them


def arrange(
    snap: readmodel.Snapshot,
    request: Arrangement,
    keys: list[Key],
    cancelled: Callable[[], bool] = lambda: False,
) -> list[Key] | None:
    """The rows of a view filtered by `request.needle` (in any cell) and sorted; None if cancelled."""
    if request.needle:
        kept = []
        for i, key in enumerate(keys):
            if i % 1000 == 0 and cancelled():
                return None
            if request.needle in readmodel.searched(request.view, snap, key):
                kept.append(key)
        keys = kept
    if request.sort:
        keys = readmodel.sort_keys(request.view, snap, keys, request.sort)
    return keys


class Prepared(Message):
    """An action's dialog read in a worker (controlroom.prepare): the UI opens it."""

    def __init__(self, content: Content) -> None:
        super().__init__()
        self.content = content
