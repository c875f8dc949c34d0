"""The fold: events read from the stores, applied to the read model (engine.read.model). Pure of any
policy on when to read: engine.read.load decides that; `advance` folds what each store gained since."""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Callable
from datetime import datetime
from itertools import filterfalse
from pathlib import Path
from typing import Any

import msgspec

from engine.base import clock
from engine.base.errors import RegulatorError
from engine.base.gcpause import gc_paused
from engine.checkout.authority import Uncounted
from engine.checkout.workspace import Workspace
from engine.log.events import INDEX, STORES, refs
from engine.log.store import KEPT_PROBLEMS, ReadResult
from engine.read import prejudge
from engine.read.kinds import (
    DispositionLine,
    HostUnitsLine,
    RoutingLine,
    SignalLine,
    SignalsLine,
    UnitsLine,
)
from engine.read.malformed import decision_refused, expiry_refused, result_refused
from engine.read.model import (
    OWED_TO,
    PERSON_DISPOSITIONS,
    RESUMING_ACTIONS,
    WAITING_ACTIONS,
    Closing,
    Cursor,
    Disposition,
    EventKind,
    MemoryEntry,
    Obligation,
    ObligationKind,
    ObligationStatus,
    RecoveryAction,
    State,
    UnitResult,
    UnitStatus,
)
from engine.read.order import (
    _CEILING,
    _HOST_KINDS,
    Refold,
    StoreReplaced,
    _Order,
    _ordered,
    _routing_order,
    _signals_seen,
)
from engine.read.persons import PERSON_STORES, _judge, _read_back, check_ahead, counts, person_refs
from engine.read.rules import close_pending, decision_closes, disposing, disposition_counts
from engine.read.vetoes import Span, host_veto
from engine.read.worldfold import KINDS as WORLD_KINDS
from engine.read.worldfold import (
    EscalatedLine,
    ExpiredLine,
    OutcomeLine,
    OverdueLine,
    PagedLine,
    SensorRunLine,
    WithdrawnLine,
    fold_world,
    opened_in_units,
    settle_unopened,
    world_signal,
)

WorldLine = (
    ExpiredLine | OverdueLine | EscalatedLine | WithdrawnLine | SensorRunLine | PagedLine | OutcomeLine
)

# the names the hot loops compare with, bound once (an enum member read from its class costs more)
_SIGNAL, _ROUTING, _DISPOSITION = EventKind.SIGNAL.value, EventKind.ROUTING.value, EventKind.DISPOSITION.value
_OPEN, _RESOLVED, _ESCALATED = ObligationStatus.OPEN, ObligationStatus.RESOLVED, ObligationStatus.ESCALATED
_INTELLIGENCE, _QUESTION = ObligationKind.INTELLIGENCE, ObligationKind.QUESTION
_ANSWERED = Disposition.ANSWERED.value
_ALWAYS = frozenset(PERSON_DISPOSITIONS) - {_ANSWERED}  # dispositions every obligation's kind allows
_DISPATCH, _CLOSE, _DEMOTE, _DECISION = (
    k.value for k in (EventKind.DISPATCH, EventKind.CLOSE, EventKind.DEMOTE, EventKind.DECISION)
)
_MEMORY, _RETRACTION = EventKind.MEMORY.value, EventKind.RETRACTION.value
_RESULT, _LEASE_EXPIRED = EventKind.RESULT.value, EventKind.LEASE_EXPIRED.value
_IN_PROGRESS, _CLOSED, _TODO = UnitStatus.IN_PROGRESS, UnitStatus.CLOSED, UnitStatus.TODO
_LOST = UnitStatus.LOST


_TYPED_KINDS = frozenset((_SIGNAL, _ROUTING, _DISPOSITION, *WORLD_KINDS))


_UNIT_PERSON = (_DECISION, _DEMOTE)
Ahead = prejudge.Prejudged | None  # a child judging the signed lines (engine.read.prejudge)
PIECE = 16 << 20  # bytes of a store read and folded at once: its events are dropped before the next


_intern = sys.intern
_WRONG_TYPES = "malformed: fields of the wrong type"  # no shape of its kind reads it, or its kind is not text
_RESTATED = "malformed: a signal id already recorded (a second line replaces nothing: the first is routed)"


