"""The read model's types, and the one place every status, kind, action and disposition is named.

What folding the stores yields (engine.read.fold), what a checkpoint keeps (engine.read.checkpoint) and
what every view and command reads (engine.read.queries) are these types. The names are StrEnums: each
member is its text (`UnitStatus.TODO == "todo"`, and prints, hashes and serialises as "todo"), so
what the stores, JSON output and tables carry is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from engine.checkout.authority import Authority, Uncounted
from engine.log.events import UNREADABLE, EventMap, EventSource
from engine.log.store import Problem
from engine.read.contracts import Contract, ContractFiles

# ---- the names -------------------------------------------------------------------------------


class ObligationStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"  # dispositioned by a person, or by a recovery decision that resumes
    ESCALATED = "escalated"  # closed by a recovery decision that waits (WAITING_ACTIONS)


class ObligationKind(StrEnum):
    INTELLIGENCE = "intelligence"  # from a routed signal
    RECOVERY_DECISION = "recovery-decision"  # opened by a unit's recovery decision
    RECOVERY = "recovery"  # opened by a failed or blocked result: a person decides (design §23)
    RECHECK = "recheck"  # opened when a signal's evidence expired under an open obligation (§24)
    QUESTION = "question"  # a unit's question to a person (ask_human), routed from its signal (§22)


class UnitStatus(StrEnum):
    TODO = "todo"
    IN_PROGRESS = "in-progress"
    CLOSED = "closed"
    WAITING = "waiting"  # on a recovery-decision obligation (see engine.read.queries.unit_status)
    ABORTED = "aborted"
    LOST = "lost"  # its lease expired while in progress (design §23): held as before, dispatchable again


class MemoryStatus(StrEnum):
    CURRENT = "current"
    EXPIRED = "expired"
    RETRACTED = "retracted"


class RecoveryAction(StrEnum):
    """What a recovery decision (`unit decide --action`) does with a unit (design §4.4)."""

    RETRY = "retry"
    REPAIR = "repair"
    ABORT = "abort"
    REMEDIATE = "remediate"
    REPLAN = "replan"
    CLARIFY = "clarify"
    PAUSE = "pause"
    ESCALATE = "escalate"


RECOVERY_ACTIONS: tuple[RecoveryAction, ...] = tuple(RecoveryAction)
RESUMING_ACTIONS = (RecoveryAction.RETRY, RecoveryAction.REPAIR)  # the unit goes back to todo
WAITING_ACTIONS = (  # the unit waits on a recovery-decision obligation
    RecoveryAction.REMEDIATE,
    RecoveryAction.REPLAN,
    RecoveryAction.CLARIFY,
    RecoveryAction.PAUSE,
    RecoveryAction.ESCALATE,
)


class Disposition(StrEnum):
    """How an obligation was closed: a person's (`obligation resolve --disposition`) or the
    engine's, written by a recovery decision."""

    NO_ACTION = "no-action"
    ACCEPTED_RISK = "accepted-risk"
    REWORK = "rework"
    REPLAN = "replan"
    RESEARCH_REQUESTED = "research-requested"
    REJECTED = "rejected"  # an abort
    ESCALATED = "escalated"  # a waiting action
    ANSWERED = "answered"  # a person's answer to a question (its rationale is the answer, §22)


PERSON_DISPOSITIONS = (
    Disposition.NO_ACTION,
    Disposition.ACCEPTED_RISK,
    Disposition.REWORK,
    Disposition.REPLAN,
    Disposition.RESEARCH_REQUESTED,
    Disposition.ANSWERED,  # on questions only (engine.commands.obligations.resolve)
)


