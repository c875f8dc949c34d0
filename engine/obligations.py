"""Dispositions: a named person, allowed by the interaction policy, ends an open obligation."""

from __future__ import annotations

from engine import clock
from engine.actors import check_person, require_grant
from engine.deadlines import Deadlines
from engine.errors import BadInput, Refused
from engine.limits import check_text
from engine.load import load
from engine.lookup import by_prefix, check_prefix
from engine.model import PERSON_DISPOSITIONS, EventKind, Obligation, ObligationKind, ObligationStatus, State
from engine.router import route_locked
from engine.signing import person_event, signer_for
from engine.workspace import Workspace

DISPOSITIONS = PERSON_DISPOSITIONS  # what `obligation resolve --disposition` accepts


def record(state: State, ob: Obligation, deadlines: Deadlines | None = None) -> dict:
    """An obligation as `obligations --json` and `controlroom --once --json` show it (SPEC §13, §24:
    `evidenceExpired` recorded by the host, `overdue` and `dueAt` by the routing policy's deadlines)."""
    from engine.queries import is_stale

    return {
        "id": ob.id,
        "unit": ob.unit,
        "signal": ob.source if ob.kind in _FROM_SIGNAL else None,
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


_FROM_SIGNAL = (ObligationKind.INTELLIGENCE, ObligationKind.RECHECK)  # `signal`: the one it is about


def deadlines_of(ws: Workspace, state: State) -> Deadlines:
    """The deadlines of the routing policy in force, at the state's time (none when the policy
    cannot be read: a listing still lists)."""
    from engine.errors import RegulatorError

    try:
        policy = ws.routing()
    except RegulatorError:
        policy = None
    return Deadlines.of(policy, state.now)


def find(state: State, prefix: str) -> Obligation:
    return by_prefix(state.obligations, prefix, "obligation")


def _may_resolve(ws: Workspace, person: str, ob: Obligation) -> None:
    policy = ws.interaction()
    if not policy.may_resolve(person, ob.severity):
        raise Refused(
            f"{person} may not resolve a {ob.severity} obligation (interaction.yaml lets them "
            f"resolve: {', '.join(policy.people[person].resolve) or 'no severity'})"
        )


def resolve(ws: Workspace, prefix: str, by: str | None, disposition: str, rationale: str) -> dict:
    check_prefix(prefix, "obligation")
    person = check_person(by)
    if disposition not in DISPOSITIONS:
        raise BadInput(f"--disposition {disposition!r} is not one of {', '.join(DISPOSITIONS)}")
    rationale = check_text("--rationale", rationale, kind="rationale")
    require_grant(ws, person, "resolve", "resolve an obligation")
    _may_resolve(ws, person, find(load(ws, stores=("signals", "units")), prefix))  # before any key
    signer = signer_for(ws, person)  # before the lock: a passphrase is never asked under it
    with ws.exclusive():
        route_locked(ws)
        state = load(ws, stores=("signals", "units"))
        ob = find(state, prefix)
        _may_resolve(ws, person, ob)
        if ob.status != ObligationStatus.OPEN:
            raise Refused(
                f"obligation {ob.id} is already {ob.status} ({ob.disposition}) by {ob.by} at {ob.closed_at}"
            )
        event = {
            "kind": EventKind.DISPOSITION,
            "obligation": ob.id,
            "unit": ob.unit,
            "disposition": disposition,
            "by": person,
            "rationale": rationale,
            "at": clock.iso(clock.now()),
        }
        return ws.store("signals").append(person_event(ws, signer, event))
