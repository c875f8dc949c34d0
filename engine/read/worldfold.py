"""The fold of what time and the world bring in (design §24): the host events the timed duties write
to signals.ndjson, a person's prediction outcome, and what a signal says about sensors,
predictions and supersession, applied to the read model's `World` (engine.read.model).

Every duty's event carries an id derived from what it is about, so a duty run twice (a retry, two
hosts, a restart) writes once; a second line with an id already folded, or about something that
already has its event, counts for nothing and `verify` names it. None of these events resolves,
approves or releases anything: each marks, or opens an advisory recheck obligation.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import msgspec

from engine.base import clock, ids
from engine.checkout.authority import Uncounted
from engine.read.model import EventKind, Obligation, ObligationKind, ObligationStatus, State

PENDING, AWAITING, CAME_TRUE, DID_NOT = "pending", "awaiting", "came-true", "did-not-come-true"
OSV_KEY = "\0"  # joins (advisory id or alias, package, lockfile) into one key of World.advisories


class OsvRef(msgspec.Struct):
    """What an OSV sensor's signal records of the advisory it raised (engine.commands.sensors)."""

    id: str
    package: str
    lockfile: str
    aliases: list[str] = []
    ecosystem: str = ""


class RoutedRecheck(msgspec.Struct):
    """The recheck obligation an evidence-expired event opens (as a routing record opens one)."""

    id: str
    severity: str
    blocks: bool
    owedTo: str = "S3"  # noqa: N815 - the store's field name
    unit: str | None = None


class ExpiredLine(msgspec.Struct, tag_field="kind", tag=EventKind.EVIDENCE_EXPIRED.value):
    kind: ClassVar[str] = EventKind.EVIDENCE_EXPIRED.value
    id: str
    signal: str
    obligations: list[str] = []
    opens: RoutedRecheck | None = None
    at: str | None = None


class OverdueLine(msgspec.Struct, tag_field="kind", tag=EventKind.OVERDUE.value):
    kind: ClassVar[str] = EventKind.OVERDUE.value
    id: str
    obligation: str
    at: str | None = None


class Paged(msgspec.Struct):
    """An escalation written where routing.yaml sets no notify says so (D-323)."""

    sent: bool
    problem: str = ""


class EscalatedLine(msgspec.Struct, tag_field="kind", tag=EventKind.DEADLINE_ESCALATED.value):
    kind: ClassVar[str] = EventKind.DEADLINE_ESCALATED.value
    id: str
    obligation: str
    at: str | None = None
    notify: Paged | None = None  # where routing.yaml set no notify (D-323)


class PagedLine(msgspec.Struct, tag_field="kind", tag=EventKind.ESCALATION_PAGED.value):
    """What an escalation's notify did, written by the host that ran it (D-323)."""

    kind: ClassVar[str] = EventKind.ESCALATION_PAGED.value
    id: str
    obligation: str
    escalation: str
    sent: bool
    problem: str = ""
    at: str | None = None


class WithdrawnLine(msgspec.Struct, tag_field="kind", tag=EventKind.ADVISORY_WITHDRAWN.value):
    kind: ClassVar[str] = EventKind.ADVISORY_WITHDRAWN.value
    id: str
    signal: str
    obligations: list[str] = []
    at: str | None = None


class SensorRunLine(msgspec.Struct, tag_field="kind", tag=EventKind.SENSOR_RUN.value):
    kind: ClassVar[str] = EventKind.SENSOR_RUN.value
    id: str
    sensor: str
    at: str | None = None
    cleared: list[str] = []  # its signals whose advisory no longer affects their pin (D-308)


class OutcomeLine(msgspec.Struct, tag_field="kind", tag=EventKind.PREDICTION_OUTCOME.value):
    kind: ClassVar[str] = EventKind.PREDICTION_OUTCOME.value
    id: str
    signal: str
    cameTrue: bool  # noqa: N815 - the store's field name
    by: str | None = None
    at: str | None = None


LINES = (ExpiredLine, OverdueLine, EscalatedLine, WithdrawnLine, SensorRunLine, PagedLine, OutcomeLine)
KINDS = frozenset(line.kind for line in LINES)
HOST_KINDS = KINDS - {EventKind.PREDICTION_OUTCOME.value}  # written by the host, unsigned