class EventKind(StrEnum):
    """The `kind` of every event the engine writes, by store. DECISION names a recovery decision
    in units.ndjson and an identity decision in identity.ndjson: the store tells them apart."""

    SIGNAL = "signal"  # signals.ndjson
    ROUTING = "routing"
    DISPOSITION = "disposition"
    DISMISSAL = "dismissal"  # a person dismisses a line `verify` names (regulator verify --dismiss)
    DISPATCH = "dispatch"  # units.ndjson
    CLOSE = "close"
    DEMOTE = "demote"
    DECISION = "decision"  # units.ndjson and identity.ndjson
    RESULT = "result"  # units.ndjson: what a unit's run came to (design §23), one per lease
    LEASE_EXPIRED = "lease-expired"  # units.ndjson: a host found the lease past its time
    MEMORY = "memory"  # memory.ndjson
    RETRACTION = "retraction"
    PROPOSAL = "proposal"  # identity.ndjson
    # host events of design §24 (signals.ndjson), written by the timed duties with derived ids
    EVIDENCE_EXPIRED = "evidence-expired"  # a signal expired under an open obligation: re-ask
    OVERDUE = "overdue"  # an obligation open past its deadline
    DEADLINE_ESCALATED = "deadline-escalated"  # ... escalated to the policy's people
    ADVISORY_WITHDRAWN = "advisory-withdrawn"  # an OSV advisory a sensor raised was withdrawn
    SENSOR_RUN = "sensor-run"  # a sensor ran: its outcome, the signals it raised, its errors
    ESCALATION_PAGED = "escalation-paged"  # what an escalation's notify did: sent, or why not (D-323)
    PREDICTION_OUTCOME = "prediction-outcome"  # a person event: whether a prediction came true
    UNREADABLE = UNREADABLE  # no store's: what a reference reads back as when its line is gone


# the status shown for a unit when the stores are absent (a clone, design §16.2): not a UnitStatus,
# since no fold ever yields it
UNKNOWN_STATUS = "unknown"


# Severities are named by the routing policy (identity.policy.RoutingPolicy.severities), so they
# are text; the engine names one itself: the severity a recovery decision's obligation opens with.
Severity = str
BLOCKING: Severity = "blocking"
ADVISORY: Severity = "advisory"  # the severity of a recovery obligation a failed result opens (§23)
OWED_TO = "S3"  # whom an obligation is owed to when its record does not say


# ---- the model -------------------------------------------------------------------------------


class Closing(msgspec.Struct, array_like=True):
    """What closes an obligation: a disposition (signals.ndjson) or a recovery decision (units)."""

    status: ObligationStatus
    disposition: str | None
    by: str | None
    rationale: str | None
    closed_at: str | None
    at: int  # reference to the closing event (engine.log.events)
    unit: object = None  # a recovery decision's unit (engine.read.rules.disposes_of); None for a disposition
    opens: str | None = None  # a waiting decision's recovery obligation, what it escalates into (D-294)


class Obligation(msgspec.Struct, array_like=True):
    """One per routed obligation: 100,000 of them are built on a cold start of a large log, and a
    Struct is built in C (half a dataclass's time); mutable, as the fold closes them in place."""

    id: str
    unit: str | None
    kind: ObligationKind
    source: str  # the signal id, or the decision id
    severity: Severity
    blocks: bool
    owed_to: str
    opened_at: str
    subject: str = ""
    expires_at: datetime | None = None
    status: ObligationStatus = ObligationStatus.OPEN
    disposition: str | None = None
    by: str | None = None
    rationale: str | None = None
    closed_at: str | None = None
    history: list[int] = []  # references (engine.log.events), oldest first; a new list each
    closed_by: int = -1  # reference to the event that closed it (-1: open), for the order rule
    # a recovery decision's: the severities of what it escalated; resolving it is theirs (D-292)
    escalated: tuple[str, ...] = ()
    into: str | None = None  # the recovery obligation a waiting decision escalated this one into (D-294)

    def close(self, closing: Closing) -> None:
        self.status = closing.status
        self.disposition = closing.disposition
        self.by = closing.by
        self.rationale = closing.rationale
        self.closed_at = closing.closed_at
        self.closed_by = closing.at
        self.history.append(closing.at)
        self.into = closing.opens


class ResultOutcome(StrEnum):
    """What a unit's run came to (`report_result`, or `unit run` when the unit reported none)."""

    DONE = "done"
    BLOCKED = "blocked"
    FAILED = "failed"