def _fold_signals(state: State, events: list[Any], at_refs: list[int]) -> None:
    signals, routings, obligations = state.signals.refs, state.routings.refs, state.obligations
    waiting, pending, host = state.unrouted_ids, state.pending, state.host
    expiries: dict[str, datetime | None] = {}
    fresh: dict[str, SignalLine] = {}  # this read's signals: a routing usually follows its signal closely
    # the order rule's inline test, its fields read once: units_at and max_seen move only while
    # units.ndjson folds, the rest only in _routing_order (read again after each call of it)
    inline, intern, units_at, max_seen = _INLINE, _intern, host.units_at, host.max_seen
    starts, saws = host.starts, host.seen_units
    signals_seen, last_saw = host.signals_seen, saws[-1] if saws else 0
    for event, at in zip(events, at_refs, strict=True):
        cls = type(event)  # a typed shape's class says its kind (its tag): cheaper than reading `kind`
        if cls is SignalsLine:  # not one of the typed shapes
            kind = event.kind
            if not isinstance(kind, str) or kind in _TYPED_KINDS:  # a list or object: no set's key
                state.uncounted.append(Uncounted("signals", at >> 2, _WRONG_TYPES))
            continue
        if cls is SignalLine:
            if event.by is not None and not counts(state, "signals", at):
                continue
            signal_id = event.id
            if signal_id in signals:  # a second line cannot restate a signal (its units, before routing)
                state.uncounted.append(Uncounted("signals", at >> 2, _RESTATED))
                continue
            signals[signal_id] = at
            fresh[signal_id] = event  # unrouted (state.unrouted_ids) unless routed by the end of this read
            if event.sensor is not None or event.supersedes is not None or event.prediction is not None:
                world_signal(state, event, at)
        elif cls is RoutingLine:
            signal_id = event.signal
            if signal_id in routings:
                continue  # a second router's duplicate: dropped
            seen = event.seen
            if seen is not None or signals_seen:
                # as a host writes it, inline (one per routing record of the log): it saw units.ndjson
                # no shorter than the routing records before it, and nothing read bears on it
                saw = seen.units if seen is not None else None
                if (
                    inline
                    and type(saw) is int
                    and signals_seen
                    and last_saw <= saw < _CEILING
                    and saw >= units_at
                    and max_seen <= at >> 2
                ):
                    starts.append(at >> 2)
                    saws.append(saw)
                    last_saw = saw
                else:
                    reason = _routing_order(state, event, at)
                    starts, saws, signals_seen = host.starts, host.seen_units, host.signals_seen
                    last_saw = saws[-1] if saws else 0
                    if reason is not None:  # counts for nothing: the next routing record routes it
                        state.uncounted.append(Uncounted("signals", at >> 2, reason))
                        continue
            signal = fresh.get(signal_id)
            if signal is not None:  # this read's: one id string, kept by signals, routings and obligations
                signal_id, subject, expires = signal.id, signal.subject, signal.expiresAt
            else:  # routed in a later read than its signal (which may be waiting): read the signal back
                waiting.pop(signal_id, None)
                earlier = state.signals.get(signal_id, {})
                subject, expires = earlier.get("subject", ""), earlier.get("expiresAt")
            routings[signal_id] = at
            if expires and expires not in expiries:
                expiries[expires] = _expiry(expires)
            for entry in event.obligations:
                ob_id = entry.id
                if ob_id in obligations:
                    continue
                # positional, every field in order (Obligation.__struct_fields__): this runs once per
                # obligation in the log, the hottest constructor
                # the few texts many obligations repeat (unit, severity, owed to) are one string
                # each, not one per obligation: ~170 bytes an open obligation (docs/performance.md)
                unit = entry.unit
                obligations[ob_id] = Obligation(
                    ob_id,  # id
                    unit if unit is None else intern(unit),
                    _INTELLIGENCE if entry.kind is None else _kind_of(entry.kind),  # kind
                    signal_id,  # source
                    intern(entry.severity),
                    entry.blocks,
                    intern(entry.owedTo),  # owed_to
                    event.at or "",  # opened_at: text, a time where a host wrote it
                    subject,
                    expiries.get(expires) if expires else None,  # expires_at
                    _OPEN,  # status
                    None,  # disposition
                    None,  # by
                    None,  # rationale
                    None,  # closed_at
                    [at],  # history
                )
                if pending and ob_id in pending and close_pending(state, obligations[ob_id]):
                    raise Refold("signals")  # a closing judged before this escalation: judge it again (D-295)
        elif cls is DispositionLine:
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
                # a recovery obligation is opened in units.ndjson, folded after this store: judged
                # there, when it opens (engine.read.rules.close_pending)
                pending.setdefault(event.obligation, []).append(closing)
            elif ob.status == _OPEN:
                ob.close(closing)
        else:  # what time and the world brought in (design §24)
            fold_world(state, event, at, counts)
            opened = getattr(event, "opens", None)  # a recheck obligation (evidence-expired)
            recheck = opened.id if opened is not None and pending and opened.id in obligations else None
            if recheck in pending and close_pending(state, obligations[recheck]):
                raise Refold("signals")  # as for a routed obligation (D-295)
    waiting.update(dict.fromkeys(filterfalse(routings.__contains__, fresh)))  # in log order, in C


