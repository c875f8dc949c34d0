"""The Python API for a host harness and the MCP server (design §17): what the CLI does for a unit.

docs/api.md documents it. A `UnitDoor` is bound to one lease when it is opened and checks that
lease against the units store on every call, so a released lease stops working at once. Errors are
the CLI's: `BadInput` (exit 2) and `Refused` (exit 3), each with `exit_code`; nothing is written.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from engine.base.errors import BadInput, Refused, RegulatorError
from engine.checkout.workspace import Lease, Workspace, locate, read_lease
from engine.commands import memory, signals
from engine.commands.actors import Actor, unit_tools
from engine.doors.client import DoorClient, ToolError
from engine.doors.door import Kept, Reads, index_key
from engine.doors.harness import CLAUDE_CODE, grants_for
from engine.read import delivery
from engine.read.load import load
from engine.read.model import Disposition, ObligationStatus, State
from engine.read.queries import answer_of

__all__ = [
    "Asked",
    "BadInput",
    "ContextResult",
    "DoorClient",
    "ObligationInfo",
    "Proposed",
    "Refused",
    "RegulatorError",
    "Remembered",
    "ToolError",
    "Reported",
    "ResultRecorded",
    "UnitDoor",
    "UnitStatus",
    "context",
    "obligations",
    "open_workspace",
    "remember",
    "render_context",
    "report",
    "report_intelligence",
    "status",
]


# ---- typed results -------------------------------------------------------------------------------
class Reported(msgspec.Struct, frozen=True):
    """A signal appended (S4 → S3); routing, not the report, opens obligations."""

    id: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id}


class Remembered(msgspec.Struct, frozen=True):
    """A memory entry recorded for later units."""

    id: str
    review_by: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "reviewBy": self.review_by}


class Asked(msgspec.Struct, frozen=True):
    """A question to a person (ask_human): its signal; routing opens its obligation."""

    id: str
    obligation: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "obligation": self.obligation}


class ResultRecorded(msgspec.Struct, frozen=True):
    """What the unit's run came to, recorded (report_result)."""

    id: str
    outcome: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "outcome": self.outcome}


class Proposed(msgspec.Struct, frozen=True):
    """A proposed change to a governed file; a person with the accept grant decides it."""

    id: str
    file: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.file}


class ContextResult(msgspec.Struct, frozen=True):
    """What the unit receives at start: `text` exactly as `regulator context` prints it (fenced,
    escaped: design §16.1) and `data` as `regulator context --json` prints it (raw values)."""

    text: str
    data: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return self.data


class ObligationInfo(msgspec.Struct, frozen=True):
    """One obligation on the unit: the §13 record, with the signal's subject and when it opened."""

    id: str
    unit: str | None
    signal: str | None
    severity: str
    blocks: bool
    owed_to: str
    status: str
    disposition: str | None
    stale: bool
    subject: str
    opened_at: str
    kind: str = "intelligence"
    answer: str | None = None  # a question answered by a person: the answer (design §22)

    @property
    def holds(self) -> bool:
        """It holds the unit now: open and at or above the policy's blocking line."""
        return self.blocks and self.status == ObligationStatus.OPEN

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "unit": self.unit,
            "signal": self.signal,
            "severity": self.severity,
            "blocks": self.blocks,
            "holds": self.holds,
            "owedTo": self.owed_to,
            "status": self.status,
            "disposition": self.disposition,
            "stale": self.stale,
            "subject": self.subject,
            "openedAt": self.opened_at,
            "kind": self.kind,
            "answer": self.answer,
        }


