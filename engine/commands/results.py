"""report_result (SPEC §22): what a unit's run came to, recorded as a `result` host event in
units.ndjson by the door that the unit called (never a close: closing stays the host's, vetoes first).

One result per lease: a second is refused (exit 3), so a unit cannot rewrite what it reported.
`unit run` (SPEC §23) records one itself when the unit reported none.
"""

from __future__ import annotations

from typing import Any

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_text
from engine.checkout.workspace import Lease, Workspace
from engine.commands.actors import check_lease, unit_tools
from engine.read.load import load
from engine.read.model import EventKind, State

FIELDS = ("summary", "outcome", "usage")
OUTCOMES = ("done", "blocked", "failed")
USAGE = ("tokens", "costUsd")
GRANT = "report_result"


def validate_result(fields: dict[str, Any]) -> dict[str, Any]:
    """The result's fields checked (exit 2 on the first problem)."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}")
    for name in ("summary", "outcome"):
        if fields.get(name) is None:
            raise BadInput(f"{name}: required")
    summary = check_text("summary", fields["summary"])
    outcome = fields["outcome"]
    if outcome not in OUTCOMES:
        raise BadInput(f"outcome: {outcome!r} is not one of {', '.join(OUTCOMES)}")
    usage = fields.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise BadInput("usage: expected an object {tokens, costUsd}")
        extra = sorted(set(usage) - set(USAGE))
        if extra:
            raise BadInput(f"usage: unknown field {extra[0]!r}; the fields are {', '.join(USAGE)}")
        tokens, cost = usage.get("tokens"), usage.get("costUsd")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
            raise BadInput(f"usage.tokens: {tokens!r} is not a count (0 or more)")
        if cost is not None and (
            isinstance(cost, bool)
            or not isinstance(cost, int | float)
            or cost < 0
            or cost != cost
            or cost > 1e12
        ):
            raise BadInput(f"usage.costUsd: {cost!r} is not an amount (0 or more)")
        usage = {"tokens": tokens, "costUsd": cost}
    return {"summary": summary, "outcome": outcome, "usage": usage}


def reported(state: State, unit_id: str, lease_hash: str | None) -> bool:
    """A result is recorded for this lease of the unit."""
    unit = state.units.get(unit_id)
    if unit is None or lease_hash is None:
        return False
    return any(
        e.get("kind") == EventKind.RESULT and e.get("leaseHash") == lease_hash
        for e in state.source.events(unit.history)
    )


def report_result(ws: Workspace, fields: dict[str, Any], lease: Lease) -> dict[str, Any]:
    """Validate (exit 2), then in the decide lock check the lease, the grant and that no result is
    recorded for it yet (exit 3), and append the result."""
    body = validate_result(fields)
    with ws.exclusive():
        state = load(ws, stores=("units",))
        check_lease(state, lease)
        _, profile, tools = unit_tools(ws, state, lease.unit)
        if GRANT not in tools:
            raise Refused(f"unit {lease.unit}'s profile {profile} does not grant {GRANT}")
        lease_hash = state.units[lease.unit].lease
        if reported(state, lease.unit, lease_hash):
            raise Refused(f"unit {lease.unit} has already reported its result under this lease")
        event = {
            "kind": EventKind.RESULT,
            "unit": lease.unit,
            "leaseHash": lease_hash,
            **body,
            "by": None,
            "at": clock.iso(clock.now()),
        }
        return ws.store("units").append(event, assign_id=True)