def _kind_of(text: str) -> ObligationKind:
    """The kind a routed obligation names: a question's, else intelligence (a routing record whose
    kind is anything else was not written by the router: verify names it, the fold keeps it as
    intelligence, which may hold)."""
    return _QUESTION if text == _QUESTION.value else _INTELLIGENCE


def _expiry(text: str) -> datetime | None:
    """A signal's expiry; one that is not a time (a line no engine wrote) never expires: its
    obligations keep holding rather than lapse (fail closed)."""
    try:
        return clock.read_time(text)
    except RegulatorError:
        return None


def _may_resolve(state: State, event: DispositionLine, ob: Obligation | None, at: int) -> bool:
    """A disposition counts only when its obligation's kind allows it (`answered` on questions
    only) and from a person the policy in force at its place lets resolve that severity
    (engine.read.rules.disposing and may_resolve, which `obligation resolve` and the room ask too)."""
    if event.disposition not in _ALWAYS:  # `answered`, or no disposition a person writes
        denied = disposing(ob, event.disposition)
        if denied is not None:
            state.uncounted.append(Uncounted("signals", at >> 2, denied.short))
            return False
    if ob is None:
        return True  # its obligation is not folded yet: judged when it opens (rules.close_pending)
    return disposition_counts(state, at, event.at, event.by, ob)