RESULT_OUTCOMES: tuple[ResultOutcome, ...] = tuple(ResultOutcome)
ASKS_RECOVERY = (ResultOutcome.BLOCKED, ResultOutcome.FAILED)  # a person decides what next (§4.4)


class UnitResult(msgspec.Struct, array_like=True):
    """The result recorded for a unit's lease: by the unit through the door, or by `unit run`
    (`by` "host") when the unit reported none. Store text: shown escaped, never interpreted."""

    id: str
    outcome: str
    summary: str
    at: str
    by: str  # "unit" or "host"
    exit_code: int | None = None  # the child's own exit code, where `unit run` saw it
    duration_s: int | None = None


class UnitState(msgspec.Struct, array_like=True):
    id: str
    contract: Contract | None = None  # attached by engine.read.load; a checkpoint does not keep it
    status: UnitStatus = UnitStatus.TODO  # as folded; engine.read.queries.unit_status says what it is now
    lease: str | None = None  # the current lease's hash (design §15.2); the token is never stored
    worktree: str | None = None
    recovery: str | None = None  # the recovery-decision obligation a waiting unit waits on
    history: list[int] = []  # references (engine.log.events)
    type: str | None = None  # as the current dispatch recorded them: a lease's grants (§15.0)
    profile: str | None = None
    # the current lease's time (design §23): None for a lease that never expires (one from before)
    expires_at: str | None = None
    ttl: int | None = None  # seconds a heartbeat extends it by
    confined: bool | None = None  # as the current dispatch recorded it (`unit run --user`)
    result: UnitResult | None = None  # the result of the latest lease, kept until the next dispatch
    run_on: str | None = None  # the host whose `unit run` runs the current lease (D-266), or None
    # every worktree a dispatch gave it, first first: none is ever a sensor's feed (D-304)
    worktrees: tuple[str, ...] = ()


class HostOrder(msgspec.Struct):
    """What the fold keeps to judge host events by the order rule (design §22): the routing
    records that route and record `seen`, in signals.ndjson's order, as two parallel lists (their
    start offsets, and the byte length of units.ndjson each saw); whether each store's host events
    have begun to record `seen` (a later one without it counts for nothing); the most of
    signals.ndjson a dispatch or close that counts claims to have seen; how far each store was read
    (units folded up to `units_at`, signals.ndjson's size when last read); and the least length of
    signals.ndjson claimed past what it held by a dispatch or close (judged again once it holds it)."""

    starts: list[int] = []
    seen_units: list[int] = []
    monotone: bool = True  # seen_units never decreases (as hosts write it: a fast path)
    signals_seen: bool = False
    units_seen: bool = False
    max_seen: int = -1
    units_at: int = 0
    signals_size: int = 0
    beyond: int = -1  # the least `seen` of signals.ndjson past its length then that voided one (-1: none)


class MemoryEntry(msgspec.Struct, array_like=True):
    event: dict[str, Any]
    retraction: dict[str, Any] | None = None


class World(msgspec.Struct):
    """What time and the world brought in (design §24), folded from signals.ndjson: each index maps to
    references (engine.log.events) or ids, so holding it costs little and a checkpoint keeps it."""

    expired: dict[str, int] = {}  # signal id -> its evidence-expired event
    stale_evidence: dict[str, str] = {}  # obligation id -> the signal whose evidence expired under it
    overdue: dict[str, int] = {}  # obligation id -> its overdue event
    escalated: dict[str, int] = {}  # obligation id -> its deadline-escalated event
    unpaged: dict[str, str] = {}  # obligation id -> why its escalation paged no one (D-315, D-323)
    paged: dict[str, int] = {}  # obligation id -> its escalation-paged event (D-323)
    # obligation id -> its overdue/escalated events read before it opened: a recovery obligation
    # opens in units.ndjson, folded after signals.ndjson (engine.read.worldfold.opened)
    unopened: dict[str, list[int]] = {}
    withdrawn: dict[str, int] = {}  # signal id -> its advisory-withdrawn event
    runs: dict[str, list[int]] = {}  # sensor -> its sensor-run events, oldest first
    sensed: dict[str, list[str]] = {}  # sensor -> the signals it raised, log order
    # "<advisory id or alias>\0<package>\0<lockfile>" -> every sensor's signal raised under it, log order
    advisories: dict[str, list[str]] = {}
    cleared: dict[
        str, int
    ] = {}  # signal id -> the sensor-run that found its advisory no longer affects its pin
    stalls: dict[str, None] = {}  # a sensor's stall signals (`stalled`), log order
    resumed: dict[str, int] = {}  # stall signal id -> the sensor-run that found its feed moving again
    predicted: dict[str, None] = {}  # signals that make a prediction, log order
    outcomes: dict[str, int] = {}  # signal id -> the prediction-outcome that counts
    superseded: dict[str, list[str]] = {}  # signal id -> the later signals that supersede it
    ids: dict[str, None] = {}  # the ids of the host events above (a duty's second write is dropped)


