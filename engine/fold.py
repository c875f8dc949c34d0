"""The fold: events read from the stores, applied to the read model (engine.model). Pure of any
policy on when to read: engine.load decides that; `advance` folds what each store gained since."""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from itertools import compress, repeat
from pathlib import Path
from typing import IO, Any, ClassVar

import msgspec

from engine import clock
from engine.authority import GRANT_OF, Uncounted
from engine.errors import RegulatorError
from engine.events import INDEX, STORES, refs, unreadable
from engine.gcpause import gc_paused
from engine.model import (
    BLOCKING,
    OWED_TO,
    RESUMING_ACTIONS,
    WAITING_ACTIONS,
    Closing,
    Cursor,
    EventKind,
    MemoryEntry,
    Obligation,
    ObligationKind,
    ObligationStatus,
    RecoveryAction,
    State,
    UnitState,
    UnitStatus,
)
from engine.store import KEPT_PROBLEMS, SKEW_S
from engine.workspace import Workspace

# the names the hot loops compare with, bound once (an enum member read from its class costs more)
_SIGNAL, _ROUTING, _DISPOSITION = EventKind.SIGNAL.value, EventKind.ROUTING.value, EventKind.DISPOSITION.value
_OPEN, _RESOLVED, _ESCALATED = ObligationStatus.OPEN, ObligationStatus.RESOLVED, ObligationStatus.ESCALATED
_INTELLIGENCE = ObligationKind.INTELLIGENCE
_DISPATCH, _CLOSE, _DEMOTE, _DECISION = (
    k.value for k in (EventKind.DISPATCH, EventKind.CLOSE, EventKind.DEMOTE, EventKind.DECISION)
)
_MEMORY, _RETRACTION = EventKind.MEMORY.value, EventKind.RETRACTION.value
_IN_PROGRESS, _CLOSED, _TODO = UnitStatus.IN_PROGRESS, UnitStatus.CLOSED, UnitStatus.TODO


class SignalsLine(msgspec.Struct):
    """What the fold reads of a line in signals.ndjson; the rest of the line is checked, not kept.
    Each default is what `dict.get` gave the fold before, so a missing field reads the same. Each
    field is Any: it holds whatever the line holds (the engine writes text; a line edited by hand
    to hold something else is named by `verify`, not coerced here)."""

    kind: Any = None
    id: Any = None
    subject: Any = ""
    expiresAt: Any = None  # noqa: N815 - the store's field name
    signal: Any = None
    obligations: Any = ()
    at: Any = None
    obligation: Any = None
    disposition: Any = None
    by: Any = None
    rationale: Any = None


class SignalLine(msgspec.Struct, tag_field="kind", tag="signal"):
    """The three kinds the signals log holds decode into typed shapes of their own fields only (a
    third less to build and free than SignalsLine). A line of any other kind, or one these refuse
    (a repeated "kind", a kind that is not text, a field of the wrong type), is read as SignalsLine
    instead; the fold counts a refused line of these kinds for nothing and `verify` names it: a
    well-chained line can be appended by anyone with the account's shell (SPEC §15.0)."""

    kind: ClassVar[str] = "signal"
    id: str
    subject: str = ""
    expiresAt: str | None = None  # noqa: N815
    by: str | None = None  # a person-raised signal counts only as a person event does


class RoutedObligation(msgspec.Struct):
    """One obligation a routing record opens, as the router writes it."""

    id: str
    severity: str
    blocks: bool
    unit: str | None = None
    owedTo: str = OWED_TO  # noqa: N815


class RoutingLine(msgspec.Struct, tag_field="kind", tag="routing"):
    kind: ClassVar[str] = "routing"
    signal: str
    obligations: list[RoutedObligation] = []
    at: str | None = None


class DispositionLine(msgspec.Struct, tag_field="kind", tag="disposition"):
    kind: ClassVar[str] = "disposition"
    obligation: str
    disposition: str | None = None
    by: str | None = None
    rationale: str | None = None
    at: str | None = None


_TYPED_KINDS = frozenset((_SIGNAL, _ROUTING, _DISPOSITION))


