"""The timed duties of design §24, each a plain function `(workspace, now) -> Outcome`, as `serve`'s
tick runs them (§22; `regulator serve --once-tick` runs one tick by hand):

- evidence: a signal whose `expiresAt` passed while an obligation it opened is open gets one
  `evidence-expired` event, which opens one advisory `recheck` obligation owed to S3;
- deadlines: an obligation open past its severity's deadline gets one `overdue` and one
  `deadline-escalated` event (naming the policy's `escalate` people), and `notify` runs once with
  the escalation's JSON on its standard input;
- sensors: each declared sensor that is due runs (engine.commands.sensors).

Each writes host events with ids derived from what they are about, inside the decide lock (taken
here unless the caller holds it), so a duty run twice writes once. None resolves, approves or
releases anything: time marks and asks; a person decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engine.base import clock, confine, ids
from engine.checkout.workspace import Workspace
from engine.commands.duty import Duty, Outcome, deciding
from engine.commands.sensors import run_due
from engine.commands.trunkfiles import not_trunks
from engine.commands.units import seen
from engine.commands.written import (
    DeadlineEscalatedEvent,
    EscalationPagedEvent,
    EvidenceExpiredEvent,
    OverdueEvent,
)
from engine.log.store import canonical
from engine.read.deadlines import Deadlines
from engine.read.load import load
from engine.read.model import EventKind, ObligationKind, ObligationStatus, State
from engine.read.worldfold import reporter
from identity.policy import RoutingPolicy

NOTIFY_TIMEOUT_S = 30
NOTIFY_AT_ONCE = 16  # notifies run at once in a tick (each in its own process group)
RECHECK_SEVERITY = "advisory"
NO_NOTIFY = "routing.yaml sets no notify"  # an escalation's page where no notify is set (D-323)
MAX_PROBLEM = 500  # characters of a failed notify's problem kept on its escalation


# ---- stale evidence ---------------------------------------------------------------------------


def evidence_events(state: State, policy: RoutingPolicy, now: datetime) -> list[EvidenceExpiredEvent]:
    """The evidence-expired events due at `now`: one per signal whose expiry has passed while an
    obligation it opened is open, each opening the signal's one recheck obligation."""
    world = state.world
    by_signal: dict[str, list[str]] = {}
    for ob in state.obligations.values():
        if (
            ob.kind == ObligationKind.INTELLIGENCE
            and ob.status == ObligationStatus.OPEN
            and ob.expires_at is not None
            and ob.expires_at <= now
            and ob.source not in world.expired
        ):
            by_signal.setdefault(ob.source, []).append(ob.id)
    severity = (
        RECHECK_SEVERITY
        if RECHECK_SEVERITY in policy.severities
        else policy.rules["intelligence-signal"].at_or_above
    )
    blocks = policy.rank(severity) >= policy.rank(policy.blocks_at_or_above)
    owed = policy.rules["intelligence-signal"].owed_to
    events: list[EvidenceExpiredEvent] = []
    for signal_id, obligations in by_signal.items():
        event_id = ids.derived_id(EventKind.EVIDENCE_EXPIRED, signal_id)
        if event_id in world.ids:
            continue
        signal = state.signals[signal_id]
        who = reporter(signal)
        events.append(
            {
                "id": event_id,
                "kind": EventKind.EVIDENCE_EXPIRED.value,
                "signal": signal_id,
                "expiresAt": signal.get("expiresAt"),
                "obligations": sorted(obligations),
                "reporter": who,
                "opens": {
                    "id": ids.recheck_obligation_id(signal_id),
                    "kind": ObligationKind.RECHECK,
                    "unit": None,
                    "severity": severity,
                    "blocks": blocks,
                    "owedTo": owed,
                },
                "reason": f"evidence expired at {signal.get('expiresAt')} while {len(obligations)} "
                f"obligation(s) it opened were open; recheck: ask {who} again",
                "at": clock.iso(now),
            }
        )
    return events


def expire_evidence(ws: Workspace, now: datetime) -> Outcome:
    """The stale-evidence duty (design §24): mark, and re-ask; never resolve."""
    policy = ws.routing()
    with deciding(ws):
        state = load(ws, now, stores=("signals",))
        store = ws.store("signals")
        marks = seen(ws, state, "signals")
        written = [
            store.append(event | {"seen": marks})["id"] for event in evidence_events(state, policy, now)
        ]
    return Outcome("evidence", written)


# ---- deadlines --------------------------------------------------------------------------------


def deadline_events(
    state: State, policy: RoutingPolicy, now: datetime
) -> list[OverdueEvent | DeadlineEscalatedEvent]:
    """One overdue and one deadline-escalated event for each open obligation past its deadline
    that has not had them."""
    world = state.world
    deadlines = Deadlines.of(policy, now)
    events: list[OverdueEvent | DeadlineEscalatedEvent] = []
    for ob in state.obligations.values():
        if not deadlines.overdue(ob):
            continue
        overdue: OverdueEvent = {
            "id": ids.derived_id(EventKind.OVERDUE, ob.id),
            "kind": EventKind.OVERDUE.value,
            "obligation": ob.id,
            "unit": ob.unit,
            "severity": ob.severity,
            "deadline": policy.deadlines[ob.severity],
            "dueAt": deadlines.due(ob),
            "at": clock.iso(now),
        }
        if ob.id not in world.overdue:
            events.append(overdue)
        if ob.id not in world.escalated:
            escalated: DeadlineEscalatedEvent = {
                **overdue,
                "id": ids.derived_id(EventKind.DEADLINE_ESCALATED, ob.id),
                "kind": EventKind.DEADLINE_ESCALATED.value,
                "people": list(policy.escalate),
                "subject": ob.subject,
            }
            events.append(escalated)
    return [e for e in events if e["id"] not in world.ids]


