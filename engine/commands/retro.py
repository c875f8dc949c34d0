"""The RETRO register (design §19): numbers generated from the stores and trunk history only, each
with the query behind it; lint recomputes them, so an edited number fails (`retro-edited`).

"A retro that reads its own narrative measures the narrator, not the system": the body is the
people's prose, the numbers are never theirs to write.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import yaml

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_text
from engine.base.text import escape
from engine.checkout.workspace import Workspace
from engine.read.model import (
    RESUMING_ACTIONS,
    EventKind,
    ObligationStatus,
    RecoveryAction,
    State,
    UnitState,
    UnitStatus,
)
from engine.read.queries import history
from identity import regular
from registry.entries import Entry, Issue, Registers, registers_from
from registry.lint import Policy

# the interaction policy as a commit had it (engine.commands.registers.policy_at, passed in: no import circle)
PolicyAt = Callable[[Workspace, bytes | None, str], Policy]

NAMES = (
    "obligationsOpened",
    "obligationsResolved",
    "obligationsByDisposition",
    "medianHoursToDisposition",
    "unitsHeld",
    "hoursHeld",
    "memoryRecorded",
    "memoryExpired",
    "memoryRetracted",
    "lintErrors",
    "tombstones",
)
GIT_NAMES = ("lintErrors", "tombstones")
QUERIES = {
    "obligationsOpened": "obligations (signals.ndjson routing records, units.ndjson recovery decisions) "
    "with openedAt in [since, until)",
    "obligationsResolved": "obligations whose counted disposition (status resolved) has at in [since, until)",
    "obligationsByDisposition": "obligationsResolved grouped by disposition",
    "medianHoursToDisposition": "median over obligationsResolved of (disposition at - openedAt), hours to "
    "0.01; null when none",
    "unitsHeld": "units with a blocking obligation open for some time in [since, until)",
    "hoursHeld": "per unit: hours in [since, until) with at least one blocking obligation open (a unit still "
    "held at until counts up to until), to 0.01",
    "memoryRecorded": "memory.ndjson memory entries with at in [since, until)",
    "memoryExpired": "memory entries whose review-by day ended in [since, until) (expired from the next "
    "midnight UTC), not retracted before that",
    "memoryRetracted": "counted retractions (memory.ndjson) with at in [since, until)",
    "lintErrors": "registry lint errors (entries, references, ladder, tombstone-not-delete) of the registers at "
    "the last trunk commit before until, units as the stores had them at until",
    "tombstones": "register entries withdrawn in place (finding resolved: true, intake disposition: rejected) "
    "at the last trunk commit before until and not at the last one before since",
}


def _in(at: object, since: datetime, until: datetime) -> bool:
    if not isinstance(at, str):
        return False
    try:
        moment = clock.read_time(at)
    except BadInput:
        return False
    return since <= moment < until


def _hours(seconds: float) -> float:
    return round(seconds / 3600, 2)


def store_numbers(state: State, since: datetime, until: datetime) -> dict[str, Any]:
    """The numbers the stores give for [since, until)."""
    opened = [ob for ob in state.obligations.values() if _in(ob.opened_at, since, until)]
    resolved = [
        ob
        for ob in state.obligations.values()
        if ob.status == ObligationStatus.RESOLVED and _in(ob.closed_at, since, until)
    ]
    by: dict[str, int] = {}
    for ob in resolved:
        key = str(ob.disposition)
        by[key] = by.get(key, 0) + 1
    # a time that does not read (a line written by hand) is left out, never a refusal of the whole
    waits = [
        (ended - begun).total_seconds()
        for ob in resolved
        if (ended := clock.moment(ob.closed_at)) is not None
        and (begun := clock.moment(ob.opened_at)) is not None
    ]
    spans: dict[str, list[tuple[datetime, datetime]]] = {}
    for ob in state.obligations.values():
        begun = clock.moment(ob.opened_at)
        if not ob.blocks or not ob.unit or begun is None:
            continue
        start = max(begun, since)
        end = until
        ended = clock.moment(ob.closed_at)
        if ob.status != ObligationStatus.OPEN and ended is not None:
            end = min(ended, until)
        if start < end:
            spans.setdefault(ob.unit, []).append((start, end))
    held = {unit: _hours(_union(parts)) for unit, parts in sorted(spans.items())}
    recorded = retracted = expired = 0
    for entry in state.memory.values():
        event = entry.event
        recorded += _in(event.get("at"), since, until)
        retraction = entry.retraction
        if retraction is not None:
            retracted += _in(retraction.get("at"), since, until)
        try:
            ends = datetime.combine(date.fromisoformat(event["reviewBy"]) + timedelta(days=1), time(), UTC)
        except (KeyError, TypeError, ValueError, OverflowError):  # 9999-12-31 has no day after
            continue
        if since <= ends < until:
            gone_before = retraction is not None and _before(retraction.get("at"), ends)
            expired += not gone_before
    return {
        "obligationsOpened": len(opened),
        "obligationsResolved": len(resolved),
        "obligationsByDisposition": dict(sorted(by.items())),
        "medianHoursToDisposition": _hours(statistics.median(waits)) if waits else None,
        "unitsHeld": len(held),
        "hoursHeld": held,
        "memoryRecorded": recorded,
        "memoryExpired": expired,
        "memoryRetracted": retracted,
    }


def _before(at: object, moment: datetime) -> bool:
    try:
        return isinstance(at, str) and clock.read_time(at) < moment
    except BadInput:
        return False


def _union(parts: list[tuple[datetime, datetime]]) -> float:
    """Seconds covered by the intervals (overlapping holds of one unit count once)."""
    total = 0.0
    end: datetime | None = None
    for start, stop in sorted(parts):
        if end is not None and start < end:
            if stop > end:
                total += (stop - end).total_seconds()
                end = stop
            continue
        total += (stop - start).total_seconds()
        end = stop
    return total


# ---- the numbers git gives: lint errors and tombstones --------------------------------------------


def unit_status_at(state: State, unit: UnitState, until: datetime) -> str:
    """A unit's status as its counted events before `until` left it (the fold's rules)."""
    status, recovery = UnitStatus.TODO, None
    for event in history(state, unit):
        if "uncounted" in event or not _before(event.get("at"), until):
            continue
        kind = event.get("kind")
        if kind == EventKind.DISPATCH:
            status = UnitStatus.IN_PROGRESS
        elif kind == EventKind.CLOSE:
            status = UnitStatus.CLOSED
        elif kind == EventKind.LEASE_EXPIRED:
            status = UnitStatus.LOST
        elif kind == EventKind.DEMOTE:
            status = UnitStatus.TODO
        elif kind == EventKind.DECISION:
            action = event.get("action")
            opens = event.get("opens")
            if action in RESUMING_ACTIONS:
                status, recovery = UnitStatus.TODO, None
            elif action == RecoveryAction.ABORT:
                status, recovery = UnitStatus.ABORTED, None
            else:
                status, recovery = UnitStatus.WAITING, opens.get("id") if isinstance(opens, dict) else None
    if status == UnitStatus.WAITING and recovery:
        ob = state.obligations.get(recovery)
        if ob is not None and ob.status != ObligationStatus.OPEN and _before(ob.closed_at, until):
            return UnitStatus.TODO
    return status


def _withdrawn(registers: Registers) -> set[str]:
    out = {e.path for e in registers.findings.values() if e.fields.get("resolved") is True}
    out |= {e.path for e in registers.intake.values() if e.fields.get("disposition") == "rejected"}
    return out


TREE = ("findings", "intake", "records", "retro", "contracts", "regulator/policy/interaction.yaml")


class Trunk:
    """Trunk as retro entries ask it, each answer read once per command: consecutive retros share
    a commit (one's until is the next one's since), so lint of many asks git less."""

    def __init__(self, ws: Workspace, policy_at: PolicyAt) -> None:
        from engine.checkout.gitconfig import trunk_of

        self.ws, self.trunk, self.policy_at = ws, trunk_of(ws), policy_at
        self._commits: dict[datetime, tuple[str | None, str]] = {}
        self._registers: dict[str, tuple[Registers, dict[str, bytes]]] = {}
        self._landed: dict[str, set[str]] = {}

    def commit_before(self, moment: datetime) -> tuple[str | None, str]:
        from registry.trunkat import commit_before

        if moment not in self._commits:
            self._commits[moment] = commit_before(self.ws.tree, self.trunk, moment)
        return self._commits[moment]

    def registers(self, sha: str) -> tuple[Registers, dict[str, bytes]]:
        from registry.trunkat import files_at

        if sha not in self._registers:
            blobs = files_at(self.ws.tree, sha, TREE)
            self._registers[sha] = (registers_from(blobs), blobs)
        return self._registers[sha]

    def landed(self, sha: str) -> set[str]:
        from registry.trunkat import landed_by

        if sha not in self._landed:
            self._landed[sha] = landed_by(self.ws.tree, sha)
        return self._landed[sha]


def git_numbers(
    ws: Workspace, state: State, since: datetime, until: datetime, trunk: Trunk
) -> tuple[dict, str]:
    """(lintErrors and tombstones, "") or ({}, why) when trunk history cannot be read."""
    from registry.lint import lint_entries, lint_history_at

    at_until, why = trunk.commit_before(until)
    if at_until is None:
        if why:
            return {}, why
        return {"lintErrors": 0, "tombstones": 0}, ""  # trunk had no commit yet: nothing to count
    registers, blobs = trunk.registers(at_until)
    units = {
        path.removeprefix("contracts/").removesuffix(".json")
        for path in blobs
        if path.startswith("contracts/") and path.endswith(".json")
    }
    # a unit's status matters to lint only where an acknowledged, unresolved finding names it (the
    # re-gate); the others need only exist, so their events are not read back
    named = {
        ref
        for f in registers.findings.values()
        if not f.fields.get("resolved") and (f.fields.get("ack") or "").strip()
        for ref in f.fields.get("affects") or []
    }
    statuses = {
        unit_id: unit_status_at(state, state.units[unit_id], until)
        if unit_id in named and unit_id in state.units
        else UnitStatus.TODO
        for unit_id in units
    }
    policy = trunk.policy_at(ws, blobs.get("regulator/policy/interaction.yaml"), f"trunk at {at_until[:10]}")
    today = (until - timedelta(microseconds=1)).date()
    issues = lint_entries(registers, statuses, set(registers.records), policy, today)
    issues += lint_history_at(registers, trunk.landed(at_until))
    errors = sum(1 for i in issues if i.level == "error")
    at_since, _ = trunk.commit_before(since)
    before = _withdrawn(trunk.registers(at_since)[0]) if at_since else set()
    return {"lintErrors": errors, "tombstones": len(_withdrawn(registers) - before)}, ""


def compute(ws: Workspace, state: State, since: datetime, until: datetime, trunk: Trunk) -> tuple[dict, str]:
    """Every number {name: {value, query}}; the second item says why the git numbers are null."""
    values = store_numbers(state, since, until)
    from_git, why = git_numbers(ws, state, since, until, trunk)
    values.update(from_git)
    numbers = {}
    for name in NAMES:
        query = QUERIES[name]
        if name in GIT_NAMES and name not in from_git:
            query += f" (not counted: {why})"
        numbers[name] = {"value": values.get(name), "query": query}
    return numbers, why


# ---- writing an entry, and checking one ---------------------------------------------------------

SLUG = re.compile(r"[^a-z0-9]+")


def period(since: str, until: str | None) -> tuple[datetime, datetime]:
    start = datetime.combine(clock.parse_date(since, "--since"), time(), UTC)
    now = clock.now()
    if until is None:
        end = now
    elif re.fullmatch(r"\d{4}-\d{2}-\d{2}", until.strip()):
        end = datetime.combine(clock.parse_date(until, "--until"), time(), UTC)
    else:
        end = clock.parse_time(until, "--until")
    if end > now:
        raise BadInput(f"--until {clock.iso(end)} is in the future: a retro counts a period that is over")
    if start >= end:
        raise BadInput(f"--since {since} is not before until ({clock.iso(end)}): the period is empty")
    return start, end


def write(
    ws: Workspace,
    state: State,
    policy_at: PolicyAt,
    since: str,
    until: str | None = None,
    title: str | None = None,
) -> tuple[Path, dict]:
    """Write retro/R-<until date>-<slug>.md with the generated numbers; the body is left for prose."""
    start, end = period(since, until)
    if not ws.has_stores:
        raise Refused(
            "the stores are absent here (a clone): a retro's numbers come from them; run it on the host"
        )
    slug = SLUG.sub("-", (title or f"since {start.date()}").lower()).strip("-")[:60]
    if not slug:
        raise BadInput("--title: give a few letters or digits (the file name is made of them)")
    entry_id = f"R-{end.date()}-{slug}"
    path = ws.tree / "retro" / f"{entry_id}.md"
    if path.exists():
        raise BadInput(f"retro/{entry_id}.md exists (entries are never rewritten): give another --title")
    numbers, _ = compute(ws, state, start, end, Trunk(ws, policy_at))
    front = {"id": entry_id, "since": start.date().isoformat(), "until": clock.iso(end), "numbers": numbers}
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    # the title is text, never structure: a line break, an escape sequence or a bidi override in
    # it is written escaped (engine.base.text.escape), so it makes no heading or colour of its own
    heading = escape(check_text("--title", title, kind="title")) if title else f"Retro since {start.date()}"
    body = (
        f"# {heading}\n\n"
        "The numbers above are generated (`regulator registry retro`); `registry lint` recomputes them "
        "from the stores and trunk history and fails an entry whose numbers were edited. Write what the "
        "people make of them below.\n"
    )
    text = f"---\n{head}---\n{body}"
    path.parent.mkdir(parents=True, exist_ok=True)
    regular.replace_text(path, text, ws.tree)  # a link planted at retro/ or its temporary is never followed
    return path, front


def _period_of(entry: Entry) -> tuple[datetime, datetime] | None:
    since, until = entry.fields.get("since"), entry.fields.get("until")
    try:
        start = datetime.combine(
            since if isinstance(since, date) else date.fromisoformat(str(since)), time(), UTC
        )
        end = clock.read_time(until if isinstance(until, str) else str(until))
    except (BadInput, ValueError):
        return None
    return start, end


def check(ws: Workspace, state: State, registers: Registers, policy_at: PolicyAt) -> list[Issue]:
    """Recompute every RETRO entry's numbers: `retro-edited` where one differs, naming the field and
    the recomputed value; `retro-unchecked` where they cannot be recomputed here."""
    issues: list[Issue] = []
    trunk = Trunk(ws, policy_at)
    for entry in sorted(registers.retro.values(), key=lambda e: e.id):
        if not ws.has_stores:
            issues.append(
                Issue(
                    "warning",
                    "retro-unchecked",
                    entry.id,
                    f"{entry.id}: numbers not recomputed (no stores here: a clone); the host's "
                    "`registry lint` checks them",
                )
            )
            continue
        found = _period_of(entry)
        if found is None:
            issues.append(Issue("error", "schema", entry.id, f"{entry.id}: since/until are not a period"))
            continue
        numbers, why = compute(ws, state, *found, trunk)
        written = entry.fields["numbers"]
        for name in sorted(set(written) - set(numbers)):
            issues.append(
                Issue(
                    "error",
                    "retro-edited",
                    entry.id,
                    f"{entry.id}: numbers.{name} is no generated number (a retro's numbers are generated only)",
                )
            )
        for name, number in numbers.items():
            mine = written.get(name)
            if name in GIT_NAMES and why:
                issues.append(
                    Issue(
                        "warning",
                        "retro-unchecked",
                        entry.id,
                        f"{entry.id}: numbers.{name} not recomputed ({why})",
                    )
                )
                continue
            if mine is None:
                issues.append(
                    Issue(
                        "error",
                        "retro-edited",
                        entry.id,
                        f"{entry.id}: numbers.{name} is missing; recomputed value {_show(number['value'])}",
                    )
                )
            elif mine.get("value") != number["value"]:
                issues.append(
                    Issue(
                        "error",
                        "retro-edited",
                        entry.id,
                        f"{entry.id}: numbers.{name} says {_show(mine.get('value'))}, recomputed value "
                        f"{_show(number['value'])}: a retro that reads its own narrative measures the narrator",
                    )
                )
    return issues


def _show(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def summary(entry: Entry) -> str:
    """One line of an entry's headline numbers (for the control room)."""
    numbers = entry.fields.get("numbers") or {}

    def value(name: str) -> object:
        number = numbers.get(name)
        return number.get("value") if isinstance(number, dict) else "?"

    return (
        f"obligations {value('obligationsOpened')} opened / {value('obligationsResolved')} resolved · "
        f"{value('unitsHeld')} unit(s) held · memory {value('memoryRecorded')} recorded · "
        f"lint errors {value('lintErrors')} · tombstones {value('tombstones')}"
    )