class UnitsLine(msgspec.Struct):
    """What the units fold reads of a line in units.ndjson: the rest (its hash, prev, signature,
    ...) is checked as JSON, not built. As with SignalsLine, each field is Any and each default is
    what `dict.get` gave the fold (UNSET where the fold tells a missing field from a null one), so
    any line reads as the whole event did; tests/test_store.py proves the two readings agree."""

    kind: Any = None
    unit: Any = None
    id: Any = None
    at: Any = None
    leaseHash: Any = None  # noqa: N815 - the store's field name
    worktree: Any = None
    type: Any = None
    profile: Any = None
    action: Any = None
    disposition: Any = None
    by: Any = None
    rationale: Any = msgspec.UNSET
    resolves: Any = ()
    opens: Any = None


_UNIT_PERSON = (_DECISION, _DEMOTE)
_KIND = operator.attrgetter("kind")
PERSON_KINDS = {"units": _UNIT_PERSON, "memory": (_RETRACTION,)}
_PARALLEL = 32  # person events in one read before their signatures are checked on every core


def person_refs(name: str, events: Sequence[Any], at_refs: list[int]) -> list[int]:
    """The references of a read's person events (SPEC §15.1), found in one pass."""
    if name == "signals":
        return [
            at
            for e, at in zip(events, at_refs, strict=True)
            if type(e) is DispositionLine or (type(e) is SignalLine and e.by is not None)
        ]
    kinds = PERSON_KINDS.get(name)
    if not kinds:
        return []
    if len(events) != len(at_refs):
        raise ValueError("one reference per event")
    # `e.kind in kinds` (units, read as UnitsLine) or `e.get("kind") in kinds` (memory, whole
    # events) for every event, in C: 800,000 of them in the bench
    found = map(_KIND, events) if name == "units" else map(dict.get, events, repeat("kind"))
    return list(compress(at_refs, map(kinds.__contains__, found)))