class Cursor(msgspec.Struct):
    """How far a store has been folded: its byte offset and line number."""

    offset: int = 0
    line: int = 0


class State(msgspec.Struct):
    """The read model: everything folded from the stores (and the contracts) at `now`."""

    now: datetime
    contracts: dict[str, Contract] = msgspec.field(default_factory=dict)
    source: EventSource = msgspec.field(default_factory=EventSource)
    signals: EventMap = None  # type: ignore[assignment]  # id -> signal event, held by reference
    routings: EventMap = None  # type: ignore[assignment]  # signal id -> its routing record
    obligations: dict[str, Obligation] = msgspec.field(default_factory=dict)
    units: dict[str, UnitState] = msgspec.field(default_factory=dict)
    memory: dict[str, MemoryEntry] = msgspec.field(default_factory=dict)
    proposals: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    decisions: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # closings read before the obligation they close (see engine.read.fold), applied when it opens.
    # The stores are read one after another, so a decision can be folded before the routing
    # record it follows; this keeps the result the same whatever order the stores were read in.
    pending: dict[str, list[Closing]] = msgspec.field(default_factory=dict)
    unrouted_ids: dict[str, None] = msgspec.field(default_factory=dict)  # signals awaiting routing, log order
    problems: list[Problem] = msgspec.field(default_factory=list)  # the first bad lines, named
    bad_lines: int = 0  # every bad line read, named or only counted (design §26)
    contract_problems: list[str] = msgspec.field(default_factory=list)
    cursors: dict[str, Cursor] = msgspec.field(default_factory=dict)
    contract_files: ContractFiles = msgspec.field(default_factory=ContractFiles)
    checkpointed: int = 0  # bytes of log the checkpoint this state came from (or wrote) covers
    registers: object = None  # registry.entries.Registers, read on first use (engine.read.ladder)
    # person events that count for nothing (unsigned where required, bad signature, replayed id)
    uncounted: list[Uncounted] = msgspec.field(default_factory=list)
    person_ids: dict[str, set[str]] = msgspec.field(default_factory=dict)  # store -> ids of person events
    auth: Authority = msgspec.field(
        default_factory=Authority
    )  # the authority the person events were judged by
    host: HostOrder = msgspec.field(default_factory=HostOrder)  # the order rule's memory (engine.read.fold)
    verdicts: dict[int, tuple[dict[str, Any], str | None]] = msgspec.field(
        default_factory=dict
    )  # see engine.read.persons.check_ahead
    reread: Callable[[], None] | None = None  # while units.ndjson folds: read what signals.ndjson gained
    # while a piece folds on a cold read: the forked child's verdict on a signed line, (event id,
    # why it counts for nothing), or None (engine.read.prejudge.Prejudged.verdict)
    prejudged: Callable[[str, int], tuple[Any, str | None] | None] | None = None
    world: World = msgspec.field(default_factory=World)  # design §24: what time and the world brought in

    def __post_init__(self) -> None:
        if self.signals is None:
            self.signals = EventMap(self.source)
        if self.routings is None:
            self.routings = EventMap(self.source, "signal")

    def unit(self, unit_id: str) -> UnitState:
        found = self.units.get(unit_id)
        if found is None:
            found = self.units[unit_id] = UnitState(id=unit_id, contract=self.contracts.get(unit_id))
        return found
