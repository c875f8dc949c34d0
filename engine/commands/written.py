"""A typed shape per event kind as written: what each writer appends (a TypedDict, checked by mypy
where the event is built). What the fold reads of each kind is engine.read.kinds (msgspec Structs,
decoded in C); tests/test_kinds.py proves every event a writer appends converts to its shape here
and every field the fold reads is one a writer writes. Only writers and tests import this module:
a reader never pays for its classes."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

# ---- as written ------------------------------------------------------------------------------


class Stamped(TypedDict, total=False):
    """What the store or the signer adds to an event as it is appended."""

    id: str  # a person event's own (made before the lock), or the store's (assign_id)
    workspace: str | None  # a person event's: the workspace it was signed for
    sig: str  # a person event's signature, where the person signs
    prev: str
    hash: str


class SignalEvent(Stamped):
    """signals.ndjson: report_intelligence, by a leased unit or a person (design §13)."""

    kind: Literal["signal"]
    subject: str
    claim: str
    observation: str
    evidence: list[str]
    confidence: str
    reportedSeverity: str
    affectedUnits: list[str]
    observedAt: str
    expiresAt: str | None
    rationale: str | None
    unit: str | None
    by: str | None
    revision: str | None
    source: str
    destination: str
    at: str
    # design §24: a claim about the future, a report that replaces an earlier one, a sensor's report
    prediction: NotRequired[dict[str, Any]]
    supersedes: NotRequired[str]
    sensor: NotRequired[str]
    osv: NotRequired[dict[str, Any]]
    stalled: NotRequired[str]  # a stalled feed's signal: its newest record's time (D-132)


class QuestionEvent(Stamped):
    """signals.ndjson: a leased unit asks a person (ask_human, engine.commands.questions; design §22)."""

    kind: Literal["signal"]
    type: Literal["question"]
    subject: str
    question: str
    options: list[str] | None
    unit: str
    by: None
    revision: str | None
    source: str
    destination: str
    at: str


class RoutedObligationEvent(TypedDict):
    """One obligation a routing record opens."""

    id: str
    unit: str | None
    severity: str
    blocks: bool
    owedTo: str
    kind: NotRequired[Literal["question"]]  # a question's obligation (design §22); else intelligence


class RoutingEvent(Stamped):
    """signals.ndjson: the router's record for one signal (engine.commands.router)."""

    kind: Literal["routing"]
    signal: str
    reportedSeverity: str | None
    derivedSeverity: str | None
    floors: list[str]
    obligations: list[RoutedObligationEvent]
    at: str
    outcome: str
    reason: str
    seen: NotRequired[dict[str, int]]  # added as it is appended (design §22: the order rule)


class DispositionEvent(Stamped):
    """signals.ndjson: a person resolves an obligation (engine.commands.obligations)."""

    kind: Literal["disposition"]
    obligation: str
    unit: str | None
    disposition: str
    by: str
    rationale: str
    at: str


class DispatchEvent(Stamped):
    """units.ndjson: the host leases a unit (engine.commands.units.dispatch)."""

    kind: Literal["dispatch"]
    unit: str
    leaseHash: str
    type: str
    profile: str
    contractHash: str | None
    worktree: str | None
    revision: str | None
    seen: dict[str, int]  # the other stores' lengths the host decided on (design §22)
    at: str
    expiresAt: NotRequired[str]  # `unit run`'s lease time and its ttl (design §23)
    ttl: NotRequired[int]
    confined: NotRequired[bool]
    runOn: NotRequired[str]  # the host whose `unit run` runs it: no other host's door answers it (D-266)


class CloseEvent(Stamped):
    """units.ndjson: the host closes an in-progress unit, its lease released."""

    kind: Literal["close"]
    unit: str
    leaseHash: str | None
    seen: dict[str, int]
    at: str


class ResultEvent(Stamped):
    """units.ndjson: the host records what a leased unit reported (report_result, design §23)."""

    kind: Literal["result"]
    unit: str
    leaseHash: str
    summary: str
    outcome: str
    usage: dict[str, Any] | None
    by: str | None
    at: str
    exitCode: NotRequired[int]
    durationS: NotRequired[float]
    opens: NotRequired[dict[str, Any]]  # a recovery obligation, for an outcome that asks one
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class LeaseExpiredEvent(Stamped):
    """units.ndjson: the host marks a lease past its time (engine.host.leases; the unit is lost)."""

    kind: Literal["lease-expired"]
    unit: str
    leaseHash: str | None
    expiredAt: str
    at: str
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class DemoteEvent(Stamped):
    """units.ndjson: a person sends an in-progress unit back to todo."""

    kind: Literal["demote"]
    unit: str
    leaseHash: str | None
    by: str
    rationale: str
    at: str


class OpenedEvent(TypedDict):
    """The blocking obligation a waiting recovery decision opens."""

    id: str
    severity: str
    owedTo: str


class RecoveryDecisionEvent(Stamped):
    """units.ndjson: a person's recovery decision (design §4.4; engine.read.rules.recovery)."""

    kind: Literal["decision"]
    unit: str
    action: str
    by: str
    rationale: str
    resolves: list[str]
    disposition: str
    opens: OpenedEvent | None
    at: str


class MemoryEvent(Stamped):
    """memory.ndjson: a fact a leased unit records (engine.commands.memory.remember)."""

    kind: Literal["memory"]
    subject: str
    note: str
    evidence: list[str]
    scope: list[str]
    reviewBy: str
    unit: str
    revision: str | None
    recordedBy: str
    at: str


