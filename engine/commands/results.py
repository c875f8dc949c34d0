"""report_result (design §22): what a unit's run came to, recorded as a `result` host event in
units.ndjson by the door that the unit called (never a close: closing stays the host's, vetoes first).

One result per lease: a second is refused (exit 3), so a unit cannot rewrite what it reported.
`unit run` (design §23) records one itself when the unit reported none (record_host_result). A
`failed` or `blocked` result asks a person for a recovery decision (an advisory obligation).
"""

from __future__ import annotations

from typing import Any

from engine.base import clock, ids
from engine.base.errors import BadInput
from engine.base.limits import check_required, check_text
from engine.checkout.workspace import Lease, Workspace
from engine.commands.actors import leased
from engine.commands.deciding import deciding
from engine.commands.units import seen
from engine.commands.written import ResultEvent
from engine.read.model import ADVISORY, ASKS_RECOVERY, OWED_TO, RESULT_OUTCOMES, EventKind, State
from engine.read.rules import Denied, refuse, reporting_result

FIELDS = ("summary", "outcome", "usage")
OUTCOMES = RESULT_OUTCOMES
USAGE = ("tokens", "costUsd")
GRANT = "report_result"


def validate_result(fields: dict[str, Any]) -> dict[str, Any]:
    """The result's fields checked (exit 2 on the first problem)."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}")
    check_required(fields, ("summary", "outcome"))
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
    """A result is recorded for this lease of the unit (the fold keeps the latest lease's)."""
    unit = state.units.get(unit_id)
    return (
        unit is not None and lease_hash is not None and unit.lease == lease_hash and unit.result is not None
    )


def result_event(
    state: State,
    unit_id: str,
    lease_hash: str | None,
    body: dict[str, Any],
    by: str,
    exit_code: int | None = None,
    duration_s: int | None = None,
) -> ResultEvent:
    """The `result` event for the unit's current lease (exit 3 when the lease is not current or a
    result is already recorded for it). Its id derives from the lease (one result per lease); a
    `failed` or `blocked` outcome opens an advisory obligation of kind `recovery`, owed to S3, that
    asks a person for a recovery decision (design §4.4, §23)."""
    refuse(reporting_result(state, unit_id, lease_hash))
    assert lease_hash is not None  # reporting_result refuses a missing lease
    result_id = ids.result_id(lease_hash)
    event: ResultEvent = {
        "kind": EventKind.RESULT.value,
        "id": result_id,
        "unit": unit_id,
        "leaseHash": lease_hash,
        "summary": body["summary"],
        "outcome": body["outcome"],
        "usage": body.get("usage"),
        "by": by,
        "at": clock.iso(clock.now()),
    }
    if exit_code is not None:
        event["exitCode"] = exit_code
    if duration_s is not None:
        event["durationS"] = duration_s
    if body["outcome"] in ASKS_RECOVERY:
        event["opens"] = {
            "id": ids.recovery_obligation_id(result_id, unit_id),
            "severity": ADVISORY,
            "owedTo": OWED_TO,
        }
    return event


def report_result(ws: Workspace, fields: dict[str, Any], lease: Lease) -> dict[str, Any]:
    """Validate (exit 2), then in the decide lock check the lease, the grant and that no result is
    recorded for it yet (exit 3), and append the result."""
    body = validate_result(fields)

    def rule(state: State) -> Denied | None:
        leased(ws, state, lease, GRANT)
        return reporting_result(state, lease.unit, state.units[lease.unit].lease)

    with deciding(ws, rule, stores=("units",), route=False) as turn:
        state = turn.state
        event = result_event(state, lease.unit, state.units[lease.unit].lease, body, by="unit")
        event["seen"] = seen(ws, state)
        return ws.store("units").append(event)


def record_host_result(
    ws: Workspace, unit_id: str, lease_hash: str, outcome: str, summary: str, exit_code: int, duration_s: int
) -> dict[str, Any] | None:
    """`unit run`'s result when the unit reported none (design §23): outcome `done` for exit 0, else
    `failed`; the child's own exit code and the run's duration. None when the unit's own result is
    already recorded for this lease (it stands)."""
    body = validate_result({"summary": summary, "outcome": outcome})
    with deciding(ws, stores=("units",), route=False) as turn:
        if reported(turn.state, unit_id, lease_hash):
            return None
        event = result_event(turn.state, unit_id, lease_hash, body, "host", exit_code, duration_s)
        event["seen"] = seen(ws, turn.state)
        return ws.store("units").append(event)
