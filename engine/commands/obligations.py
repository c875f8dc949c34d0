"""Dispositions: a named person, allowed by the interaction policy, ends an open obligation."""

from __future__ import annotations

from engine.base import clock
from engine.base.errors import BadInput
from engine.base.limits import check_text
from engine.base.lookup import by_prefix, check_prefix
from engine.checkout.workspace import Workspace
from engine.commands.actors import check_person
from engine.commands.deciding import deciding
from engine.commands.written import DispositionEvent
from engine.read.deadlines import Deadlines
from engine.read.model import (
    PERSON_DISPOSITIONS,
    EventKind,
    Obligation,
    ObligationKind,
    State,
)
from engine.read.rules import Denied, lacks, refuse, resolving

DISPOSITIONS = PERSON_DISPOSITIONS  # what `obligation resolve --disposition` accepts
_FROM_SIGNALS = (ObligationKind.INTELLIGENCE, ObligationKind.QUESTION, ObligationKind.RECHECK)


def record(state: State, ob: Obligation, deadlines: Deadlines | None = None) -> dict:
    """An obligation as `obligations --json` and `controlroom --once --json` show it (design §13, §24:
    `evidenceExpired` recorded by the host, `overdue` and `dueAt` by the routing policy's deadlines)."""
    from engine.read.queries import is_stale

    return {
        "id": ob.id,
        "unit": ob.unit,
        "signal": ob.source if ob.kind in _FROM_SIGNALS else None,
        "severity": ob.severity,
        "blocks": ob.blocks,
        "owedTo": ob.owed_to,
        "status": ob.status,
        "disposition": ob.disposition,
        "stale": is_stale(state, ob),
        "evidenceExpired": ob.id in state.world.stale_evidence,
        "overdue": deadlines.overdue(ob) if deadlines is not None else False,
        "dueAt": deadlines.due(ob) if deadlines is not None else None,
    }


def deadlines_of(ws: Workspace, state: State) -> Deadlines:
    """The deadlines of the routing policy in force, at the state's time (none when the policy
    cannot be read: a listing still lists)."""
    from engine.base.errors import RegulatorError

    try:
        policy = ws.routing()
    except RegulatorError:
        policy = None
    return Deadlines.of(policy, state.now)


def find(state: State, prefix: str) -> Obligation:
    return by_prefix(state.obligations, prefix, "obligation")


def resolve(ws: Workspace, prefix: str, by: str | None, disposition: str, rationale: str) -> dict:
    check_prefix(prefix, "obligation")
    person = check_person(by)
    if disposition not in DISPOSITIONS:
        raise BadInput(f"--disposition {disposition!r} is not one of {', '.join(DISPOSITIONS)}")
    rationale = check_text("--rationale", rationale, kind="rationale")
    refuse(lacks(ws.people(), person, "resolve", "resolve an obligation"))

    def rule(state: State) -> Denied | None:
        return resolving(ws.people(), person, find(state, prefix), disposition)

    with deciding(ws, rule, stores=("signals", "units"), person=person) as turn:
        ob = find(turn.state, prefix)
        event: DispositionEvent = {
            "kind": EventKind.DISPOSITION.value,
            "obligation": ob.id,
            "unit": ob.unit,
            "disposition": disposition,
            "by": person,
            "rationale": rationale,
            "at": clock.iso(clock.now()),
        }
        return ws.store("signals").append(turn.signed(event))