def check_deadlines(ws: Workspace, now: datetime) -> Outcome:
    """The deadline duty (design §24): overdue, escalated, notified once; never resolved.

    The escalation is written first (a host ticking meanwhile finds it and pages no one again).
    Where routing.yaml sets `notify`, it runs once for each escalation written here (outside the
    decide lock), and an `escalation-paged` event then records what it did: `sent`, or not and
    why (not run, not finished, not exiting 0). Where routing.yaml sets none, the escalation itself
    says so (`notify: {"sent": false, "problem": NO_NOTIFY}`). Either way an escalation that paged
    no one is said on its obligation (`notPaged`, `(not paged)`, its lifecycle, the header's count),
    not only in serve's log (D-315, D-323). A host that stops between a notify and its record
    leaves that escalation with no word of its page."""
    policy = ws.routing()
    if not policy.deadlines:
        return Outcome("deadlines", note="routing.yaml sets no deadlines")
    with deciding(ws):
        state = load(ws, now, stores=("signals", "units"))
        events: list[OverdueEvent | DeadlineEscalatedEvent] = []
        for event in deadline_events(state, policy, now):
            if event["kind"] == EventKind.DEADLINE_ESCALATED and not policy.notify:
                # recorded, so never taken for a page that went out (an operator's re-check, D-323)
                event["notify"] = {"sent": False, "problem": NO_NOTIFY}  # type: ignore[typeddict-unknown-key]
            events.append(event)
        written = _append(ws, now, events, state)
    outcome = Outcome("deadlines", [e["id"] for e in written])
    escalated: list[dict] = (
        [e for e in written if e["kind"] == EventKind.DEADLINE_ESCALATED] if policy.notify else []
    )
    if not escalated:
        return outcome
    # at once, NOTIFY_AT_ONCE at a time: one after another, fifty escalations and a webhook that
    # never answers held the tick (and the lease expiry after it) for fifty times 30 s
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(NOTIFY_AT_ONCE, len(escalated))) as pool:
        problems = list(pool.map(lambda event: notify(ws, policy.notify, event), escalated))
    pages: list[EscalationPagedEvent] = []
    for escalation, problem in zip(escalated, problems, strict=True):
        people = escalation.get("people")
        page: EscalationPagedEvent = {
            "id": ids.derived_id(EventKind.ESCALATION_PAGED, escalation["obligation"]),
            "kind": EventKind.ESCALATION_PAGED.value,
            "obligation": escalation["obligation"],
            "escalation": escalation["id"],
            "people": [str(p) for p in people] if isinstance(people, list) else [],
            "sent": not problem,
            "at": clock.iso(now),
        }
        if problem:
            outcome.errors.append(f"notify for {escalation['obligation']}: {problem}")
            page["problem"] = problem[:MAX_PROBLEM]
        pages.append(page)
    with deciding(ws):  # stamped when written: the notifies took up to NOTIFY_TIMEOUT_S
        recorded = [e["id"] for e in _append(ws, max(now, clock.now()), pages)]
    outcome.written += recorded
    for page in pages:  # a line with its id already there is not this host's (an adversarial review:
        # a unit sharing the account wrote "sent" first, and the host dropped its own record unsaid)
        if page["id"] not in recorded:
            outcome.errors.append(
                f"notify for {page['obligation']}: what it did was not recorded: a line with its record's "
                "id is already in signals.ndjson, written by no host (`regulator verify`)"
            )
    return outcome


def _append(
    ws: Workspace,
    now: datetime,
    events: Sequence[OverdueEvent | DeadlineEscalatedEvent | EscalationPagedEvent],
    state: State | None = None,
) -> list[dict]:
    """Append those of `events` no host has written yet (the stores read again unless `state` is
    this lock's read: a duty run twice writes once), each stamped `now` and with how far this host
    had folded (`seen`); the events as written. Inside the decide lock."""
    if not events:
        return []
    state = state or load(ws, now, stores=("signals", "units"))
    store = ws.store("signals")
    marks = seen(ws, state, "signals")
    fresh = [e for e in events if e["id"] not in state.world.ids]
    return [store.append(event | {"at": clock.iso(now), "seen": marks}) for event in fresh]


def notify(ws: Workspace, argv: tuple[str, ...], event: dict) -> str:
    """Run the policy's `notify` once for an escalation, the event's JSON (as written) on its
    standard input; the problem in one line ("" when it ran and exited 0). Not retried: its
    escalation-paged event records what became of it (check_deadlines)."""
    refused = not_trunks(ws, argv)
    if refused is not None:
        return f"not run: {refused}"
    ran = confine.run(argv, stdin=canonical(event) + b"\n", timeout=NOTIFY_TIMEOUT_S, cwd=ws.root)
    if ran.problem:
        return ran.problem
    if ran.code != 0:
        return ran.exited(" ".join(argv)[:200])
    return ""


# ---- the duties, as serve's tick runs them (engine.host.world registers them) ---------------------

DUTIES: dict[str, Duty] = {
    "evidence": expire_evidence,
    "deadlines": check_deadlines,
    "sensors": run_due,
}
