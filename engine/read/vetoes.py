"""Vetoes (SPEC §4.3): what holds a unit's dispatch or close. Checked before the unit's status."""

from __future__ import annotations

from engine.base.errors import BadInput, Refused
from engine.checkout.workspace import Workspace
from engine.read.model import Obligation, ObligationKind, State, UnitState, UnitStatus
from engine.read.queries import held_by, unit_status


def _describe(state: State, ob: Obligation) -> str:
    if ob.kind == ObligationKind.RECOVERY_DECISION:
        return f"{ob.id} ({ob.severity}, recovery decision {ob.source})"
    if ob.kind == ObligationKind.RECOVERY:
        return f"{ob.id} ({ob.severity}, recovery after result {ob.source})"
    signal = state.signals.get(ob.source, {})
    return f"{ob.id} ({ob.severity}, signal {ob.source}: {signal.get('subject', '?')})"


def _held(state: State, unit: UnitState, doing: str) -> None:
    holding = held_by(state, unit.id)
    if holding:
        named = "; ".join(_describe(state, ob) for ob in holding)
        raise Refused(
            f"{doing} of {unit.id} vetoed: held by open obligation(s) {named}; "
            "resolve them with `regulator obligation resolve`"
        )


DISPATCHABLE = (UnitStatus.TODO, UnitStatus.LOST)  # a lost unit's lease expired: it may run again (§23)


def check_dispatch(ws: Workspace, state: State, unit: UnitState) -> None:
    _held(state, unit, "dispatch")
    status = unit_status(state, unit)
    if status == UnitStatus.WAITING:
        raise Refused(
            f"dispatch of {unit.id} vetoed: it waits on recovery decision obligation {unit.recovery}"
        )
    from engine.read.ladder import stale_knowledge  # registers are read only when a unit is decided

    findings = stale_knowledge(ws, state).get(unit.id)
    if findings:
        raise Refused(
            f"dispatch of {unit.id} vetoed: stale-knowledge from unresolved finding(s) "
            f"{', '.join(findings)}; resolve the finding first "
            f"(regulator registry resolve {findings[0]} --by PERSON --rationale R --commit)"
        )
    if status not in DISPATCHABLE:
        raise BadInput(f"unit {unit.id} is {status}; dispatch needs a todo or lost unit")


def check_close(ws: Workspace, state: State, unit: UnitState) -> None:
    _held(state, unit, "close")
    status = unit_status(state, unit)
    if status != UnitStatus.IN_PROGRESS:
        raise BadInput(f"unit {unit.id} is {status}; close needs an in-progress unit")