def _fold_units(state: State, events: list[UnitsLine], at_refs: list[int]) -> None:
    obligations, units, unit_of = state.obligations, state.units, state.unit
    holds: dict[str, list[Obligation]] | None = None  # unit -> its blocking obligations, built once needed
    first: dict[str, int] = {}  # unit -> where in signals.ndjson its first blocking obligation opened
    held: dict[str, list[Span]] = {}  # unit -> (opened, obligation) of each, parsed once the unit needs them
    last_at: object = None
    last_when: datetime | None = None
    host = state.host
    crossing = "signals" in state.cursors  # signals.ndjson is folded here: the order rule applies
    order = _Order(host)
    for event, at in zip(events, at_refs, strict=True):
        kind = event.kind
        unit_id = event.unit
        if not isinstance(unit_id, str):
            continue
        unit = units.get(unit_id)
        if unit is None:
            unit = unit_of(unit_id)
        unit.history.append(at)  # shown in the lifecycle even when it counts for nothing
        if type(kind) is not str:  # a list or object: no kind a host or person writes, no set's key
            state.uncounted.append(Uncounted("units", at >> 2, _WRONG_TYPES))
            continue
        if kind in _UNIT_PERSON and not counts(state, "units", at):
            continue
        if kind in _HOST_KINDS:
            seen = event.seen
            if seen is not None or host.units_seen or (crossing and order.decided_before(at >> 2)):
                # judged by the order (design §22): where it says it decided, not by its time
                wanted = _signals_seen(seen) if crossing else None
                if type(wanted) is int and wanted > host.signals_size and state.reread is not None:
                    host.units_at = at >> 2  # what a routing read now must find seen
                    state.reread()  # appended to signals.ndjson since it was read: read it first
                    holds, held, order = None, {}, _Order(host)
                if holds is None:
                    holds = _holds(obligations)
                    first = _first_opened(holds)
                # as a host writes it, inline (one per dispatch and close of the log): a status the
                # command accepts, what it saw of signals.ndjson held, every routing record decided
                # before it seen and none that saw it, and no blocking obligation of the unit in
                # what it saw; anything else is asked of _ordered, which decides and says why
                if (
                    _INLINE
                    and host.units_seen
                    and seen is not None
                    and (unit.status == _IN_PROGRESS) != (kind == _DISPATCH)
                    and (
                        not crossing  # the units log alone (a door): its status is all that is judged
                        or type(wanted) is int
                        and wanted <= host.signals_size
                        and (
                            (k := bisect_left(order.starts, wanted)) == len(order.low)
                            or order.low[k] > at >> 2
                        )
                        and (k == 0 or order.high[k - 1] <= at >> 2)
                        and wanted <= first.get(unit_id, wanted)
                    )
                ):
                    reason = None
                else:
                    reason = _ordered(
                        state, unit, kind, seen, at >> 2, holds.get(unit_id, ()), order, crossing
                    )
                if reason is not None:
                    state.uncounted.append(Uncounted("units", at >> 2, reason))
                    continue
                if type(wanted) is int and wanted > host.max_seen:
                    host.max_seen = wanted  # what a routing record read later must not be
            else:  # a store from before `seen` (design §22): judged by time, as it always was
                if holds is None:
                    holds = _holds(obligations)
                    first = _first_opened(holds)
                at_text = event.at
                if at_text != last_at or type(at_text) is not str:  # a host writes many in one second
                    last_at, last_when = at_text, clock.moment(at_text)
                spans = held.get(unit_id)
                if spans is None:
                    spans = held[unit_id] = [
                        (clock.moment(ob.opened_at), ob) for ob in holds.get(unit_id, ())
                    ]
                # the common case needs no call: no hold, a time, and a status the command accepts
                # (a dispatch refuses only in-progress, a close anything else: engine.read.vetoes.REFUSED)
                if spans or last_when is None or (unit.status == _IN_PROGRESS) == (kind == _DISPATCH):
                    reason = host_veto(unit, kind, last_when, spans)
                else:
                    reason = None
                if reason is not None:
                    state.uncounted.append(Uncounted("units", at >> 2, reason))
                    continue
        if kind == _DISPATCH:
            # a first-round dispatch kept the token itself in the log: such a lease is not honoured
            # each field kept only in the type a host writes (a hand-written line's other types
            # would stop the lease duty, `unit close` or a leased call: none where it is not text)
            worktree = _text(event.worktree)
            unit.status, unit.lease, unit.worktree = _IN_PROGRESS, _text(event.leaseHash), worktree
            if worktree and worktree not in unit.worktrees:  # every one it was given (a feed's check)
                unit.worktrees = (*unit.worktrees, worktree)
            unit.type, unit.profile = _text(event.type), _text(event.profile)
            expires, ttl = event.expiresAt, event.ttl
            unit.expires_at = expires if type(expires) is str else None
            unit.ttl = ttl if type(ttl) is int and 0 <= ttl <= _MAX_TTL_S else None  # else: never expires
            unit.confined = event.confined if type(event.confined) is bool else None
            unit.run_on = event.runOn if type(event.runOn) is str else None
            unit.result = None
        elif kind == _RESULT:
            reason = result_refused(unit, event)
            if reason is not None:
                state.uncounted.append(Uncounted("units", at >> 2, reason))
                continue
            unit.result = UnitResult(
                event.id,
                event.outcome,
                event.summary,
                event.at,
                "host" if event.by == "host" else "unit",
                event.exitCode if type(event.exitCode) is int else None,
                event.durationS if type(event.durationS) is int else None,
            )
            opened = event.opens
            if opened:
                recovery = Obligation(
                    id=opened["id"],
                    unit=unit_id,
                    kind=ObligationKind.RECOVERY,
                    source=event.id,
                    severity=opened["severity"],
                    blocks=False,
                    owed_to=opened.get("owedTo", OWED_TO),
                    opened_at=_text(event.at) or "",  # text, whatever a line held
                    subject=f"recovery: {unit_id} reported {event.outcome}: {event.summary}",
                    history=[at],
                )
                _opened(state, recovery)
        elif kind == _LEASE_EXPIRED:
            reason = expiry_refused(unit, event)
            if reason is not None:
                state.uncounted.append(Uncounted("units", at >> 2, reason))
                continue
            unit.status, unit.lease = _LOST, None
        elif kind == _CLOSE:
            unit.status, unit.lease = _CLOSED, None
        elif kind == _DEMOTE:
            unit.status, unit.lease = _TODO, None
        elif kind == _DECISION:
            reason = decision_refused(event)
            if reason is not None:
                state.uncounted.append(Uncounted("units", at >> 2, f"malformed: {reason}"))
                continue
            action = event.action
            rationale = event.rationale
            opened = event.opens  # checked: a waiting action's derived recovery obligation, else None
            closing = Closing(
                status=_ESCALATED if action in WAITING_ACTIONS else _RESOLVED,
                disposition=event.disposition,
                by=event.by,
                rationale=None if rationale is msgspec.UNSET else rationale,
                closed_at=_text(event.at),
                at=at,
                unit=unit_id,
                opens=opened["id"] if opened else None,
            )
            escalated: set[str] = set()
            for ob_id in event.resolves:
                ob = obligations.get(ob_id)
                if ob is None:
                    state.pending.setdefault(ob_id, []).append(closing)
                elif ob.status == _OPEN:
                    if decision_closes(state, closing, ob):
                        ob.close(closing)
                        escalated.add(ob.severity)
                        escalated.update(ob.escalated)
                    else:
                        ob.history.append(at)  # shown in its lifecycle: it counted for nothing
            if opened:
                ob = Obligation(
                    id=opened["id"],
                    unit=unit_id,
                    kind=ObligationKind.RECOVERY_DECISION,
                    source=event.id,
                    severity=opened["severity"],
                    blocks=True,
                    owed_to=opened.get("owedTo", OWED_TO),
                    opened_at=_text(event.at) or "",  # text, whatever a line held
                    subject=f"recovery decision: {action} — {'' if rationale is msgspec.UNSET else rationale}",
                    history=[at],
                    escalated=tuple(sorted(escalated)),
                )
                if _opened(state, ob) and holds is not None:
                    holds.setdefault(unit_id, []).append(ob)
                    first[unit_id] = -1  # opened here: before every host event after it
                    if unit_id in held:
                        held[unit_id].append((clock.moment(ob.opened_at), ob))
            unit.lease = None
            if action in RESUMING_ACTIONS:
                unit.status, unit.recovery = UnitStatus.TODO, None
            elif action == RecoveryAction.ABORT:
                unit.status, unit.recovery = UnitStatus.ABORTED, None
            else:
                unit.status, unit.recovery = UnitStatus.WAITING, opened["id"] if opened else None


