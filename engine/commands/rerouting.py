"""verify's re-routing: each routing record is what the router writes for its signal (design §15.0)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.checkout.workspace import Workspace
from engine.log.events import unreadable
from engine.log.lines import whole
from engine.log.store import AS_IT_STANDS, SKIPPED, TAKEN
from engine.read.model import EventKind

if TYPE_CHECKING:
    from engine.checkout.authority import Authority
    from engine.read.model import State

# what a routing record is found to be: (its line number, what is wrong, what readers do with it)
Named = tuple[int, str, str]


def store_lines(ws: Workspace, store: str) -> Iterator[tuple[int, int, bytes | None]]:
    """(line number, start offset, line) for each line of a store, read in bounded memory (a line
    longer than engine.log.store.MAX_LINE is None); nothing when it cannot be read."""
    try:
        yield from ((n, start, raw) for n, (start, raw) in enumerate(ws.store(store).lines(), start=1))
    except (OSError, Refused):
        return


def _signals_read(state: State | None) -> int:
    """How much of signals.ndjson a fold read (-1: none)."""
    cursor = state.cursors.get("signals") if state is not None else None
    return cursor.offset if cursor is not None else -1


def routings(ws: Workspace, fresh: State) -> list[Named]:
    """Every routing record must be the one the router writes for its signal under the routing
    policy then in force, once per signal (design §15.0): each signal routed again, as the fold
    counted it. Readers still obey what is written; verify names it (exit 1). Only what the fold
    read is judged: a line appended since is the next run's (it would route a signal this fold
    never saw)."""
    records: list[tuple[int, int, dict]] = []  # (line, offset, record): checked once every line is read
    signal_lines: dict[int, dict] = {}  # offset -> signal event: the routing checks read no line twice
    unread: set[int] = set()  # offsets of lines that do not read back whole
    folded = _signals_read(fresh)
    for number, start, raw in store_lines(ws, "signals"):
        if start >= folded:
            break
        if raw is None or raw[:1] != b"{" and raw.lstrip()[:1] != b"{":
            continue  # too long, or no JSON object: no event; the chain check names it
        try:
            event = whole(raw)
        except (ValueError, RecursionError):
            event = None
        if type(event) is not dict:
            unread.add(
                start
            )  # counted by the fold (its shape skipped what fails here)? read as the router reads it
            continue
        kind = event.get("kind")
        if kind == EventKind.ROUTING:
            records.append((number, start, event))
        elif kind == EventKind.SIGNAL:
            signal_lines[start] = event
    found: list[Named] = []
    routed: set[str] = set()
    refs = fresh.signals.refs
    # the line each counts from; one that does not read back whole reads as the router reads it
    signals = {
        key: signal_lines.get(ref >> 2)
        or (fresh.signals.keyed([key], [unreadable(ref)])[0][1] if ref >> 2 in unread else None)
        for key, ref in refs.items()
    }
    void = {u.offset for u in fresh.uncounted if u.store == "signals"}  # named already, as the fold judged
    authority = ws.authority()
    for number, start, event in records:
        if start in void:
            continue
        problem = _routing_problem(authority, signals, refs, event, routed)
        if problem:
            found.append((number, *problem))
    return found


def routing_pass(ws: Workspace, authority: Authority) -> dict[str, Any]:
    """The half of `routings` that needs no fold, run beside it: every routing record of
    signals.ndjson as it stands, routed again on the first line that reads as a signal with its
    id. {"end": the offset up to which every line was read, "records": [line number, offset,
    signal id, the offset of the signal line it was routed on (-1: none), what is wrong with it
    then (None: nothing)]}, for `judge_routings`."""
    routing = RoutingPass(authority)
    for number, start, raw in store_lines(ws, "signals"):
        routing.end = start + len(raw) + 1 if raw is not None else start + 1  # a line too long: not known
        if raw is None or raw[:1] != b"{" and raw.lstrip()[:1] != b"{":
            continue
        try:
            event = whole(raw)
        except (ValueError, RecursionError):
            continue
        if type(event) is dict:
            routing.line(number, start, event)
    return routing.answer()


class RoutingPass:
    """`routing_pass`'s account, fed each line that reads as a JSON object, in order: by its own
    read of signals.ndjson, or by the chain check's (`beside`: --once's child, D-260). The chain
    check gives only the lines it decodes, so a store whose last lines do not decode reads as one
    read to less than its end, which `judge_routings` then judges whole (`routings`)."""

    def __init__(self, authority: Authority) -> None:
        self.authority = authority
        self.first: dict[str, tuple[int, dict]] = {}  # signal id -> (offset, event) of its first signal line
        self.records: list[list[Any]] = []
        self.end = 0

    def line(self, number: int, start: int, event: dict) -> None:
        kind = event.get("kind")
        if kind == _SIGNAL:
            key = event.get("id")
            if isinstance(key, str) and key not in self.first:
                self.first[key] = (start, event)
        elif kind == _ROUTING:
            sid = event.get("signal")
            offset, signal = self.first.get(sid, (-1, None)) if isinstance(sid, str) else (-1, None)
            verdict = _route_problem(self.authority, signal, event) if offset >= 0 else None
            self.records.append([number, start, sid if isinstance(sid, str) else None, offset, verdict])

    def beside(self, each: Each | None) -> Each:
        """The chain check's feed of signals.ndjson (engine.log.store.verify's `each`), given to
        `each` too."""

        def both(number: int, start: int, size: int, event: dict) -> None:
            if each is not None:
                each(number, start, size, event)
            self.end = start + size + 1
            self.line(number, start, event)

        return both

    def answer(self) -> dict[str, Any]:
        return {"end": self.end, "records": self.records}


_SIGNAL, _ROUTING = EventKind.SIGNAL.value, EventKind.ROUTING.value
# engine.log.store.verify's `each`: (line number, start offset, the line's size, the event)
Each = Callable[[int, int, int, dict], None]


def judge_routings(ws: Workspace, fresh: State, early: dict[str, Any]) -> list[Named]:
    """`routings` from `routing_pass`'s answer and the fold: what is judged the same is the
    same (tests/test_perf_paths.py proves it). Where the pass did not read every line the fold
    read, or routed a record on a line the fold does not count its signal from, `routings`
    itself judges the whole store."""
    folded = _signals_read(fresh)
    if early["end"] < folded:
        return routings(ws, fresh)
    refs = fresh.signals.refs
    void = {u.offset for u in fresh.uncounted if u.store == "signals"}
    found: list[Named] = []
    routed: set[str] = set()
    for number, start, sid, offset, verdict in early["records"]:
        if start >= folded:
            break
        if start in void:
            continue
        first = _first_for(sid, refs, routed)
        if first is not None:
            found.append((number, *first))
            continue
        if refs[sid] >> 2 != offset:  # its signal counts from another line than the pass routed it on
            return routings(ws, fresh)
        if verdict is not None:  # [message, reading], as the pass sent it
            found.append((number, str(verdict[0]), str(verdict[1])))
    return found


# what is wrong with a routing record: (message, what readers do with it)
Problem = tuple[str, str]
_NO_SIGNAL = ("a routing record for no signal that counts (forged?)", AS_IT_STANDS)
_SECOND = ("a second routing record for the same signal (readers ignore it)", SKIPPED)


def _routing_problem(
    authority: Authority, signals: dict, counted: dict, record: dict, routed: set[str]
) -> Problem | None:
    signal_id = record.get("signal")
    first = _first_for(signal_id, counted, routed)
    if first is not None or not isinstance(signal_id, str):
        return first
    return _route_problem(authority, signals.get(signal_id), record)


def _first_for(signal_id: object, counted: dict, routed: set[str]) -> Problem | None:
    """What is wrong with a routing record for `signal_id` before its content is looked at: no
    signal that counts by that id, or one already routed (`routed`, which this adds it to)."""
    if not isinstance(signal_id, str) or signal_id not in counted:
        return _NO_SIGNAL
    if signal_id in routed:
        return _SECOND
    routed.add(signal_id)
    return None


def _route_problem(authority: Authority, signal: dict | None, record: dict) -> Problem | None:
    """What is wrong with a routing record for a counted signal (its first): it must be what the
    router writes for `signal` (the line that signal counts from; None: none reads as it) under
    the policy in force when it was written."""
    from engine.commands.router import route_signal

    at = record.get("at")
    when = clock.moment(at)
    policy = authority.routing_then(at, record.get("seen"))
    if when is None or policy is None:  # none in force then, or its text does not parse
        return None
    if signal is None:  # its line no longer reads as the signal it was folded from
        return _NO_SIGNAL
    try:
        expected = route_signal(signal, policy, when, reasons=False)
    except (KeyError, ValueError, TypeError, BadInput):
        return None
    get = record.get
    if (
        get("outcome") != expected["outcome"]
        or get("derivedSeverity") != expected["derivedSeverity"]
        or get("obligations") != expected["obligations"]
    ):
        return (
            f"routing record for {record.get('signal')} says {record.get('outcome')}/{record.get('derivedSeverity')}; "
            f"the router writes {expected['outcome']}/{expected['derivedSeverity']} (forged?); readers obey it",
            TAKEN,
        )
    return None