def world_signal(state: State, event: Any, at: int) -> None:
    """A signal that names a sensor, supersedes another or makes a prediction: index it."""
    world = state.world
    if event.sensor is not None:
        world.sensed.setdefault(event.sensor, []).append(event.id)
        if event.stalled is not None:
            world.stalls[event.id] = None
        ref = event.osv
        if ref is not None:
            for name in dict.fromkeys((ref.id, *ref.aliases)):
                world.advisories.setdefault(OSV_KEY.join((name, ref.package, ref.lockfile)), []).append(
                    event.id
                )
    if event.supersedes is not None and event.supersedes in state.signals.refs:
        world.superseded.setdefault(event.supersedes, []).append(event.id)
    if event.prediction is not None:
        world.predicted[event.id] = None


def fold_world(state: State, event: Any, at: int, counts: Any) -> None:
    """One of this module's lines (LINES), in log order. `counts` is engine.read.persons.counts: whether a
    person event counts (signed, granted, first with its id)."""
    world = state.world
    kind = event.kind
    if kind == OutcomeLine.kind:
        _outcome(state, event, at, counts)
        return
    if event.id in world.ids:
        _uncounted(state, at, "host event: an id already recorded (a second write of a duty)")
        return
    problem = _HOST[kind](state, event, at)
    if problem is not None:  # a host's kind: `verify` names it so, never as a person event
        _uncounted(state, at, problem if problem.startswith("host event: ") else f"host event: {problem}")
        return
    world.ids[event.id] = None


def _expired(state: State, event: ExpiredLine, at: int) -> str | None:
    world = state.world
    if event.signal not in state.signals.refs:
        return "evidence-expired for no signal that counts"
    if event.signal in world.expired:
        return "a second evidence-expired for the same signal"
    # as engine.commands.timed.evidence_events writes it: once an obligation it names has passed its
    # signal's expiry, opening the signal's one recheck obligation on no unit (a line a unit forged
    # would mark evidence stale early, or hold a unit of its choosing)
    when = clock.moment(event.at)
    listed = [state.obligations.get(ob_id) for ob_id in event.obligations]
    if when is None or not any(
        ob is not None and ob.source == event.signal and ob.expires_at is not None and ob.expires_at <= when
        for ob in listed
    ):
        return "host event: evidence-expired before the evidence it names expired: no host wrote it (forged?)"
    opened = event.opens
    if opened is not None and (
        opened.unit is not None or opened.id != ids.recheck_obligation_id(event.signal)
    ):
        return "host event: evidence-expired opening a recheck obligation no host writes (on a unit, or another id): forged?"
    world.expired[event.signal] = at
    for ob_id in event.obligations:
        ob = state.obligations.get(ob_id)
        if ob is not None and ob.source == event.signal:
            world.stale_evidence[ob_id] = event.signal
            ob.history.append(at)
    if opened is not None and opened.id not in state.obligations:
        subject = state.signals[event.signal].get("subject")
        ob = Obligation(
            id=opened.id,
            unit=opened.unit,
            kind=ObligationKind.RECHECK,
            source=event.signal,
            severity=opened.severity,
            blocks=opened.blocks,
            owed_to=opened.owedTo,
            opened_at=event.at or "",
            subject=f"recheck: {subject if isinstance(subject, str) else ''}",
            history=[at],
        )
        state.obligations[ob.id] = ob  # what was folded before it, closing it: engine.read.fold
    return None


def _past_due(state: State, ob: Obligation, at: object) -> bool:
    """Whether `at` is at or after the obligation's deadline under the routing policy in force
    then (Authority.routing_then, as verify reads a routing record without `seen`): when the
    deadline duty (engine.commands.timed.deadline_events) writes its marks."""
    when, opened = clock.moment(at), clock.moment(ob.opened_at)
    if when is None or opened is None:
        return False
    policy = state.auth.routing_then(at)
    seconds = policy.deadline_seconds(ob.severity) if policy is not None else None
    due = clock.later(opened, seconds) if seconds is not None else None
    return due is not None and when >= due  # None: no deadline, or past the calendar's end


def _obligation_mark(index: str) -> Any:
    def mark(state: State, event: OverdueLine | EscalatedLine, at: int) -> str | None:
        if event.obligation not in state.obligations:
            # a recovery obligation opens in units.ndjson, folded after this store: each of its marks
            # waits, judged in log order when it opens (an adversarial review: a forged escalation
            # read first made the host's own "a second", and once the forged one was judged, nothing
            # counted: the host escalated and paged again on every tick)
            state.world.unopened.setdefault(event.obligation, []).append(at)
            return None
        paged = getattr(event, "notify", None)  # where routing.yaml set no notify (D-323)
        unpaged = (paged.problem or "not paged") if paged is not None else None
        return _mark(state, index, event.kind, event.obligation, event.at, unpaged, at)

    return mark


