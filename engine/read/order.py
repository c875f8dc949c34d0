"""The order rule (design §22): how the fold judges a host event (a routing record, a dispatch, a
close) by the `seen` it records, exactly, with no time compared (D-148..D-150). engine.read.fold
asks it where a host event is not one a host writes inline."""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Sequence

from engine.log.events import HOST_KINDS, INDEX
from engine.log.lines import whole
from engine.read.kinds import RoutingLine, Seen
from engine.read.model import HostOrder, Obligation, State, UnitState
from engine.read.vetoes import REFUSED

# the units' host events (engine.log.events.HOST_KINDS) a host writes only past its vetoes
# (engine.read.vetoes.REFUSED: the statuses it never writes them from)
_HOST_KINDS = HOST_KINDS & frozenset(REFUSED)
_ID = operator.attrgetter("id")


class StoreReplaced(Exception):
    """A store is shorter than what was read of it: read everything again."""


class Refold(StoreReplaced):
    """A routing record read now bears on dispatches and closes read before it (only a line that
    no host wrote can be placed so, design §22): read everything again, so each is judged with it."""


# ---- the order rule (design §22) ------------------------------------------------------------------
# A host event (a routing record, a dispatch, a close) records `seen`: the byte length of every other
# store when the host decided it, inside the decide lock. A line of a store is covered by a length
# when it starts before it (for every length a host records, which falls between lines, the same as
# ending at or before it). For a routing record R and a dispatch or close F: R decided before F was
# appended when R's `seen` of units.ndjson does not cover F; F must then have seen R. When neither
# saw the other, F counts for nothing (D-148): the routing's hold stands.

_CEILING = 1 << 62  # past any store's length: a forged figure stays within a checkpoint's 64 bits


class _Order:
    """The routing records that route and record `seen`, as a units fold asks of them (a bisection
    a question; where a forged line breaks their order, suffix minima and prefix maxima instead)."""

    def __init__(self, host: HostOrder) -> None:
        self.starts, self.seen = host.starts, host.seen_units
        self.low, self.high = self.seen, self.seen
        if not host.monotone:
            low, high = list(self.seen), list(self.seen)
            for k in range(len(low) - 2, -1, -1):
                low[k] = min(low[k], low[k + 1])
            for k in range(1, len(high)):
                high[k] = max(high[k], high[k - 1])
            self.low, self.high = low, high

    def decided_before(self, start: int) -> bool:
        """A routing record was decided before the units line at `start` was appended."""
        return bool(self.low) and self.low[0] <= start

    def unseen(self, start: int, seen: int) -> int | None:
        """A routing record decided before the line at `start` was appended that `seen` does not
        cover (the line did not see it), by index; None when it saw every one."""
        k = bisect_left(self.starts, seen)
        if k < len(self.low) and self.low[k] <= start:
            return next(j for j in range(k, len(self.seen)) if self.seen[j] <= start)
        return None

    def saw_first(self, start: int, seen: int) -> int | None:
        """A routing record that saw the line at `start` though `seen` covers it (each says it saw
        the other first, which no two hosts can), by index; None when there is none."""
        k = bisect_left(self.starts, seen)
        if k > 0 and self.high[k - 1] > start:
            return next(j for j in range(k) if self.seen[j] > start)
        return None


def _routing_order(state: State, event: RoutingLine, at: int) -> str | None:
    """Why a routing record counts for nothing by the order, or None: once a host event of
    signals.ndjson records `seen`, every later one must. One that counts is kept for judging the
    dispatches and closes (a routing record depends on no other store, so none is refused here for
    another store's line: design §22, D-148)."""
    host = state.host
    seen = event.seen
    what = f"routing record of signal {event.signal}"
    if seen is None:
        return (
            f"host event: {what} without `seen`, after host events that record it: no host wrote it (forged?)"
        )
    host.signals_seen = True
    units = seen.units
    if units is None:
        return f"host event: {what} records no `seen` of units.ndjson: no host wrote it (forged?)"
    units = min(units, _CEILING)
    start = at >> 2
    if host.max_seen > start or units < host.units_at:
        _check_folded(state, start, units)
    if host.seen_units and units < host.seen_units[-1]:
        host.monotone = False
    host.starts.append(start)
    host.seen_units.append(units)
    return None