class UnitStatus(msgspec.Struct, frozen=True):
    """The unit's status and why it is held (the unit's row of `status --json`, and more)."""

    unit: str
    type: str | None
    profile: str | None
    status: str
    held: bool
    blocked_by: list[str] = msgspec.field(default_factory=list)
    stale_knowledge: list[str] = msgspec.field(default_factory=list)
    grants: list[str] = msgspec.field(default_factory=list)
    unrouted: int = 0  # signals not yet routed: an obligation may still be on its way
    checks: list[str] = msgspec.field(
        default_factory=list
    )  # the commands run_checks may run (its contract's)
    # what its profile grants in each harness (engine.doors.harness.Grants.as_json), for the hooks (§23)
    harness: dict[str, Any] = msgspec.field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "type": self.type,
            "profile": self.profile,
            "status": self.status,
            "held": self.held,
            "blockedBy": list(self.blocked_by),
            "staleKnowledge": list(self.stale_knowledge),
            "grants": list(self.grants),
            "unrouted": self.unrouted,
            "checks": list(self.checks),
            "harness": dict(self.harness),
        }


def _fields(fields: object) -> dict[str, Any]:
    """A call's fields as a dict of named fields, or BadInput (exit 2) naming what was given."""
    if not isinstance(fields, Mapping) or not all(isinstance(k, str) for k in fields):
        raise BadInput(f"fields must be a mapping of field names to values, not {type(fields).__name__}")
    return dict(fields)


def _flush_checkpoint() -> None:
    """A write's load may have offered its state for a checkpoint (engine.read.checkpoint): write it now,
    after the write and outside its lock, as the CLI does when a command ends."""
    module = sys.modules.get("engine.read.checkpoint")
    if module is not None:
        module.flush()


