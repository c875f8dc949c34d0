"""Events by reference: the read models keep where an event lies in its store, not the event.

A signal or routing record is read again only when someone looks at it (a row on screen, a
detail pane, `obligation show`), so holding 100,000 obligations costs their few fields and one
integer per event, and a checkpoint of them loads in a fraction of the time the log takes to
parse. A reference is `offset << 2 | store`: one int, cheap to fold, to keep and to persist.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from engine.base.gcpause import gc_paused
from engine.log.lines import DEEP_BYTES, too_deep, whole

_loads = whole  # a line read whole, as every reader reads one (nested too deep: refused)

StoreName = Literal["signals", "units", "memory", "identity"]
# every store, the one list: in the fold's order (signals before units), and the index a reference carries
UNREADABLE = "unreadable"  # the kind of what a reference reads back as when its line is gone
STORES: tuple[StoreName, ...] = ("signals", "units", "memory", "identity")
INDEX: dict[str, int] = {name: i for i, name in enumerate(STORES)}
# host events (design §22): the kinds only a host writes, unsigned, from what it decided: routing
# records, the units' dispatch and close, a run's result and an expired lease (§23), what the timed
# duties record (§24), and a database's upgrade mark. One list: the PostgreSQL insert trigger
# (engine.log.pg.sql) refuses them from any role but regulator_host, and the fold and `verify`
# re-derive the ones a rule judges (engine.read.fold, engine.commands.verification).
HOST_KINDS: frozenset[str] = frozenset(
    (
        "routing",
        "dispatch",
        "close",
        "result",
        "lease-expired",
        "evidence-expired",
        "overdue",
        "deadline-escalated",
        "advisory-withdrawn",
        "sensor-run",
        "escalation-paged",
        "upgrade",
    )
)
UPGRADE = "upgrade"  # `regulator store upgrade`'s mark in units.ndjson (engine.log.pg.admin.upgrade)
CACHED = 4096  # parsed events kept: a screenful of rows and their detail panes many times over
BULK = 64  # more references than this at once: one read per store, of the span they lie in


def refs(store: str, offsets: list[int]) -> list[int]:
    """The references to the events starting at these byte offsets of one store."""
    index = INDEX[store]
    return [offset << 2 | index for offset in offsets]


def unreadable(item: int) -> dict[str, Any]:
    """What a reference resolves to when its line no longer parses (the store was edited)."""
    return {"kind": UNREADABLE, "store": STORES[item & 3], "offset": item >> 2}


class EventSource:
    """Reads events back by reference from one workspace's stores, keeping the latest parsed. The
    control room reads through one source from its UI thread and its workers at once: the cache
    is changed and read under `_lock` (the files are read outside it)."""

    def __init__(self) -> None:
        self.paths: tuple[Path, ...] = ()
        self._cache: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def bind(self, paths: tuple[Path, ...]) -> None:
        if self.paths != paths:
            with self._lock:
                self.paths = paths
                self._cache.clear()

    def _cached(self, item: int) -> dict[str, Any] | None:
        with self._lock:
            found = self._cache.get(item)
            if found is not None:
                self._cache.move_to_end(item)
            return found

    def event(self, item: int) -> dict[str, Any]:
        found = self._cached(item)
        if found is not None:
            return found
        try:
            with open(self.paths[item & 3], "rb") as handle:
                handle.seek(item >> 2)
                found = _parse(handle.readline(), item)
        except (OSError, IndexError):
            found = unreadable(item)
        self._remember(item, found)
        return found

    def events(self, refs: Iterable[int]) -> list[dict[str, Any]]:
        items = list(refs)
        if len(items) <= BULK:
            return [self.event(item) for item in items]
        with gc_paused():  # every event parsed stays alive in the list returned: nothing to collect
            return self._bulk(items)

    def _spans(self, items: list[int]) -> dict[int, tuple[int, bytes]]:
        """store index -> (offset of the bytes, the bytes): one read per store, from the first line
        wanted through the last, no more."""
        data: dict[int, tuple[int, bytes]] = {}
        indexes = {item & 3 for item in items}
        for index in indexes:
            if len(indexes) == 1:  # a reference orders as its offset within one store
                first, last = min(items) >> 2, max(items) >> 2
            else:
                offsets = [item >> 2 for item in items if item & 3 == index]
                first, last = min(offsets), max(offsets)
            try:
                with open(self.paths[index], "rb") as handle:
                    handle.seek(first)
                    data[index] = first, handle.read(last - first) + handle.readline()
            except (OSError, IndexError):
                data[index] = first, b""
        return data

    def shaped(self, parts: Sequence[tuple[Collection[int], msgspec.json.Decoder[Any]]]) -> list[list[Any]]:
        """For each (references, decoder): the lines at those references decoded in a caller's
        shape (a Struct of the fields it shows, each `object`), None where a line does not decode
        as one; one read per store for all the parts, no cache. A shape skips the fields it does
        not name without looking at them: a number out of range or a byte that is no UTF-8 there is
        not seen (D-184), where the whole read (`events`) reads the line as unreadable. So a caller
        takes what this gives only where `verify` read every line of the store whole
        (controlroom.once, D-203)."""
        every = [item for refs, _ in parts for item in refs]
        data = self._spans(every) if every else {}
        out: list[list[Any]] = []
        with gc_paused():  # every row decoded stays alive in the lists returned
            for refs, decoder in parts:
                decode = decoder.decode
                rows: list[Any] = []
                append = rows.append
                for item in refs:
                    start, blob = data[item & 3]
                    at = (item >> 2) - start
                    end = blob.find(b"\n", at)
                    raw = blob[at:end] if end >= 0 else blob[at:]
                    try:
                        append(None if len(raw) > DEEP_BYTES and too_deep(raw) else decode(raw))
                    except (ValueError, RecursionError):  # msgspec's errors are ValueErrors
                        append(None)
                out.append(rows)
        return out

    def _bulk(self, items: list[int]) -> list[dict[str, Any]]:
        with self._lock:
            cache = self._cache
            known = {item: cache[item] for item in items if item in cache} if cache else {}
        wanted = [item for item in items if item not in known] if known else items
        data = self._spans(wanted)  # store index -> (offset of the bytes, the bytes)
        out: list[dict[str, Any]] = []
        append, loads, get = out.append, _loads, known.get
        for item in items:
            found = get(item)
            if found is None:
                start, blob = data[item & 3]
                at = (item >> 2) - start
                end = blob.find(b"\n", at)
                try:
                    found = loads(blob[at:end] if end >= 0 else blob[at:])
                except (ValueError, RecursionError):
                    found = None
                if type(found) is not dict:  # as _parse: a line that is no object reads as unreadable
                    found = unreadable(item)
            append(found)
        return out

    def _remember(self, item: int, event: dict[str, Any]) -> None:
        with self._lock:
            self._cache[item] = event
            if len(self._cache) > CACHED:
                self._cache.popitem(last=False)


def _parse(raw: bytes, item: int) -> dict[str, Any]:
    try:
        event = _loads(raw)
    except (ValueError, RecursionError):
        return unreadable(item)
    return event if type(event) is dict else unreadable(item)


class EventMap(Mapping[str, dict[str, Any]]):
    """id -> event, holding references; looks like the dict of events it replaces. An event whose
    line no longer reads back whole (`unreadable`: edited, or a number out of a float's range in a
    field the fold's shape skipped, which msgspec does not look at) still carries the key it was
    folded under, in `field` (a signal's "id", a routing record's "signal"): every reader of it can
    name it, and the router notes it (engine.commands.router.unroutable)."""

    __slots__ = ("field", "refs", "source")

    def __init__(self, source: EventSource, field: str = "id") -> None:
        self.refs: dict[str, int] = {}
        self.source = source
        self.field = field

    def _keyed(self, key: str, event: dict[str, Any]) -> dict[str, Any]:
        return {**event, self.field: key} if event.get("kind") == UNREADABLE else event

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self._keyed(key, self.source.event(self.refs[key]))

    def __setitem__(self, key: str, value: int) -> None:
        self.refs[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self.refs

    def __iter__(self) -> Iterator[str]:
        return iter(self.refs)

    def __len__(self) -> int:
        return len(self.refs)

    def values(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [event for _, event in self.items()]

    def items(self) -> list[tuple[str, dict[str, Any]]]:  # type: ignore[override]
        keys = list(self.refs)
        return self.keyed(keys, self.source.events(self.refs[k] for k in keys))

    def keyed(self, keys: list[str], events: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        """(key, event) for events read back for these keys, in order (an unreadable one keyed)."""
        field = self.field
        return [
            (key, event if event.get("kind") != UNREADABLE else {**event, field: key})
            for key, event in zip(keys, events, strict=True)
        ]