_MAX_TTL_S = 100 * 366 * 86400  # a lease's ttl past a century is no time a host writes


def _text(value: object) -> str | None:
    return value if type(value) is str else None


def _opened(state: State, ob: Obligation) -> bool:
    """Open an obligation units.ndjson opens (a result's recovery, a recovery decision's): the
    first line that opens an id opens it, as for a routing record's (_fold_signals); a later one
    opens nothing (D-185). The closes and world marks read before it are its own."""
    if ob.id in state.obligations:
        return False
    state.obligations[ob.id] = ob
    opened_in_units(state, ob)
    close_pending(state, ob)
    return True


def _first_opened(holds: dict[str, list[Obligation]]) -> dict[str, int]:
    """Where each unit's first blocking obligation opened in signals.ndjson (-1: one opened in
    units.ndjson): a dispatch or close that saw less saw none of them (the order rule's fast path)."""
    return {
        unit: min(-1 if ob.history[0] & 3 else ob.history[0] >> 2 for ob in obs)
        for unit, obs in holds.items()
    }


def _holds(obligations: dict[str, Obligation]) -> dict[str, list[Obligation]]:
    """Every unit's blocking obligations, open or not (one pass, for the units' host events)."""
    index: dict[str, list[Obligation]] = {}
    for ob in obligations.values():
        if ob.blocks and ob.unit:
            index.setdefault(ob.unit, []).append(ob)
    return index