def _mark(
    state: State, index: str, kind: str, ob_id: str, when: object, unpaged: str | None, at: int
) -> str | None:
    """An overdue or deadline-escalated mark on a known obligation: the first written at or after
    its deadline counts (D-191); `unpaged`: why an escalation paged no one, where it says so itself
    (routing.yaml set no notify, D-323)."""
    marks: dict[str, int] = getattr(state.world, index)
    ob = state.obligations[ob_id]
    if ob_id in marks:
        return f"host event: a second {kind} for the same obligation"
    if not _past_due(state, ob, when):
        return f"host event: {kind} before its obligation was due: no host wrote it (forged?)"
    marks[ob_id] = at
    if unpaged is not None:
        state.world.unpaged[ob_id] = unpaged
    ob.history.append(at)
    return None


def opened_in_units(state: State, ob: Obligation) -> None:
    """An obligation that units.ndjson opens (a recovery, a recovery decision's): the overdue,
    deadline-escalated and escalation-paged events read before it, judged now in log order as they
    are on a known obligation (D-191, D-323); one that does not count is named by `verify`."""
    world = state.world
    marks = world.unopened.pop(ob.id, None) if world.unopened else None
    for at in marks or ():
        event = state.source.event(at)
        kind = event.get("kind")
        if kind == PagedLine.kind:
            problem = _page(
                state, ob.id, str(event.get("escalation")), event.get("sent") is True,
                str(event.get("problem") or ""), event.get("at"), at,
            )  # fmt: skip
        else:
            index = "overdue" if kind == OverdueLine.kind else "escalated"
            paged = event.get("notify")
            unpaged = str(paged.get("problem") or "not paged") if isinstance(paged, dict) else None
            problem = _mark(state, index, str(kind), ob.id, event.get("at"), unpaged, at)
        if problem is not None:
            _uncounted(state, at, problem)
            world.ids.pop(event.get("id"), None)  # type: ignore[arg-type]


def settle_unopened(state: State) -> None:
    """Once units.ndjson is folded to its end, a mark or page whose obligation never opened counts
    for nothing (`verify` names it): its obligation was written before it."""
    world = state.world
    for marks in world.unopened.values():
        for at in marks:
            event = state.source.event(at)
            _uncounted(state, at, f"host event: {event.get('kind')} for no obligation that counts")
            world.ids.pop(event.get("id"), None)  # type: ignore[arg-type]
    world.unopened = {}


def _paged(state: State, event: PagedLine, at: int) -> str | None:
    """An escalation's page (D-323): after its escalation, once (a recovery obligation's waits until
    it opens, as its marks do). One that did not go out is kept per obligation (`World.unpaged`),
    said on the obligation and counted in the header."""
    if event.obligation not in state.obligations:
        state.world.unopened.setdefault(event.obligation, []).append(at)
        return None
    return _page(state, event.obligation, event.escalation, event.sent, event.problem, event.at, at)


def _page(
    state: State, ob_id: str, escalation: str, sent: bool, problem: str, when: object, at: int
) -> str | None:
    """As the host writes one: for its obligation's escalation that counts, naming it, stamped no
    earlier, after an escalation that had a notify to run, and once (an adversarial review: a page
    back-dated, naming another escalation, or after one that said no notify was set, counted)."""
    world = state.world
    ref = world.escalated.get(ob_id)
    if ref is None:
        return "host event: escalation-paged for no escalation that counts"
    if ob_id in world.paged:
        return "host event: a second escalation-paged for the same escalation"
    escalated = state.source.event(ref)
    then, moment = clock.moment(escalated.get("at")), clock.moment(when)
    if (
        escalated.get("id") != escalation
        or isinstance(escalated.get("notify"), dict)
        or then is None
        or moment is None
        or moment < then
    ):
        return (
            "host event: escalation-paged naming another escalation, stamped before it, or after one "
            "with no notify set: no host wrote it (forged?)"
        )
    world.paged[ob_id] = at
    if not sent:
        world.unpaged[ob_id] = problem or "not paged"
    state.obligations[ob_id].history.append(at)
    return None


def _withdrawn(state: State, event: WithdrawnLine, at: int) -> str | None:
    world = state.world
    if event.signal not in state.signals.refs:
        return "advisory-withdrawn for no signal that counts"
    if event.signal in world.withdrawn:
        return "a second advisory-withdrawn for the same signal"
    world.withdrawn[event.signal] = at
    for ob_id in event.obligations:
        ob = state.obligations.get(ob_id)
        if ob is not None and ob.source == event.signal:
            ob.history.append(at)
    return None


