"""Dispositions: a named person, allowed by the interaction policy, ends an open obligation."""

from __future__ import annotations

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_text
from engine.base.lookup import by_prefix, check_prefix
from engine.checkout.workspace import Workspace
from engine.commands.actors import check_person, require_grant
from engine.commands.router import route_locked
from engine.read.deadlines import Deadlines
from engine.read.load import load
from engine.read.model import (
    PERSON_DISPOSITIONS,
    Disposition,
    EventKind,
    Obligation,
    ObligationKind,
    ObligationStatus,
    State,
)
from engine.trust.signing import person_event, signer_for

DISPOSITIONS = PERSON_DISPOSITIONS  # what `obligation resolve --disposition` accepts
_FROM_SIGNALS = (ObligationKind.INTELLIGENCE, ObligationKind.QUESTION, ObligationKind.RECHECK)


def dispositions_for(ob: Obligation) -> tuple[str, ...]:
    """What a person may dispose of this obligation with: `answered` on questions only (§22)."""
    if ob.kind == ObligationKind.QUESTION:
        return tuple(DISPOSITIONS)
    return tuple(d for d in DISPOSITIONS if d != Disposition.ANSWERED)


def record(state: State, ob: Obligation, deadlines: Deadlines | None = None) -> dict:
    """An obligation as `obligations --json` and `controlroom --once --json` show it (SPEC §13, §24:
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


def _check_disposition(ob: Obligation, disposition: str) -> None:
    if disposition not in dispositions_for(ob):
        raise BadInput(
            f"--disposition {disposition}: allowed on questions only; obligation {ob.id} is of kind "
            f"{ob.kind} (use one of {', '.join(dispositions_for(ob))})"
        )


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
    found = find(load(ws, stores=("signals", "units")), prefix)
    _check_disposition(found, disposition)  # bad input before any key is asked for
    _may_resolve(ws, person, found)  # before any key
    signer = signer_for(ws, person)  # before the lock: a passphrase is never asked under it
    with ws.exclusive():
        route_locked(ws)
        state = load(ws, stores=("signals", "units"))
        ob = find(state, prefix)
        _may_resolve(ws, person, ob)
        _check_disposition(ob, disposition)
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
