"""Operational memory (seed 000): dated facts for later units, written by a unit under its lease."""

from __future__ import annotations

import re
from datetime import date, timedelta

from engine.base import clock
from engine.base.errors import BadInput
from engine.base.limits import check_known, check_list, check_required, check_text
from engine.base.lookup import by_prefix
from engine.checkout.workspace import Lease, Workspace
from engine.commands.actors import check_person, leased, require_grant, through_door
from engine.commands.deciding import deciding
from engine.commands.written import MemoryEvent, RetractionEvent
from engine.read.model import EventKind, MemoryEntry, MemoryStatus, State
from engine.read.queries import memory_status
from engine.read.rules import Denied, retracting

FIELDS = ("subject", "note", "evidence", "reviewBy", "scope")
MAX_REVIEW_DAYS = 90
UNIT_TYPE = re.compile(r"[a-z0-9][a-z0-9-]*")


def validate_entry(fields: dict, today: date) -> dict:
    check_known(fields, FIELDS, {"review-by": "reviewBy"})
    check_required(fields, ("subject", "note", "evidence", "reviewBy"))
    subject = check_text("subject", fields["subject"])
    note = check_text("note", fields["note"])
    evidence = check_list("evidence", [] if fields.get("evidence") is None else fields["evidence"], minimum=1)
    if not isinstance(fields["reviewBy"], str):
        raise BadInput("reviewBy: expected a date YYYY-MM-DD")
    review_by = clock.parse_date(fields["reviewBy"], "review-by")
    if review_by <= today:
        raise BadInput(
            f"review-by {review_by} is not after today ({today}); a stale fact is not worth recording"
        )
    latest = today + timedelta(days=MAX_REVIEW_DAYS)
    if review_by > latest:
        raise BadInput(
            f"review-by {review_by} is more than {MAX_REVIEW_DAYS} days out (latest {latest}); "
            "a fact that should hold longer is a rule: propose it"
        )
    scope = check_list("scope", [] if fields.get("scope") is None else fields["scope"], kind="name")
    for unit_type in scope:
        if not UNIT_TYPE.fullmatch(unit_type):
            raise BadInput(f"scope: {unit_type!r} is not a unit type (lowercase letters, digits, '-')")
    return {
        "subject": subject,
        "note": note,
        "evidence": evidence,
        "scope": sorted(set(scope)),
        "reviewBy": review_by.isoformat(),
    }


def remember(ws: Workspace, fields: dict, lease: Lease | None) -> dict:
    """Validate (exit 2), then check the lease and the profile's remember grant (exit 3)."""
    body = validate_entry(fields, clock.today())
    if lease is None:
        raise BadInput(
            "memory is written by a unit under its lease: run inside a leased worktree or pass --lease FILE"
        )
    through_door(lease, "remember")
    revision = ws.revision(lease.worktree)

    def rule(state: State) -> Denied | None:
        leased(ws, state, lease, "remember")
        return over_quota(ws, state, lease.unit)

    # the count and the append under one lock: two writers cannot both take the last place
    with deciding(ws, rule, stores=("units", "memory"), route=False, first=True):
        event: MemoryEvent = {
            "kind": EventKind.MEMORY.value,
            "subject": body["subject"],
            "note": body["note"],
            "evidence": body["evidence"],
            "scope": body["scope"],
            "reviewBy": body["reviewBy"],
            "unit": lease.unit,
            "revision": revision,
            "recordedBy": "S1",
            "at": clock.iso(clock.now()),
        }
        return ws.store("memory").append(event, assign_id=True)


def over_quota(ws: Workspace, state: State, unit: str) -> Denied | None:
    """A recording unit holds at most memory.maxCurrentPerUnit current entries (design §16.1)."""
    most = ws.routing().memory.max_current_per_unit
    today = state.now.date()
    mine = [entry for entry in state.memory.values() if entry.event.get("unit") == unit]
    held = sum(memory_status(entry, today) == MemoryStatus.CURRENT for entry in mine)
    if held < most:
        return None
    return Denied(
        f"unit {unit} holds {held} current memory entries",
        f"unit {unit} holds {held} current memory entries, the most one unit may hold "
        "(memory.maxCurrentPerUnit in regulator/policy/routing.yaml): ask a person to retract one "
        "(`regulator memory retract ID --by PERSON`) or let one expire",
    )


def find(entries: dict[str, MemoryEntry], prefix: str) -> MemoryEntry:
    return by_prefix(entries, prefix, "memory entry")


def retract(ws: Workspace, prefix: str, by: str | None, reason: str) -> dict:
    """A later event; nothing is deleted. Needs a person with the retract grant."""
    person = check_person(by, reason=reason)
    reason = check_text("--reason", reason, kind="reason")
    require_grant(ws, person, "retract", "retract a memory entry")

    def rule(state: State) -> Denied | None:
        return retracting(ws.people(), person, find(state.memory, prefix))

    with deciding(ws, rule, stores=("memory",), person=person, route=False) as turn:
        entry = find(turn.state.memory, prefix)
        event: RetractionEvent = {
            "kind": EventKind.RETRACTION.value,
            "entry": entry.event["id"],
            "by": person,
            "reason": reason,
            "at": clock.iso(clock.now()),
        }
        return ws.store("memory").append(turn.signed(event))
