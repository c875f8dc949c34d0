"""Vetoes (SPEC §4.3, §26): what holds a unit's dispatch or close. Checked before the unit's status.

One function, `check`, judges both; every caller that dispatches or closes a unit asks it.
"""

from __future__ import annotations

from engine.errors import BadInput, Refused
from engine.ladder import HeldBy, held
from engine.model import Obligation, ObligationKind, State, UnitState, UnitStatus
from engine.queries import unit_status
from engine.workspace import Workspace

DISPATCH, CLOSE = "dispatch", "close"


def _describe(state: State, ob: Obligation) -> str:
    if ob.kind == ObligationKind.RECOVERY_DECISION:
        return f"{ob.id} ({ob.severity}, recovery decision {ob.source})"
    signal = state.signals.get(ob.source, {})
    return f"{ob.id} ({ob.severity}, signal {ob.source}: {signal.get('subject', '?')})"


def check(ws: Workspace, state: State, unit: UnitState, doing: str) -> None:
    """Refused (exit 3) while the unit is held (engine.ladder.held: a blocking obligation, or an
    unresolved finding as trunk and the working tree hold it), or, for a dispatch, while it waits on
    a recovery decision; then BadInput (exit 2) when its status does not allow `doing`."""
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
            f"{', '.join(holding.findings)}; resolve the finding first (committed to trunk with "
            "Authorized-by: an edit not on trunk adds a hold, never lifts one)"
        )
    needed, named = (
        (UnitStatus.TODO, "a todo") if doing == DISPATCH else (UnitStatus.IN_PROGRESS, "an in-progress")
    )
    if status != needed:
        raise BadInput(f"unit {unit.id} is {status}; {doing} needs {named} unit")


def check_dispatch(ws: Workspace, state: State, unit: UnitState) -> None:
    check(ws, state, unit, DISPATCH)


def check_close(ws: Workspace, state: State, unit: UnitState) -> None:
    check(ws, state, unit, CLOSE)
