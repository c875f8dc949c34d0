"""Vetoes (SPEC §4.3, §26): what holds a unit's dispatch or close. Checked before the unit's status.

One function, `check`, judges both, by engine.read.ladder.held (open blocking obligations and the
unresolved findings trunk and the working tree hold); every caller that dispatches or closes a
unit asks it.
"""

from __future__ import annotations

from engine.base.errors import BadInput, Refused
from engine.checkout.workspace import Workspace
from engine.read.ladder import HeldBy, held
from engine.read.model import Obligation, ObligationKind, State, UnitState, UnitStatus
from engine.read.queries import unit_status

DISPATCH, CLOSE = "dispatch", "close"
DISPATCHABLE = (UnitStatus.TODO, UnitStatus.LOST)  # a lost unit's lease expired: it may run again (§23)


def _describe(state: State, ob: Obligation) -> str:
    if ob.kind == ObligationKind.RECOVERY_DECISION:
        return f"{ob.id} ({ob.severity}, recovery decision {ob.source})"
    if ob.kind == ObligationKind.RECOVERY:
        return f"{ob.id} ({ob.severity}, recovery after result {ob.source})"
    signal = state.signals.get(ob.source, {})
    return f"{ob.id} ({ob.severity}, signal {ob.source}: {signal.get('subject', '?')})"


def check(ws: Workspace, state: State, unit: UnitState, doing: str) -> None:
    """Refused (exit 3) while the unit is held (engine.read.ladder.held: a blocking obligation, or
    an unresolved finding as trunk and the working tree hold it), or, for a dispatch, while it waits
    on a recovery decision; then BadInput (exit 2) when its status does not allow `doing`."""
    holding = held(ws, state).get(unit.id, HeldBy())
    if holding.obligations:
        named = "; ".join(_describe(state, ob) for ob in holding.obligations)
        raise Refused(
            f"{doing} of {unit.id} vetoed: held by open obligation(s) {named}; "
            "resolve them with `regulator obligation resolve`"
        )
    status = unit_status(state, unit)
    if doing == DISPATCH and status == UnitStatus.WAITING:
        raise Refused(
            f"dispatch of {unit.id} vetoed: it waits on recovery decision obligation {unit.recovery}"
        )
    if holding.findings:
        raise Refused(
            f"{doing} of {unit.id} vetoed: stale-knowledge from unresolved finding(s) "
            f"{', '.join(holding.findings)}; resolve the finding first, on trunk "
            f"(regulator registry resolve {holding.findings[0]} --by PERSON --rationale R --commit): "
            "an edit not committed to trunk with Authorized-by adds a hold, never lifts one"
        )
    if doing == DISPATCH and status not in DISPATCHABLE:
        raise BadInput(f"unit {unit.id} is {status}; dispatch needs a todo or lost unit")
    if doing == CLOSE and status != UnitStatus.IN_PROGRESS:
        raise BadInput(f"unit {unit.id} is {status}; close needs an in-progress unit")


def check_dispatch(ws: Workspace, state: State, unit: UnitState) -> None:
    check(ws, state, unit, DISPATCH)


def check_close(ws: Workspace, state: State, unit: UnitState) -> None:
    check(ws, state, unit, CLOSE)