class RetractionEvent(Stamped):
    """memory.ndjson: a person retracts an entry."""

    kind: Literal["retraction"]
    entry: str
    by: str
    reason: str
    at: str


class ProposalEvent(Stamped):
    """identity.ndjson: a change to a governed file, proposed by a unit or a person (design §7)."""

    kind: Literal["proposal"]
    file: str
    content: str
    contentHash: str
    baseHash: str | None
    rationale: str
    unit: str | None
    by: str | None
    at: str


class IdentityDecisionEvent(Stamped):
    """identity.ndjson: a person accepts or rejects a proposal; `marks` are the other stores'
    sizes, where the decision takes effect (engine.checkout.authority.people_for)."""

    kind: Literal["decision"]
    decision: Literal["accepted", "rejected"]
    proposal: str
    file: str
    contentHash: str | None
    by: str
    rationale: str
    marks: dict[str, int]
    at: str


class BaselineEvent(Stamped, total=False):
    """identity.ndjson: init's first events, one per governed file, trusted on first use."""

    nonce: str  # the first one's: never two workspaces alike
    kind: Literal["decision"]
    decision: Literal["baseline"]
    proposal: None
    file: str
    content: str
    contentHash: str
    by: str
    rationale: str
    at: str


class DismissalEvent(Stamped):
    """identity.ndjson: a person dismisses a line `verify` names (it still counts for nothing)."""

    kind: Literal["dismissal"]
    store: str
    line: int
    lineHash: str | None
    by: str
    rationale: str
    at: str


class EvidenceExpiredEvent(Stamped):
    """signals.ndjson: the host marks a signal's evidence stale and opens its recheck (design §24)."""

    kind: Literal["evidence-expired"]
    signal: str
    expiresAt: str | None
    obligations: list[str]
    reporter: str
    opens: dict[str, Any]
    reason: str
    at: str
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class OverdueEvent(Stamped):
    """signals.ndjson: an open obligation past its deadline (engine.commands.timed)."""

    kind: Literal["overdue"]
    obligation: str
    unit: str | None
    severity: str
    deadline: str
    dueAt: str | None
    at: str
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class DeadlineEscalatedEvent(Stamped):
    """signals.ndjson: the same, escalated to the policy's people (once)."""

    kind: Literal["deadline-escalated"]
    obligation: str
    unit: str | None
    severity: str
    deadline: str
    dueAt: str | None
    at: str
    people: list[str]
    subject: str
    # where routing.yaml sets no notify: {"sent": false, "problem": "routing.yaml sets no notify"}
    # (D-323); where it sets one, an escalation-paged event follows once the notify has run
    notify: NotRequired[dict[str, Any]]
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class AdvisoryWithdrawnEvent(Stamped):
    """signals.ndjson: an OSV advisory a sensor's signal named was withdrawn (design §24)."""

    kind: Literal["advisory-withdrawn"]
    signal: str
    advisory: str
    withdrawn: str | None
    sensor: str
    obligations: list[str]
    at: str
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class SensorRunEvent(Stamped):
    """signals.ndjson: one run of a declared sensor (engine.commands.sensors)."""

    kind: Literal["sensor-run"]
    sensor: str
    sensorKind: str
    outcome: str
    signals: list[str]
    withdrawn: list[str]
    errors: list[str]
    errorCount: int
    exitCode: int | None
    revision: str | None
    at: str
    cleared: NotRequired[list[str]]  # its signals whose advisory no longer affects their pin (D-308)
    stalled: NotRequired[bool]  # its feed found stalled (D-309)
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class EscalationPagedEvent(Stamped):
    """signals.ndjson: what an escalation's notify did, written once it has run (D-323)."""

    kind: Literal["escalation-paged"]
    obligation: str
    escalation: str  # the deadline-escalated event's id
    people: list[str]
    sent: bool
    problem: NotRequired[str]  # why not: not run, not finished or not exiting 0, in one line
    at: str
    seen: NotRequired[dict[str, int]]  # how far the host had folded every other store (design §22)


class PredictionOutcomeEvent(Stamped):
    """signals.ndjson: a person records whether a prediction came true (design §24)."""

    kind: Literal["prediction-outcome"]
    signal: str
    cameTrue: bool
    by: str
    rationale: str
    at: str


# each store's kinds, as written (tests/test_kinds.py converts what each writer appends)
WRITTEN: dict[str, dict[str, tuple[type, ...]]] = {
    "signals": {
        "signal": (SignalEvent, QuestionEvent),
        "routing": (RoutingEvent,),
        "disposition": (DispositionEvent,),
        "evidence-expired": (EvidenceExpiredEvent,),
        "overdue": (OverdueEvent,),
        "deadline-escalated": (DeadlineEscalatedEvent,),
        "advisory-withdrawn": (AdvisoryWithdrawnEvent,),
        "sensor-run": (SensorRunEvent,),
        "escalation-paged": (EscalationPagedEvent,),
        "prediction-outcome": (PredictionOutcomeEvent,),
    },
    "units": {
        "dispatch": (DispatchEvent,),
        "close": (CloseEvent,),
        "demote": (DemoteEvent,),
        "decision": (RecoveryDecisionEvent,),
        "result": (ResultEvent,),
        "lease-expired": (LeaseExpiredEvent,),
    },
    "memory": {"memory": (MemoryEvent,), "retraction": (RetractionEvent,)},
    "identity": {
        "proposal": (ProposalEvent,),
        "decision": (IdentityDecisionEvent, BaselineEvent),
        "dismissal": (DismissalEvent,),
    },
}