def _check_folded(state: State, start: int, units: int) -> None:
    """A routing record read after dispatches and closes that must be judged with it (one that was
    appended after it was decided, or that says it saw it): Refold if one of them is among them,
    since it would count for nothing, or for nothing for another reason (one already refused for
    another reason, a veto, is refused by the order where a cold read has the routing record
    first: every reader names the same reason). Only lines that no host wrote place a routing
    record so (a host appends every host event inside the decide lock, and a fold reads what
    signals.ndjson gained before judging a dispatch or close that saw it)."""
    host = state.host
    low = 0 if host.max_seen > start else units
    if low >= host.units_at:
        return
    with open(state.source.paths[INDEX["units"]], "rb") as handle:
        handle.seek(low)
        data = handle.read(host.units_at - low)
    offset = low
    for raw in data.split(b"\n"):
        here, offset = offset, offset + len(raw) + 1
        try:
            event = whole(raw)
        except (ValueError, RecursionError):
            continue
        kind = event.get("kind") if type(event) is dict else None
        if type(kind) is not str or kind not in _HOST_KINDS:  # a list or object: no set's key
            continue
        if not isinstance(event.get("unit"), str):
            continue
        seen = event.get("seen")
        wanted = seen.get("signals") if type(seen) is dict else None
        saw = type(wanted) is int and wanted > start
        if (here >= units) != saw:  # appended after it was decided yet did not see it, or both saw
            raise Refold("signals")


def _ordered(
    state: State,
    unit: UnitState,
    kind: str,
    seen: object,
    start: int,
    holds: Sequence[Obligation],
    order: _Order,
    crossing: bool,
) -> str | None:
    """Why a dispatch or close judged by the order counts for nothing, or None: its status before
    it must be one the command accepts; once a host event of units.ndjson records `seen`, or a
    routing record decided before it was appended does, it must record it; and, where
    signals.ndjson is folded too (`crossing`), it must have seen every routing record decided
    before it was appended, none that saw it, and no blocking obligation may hold the unit at
    exactly what it saw (opened by a routing record it saw or a recovery decision before it, not
    closed by a disposition it saw or a decision before it). No time is compared."""
    host = state.host
    what = f"{kind} of {unit.id}"
    if seen is not None:
        host.units_seen = True
    status = unit.status
    if status in REFUSED[kind]:
        return f"host event: {what} while it was {status}, which no host writes (forged?)"
    if seen is None:
        return (
            f"host event: {what} without `seen`, after host events that record it: no host wrote it (forged?)"
        )
    if not crossing:
        return None
    wanted = _signals_seen(seen)
    if type(wanted) is not int:
        return f"host event: {what} records no `seen` of signals.ndjson: no host wrote it (forged?)"
    if wanted > host.signals_size:
        host.beyond = wanted if host.beyond < 0 else min(host.beyond, wanted)
        return (
            f"host event: {what} says it saw {wanted} bytes of signals.ndjson, more than it holds: no "
            "host wrote it (forged?)"
        )
    # first what it saw (every reader that judges it has read that much), then the routing records
    # after it, so every reader names the same reason; the obligations in a fixed order
    for ob in sorted(holds, key=_ID):
        opened = ob.history[0]
        if not opened & 3 and opened >> 2 >= wanted:
            continue  # routed after what it saw
        closing = ob.closed_by
        if closing >= 0 and (closing & 3 or closing >> 2 < wanted):
            continue  # closed by a decision before it, or a disposition it saw
        return (
            f"host event: {what} while held by blocking obligation {ob.id} (opened "
            f"{ob.opened_at}): vetoed, so no host wrote it (forged?)"
        )
    j = order.unseen(start, wanted)
    if j is not None:
        return (
            f"host event: {what} did not see the routing record of signal {_routed(state, j)}, decided "
            "before it was appended: out of order, so no host wrote it (forged?)"
        )
    j = order.saw_first(start, wanted)
    if j is not None:
        return (
            f"host event: {what} says it saw the routing record of signal {_routed(state, j)}, which "
            "saw it first: out of order, so no host wrote it (forged?)"
        )
    return None


def _signals_seen(seen: object) -> object:
    """What a dispatch's or close's `seen` says of signals.ndjson (None when it says nothing)."""
    if type(seen) is Seen:
        return seen.signals
    return seen.get("signals") if type(seen) is dict else None


def _routed(state: State, index: int) -> object:
    """The signal a remembered routing record routes (read back: this is only asked to name one)."""
    return state.source.event(state.host.starts[index] << 2 | INDEX["signals"]).get("signal")
