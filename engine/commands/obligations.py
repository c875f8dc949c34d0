"""Dispositions: a named person, allowed by the interaction policy, ends an open obligation."""

from __future__ import annotations

from collections.abc import Callable

from engine.base import clock
from engine.base.errors import BadInput
from engine.base.limits import check_text
from engine.base.lookup import by_prefix, check_prefix
from engine.checkout import runs
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
    UnitStatus,
)
from engine.read.queries import is_stale, unit_status
from engine.read.rules import Denied, lacks, refuse, resolving
from engine.read.vetoes import AWAITING_CLOSE, blocking, holds, result_waits

DISPOSITIONS = PERSON_DISPOSITIONS  # what `obligation resolve --disposition` accepts
_FROM_SIGNALS = (ObligationKind.INTELLIGENCE, ObligationKind.QUESTION, ObligationKind.RECHECK)


def record(state: State, ob: Obligation, deadlines: Deadlines | None = None) -> dict:
    """An obligation as `obligations --json` and `controlroom --once --json` show it (design §13, §24:
    `evidenceExpired` recorded by the host, `overdue` and `dueAt` by the routing policy's deadlines).
    Called once per obligation by `--once --json` and `obligations --json`: nothing imported here
    (one here made 100,000 records 435 ms instead of 277)."""
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
        # its signal's advisory, as the sensor last said: withdrawn, or affecting no pin now (D-312)
        "advisoryWithdrawn": ob.source in state.world.withdrawn,
        "advisoryCleared": ob.source in state.world.cleared,
        "stallEnded": ob.source in state.world.resumed,  # a stall signal's feed moving again (D-321)
        # its escalation's notify not run, not finished or not exiting 0: the one line (D-315)
        "notPaged": state.world.unpaged.get(ob.id),
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


def resolve(
    ws: Workspace,
    prefix: str,
    by: str | None,
    disposition: str,
    rationale: str,
    say: Callable[[str], None] | None = None,
) -> dict:
    """A person's disposition of an open obligation (design §5.4); `say` is told, once it is written,
    what the write does not show (after_resolving)."""
    check_prefix(prefix, "obligation")
    person = check_person(by, rationale=rationale)
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
        notes = after_resolving(
            ws, turn.state, ob, lambda unit: bool(holds(ws, turn.state).findings.get(unit))
        )
        written = ws.store("signals").append(turn.signed(event))
    if say is not None:
        for note in notes:
            say(note)
    return written


def after_resolving(ws: Workspace, state: State, ob: Obligation, flagged: Callable[[str], bool]) -> list[str]:
    """What a person resolving `ob` (as `state` stood before) should hear that the write does not
    say (an operator's review): a question whose unit's lease is over (no lease, or its `unit run`
    over on this host: runs.ended) is answered to no one; the last obligation holding a unit whose
    result is done leaves it ready to close, which nothing does by itself, unless a finding holds
    it too (`flagged(unit)`: asked only then, since it reads the registers) or a `unit run --wait`
    waits to close it (runs.waits: the person is not sent to close it by hand)."""
    unit = state.units.get(ob.unit) if ob.unit else None
    if unit is None:
        return []
    status = unit_status(state, unit)
    if ob.kind == ObligationKind.QUESTION:
        running = status == UnitStatus.IN_PROGRESS
        if running and not runs.ended(ws, unit.lease, unit.run_on):
            return []
        said = "in progress but its run is over" if running else status
        return [
            f"unit {unit.id} is {said}: its lease is over, so it will not read this answer "
            "(a unit reads answers only while its lease is current; it is recorded all the same)"
        ]
    if not ob.blocks:
        return []  # it held nothing: its unit waits for what it waited for before
    holding = blocking(state).get(unit.id, [])  # one pass over the obligations, asked once
    if [o for o in holding if o.id != ob.id] or result_waits(state, unit, holding) != AWAITING_CLOSE:
        return []
    if flagged(unit.id):
        return []
    closes = (
        "its waiting `unit run --wait` closes it"
        if runs.waits(ws, unit.lease, unit.run_on)
        else f"`regulator unit close {unit.id}` closes it"
    )
    return [f"unit {unit.id}'s result is done and no other obligation holds it now: {closes}"]