# ---- the door --------------------------------------------------------------------------------------
class UnitDoor:
    """The engine for one unit, stamped from the lease bound here, never from an argument.

    Opening reads the lease file once and refuses (exit 3) a lease that is not the unit's current
    one; every call checks it again against the units store (it is held in memory: editing or
    removing the file afterwards changes nothing). A door kept open keeps its reads between calls
    (engine.doors.door): the units store's fold, the worktree's HEAD, the workspace's checks, each read
    again only as far as it changed, so a writer that loops over one door pays for what changed."""

    def __init__(self, lease_file: str | Path) -> None:
        path = Path(lease_file)
        self.lease: Lease = read_lease(path)
        home = self.lease.workspace.resolve()
        index = index_key(home)  # before locate() asks git about it (the usual layout: home is the root)
        self.workspace: Workspace
        self.workspace, _ = locate(lease_file=path)
        self._kept = Kept(self.workspace, self.lease)
        self._kept.untracked_checked(home, index)
        self._reads = Reads()
        self.check()

    @classmethod
    def bound(cls, ws: Workspace, lease: Lease, reads: Reads | None = None) -> UnitDoor:
        """A door for a lease the host found itself (serve's door: the bearer token's lease, no
        lease file read); refused (exit 3) as the constructor refuses a lease not current.
        `reads`: the read model the host's doors share (engine.doors.door.Reads)."""
        door = cls.__new__(cls)
        door.lease = lease
        door.workspace = ws
        door._kept = Kept(ws, lease)
        door._reads = reads if reads is not None else Reads()
        door.check()
        return door

    @property
    def unit(self) -> str:
        return self.lease.unit

    def _ws(self) -> Workspace:
        """The workspace, checked again as locating it checked it, its clock mode read again (a
        decision may have changed it)."""
        return self._kept.workspace()

    def check(self) -> State:
        """The lease is still the unit's current one (exit 3 otherwise); the units state read."""
        return self._kept.refresh(sync=True)

    def report(self, fields: Mapping[str, Any]) -> Reported:
        """report_intelligence (design §5.2) with seed 000's field names; the engine validates
        (exit 2) then authorizes (profile grant and research type, exit 3).

        On PostgreSQL a door that knows where the units and identity stores ended when it last
        read them appends in one round trip that writes only if they still end there; otherwise
        (or when they moved on) it reads what they gained, decides again and appends."""
        kept = self._kept
        ws = kept.ws
        written: dict[str, Any] | None = None
        if ws.url is not None and kept.tails is not None and kept.state is not None:
            try:
                event = self._signal(kept.workspace(), fields, kept.state)
            except RegulatorError:  # judged on what this host had read: read the server's, judge again
                pass
            else:
                written = kept.signals(ws.url).append_unchanged(event, kept.tails)
        if written is None:  # files: units.ndjson looked at; PostgreSQL: what the stores gained read
            state = kept.refresh(sync=ws.url is not None)
            written = ws.store("signals").append(self._signal(ws, fields, state), assign_id=True)
        _flush_checkpoint()
        return Reported(written["id"])

    def _signal(self, ws: Workspace, fields: Mapping[str, Any], state: State) -> dict[str, Any]:
        kept = self._kept

        def signal_id(named: str) -> str:  # the signal superseded, in the kept read model
            from engine.base.lookup import key_by_prefix

            with self._reads.reading(ws) as loaded:
                return key_by_prefix(loaded.signals.refs, named, "signal")

        return signals.unit_signal(
            ws, _fields(fields), self.lease, state, kept.known(), kept.head.revision, signal_id
        )

    def remember(self, fields: Mapping[str, Any]) -> Remembered:
        """A memory entry (design §6.1): subject, note, evidence, reviewBy, scope."""
        self.check()
        event = memory.remember(self._ws(), _fields(fields), self.lease)
        _flush_checkpoint()
        return Remembered(event["id"], event["reviewBy"])

    def ask(self, fields: Mapping[str, Any]) -> Asked:
        """ask_human (design §22): a question to a person, where the profile grants ask_human; the
        router opens its advisory obligation, and the answer comes back in `obligations` and the
        context."""
        from engine.base import ids
        from engine.commands.questions import unit_question

        state = self.check()
        ws = self._ws()
        kept = self._kept
        event = unit_question(ws, _fields(fields), self.lease, state, kept.head.revision)
        written = ws.store("signals").append(event, assign_id=True)
        _flush_checkpoint()
        return Asked(written["id"], ids.question_obligation_id(written["id"]))

    def report_result(self, fields: Mapping[str, Any]) -> ResultRecorded:
        """report_result (design §22): summary, outcome (done|blocked|failed), usage {tokens, costUsd}."""
        from engine.commands.results import report_result

        self.check()
        event = report_result(self._ws(), _fields(fields), self.lease)
        _flush_checkpoint()
        return ResultRecorded(event["id"], event["outcome"])

    def propose(self, path: object, content: object, rationale: object) -> Proposed:
        """A proposed change to a governed file (design §7), where the profile grants
        propose_policy_change; the whole proposed content as text."""
        from engine.commands.proposals import propose

        self.check()
        if not isinstance(path, str):
            raise BadInput("path: required (a governed file, e.g. regulator/identity/invariants.md)")
        if not isinstance(content, str):
            raise BadInput("content: required (the whole proposed content, as text)")
        event = propose(
            self._ws(),
            path,
            content.encode("utf-8", "surrogatepass"),
            rationale if isinstance(rationale, str) else "",
            Actor(unit=self.unit, lease=self.lease),
        )
        _flush_checkpoint()
        return Proposed(event["id"], event["file"])

    def context(self, budget: int = delivery.DEFAULT_BUDGET) -> ContextResult:
        """What this unit receives at start (design §6.4, §16.1)."""
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise BadInput(f"budget: {budget!r} is not a number of characters (0 or more)")
        self.check()
        ws = self._ws()
        loaded = load(ws)
        if self.unit not in loaded.contracts:  # as `regulator context`: no contract, no type to scope by
            raise BadInput(f"unit {self.unit!r} has no contract under contracts/")
        built = delivery.build_context(ws, loaded, self.unit, budget)
        return ContextResult(delivery.render_text(built), delivery.render_json(built))

    def obligations(self, include_closed: bool = False) -> list[ObligationInfo]:
        """The obligations on this unit: open ones and the questions a person answered (`answer`:
        the unit reads its answers where it reads its obligations, D-162), or all with
        include_closed; in log order."""
        from engine.commands.obligations import record

        self.check()
        with self._reads.reading(self._ws()) as loaded:
            found = []
            for ob in loaded.obligations.values():
                if ob.unit != self.unit:
                    continue
                if not (
                    include_closed
                    or ob.status == ObligationStatus.OPEN
                    or ob.disposition == Disposition.ANSWERED
                ):
                    continue
                r = record(loaded, ob)
                found.append(
                    ObligationInfo(
                        id=r["id"],
                        unit=r["unit"],
                        signal=r["signal"],
                        severity=r["severity"],
                        blocks=r["blocks"],
                        owed_to=r["owedTo"],
                        status=r["status"],
                        disposition=r["disposition"],
                        stale=r["stale"],
                        subject=ob.subject,
                        opened_at=ob.opened_at,
                        kind=str(ob.kind),
                        answer=answer_of(ob),
                    )
                )
        return found

    def status(self) -> UnitStatus:
        """This unit's status and what holds it (reads only; never routes)."""
        from engine.read.status import status as derive

        self.check()
        ws = self._ws()
        with self._reads.reading(ws) as loaded:
            data = derive(ws, loaded, only=self.unit)
            if not data["units"]:  # never while the lease checked is current: the fold has its dispatch
                raise Refused(f"unit {self.unit!r} is not in units.ndjson as read now; call again")
            row = data["units"][0]
            unit_type, profile, tools = unit_tools(ws, loaded, self.unit)
            contract = loaded.contracts.get(self.unit)
            checks = list(contract.checks) if contract is not None else []
        mapping = ws.profiles().harness(CLAUDE_CODE)
        return UnitStatus(
            unit=self.unit,
            type=unit_type,
            profile=profile,
            status=row["status"],
            held=bool(row["held"]),
            blocked_by=list(row["blockedBy"]),
            stale_knowledge=list(row["staleKnowledge"]),
            grants=list(tools),
            unrouted=data["unrouted"] or 0,
            checks=checks,
            harness={CLAUDE_CODE: grants_for(profile, tools, mapping, checks).as_json()},
        )