_INLINE = True  # the folds judge a host event as hosts write it inline (tests turn it off: the same)


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
                and type(get("at")) is str
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
        clock.parse_date(review_by)  # exactly YYYY-MM-DD, as remember writes it (design §26)
    except RegulatorError:
        return "reviewBy is not a calendar date (YYYY-MM-DD)"
    for name in ("scope", "evidence"):  # remember writes both, lists of text (scope may be empty)
        value = event.get(name)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return f"{name} is not a list of text"
    if not isinstance(event.get("unit"), str | None):
        return "unit is not text"
    if not isinstance(event.get("at"), str):  # the context orders entries by it (engine.read.delivery)
        return "at is not text"
    return None


def _fold_identity(state: State, events: list[dict[str, Any]], at_refs: list[int]) -> None:
    """Proposals and decisions as the authority counted them (engine.checkout.authority folds the whole
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
    "signals": (SignalLine | RoutingLine | DispositionLine | WorldLine, SignalsLine),
    "units": (HostUnitsLine, UnitsLine),
}
ORDER = STORES  # the fold's order (signals before units), also the index a reference carries


def advance(
    ws: Workspace, state: State, *, final: bool = True, stores: tuple[str, ...] = ORDER
) -> dict[str, int]:
    """Fold what each store gained since the last read; returns how many events each gained.

    Signals fold before units so a decision finds the obligations it closes; within one store,
    log order is the order of events. A dispatch or close that saw more of signals.ndjson than was
    read of it (appended since) has the rest read first (`state.reread`), so it is judged at
    exactly what it saw (design §22). A state that folds signals.ndjson reads it whenever it
    reads units.ndjson: a units line is judged with every signal before it, as a cold read does.
    """
    if "units" in stores and "signals" in state.cursors and "signals" not in stores:
        stores = ("signals", *stores)  # never units ahead of the signals it is judged with (as cold)
    state.source.bind(tuple(ws.store(name).path for name in STORES))
    state.auth = ws.authority()
    behind = _policy_behind(state)
    if behind is not None:  # a decision placing a policy before lines this state judged: judge them again
        raise Refold(behind)
    gained: dict[str, int] = dict.fromkeys((name for name in ORDER if name in stores), 0)
    ahead = _prejudge(ws, state, [name for name in gained if name in PERSON_STORES])
    try:
        for name in list(gained):
            if name == "units" and "signals" in state.cursors:
                state.reread = lambda: _read(ws, state, "signals", final, gained)
            try:
                _read(ws, state, name, final, gained, ahead)
            finally:
                state.reread = None
    finally:
        if ahead is not None:
            ahead.close()
    if "units" in gained and "signals" in state.cursors:
        settle_unopened(state)  # the obligations units.ndjson opens are all folded now
    return gained


def _policy_behind(state: State) -> str | None:
    """A store whose lines this state judged under a policy that a decision it has not folded yet
    places before them (its `marks` below the store's cursor), or None. `identity accept` records
    the stores' sizes as it decides, at or past what any reader had folded; a decision signed by hand
    may name earlier ones, and a cold fold judges those lines by it: the state is folded again, so
    the fast path and the slow agree (an adversarial review: a narrowed `resolve:` placed back over
    a disposition already counted left the checkpoint's verdict standing, D-294)."""
    if "identity" not in state.cursors:
        return None  # a state that does not fold identity.ndjson (the door's units: refolded on its change)
    for decision in state.auth.decisions[len(state.decisions) :]:
        marks = decision.get("marks")
        if not isinstance(marks, dict):
            continue
        for name, cursor in state.cursors.items():
            mark = marks.get(name)
            if name != "identity" and isinstance(mark, int) and mark < cursor.offset:
                return name
    return None


def _prejudge(ws: Workspace, state: State, names: list[str]) -> prejudge.Prejudged | None:
    """A forked child judging the stores' signed lines while they parse (engine.read.prejudge)."""
    if ws.url is not None or not names:  # a mirror may be fetched again under the read: not there
        return None

    def judge(name: str, path: Path, found: list[int]) -> list[tuple[int, Any, str | None]]:
        lines = zip(_read_back(path, found), found, strict=True)
        return [
            (at, event.get("id"), _judge(state, event, before, name, at)) for (event, before), at in lines
        ]

    where = [(n, ws.store(n).path, state.cursors.get(n, Cursor()).offset, INDEX[n]) for n in names]
    return prejudge.start(where, judge)


def _read(ws: Workspace, state: State, name: str, final: bool, gained: dict, ahead: Ahead = None) -> None:
    """Fold what one store gained since it was last read, a piece at a time (PIECE bytes: each
    piece's events are folded, then dropped, so a cold read never holds a whole store's events)."""
    if name == "signals" and name not in state.cursors and state.host.units_at:
        raise Refold(name)  # dispatches and closes were judged without it: judge them with it
    cursor = state.cursors.setdefault(name, Cursor())
    store = ws.store(name)
    if store.size() < cursor.offset:  # replaced or truncated: the caller reloads in full
        raise StoreReplaced(name)
    limit = PIECE if ws.url is None else None  # a mirror is proven against the server once per read
    more, file = True, None
    with gc_paused():
        while more:
            result = store.read(cursor.offset, cursor.line, final=final, shape=SHAPES.get(name), limit=limit)
            if file not in (None, result.file):  # renamed over between two pieces (an editor's save)
                raise StoreReplaced(name)
            file = result.file
            cursor.offset, cursor.line, more = result.offset, result.line, result.more
            _fold_piece(state, ws, name, result, ahead)
            gained[name] = gained.get(name, 0) + len(result.events)


def _fold_piece(state: State, ws: Workspace, name: str, result: ReadResult, ahead: Ahead) -> None:
    if name == "signals":
        host = state.host
        host.signals_size = result.end
        if 0 <= host.beyond <= result.end:  # a dispatch or close said it saw this much: judge it now
            raise Refold("signals")
    if result.bad:
        state.bad_lines += result.bad
        state.problems.extend(result.problems)
        # in store order, then line: the same list however the log was read (a checkpoint);
        # the first KEPT_PROBLEMS are named, every one is counted (design §26)
        state.problems.sort(key=lambda p: (INDEX.get(p.store.removesuffix(".ndjson"), 9), p.line))
        del state.problems[KEPT_PROBLEMS:]
    at = refs(name, result.starts)
    outer = state.prejudged  # a units piece's, while signals.ndjson is read again inside it (reread)
    if ahead is not None and ahead.alive(name):  # the child's verdicts, taken as the fold reaches each line
        state.prejudged = _Taken(state, ws, name, result.events, at, ahead)
    else:  # the person events' signatures checked here, ahead of the fold, on every core
        state.prejudged = None
        check_ahead(state, ws, name, person_refs(name, result.events, at))
    try:
        FOLDS[name](state, result.events, at)
    finally:
        state.prejudged = outer
    state.verdicts.clear()
    if name == "units":
        state.host.units_at = state.cursors[name].offset


class _Taken:
    """The child's verdict on a line, as the fold of one piece reaches it; once the child has
    stopped (failed, or behind past GRACE_S), the rest of the piece's person events are checked
    here at once, on every core (check_ahead), not one by one."""

    def __init__(self, state: State, ws: Workspace, name: str, events: list[Any], at: list[int], ahead: Any):
        self.state, self.ws, self.name, self.events, self.at, self.ahead = state, ws, name, events, at, ahead

    def __call__(self, store: str, ref: int) -> tuple[Any, str | None] | None:
        ahead = self.ahead
        if ahead is not None:
            told = ahead.verdict(store, ref)
            if told is not None or ahead.alive(store):
                return told
            self.ahead = None
            rest = [r for r in person_refs(self.name, self.events, self.at) if r >= ref]
            check_ahead(self.state, self.ws, self.name, rest)
        return None
