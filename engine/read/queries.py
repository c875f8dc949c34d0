"""The derived states every view and command asks: stale, current, waiting, a history (held is
engine.read.vetoes', who may act engine.read.rules').

Nothing else decides these: a view formats what these say (controlroom.readmodel), a command
acts on it (engine.commands.units, engine.commands.obligations), Next-up ranks what they leave (engine.read.nextup).
"""

from __future__ import annotations

from datetime import date
from typing import Any

import msgspec

from engine.base import clock
from engine.log.events import INDEX
from engine.read.model import (
    Disposition,
    MemoryEntry,
    MemoryStatus,
    Obligation,
    ObligationKind,
    ObligationStatus,
    State,
    UnitState,
    UnitStatus,
)

# bound once: a member read from its enum class goes through EnumType.__getattr__ on Python 3.11
# (about 0.3 µs; Next-up asks twice per unit)
_OPEN = ObligationStatus.OPEN
_WAITING, _TODO = UnitStatus.WAITING, UnitStatus.TODO


def history(state: State, holder: Obligation | UnitState) -> list[dict[str, Any]]:
    """An obligation's or a unit's events, oldest first, read back from the stores; a person event
    that counts for nothing carries `uncounted` (its reason)."""
    events = state.source.events(holder.history)
    if not state.uncounted:
        return events
    why = {(INDEX.get(u.store, -1), u.offset): u.reason for u in state.uncounted}
    out = []
    for ref, event in zip(holder.history, events, strict=True):
        reason = why.get((ref & 3, ref >> 2))
        out.append(event if reason is None else {**event, "uncounted": reason})
    return out


def unit_status(state: State, unit: UnitState) -> UnitStatus:
    """A waiting unit returns to todo once its recovery-decision obligation is dispositioned."""
    if unit.status == _WAITING and unit.recovery:
        ob = state.obligations.get(unit.recovery)
        if ob is not None and ob.status != _OPEN:
            return _TODO
    return unit.status


# a unit whose work has started and not ended: an in-progress one, or one whose lease expired
# while in progress (lost, design §23). A hold on either fails --once; status, the room and Next-up
# show both.
STARTED = (UnitStatus.IN_PROGRESS, UnitStatus.LOST)


def confined(state: State, unit: UnitState) -> bool | None:
    """Whether a started unit runs confined (`unit run --user`, design §23); a unit dispatched any
    other way is not known to be: false. None for a unit that is not started."""
    if unit_status(state, unit) not in STARTED:
        return None
    return unit.confined is True


def is_stale(state: State, ob: Obligation) -> bool:
    """Open, and the signal behind it has expired: shown as stale until dispositioned."""
    return ob.status == _OPEN and ob.expires_at is not None and ob.expires_at <= state.now


def obligation_marks(state: State, ob: Obligation, overdue: bool) -> list[str]:
    """What an obligation's row says beside its subject, most urgent first: its escalation's page
    did not go out, overdue (`overdue`: by the deadlines in force), its evidence expired, stale,
    its advisory withdrawn, or affecting no pin now, its sensor's stall over (D-321). The one list
    `obligations`, `obligation show` and the control room show (D-319)."""
    world = state.world
    return [
        word
        for word, on in (
            ("not paged", ob.id in world.unpaged and ob.status == _OPEN),  # paged by hand, once closed
            ("overdue", overdue),
            ("evidence expired", ob.id in world.stale_evidence),
            ("stale", is_stale(state, ob)),
            ("advisory withdrawn", ob.source in world.withdrawn),
            ("pin no longer affected", ob.source in world.cleared),
            ("feed moving again", ob.source in world.resumed),  # a stall signal's (D-321)
        )
        if on
    ]


def unrouted(state: State) -> list[dict[str, Any]]:
    """Signals with no routing record yet, in log order (kept as the log is folded)."""
    return [state.signals[s_id] for s_id in state.unrouted_ids]


def unrouted_count(state: State) -> int:
    return len(state.unrouted_ids)


def memory_status(entry: MemoryEntry, today: date) -> MemoryStatus:
    """Current through its review-by day; expired from the day after; retracted overrides."""
    if entry.retraction is not None:
        return MemoryStatus.RETRACTED
    if date.fromisoformat(entry.event["reviewBy"]) < today:
        return MemoryStatus.EXPIRED
    return MemoryStatus.CURRENT


def days_left(entry: MemoryEntry, today: date) -> int:
    return (date.fromisoformat(entry.event["reviewBy"]) - today).days