def _run(state: State, event: SensorRunLine, at: int) -> str | None:
    world = state.world
    world.runs.setdefault(event.sensor, []).append(at)
    for signal_id in event.cleared:  # only a signal this sensor raised, once (the next raise is anew)
        if signal_id not in state.signals.refs or state.signals[signal_id].get("sensor") != event.sensor:
            continue
        if signal_id in world.stalls:  # its feed moving again (D-321)
            world.resumed.setdefault(signal_id, at)
        elif signal_id not in world.cleared:
            world.cleared[signal_id] = at
    return None


_HOST = {
    ExpiredLine.kind: _expired,
    OverdueLine.kind: _obligation_mark("overdue"),
    EscalatedLine.kind: _obligation_mark("escalated"),
    WithdrawnLine.kind: _withdrawn,
    SensorRunLine.kind: _run,
    PagedLine.kind: _paged,
}


def _outcome(state: State, event: OutcomeLine, at: int, counts: Any) -> None:
    """A person's record of whether a prediction came true: it counts when signed by a person with
    the grant (engine.checkout.authority.GRANT_OF), for a signal that predicts, and only the first."""
    world = state.world
    if not counts(state, "signals", at):
        return
    if event.signal not in world.predicted:
        _uncounted(state, at, "a prediction outcome for no signal that makes a prediction")
    elif event.signal in world.outcomes:
        _uncounted(state, at, "a second prediction outcome for the same signal")
    else:
        world.outcomes[event.signal] = at


def _uncounted(state: State, at: int, reason: str) -> None:
    state.uncounted.append(Uncounted("signals", at >> 2, reason))


def reporter(signal: dict[str, Any]) -> str:
    """Who reported a signal, in words: `unit r1`, `sensor osv-pypi` or `person alice`."""
    if isinstance(signal.get("sensor"), str):
        return f"sensor {signal['sensor']}"
    if isinstance(signal.get("unit"), str):
        return f"unit {signal['unit']}"
    if isinstance(signal.get("by"), str):
        return f"person {signal['by']}"
    return "unknown"


def reporter_label(signal: dict[str, Any]) -> str:
    """Who reported a signal, in a table's cell: `r1` (a unit), `sensor:osv-pypi`, `@alice` (a
    person): the same in `signals` and the control room (an operator's first day found a sensor's
    name and a person's indistinguishable from a unit id in the one, marked in the other)."""
    if isinstance(signal.get("sensor"), str):
        return f"sensor:{signal['sensor']}"
    if isinstance(signal.get("unit"), str):
        return str(signal["unit"])
    if isinstance(signal.get("by"), str):
        return f"@{signal['by']}"
    return "?"


# ---- predictions (read back) ---------------------------------------------------------------


def resolves_at(signal: dict[str, Any]) -> datetime | None:
    prediction = signal.get("prediction")
    return clock.moment(prediction.get("resolvesAt")) if isinstance(prediction, dict) else None


def outcome(state: State, signal_id: str) -> dict[str, Any] | None:
    """The counted outcome recorded for a signal's prediction, or None."""
    ref = state.world.outcomes.get(signal_id)
    return state.source.event(ref) if ref is not None else None


def status(state: State, signal_id: str, signal: dict[str, Any]) -> str:
    """pending (before resolvesAt), awaiting (past it, no outcome), came-true or did-not-come-true."""
    found = outcome(state, signal_id)
    if found is not None:
        return CAME_TRUE if found.get("cameTrue") is True else DID_NOT
    due = resolves_at(signal)
    return AWAITING if due is not None and due <= state.now else PENDING


def prediction_json(state: State, signal_id: str, signal: dict[str, Any]) -> dict[str, Any] | None:
    """A signal's `prediction` as `signals --json` shows it: resolvesAt, cameTrue (null until a
    person records it), status, and who recorded it when."""
    prediction = signal.get("prediction")
    if not isinstance(prediction, dict):
        return None
    found = outcome(state, signal_id)
    return {
        "resolvesAt": prediction.get("resolvesAt"),
        "cameTrue": found.get("cameTrue") if found else None,
        "status": status(state, signal_id, signal),
        "by": found.get("by") if found else None,
        "at": found.get("at") if found else None,
    }