# ---- one call per door, for a harness that makes one call ----------------------------------------
def report(lease_file: str | Path, fields: Mapping[str, Any]) -> Reported:
    """report_intelligence for the unit holding this lease."""
    return UnitDoor(lease_file).report(fields)


def context(lease_file: str | Path, budget: int = delivery.DEFAULT_BUDGET) -> ContextResult:
    """What the unit holding this lease receives at start."""
    return UnitDoor(lease_file).context(budget)


def obligations(lease_file: str | Path, include_closed: bool = False) -> list[ObligationInfo]:
    """The obligations on the unit holding this lease."""
    return UnitDoor(lease_file).obligations(include_closed)


def status(lease_file: str | Path) -> UnitStatus:
    """The status of the unit holding this lease, and what holds it."""
    return UnitDoor(lease_file).status()


def remember(
    lease_file: str | Path,
    subject: str,
    note: str,
    evidence: list[str],
    review_by: str,
    scope: list[str] | None = None,
) -> str:
    """Record a memory entry for the unit holding this lease; returns the entry id."""
    fields = {
        "subject": subject,
        "note": note,
        "evidence": list(evidence),
        "reviewBy": review_by,
        "scope": list(scope or []),
    }
    return UnitDoor(lease_file).remember(fields).id


def report_intelligence(lease_file: str | Path, **fields: Any) -> str:
    """report_intelligence with seed 000's field names as keywords; returns the signal id."""
    return report(lease_file, fields).id


def open_workspace(root: str | Path) -> Workspace:
    ws, _ = locate(Path(root))
    return ws


def render_context(root: str | Path, unit: str | None = None, budget: int = delivery.DEFAULT_BUDGET) -> str:
    """Exactly what `regulator context UNIT` prints (a host reading for any unit, no lease)."""
    ws = open_workspace(root)
    return delivery.render_context(ws, load(ws), unit, budget)