def signals_routed(state: State) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(id, signal, its routing record or None while unrouted) for every signal, in log order:
    the signals and their routing records read back at once (one read of the span they lie in,
    both in signals.ndjson), not one open per row."""
    signals, routings = state.signals.refs, state.routings.refs
    read = state.source.events([*signals.values(), *routings.values()])
    routed = dict(state.routings.keyed(list(routings), read[len(signals) :]))
    get = routed.get
    return [
        (key, signal, get(key)) for key, signal in state.signals.keyed(list(signals), read[: len(signals)])
    ]


class SignalRow(msgspec.Struct):
    """The fields of a signal line a row shows (`signals_routed_shaped`): a value the line does
    not hold reads as None, as `dict.get` reads it."""

    unit: object = None
    by: object = None
    sensor: object = None
    subject: object = None
    reportedSeverity: object = None
    at: object = None
    prediction: object = None


class RoutingRow(msgspec.Struct):
    """The fields of a routing record a signal's row shows."""

    derivedSeverity: object = None
    outcome: object = None


_SIGNAL_ROW = msgspec.json.Decoder(SignalRow)
_ROUTING_ROW = msgspec.json.Decoder(RoutingRow)


def signals_routed_shaped(state: State) -> list[tuple[str, SignalRow | None, RoutingRow | None]]:
    """`signals_routed`, each line decoded in a row's shape: (id, its fields, its routing record's
    (None while unrouted)); a line that does not decode in that shape reads
    as one with no fields (None), as a line that does not read back whole does there. Four to
    seven times faster than reading every line whole, and equal to it wherever every line of
    signals.ndjson reads whole (tests/test_perf_paths.py); a line that does not (D-184) is shown
    here with the fields it has: only a caller that knows none does uses this (D-203)."""
    signals, routings = state.signals.refs, state.routings.refs
    read, routed_read = state.source.shaped(
        [(signals.values(), _SIGNAL_ROW), (routings.values(), _ROUTING_ROW)]
    )
    routed: dict[str, RoutingRow | None] = dict(zip(routings, routed_read, strict=True))
    get = routed.get
    return [(key, row, get(key)) for key, row in zip(signals, read, strict=True)]


def signal_rows(state: State) -> list[dict[str, Any]]:
    """Every signal with its routing outcome (None while unrouted), in log order: what `signals`
    lists (`controlroom --once --json` reports some of it: controlroom.once._signals_json)."""
    from engine.read.worldfold import prediction_json, reporter_label

    world = state.world
    rows = []
    for signal_id, signal, routing in signals_routed(state):
        rows.append(
            {
                "id": signal_id,
                "subject": signal.get("subject"),
                "reportedSeverity": signal.get("reportedSeverity"),
                "type": signal.get("type"),  # `question` for a unit's question (it has no severity)
                "derivedSeverity": routing.get("derivedSeverity") if routing else None,
                "routed": routing is not None,
                "outcome": routing.get("outcome") if routing else None,
                "reason": routing.get("reason") if routing else None,
                "obligations": [o["id"] for o in routing.get("obligations", [])] if routing else [],
                "unit": signal.get("unit"),
                "by": signal.get("by"),
                "at": signal.get("at"),
                "from": reporter_label(signal),
                "sensor": signal.get("sensor"),
                "supersedes": signal.get("supersedes"),
                "supersededBy": world.superseded.get(signal_id, []),
                "evidenceExpired": signal_id in world.expired,
                "withdrawn": signal_id in world.withdrawn,
                "cleared": signal_id in world.cleared,  # D-308: its advisory no longer affects its pin
                "stallEnded": signal_id in world.resumed,  # D-321: a stall signal whose feed moves again
                "prediction": prediction_json(state, signal_id, signal)
                if signal_id in world.predicted
                else None,
            }
        )
    return rows


def age(state: State, at: str) -> str:
    """How long ago `at` was on the state's clock, in the largest whole unit (d, h, m, s); "?"
    for a time that does not read (a line written by hand)."""
    moment = clock.moment(at)
    if moment is None:
        return "?"
    seconds = max(0, int((state.now - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def answer_of(ob: Obligation) -> str | None:
    """A question's answer, as a person gave it (`answered`); None for every other obligation and
    for a question not answered: `obligations --json` and the door's `obligations` alike."""
    return (ob.rationale or "") if ob.disposition == Disposition.ANSWERED else None


def answers(state: State, unit_id: str) -> list[dict[str, Any]]:
    """The questions this unit asked that a person answered, in log order: {"obligation",
    "question", "options", "answer", "by", "at"} (raw values; the caller escapes what it shows)."""
    found = []
    for ob in state.obligations.values():
        if ob.unit != unit_id or ob.kind != ObligationKind.QUESTION:
            continue
        if ob.disposition != Disposition.ANSWERED:
            continue
        signal = state.signals.get(ob.source) or {}
        found.append(
            {
                "obligation": ob.id,
                "question": signal.get("question") if isinstance(signal.get("question"), str) else ob.subject,
                "options": list(signal.get("options") or []),
                "answer": answer_of(ob),
                "by": ob.by,
                "at": ob.closed_at,
            }
        )
    return found