def event_line(event: dict[str, Any]) -> str | None:
    """One of this module's events on a lifecycle, as one line of text (store text escaped), or
    None for any other kind."""
    from engine.base.text import escape

    at, kind = event.get("at"), event.get("kind")
    if kind == EventKind.EVIDENCE_EXPIRED:
        found = event.get("opens")
        opened: dict[str, Any] = found if isinstance(found, dict) else {}
        return (
            f"{at} evidence expired (the signal expired {event.get('expiresAt')}); recheck "
            f"{opened.get('id')} opened, owed to S3: ask {escape(event.get('reporter'))} again"
        )
    if kind == EventKind.OVERDUE:
        return f"{at} overdue: the {event.get('severity')} deadline of {event.get('deadline')} passed at {event.get('dueAt')}"
    if kind == EventKind.DEADLINE_ESCALATED:
        listed = event.get("people")
        people: list[Any] = listed if isinstance(listed, list) else []
        named = ", ".join(str(p) for p in people) or "no one (routing.yaml escalate names nobody)"
        paged = event.get("notify")  # where routing.yaml set no notify (D-323)
        said = f"; {_not_paged(paged.get('problem'), named)}" if isinstance(paged, dict) else ""
        return f"{at} deadline escalated to {escape(named)}{said}"
    if kind == EventKind.ESCALATION_PAGED:
        listed = event.get("people")
        named = ", ".join(str(p) for p in listed) if isinstance(listed, list) else ""
        if event.get("sent") is True:
            return f"{at} notify ran for the escalation (it exited 0)"
        return f"{at} {_not_paged(event.get('problem'), named or 'its people')}"
    if kind == EventKind.ADVISORY_WITHDRAWN:
        return (
            f"{at} advisory {escape(event.get('advisory'))} withdrawn ({escape(event.get('withdrawn') or '?')}) "
            f"by its feed (sensor {escape(event.get('sensor'))})"
        )
    if kind == EventKind.PREDICTION_OUTCOME:
        said = "came true" if event.get("cameTrue") is True else "did not come true"
        return f"{at} the prediction {said}, recorded by {escape(event.get('by'))}: {escape(event.get('rationale'))}"
    return None


UNRECORDED_PAGE = (
    "  no record of its page: its notify may still be running, or the host that ran it stopped "
    "(serve's log says which)"
)


def page_unrecorded(state: State, ob: Obligation) -> bool:
    """Escalated, and nothing says what its page did (no escalation-paged, no "no notify"): a
    notify running, or its host stopped between the notify and its record (an operator's re-check:
    it read as a page that went out, D-323)."""
    world = state.world
    return ob.id in world.escalated and ob.id not in world.paged and ob.id not in world.unpaged


def _not_paged(problem: object, named: str) -> str:
    from engine.base.text import escape

    return (
        f"NOT PAGED: {escape(problem or 'not paged')}: page {escape(named)} by hand (notify is not run again"
        " for it: a notify set or mended now pages later escalations)"
    )


def evidence_expired(state: State, ob: Obligation) -> bool:
    """The host recorded that the evidence behind this obligation expired while it was open (design
    §24; the age-based `stale` of engine.read.queries.is_stale is another thing)."""
    return ob.id in state.world.stale_evidence


def is_open(ob: Obligation) -> bool:
    return ob.status == ObligationStatus.OPEN


def signal_marks(state: State, signal_id: str, signal: dict[str, Any]) -> str:
    """What `signals` appends to a signal's subject: `signal_mark_words`, each in parentheses."""
    return "".join(f" ({m})" for m in signal_mark_words(state, signal_id, signal))


def signal_mark_words(state: State, signal_id: str, signal: dict[str, Any]) -> list[str]:
    """What a signal row says beside its subject (design §24): its prediction's state, supersession,
    stale evidence, a withdrawn advisory, one affecting no pin now, a stall over. The one list
    `signals` and the control room show (an operator's review: `signals` marked none of them)."""
    world = state.world
    marks = []
    if signal_id in world.predicted:
        found = status(state, signal_id, signal)
        marks.append(
            {
                AWAITING: "prediction awaits its outcome",
                CAME_TRUE: "came true",
                DID_NOT: "did not come true",
            }.get(found, "prediction pending")
        )
    if isinstance(signal.get("supersedes"), str):
        marks.append(f"supersedes {signal['supersedes'][-8:]}")
    if world.superseded.get(signal_id):
        marks.append(f"superseded by {world.superseded[signal_id][-1][-8:]}")
    if signal_id in world.expired:
        marks.append("evidence expired")
    if signal_id in world.withdrawn:
        marks.append("advisory withdrawn")
    if signal_id in world.cleared:
        marks.append("pin no longer affected")
    if signal_id in world.resumed:
        marks.append("feed moving again")
    return marks
