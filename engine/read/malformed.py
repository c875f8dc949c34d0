"""Why a units.ndjson line counts for nothing (split from engine.read.fold, D-295): a recovery
decision, a result or a lease expiry not as the engine writes it. The fold asks these; `verify`
names what they answer."""

from __future__ import annotations

import msgspec

from engine.base import clock, ids
from engine.read.kinds import UnitsLine
from engine.read.model import (
    ADVISORY,
    ASKS_RECOVERY,
    BLOCKING,
    OWED_TO,
    RESULT_OUTCOMES,
    WAITING_ACTIONS,
    RecoveryAction,
    UnitState,
    UnitStatus,
)

_IN_PROGRESS = UnitStatus.IN_PROGRESS


_ACTIONS = frozenset(action.value for action in RecoveryAction)


def decision_refused(event: UnitsLine) -> str | None:
    """Why a recovery decision is not one `unit decide` writes (a line signed by hand), or None:
    an action it takes, the obligations it resolves as a list of ids, what it opens (if anything)
    as an id, a severity and whom it is owed to, a time, all text."""
    if event.action not in _ACTIONS:
        return "a decision without a recovery action"
    resolves = event.resolves
    if type(resolves) not in (list, tuple) or not all(type(ob_id) is str for ob_id in resolves):
        return "resolves is not a list of obligation ids"
    opens = event.opens
    if event.action in WAITING_ACTIONS:
        unit_id = event.unit
        if type(event.id) is not str or not opens_derived(
            opens, ids.recovery_obligation_id(event.id, str(unit_id)), BLOCKING
        ):
            return "opens is not the blocking recovery obligation the decision's id names"
    elif opens is not None:
        return "opens an obligation, which only a waiting action does"
    if type(event.at) is not str:
        return "at is not text"
    rationale = event.rationale
    if rationale is not msgspec.UNSET and type(rationale) is not str:
        return "rationale is not text"
    return None


def result_refused(unit: UnitState, event: UnitsLine) -> str | None:
    """Why a result line counts for nothing: the host writes one only for the unit's current lease,
    once, with an outcome it knows (engine.commands.results)."""
    if unit.status != _IN_PROGRESS or not unit.lease or event.leaseHash != unit.lease:
        return f"host event: result for {unit.id} under a lease that is not its current one (forged?)"
    if unit.result is not None:
        return f"host event: a second result for {unit.id}'s lease (one per lease)"
    if event.outcome not in RESULT_OUTCOMES or type(event.summary) is not str or type(event.id) is not str:
        return "malformed: a result without its id, outcome or summary"
    opened = event.opens
    if opened is not None and not (
        event.outcome in ASKS_RECOVERY
        and opens_derived(opened, ids.recovery_obligation_id(event.id, unit.id), ADVISORY)
    ):
        return "malformed: a result that opens an obligation it does not ask for"
    return None


def opens_derived(opened: object, derived: str, severity: str) -> bool:
    """`opens` is exactly what the engine writes: the id derived from the event's own (a chosen id
    could take a routed obligation's before routing opens it, then be resolved by whoever the chosen
    severity allows: an adversarial review), that severity, owed to S3."""
    return (
        type(opened) is dict
        and opened.get("id") == derived
        and opened.get("severity") == severity
        and opened.get("owedTo", OWED_TO) == OWED_TO
    )


def expiry_refused(unit: UnitState, event: UnitsLine) -> str | None:
    """Why a lease-expired line counts for nothing: only an in-progress unit's current lease that
    has a time, with no result recorded, expires, and not before its time (design §23)."""
    if unit.status != _IN_PROGRESS or not unit.lease or event.leaseHash != unit.lease:
        return f"host event: lease-expired for {unit.id} under a lease that is not its current one"
    if unit.expires_at is None:
        return f"host event: lease-expired for {unit.id}, whose lease never expires (forged?)"
    if unit.result is not None:
        return f"host event: lease-expired for {unit.id} after its result was recorded (forged?)"
    when, due = clock.moment(event.at), clock.moment(unit.expires_at)
    if when is None or due is None or when < due:
        return f"host event: lease-expired for {unit.id} before its lease's time {unit.expires_at} (forged?)"
    return None