def check_ahead(state: State, ws: Workspace, name: str, found: list[int]) -> None:
    """Check many person events' signatures at once, on every core (Ed25519 verification runs
    without the GIL): the fold then finds each verdict ready. Only what the fold would check."""
    if len(found) < _PARALLEL:
        return
    from concurrent.futures import ThreadPoolExecutor

    lines = [(*line, at) for line, at in zip(_read_back(ws.store(name).path, found), found, strict=True)]
    workers = max(1, min(4, os.cpu_count() or 1))
    size = -(-len(lines) // workers)
    chunks = [lines[k : k + size] for k in range(0, len(lines), size)]

    def judge(chunk: list[tuple[dict[str, Any], object, int]]) -> list[str | None]:
        return [_judge(state, event, previous, name, at) for event, previous, at in chunk]

    with ThreadPoolExecutor(workers) as pool:
        verdicts = [v for part in pool.map(judge, chunks) for v in part]
    events = [event for event, _, _ in lines]
    state.verdicts.update(zip(found, zip(events, verdicts, strict=True), strict=True))


def _read_back(path: Path, found: list[int]) -> list[tuple[dict[str, Any], object]]:
    """Whole events at these references, each with the `at` of the line before it, read through
    one handle."""
    with open(path, "rb") as handle:
        return [_person_line(handle, at) for at in found]


_AT = re.compile(rb'"at":"([^"]*)"')


def _person_line(handle: IO[bytes], at: int) -> tuple[dict[str, Any], object]:
    """The event at a reference, and the `at` of the line before it (None for the first line)."""
    offset = at >> 2
    start = max(0, offset - 4096)
    handle.seek(start)
    before = handle.read(offset - start)
    line = handle.readline()
    try:
        event = msgspec.json.decode(line)
    except (ValueError, RecursionError):
        event = None
    if type(event) is not dict:
        return unreadable(at), None
    cut = before[:-1].rfind(b"\n")  # the line before this one (its newline ends `before`)
    found = _AT.findall(before[cut + 1 :]) if cut >= 0 or start == 0 else []
    return event, (found[-1].decode() if found else None)


def _judge(state: State, event: dict[str, Any], previous: object, store: str, at: int) -> str | None:
    """Why a person event counts for nothing (grant, signature, or a time before its store's),
    judged under the policy in force at its place in the log (engine.authority.people_for)."""
    people = state.auth.people_for(store, at >> 2, event.get("at"))
    grant = GRANT_OF.get(event.get("kind")) if people.grants else None  # type: ignore[arg-type]
    reason = state.auth.check(event, people, grant)
    if reason is None and state.auth.clock == "system" and _backdated(event.get("at"), previous):
        reason = "back-dated (stamped before the line before it)"
    return reason


def _backdated(at: object, previous: object) -> bool:
    """More than the skew a store allows (SPEC §15.3) before the line before it."""
    if not isinstance(at, str) or not isinstance(previous, str) or at >= previous:
        return False
    try:
        return (clock.read_time(previous) - clock.read_time(at)).total_seconds() > SKEW_S
    except Exception:  # noqa: BLE001 - an unreadable time is not a back-dated one
        return False


def counts(state: State, store: str, at: int) -> bool:
    """Whether the person event at this reference counts (SPEC §15.1): signed by a key the policy
    in force at its time lists for the person (or unsigned where signatures are not required),
    and the first event of its store with its id. One that does not is kept in `uncounted`."""
    ready = state.verdicts.pop(at, None)
    if ready is not None:
        event, reason = ready
    else:
        with open(state.source.paths[at & 3], "rb") as handle:
            event, previous = _person_line(handle, at)
        reason = _judge(state, event, previous, store, at)
    event_id = event.get("id")
    if reason is None and isinstance(event_id, str):
        seen = state.person_ids.setdefault(store, set())
        if event_id in seen:
            reason = "replayed id (an event with this id came earlier)"
        else:
            seen.add(event_id)
    if reason is None:
        return True
    state.uncounted.append(Uncounted(store, at >> 2, reason, event_id if isinstance(event_id, str) else None))
    return False


_RESTATED = "malformed: a signal id already recorded (a second line replaces nothing: the first is routed)"


def _fold_signals(state: State, events: list[Any], at_refs: list[int]) -> None:
    signals, routings, obligations = state.signals.refs, state.routings.refs, state.obligations
    waiting, pending = state.unrouted_ids, state.pending
    expiries: dict[str, datetime | None] = {}
    fresh: dict[str, SignalLine] = {}  # this read's signals: a routing usually follows its signal closely
    for event, at in zip(events, at_refs, strict=True):
        kind = event.kind
        if type(event) is SignalsLine:  # not one of the typed shapes
            if kind in _TYPED_KINDS or not isinstance(kind, str):
                state.uncounted.append(Uncounted("signals", at >> 2, "malformed: fields of the wrong type"))
            continue
        if kind == _SIGNAL:
            if event.by is not None and not counts(state, "signals", at):
                continue
            if event.id in signals:  # a second line cannot restate a signal (its units, before routing)
                state.uncounted.append(Uncounted("signals", at >> 2, _RESTATED))
                continue
            signals[event.id] = at
            fresh[event.id] = event
            if event.id not in routings:
                waiting[event.id] = None
        elif kind == _ROUTING:
            signal_id = event.signal
            if signal_id in routings:
                continue  # a second router's duplicate: dropped
            routings[signal_id] = at
            waiting.pop(signal_id, None)
            signal = fresh.get(signal_id)
            if signal is not None:
                subject, expires = signal.subject, signal.expiresAt
            else:  # routed in a later read than its signal: read the signal back
                earlier = state.signals.get(signal_id, {})
                subject, expires = earlier.get("subject", ""), earlier.get("expiresAt")
            if expires and expires not in expiries:
                expiries[expires] = _expiry(expires)
            for entry in event.obligations:
                ob_id = entry.id
                if ob_id in obligations:
                    continue
                # positional, every field in order (Obligation.__struct_fields__): this runs once per
                # obligation in the log, the hottest constructor
                obligations[ob_id] = Obligation(
                    ob_id,  # id
                    entry.unit,
                    _INTELLIGENCE,  # kind
                    signal_id,  # source
                    entry.severity,
                    entry.blocks,
                    entry.owedTo,  # owed_to
                    event.at,  # opened_at
                    subject,
                    expiries.get(expires) if expires else None,  # expires_at
                    _OPEN,  # status
                    None,  # disposition
                    None,  # by
                    None,  # rationale
                    None,  # closed_at
                    [at],  # history
                )
                if pending and ob_id in pending:
                    obligations[ob_id].close(pending.pop(ob_id))
        elif kind == _DISPOSITION:
            ob = obligations.get(event.obligation)
            if not counts(state, "signals", at) or not _may_resolve(state, event, ob, at):
                if ob is not None:
                    ob.history.append(at)  # shown in its lifecycle, marked: it counts for nothing
                continue
            closing = Closing(
                status=_RESOLVED,
                disposition=event.disposition,
                by=event.by,
                rationale=event.rationale,
                closed_at=event.at,
                at=at,
            )
            if ob is None:
                # a recovery-decision obligation is opened in units.ndjson, folded after this store
                pending.setdefault(event.obligation, closing)
            elif ob.status == _OPEN:
                ob.close(closing)


def _expiry(text: str) -> datetime | None:
    """A signal's expiry; one that is not a time (a line no engine wrote) never expires: its
    obligations keep holding rather than lapse (fail closed)."""
    try:
        return clock.read_time(text)
    except RegulatorError:
        return None


def _may_resolve(state: State, event: DispositionLine, ob: Obligation | None, at: int) -> bool:
    """A disposition counts only from a person the policy lets resolve that severity (an
    obligation not yet folded is a recovery decision's: blocking)."""
    severity = ob.severity if ob is not None else BLOCKING
    people = state.auth.people_for("signals", at >> 2, event.at)
    if not people.grants:  # no interaction policy known (a store without its identity): as before
        return True
    if isinstance(event.by, str) and severity in people.resolve.get(event.by, ()):
        return True
    state.uncounted.append(Uncounted("signals", at >> 2, f"by a person who may not resolve {severity}"))
    return False


def _fold_units(state: State, events: list[UnitsLine], at_refs: list[int]) -> None:
    obligations, units, unit_of = state.obligations, state.units, state.unit
    holds: dict[str, list[Obligation]] | None = None  # unit -> its blocking obligations, built once needed
    held: dict[str, list[Span]] = {}  # unit -> (opened, obligation) of each, parsed once the unit needs them
    last_at: object = None
    last_when: datetime | None = None
    for event, at in zip(events, at_refs, strict=True):
        kind = event.kind
        unit_id = event.unit
        if not isinstance(unit_id, str):
            continue
        unit = units.get(unit_id)
        if unit is None:
            unit = unit_of(unit_id)
        unit.history.append(at)  # shown in the lifecycle even when it counts for nothing
        if kind in _UNIT_PERSON and not counts(state, "units", at):
            continue
        if kind in _HOST_KINDS:
            if holds is None:
                holds = _holds(obligations)
            at_text = event.at
            if at_text != last_at or type(at_text) is not str:  # a host writes many in one second
                last_at, last_when = at_text, clock.moment(at_text)
            spans = held.get(unit_id)
            if spans is None:
                spans = held[unit_id] = [(clock.moment(ob.opened_at), ob) for ob in holds.get(unit_id, ())]
            # the common case needs no call: no hold, a time, and a status the command accepts
            # (a dispatch refuses only in-progress, a close anything else: _REFUSED)
            if spans or last_when is None or (unit.status == _IN_PROGRESS) == (kind == _DISPATCH):
                reason = _vetoed(unit, kind, last_when, spans)
            else:
                reason = None
            if reason is not None:
                state.uncounted.append(Uncounted("units", at >> 2, reason))
                continue
        if kind == _DISPATCH:
            # a first-round dispatch kept the token itself in the log: such a lease is not honoured
            unit.status, unit.lease, unit.worktree = (
                _IN_PROGRESS,
                event.leaseHash,
                event.worktree,
            )
            unit.type, unit.profile = event.type, event.profile
        elif kind == _CLOSE:
            unit.status, unit.lease = _CLOSED, None
        elif kind == _DEMOTE:
            unit.status, unit.lease = _TODO, None
        elif kind == _DECISION:
            action = event.action
            rationale = event.rationale
            closing = Closing(
                status=_ESCALATED if action in WAITING_ACTIONS else _RESOLVED,
                disposition=event.disposition,
                by=event.by,
                rationale=None if rationale is msgspec.UNSET else rationale,
                closed_at=event.at,
                at=at,
            )
            for ob_id in event.resolves:
                ob = obligations.get(ob_id)
                if ob is None:
                    state.pending.setdefault(ob_id, closing)
                elif ob.status == _OPEN:
                    ob.close(closing)
            opened = event.opens
            if opened:
                ob = Obligation(
                    id=opened["id"],
                    unit=unit_id,
                    kind=ObligationKind.RECOVERY_DECISION,
                    source=event.id,
                    severity=opened["severity"],
                    blocks=True,
                    owed_to=opened.get("owedTo", OWED_TO),
                    opened_at=event.at,
                    subject=f"recovery decision: {action} — {'' if rationale is msgspec.UNSET else rationale}",
                    history=[at],
                )
                obligations[ob.id] = ob
                if holds is not None:
                    holds.setdefault(unit_id, []).append(ob)
                    if unit_id in held:
                        held[unit_id].append((clock.moment(ob.opened_at), ob))
                pending = state.pending.pop(ob.id, None)
                if pending is not None:
                    ob.close(pending)
            unit.lease = None
            if action in RESUMING_ACTIONS:
                unit.status, unit.recovery = UnitStatus.TODO, None
            elif action == RecoveryAction.ABORT:
                unit.status, unit.recovery = UnitStatus.ABORTED, None
            else:
                unit.status, unit.recovery = UnitStatus.WAITING, opened["id"] if opened else None


_HOST_KINDS = frozenset((EventKind.DISPATCH.value, EventKind.CLOSE.value))
# the statuses (as the units log alone folds them) a host never writes the event from
# (engine.vetoes): a dispatch over a live lease, a close of anything but an in-progress unit. Judged
# on the units log alone, so a fold from a checkpoint judges as a fold from the start. A waiting
# unit's dispatch is judged by its recovery obligation's times (a blocking obligation, below); a
# closed unit dispatched again is not judged: the engine refuses it, but synthetic logs
# (bench/generate.py) cycle so
_REFUSED = {
    EventKind.DISPATCH.value: frozenset((UnitStatus.IN_PROGRESS,)),
    EventKind.CLOSE.value: frozenset(set(UnitStatus) - {UnitStatus.IN_PROGRESS}),
}


def _holds(obligations: dict[str, Obligation]) -> dict[str, list[Obligation]]:
    """Every unit's blocking obligations, open or not (one pass, for the units' host events)."""
    index: dict[str, list[Obligation]] = {}
    for ob in obligations.values():
        if ob.blocks and ob.unit:
            index.setdefault(ob.unit, []).append(ob)
    return index


Span = tuple[datetime | None, Obligation]  # a blocking obligation and the time it opened


def _vetoed(unit: UnitState, kind: str, when: datetime | None, spans: list[Span]) -> str | None:
    """Why a dispatch or close counts for nothing: the host writes one only when its vetoes pass
    (engine.vetoes), unsigned, so a line that a writer (a unit with the store's writer role, or
    sharing the operator's account) appended past them is re-derived here (SPEC §15.0, §18). Its
    status before it must be one the command accepts (exact: the units log is in order), and no
    blocking obligation may have held the unit at its time (`when`, its `at` read as a time; `spans`,
    the unit's blocking obligations with the times they opened). Across stores only times order
    events, so an obligation counts as holding only when it was opened, and still open, more than
    the skew two hosts' clocks may show (2 × SKEW_S) on either side of the event: a host's honest
    line is never refused, and under a pinned clock (every time the same) only the status is judged."""
    status = unit.status
    if status in _REFUSED[kind]:
        return f"host event: {kind} of {unit.id} while it was {status}, which no host writes (forged?)"
    if when is None:
        return f"host event: {kind} of {unit.id} without a UTC time (forged?)"
    for opened, ob in spans:
        if opened is None or when - opened <= _ORDERED:
            continue
        if ob.status != _OPEN:
            closed = clock.moment(ob.closed_at)
            if closed is None or closed - when <= _ORDERED:
                continue
        return (
            f"host event: {kind} of {unit.id} while held by blocking obligation {ob.id} (opened "
            f"{ob.opened_at}): vetoed, so no host wrote it (forged?)"
        )
    return None


_ORDERED = timedelta(seconds=2 * SKEW_S)  # two hosts' clocks, each within SKEW_S of the server's (SPEC §18)


def _fold_memory(state: State, events: list[dict[str, Any]], at_refs: list[int]) -> None:
    memory = state.memory
    dates: set[str] = set()  # the review dates of this read already found calendar dates
    for event, at in zip(events, at_refs, strict=True):
        get: Callable[[str], Any] = event.get
        kind = get("kind")
        if kind == _MEMORY:
            # an entry as `remember` writes it is recognised here, inline: this runs for every entry
            # of a cold read (400,000 in the bench). Any other line, or a review date not met yet
            # in this read, is asked of _memory_problem, which decides (tests/test_fold_memory.py).
            entry_id, scope, evidence, unit = get("id"), get("scope"), get("evidence"), get("unit")
            review_by = get("reviewBy")
            written = (
                type(entry_id) is str
                and entry_id not in memory
                and type(get("subject")) is str
                and type(get("note")) is str
                and type(review_by) is str
                and review_by in dates
                and type(scope) is list
                and type(evidence) is list
                and (unit is None or type(unit) is str)
            )
            if written:
                try:
                    "".join(scope)  # refuses, in C, an item that is not text
                    "".join(evidence)
                except TypeError:
                    written = False
            if not written:
                problem = _memory_problem(event, memory)
                if problem is not None:
                    state.uncounted.append(Uncounted("memory", at >> 2, f"malformed: {problem}"))
                    continue
                dates.add(review_by)
            memory[entry_id] = MemoryEntry(event)
        elif kind == _RETRACTION:
            target = get("entry")
            if not isinstance(target, str):
                state.uncounted.append(
                    Uncounted("memory", at >> 2, "malformed: a retraction without an entry id")
                )
                continue
            if not counts(state, "memory", at):
                continue
            entry = memory.get(target)
            if entry is not None and entry.retraction is None:
                entry.retraction = event


def _memory_problem(event: dict[str, Any], memory: dict[str, MemoryEntry]) -> str | None:
    """Why a memory line is not an entry `remember` writes (a line appended by hand), or None: the
    fields every reader uses must have their types, and an id names one entry only (D-65)."""
    entry_id = event.get("id")
    if not isinstance(entry_id, str):
        return "an entry without a text id"
    if entry_id in memory:
        return "an entry id already recorded (a second line cannot replace an entry)"
    if not (isinstance(event.get("subject"), str) and isinstance(event.get("note"), str)):
        return "subject or note is not text"
    review_by = event.get("reviewBy")
    try:
        clock.parse_date(review_by)  # exactly YYYY-MM-DD, as remember writes it (SPEC §26)
    except RegulatorError:
        return "reviewBy is not a calendar date (YYYY-MM-DD)"
    for name in ("scope", "evidence"):  # remember writes both, lists of text (scope may be empty)
        value = event.get(name)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return f"{name} is not a list of text"
    if not isinstance(event.get("unit"), str | None):
        return "unit is not text"
    return None


def _fold_identity(state: State, events: list[dict[str, Any]], at_refs: list[int]) -> None:
    """Proposals and decisions as the authority counted them (engine.authority folds the whole
    store: a decision counts only under the policy in force before it)."""
    state.proposals = dict(state.auth.proposals)
    state.decisions = list(state.auth.decisions)


Fold = Callable[[State, list[Any], list[int]], None]
FOLDS: dict[str, Fold] = {
    "signals": _fold_signals,
    "units": _fold_units,
    "memory": _fold_memory,
    "identity": _fold_identity,
}
# (the usual shapes, the shape for any line), or one shape for any line: the other folds keep whole
# events (memory, proposals)
SHAPES: dict[str, tuple[object, type] | type] = {
    "signals": (SignalLine | RoutingLine | DispositionLine, SignalsLine),
    "units": UnitsLine,
}
ORDER = STORES  # the fold's order (signals before units), also the index a reference carries


class StoreReplaced(Exception):
    """A store is shorter than what was read of it: read everything again."""


def advance(
    ws: Workspace, state: State, *, final: bool = True, stores: tuple[str, ...] = ORDER
) -> dict[str, int]:
    """Fold what each store gained since the last read; returns how many events each gained.

    Signals fold before units so a decision finds the obligations it closes; within one store,
    log order is the order of events.
    """
    state.source.bind(tuple(ws.store(name).path for name in STORES))
    state.auth = ws.authority()
    gained: dict[str, int] = {}
    for name in ORDER:
        if name not in stores:
            continue
        cursor = state.cursors.setdefault(name, Cursor())
        store = ws.store(name)
        if store.size() < cursor.offset:  # replaced or truncated: the caller reloads in full
            raise StoreReplaced(name)
        with gc_paused():
            result = store.read(cursor.offset, cursor.line, final=final, shape=SHAPES.get(name))
            cursor.offset, cursor.line = result.offset, result.line
            if result.bad:
                state.bad_lines += result.bad
                state.problems.extend(result.problems)
                # in store order, then line: the same list however the log was read (a checkpoint);
                # the first KEPT_PROBLEMS are named, every one is counted (SPEC §26)
                state.problems.sort(key=lambda p: (INDEX.get(p.store.removesuffix(".ndjson"), 9), p.line))
                del state.problems[KEPT_PROBLEMS:]
            at = refs(name, result.starts)
            check_ahead(state, ws, name, person_refs(name, result.events, at))
            FOLDS[name](state, result.events, at)
            state.verdicts.clear()
        gained[name] = len(result.events)
    return gained
