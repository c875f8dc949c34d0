"""Is this unit held, and by what (design §4.3, §26): the one answer the dispatch and close vetoes,
the fold's judgement of a host's dispatch or close, Next-up, status, --once and the control room ask.

"Held" means one thing everywhere: a unit is held by its open blocking obligations and by the
unresolved findings that name it, as trunk and the working tree hold them (stale knowledge,
engine.read.ladder); a waiting unit also waits on its recovery decision's obligation. A closed or
aborted unit is held by nothing: its work is over and it is never dispatched again (D-272); what
was opened on it stays open, and blocking, in every listing of obligations. `holding`
says whether one obligation holds: now, or at an event's time."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.base import clock
from engine.checkout.workspace import Workspace
from engine.log.store import SKEW_S
from engine.read.model import (
    Obligation,
    ObligationKind,
    ObligationStatus,
    ResultOutcome,
    State,
    UnitState,
    UnitStatus,
)
from engine.read.queries import unit_status
from engine.read.rules import Denied

_OPEN = ObligationStatus.OPEN  # bound once (engine.read.queries says why)
# two hosts' clocks, each within SKEW_S of the server's (design §18): across stores only times order
# events, so an obligation holds an event only when it opened (and stayed open) this far around it
ORDERED = timedelta(seconds=2 * SKEW_S)


def holding(ob: Obligation, when: datetime | None = None, opened: datetime | None = None) -> bool:
    """Whether a blocking obligation holds its unit: now (`when` None) while it is open; at an
    event's time `when` (`opened`: the time it opened, parsed) when it opened more than ORDERED
    before and was still open ORDERED after, so a host's honest line is never judged held, and
    under a pinned clock (every time the same) none is."""
    if not ob.blocks:
        return False
    if when is None:
        return ob.status == _OPEN
    if opened is None or when - opened <= ORDERED:
        return False
    if ob.status != _OPEN:
        closed = clock.moment(ob.closed_at)
        if closed is None or closed - when <= ORDERED:
            return False
    return True


def blocking(state: State) -> dict[str, list[Obligation]]:
    """unit id -> the obligations holding it now (one pass over every obligation)."""
    index: dict[str, list[Obligation]] = {}
    for ob in state.obligations.values():
        if ob.blocks and ob.unit and holding(ob):  # `blocks` first: most obligations do not (a call saved)
            index.setdefault(ob.unit, []).append(ob)
    return index


@dataclass(frozen=True)
class Holds:
    """What holds each unit now: `obligations` (open, blocking) and `findings` (unresolved, naming
    it: stale knowledge; read from the registers when first asked)."""

    ws: Workspace
    state: State
    obligations: dict[str, list[Obligation]]

    @functools.cached_property
    def findings(self) -> dict[str, list[str]]:
        from engine.read.ladder import stale_knowledge  # registers are read only when asked

        return {
            u: by for u, by in stale_knowledge(self.ws, self.state).items() if not finished(self.state, u)
        }

    @functools.cached_property
    def blind(self) -> str:
        """Why trunk's history cannot be read where the stores are ("" when it can): then every
        finding holds what it names, resolved or not (engine.read.ladder.stale_knowledge, D-201)."""
        from engine.read.ladder import blind_why

        return blind_why(self.ws, self.state)

    def held(self, unit_id: str) -> bool:
        return bool(self.obligations.get(unit_id) or self.findings.get(unit_id))

    def units(self) -> set[str]:
        """Every unit held, by an obligation or a finding."""
        return {u for u, by in self.obligations.items() if by} | {u for u, by in self.findings.items() if by}


def finished(state: State, unit_id: str) -> bool:
    """Closed or aborted: the unit's work is over and no veto of it is ever asked again."""
    unit = state.units.get(unit_id)
    return unit is not None and unit_status(state, unit) in (UnitStatus.CLOSED, UnitStatus.ABORTED)


def holds(ws: Workspace, state: State) -> Holds:
    return Holds(ws, state, {u: by for u, by in blocking(state).items() if not finished(state, u)})


AWAITING_CLOSE, READY_TO_CLOSE, AWAITING_DECISION = "awaiting close", "ready to close", "awaiting decision"


def result_waits(
    state: State, unit: UnitState, holding: list[Obligation] | None = None, flagged: bool = False
) -> str | None:
    """What an in-progress unit whose lease recorded a result waits for (design §23), or None:
    `awaiting close` (done, and a hold vetoes its close: a person's disposition first), `ready to
    close` (done, and no obligation holds it: `regulator unit close` closes it; an operator's review
    found such a unit shown as plainly in progress, its lease never expiring), `awaiting decision`
    (failed or blocked: a person records a recovery decision). `holding`: the obligations holding it
    now (blocking()), when the caller has them; `flagged`: an unresolved finding holds it too
    (Holds.findings: "held" is one thing, and a finding vetoes the close as an obligation does)."""
    result = unit.result
    if result is None or unit_status(state, unit) != UnitStatus.IN_PROGRESS:
        return None
    if result.outcome != ResultOutcome.DONE:
        return AWAITING_DECISION
    if holding is None:
        holding = blocking(state).get(unit.id, [])
    return AWAITING_CLOSE if holding or flagged else READY_TO_CLOSE


def awaiting_close(state: State, unit: UnitState, holding: list[Obligation] | None = None) -> bool:
    """In progress with a `done` result recorded for its lease, and a hold that vetoes its close
    (result_waits): the unit's work is over, a person's disposition is not."""
    return result_waits(state, unit, holding) == AWAITING_CLOSE


def _describe(state: State, ob: Obligation) -> str:
    if ob.kind == ObligationKind.RECOVERY_DECISION:
        return f"{ob.id} ({ob.severity}, recovery decision {ob.source})"
    if ob.kind == ObligationKind.RECOVERY:
        return f"{ob.id} ({ob.severity}, recovery after result {ob.source})"
    signal = state.signals.get(ob.source, {})
    return f"{ob.id} ({ob.severity}, signal {ob.source}: {signal.get('subject', '?')})"


def _flagged(found: Holds, unit: UnitState, doing: str) -> Denied | None:
    findings = found.findings.get(unit.id)
    if not findings:
        return None
    if found.blind:
        text = (
            f"{doing} of {unit.id} vetoed: stale-knowledge from finding(s) {', '.join(findings)}: trunk's "
            f"history cannot be read here ({found.blind}), so every finding holds what it names, resolved "
            "or not; make trunk readable first (`regulator registry lint` says the same)"
        )
        return Denied(text, text)
    text = (
        f"{doing} of {unit.id} vetoed: stale-knowledge from unresolved finding(s) "
        f"{', '.join(findings)}; resolve the finding first, on trunk "
        f"(regulator registry resolve {findings[0]} --by PERSON --rationale R --commit): "
        "an edit not committed to trunk with Authorized-by adds a hold, never lifts one"
    )
    return Denied(text, text)


def _held(state: State, found: Holds, unit: UnitState, doing: str) -> Denied | None:
    by = found.obligations.get(unit.id)
    if not by:
        return None
    named = "; ".join(_describe(state, ob) for ob in by)
    text = (
        f"{doing} of {unit.id} vetoed: held by open obligation(s) {named}; "
        "resolve them with `regulator obligation resolve`"
    )
    return Denied(text, text)


DISPATCHABLE = (UnitStatus.TODO, UnitStatus.LOST)  # a lost unit's lease expired: it may run again (§23)
_ENDED = (UnitStatus.CLOSED, UnitStatus.ABORTED)  # never dispatched again: more work is a new unit


def dispatch_veto(ws: Workspace, state: State, unit: UnitState) -> Denied | None:
    """Why the host may not dispatch the unit now: closed or aborted (never dispatched again,
    whatever holds it: said first, so the refusal does not send a person to resolve obligations
    for nothing), held, waiting, flagged by a finding, or not todo or lost."""
    status = unit_status(state, unit)
    if status in _ENDED:
        text = f"unit {unit.id} is {status}; dispatch needs a todo or lost unit"
        return Denied(text, text + _NEXT[status], bad_input=True)
    found = holds(ws, state)
    denied = _held(state, found, unit, "dispatch")
    if denied is not None:
        return denied
    if status == UnitStatus.WAITING:
        text = f"dispatch of {unit.id} vetoed: it waits on recovery decision obligation {unit.recovery}"
        return Denied(text, text)
    denied = _flagged(found, unit, "dispatch")
    if denied is not None:
        return denied
    if status not in DISPATCHABLE:
        text = f"unit {unit.id} is {status}; dispatch needs a todo or lost unit"
        return Denied(text, text + _next(state, unit, status), bad_input=True)
    return None


def _next(state: State, unit: UnitState, status: UnitStatus) -> str:
    """What a person does instead of the refused dispatch. A recorded result says it, as `status`
    does (an operator's review: a failed unit's refusal said "it runs under a lease already" and
    offered `unit close`, which closed it with no recovery decision, its recovery left open)."""
    waits = result_waits(state, unit, []) if status == UnitStatus.IN_PROGRESS else None
    if waits == AWAITING_DECISION:
        outcome = unit.result.outcome if unit.result is not None else "failed"
        return (
            f": its result is {outcome}, awaiting a recovery decision "
            f"(`regulator unit decide {unit.id} --action retry|repair|abort|…`)"
        )
    if waits == READY_TO_CLOSE:
        return f": its result is done and nothing holds it (`regulator unit close {unit.id}` closes it)"
    return _NEXT.get(status, "")


# what a person does instead, by the status that refused a dispatch (the command's full refusal)
_NEXT = {
    UnitStatus.CLOSED: ": its work is done; more work is a new unit (`regulator unit new`)",
    UnitStatus.ABORTED: ": a recovery decision aborted it; more work is a new unit (`regulator unit new`)",
    UnitStatus.IN_PROGRESS: (
        ": it runs under a lease already (`regulator unit close` it, or `regulator unit demote` it to todo)"
    ),
}


def close_veto(ws: Workspace, state: State, unit: UnitState) -> Denied | None:
    """Why the host may not close the unit now: held (by an obligation or a finding), or not in
    progress."""
    found = holds(ws, state)
    denied = _held(state, found, unit, "close") or _flagged(found, unit, "close")
    if denied is not None:
        return denied
    status = unit_status(state, unit)
    if status != UnitStatus.IN_PROGRESS:
        text = f"unit {unit.id} is {status}; close needs an in-progress unit"
        return Denied(text, text, bad_input=True)
    return None


# the statuses (as the units log alone folds them) a host never writes the event from: a dispatch
# over a live lease, a close of anything but an in-progress unit. Judged on the units log alone,
# so a fold from a checkpoint judges as a fold from the start. A waiting unit's dispatch is judged
# by its recovery obligation's times (a blocking obligation); a closed unit dispatched again is
# not judged: the veto refuses it, but synthetic logs (bench/generate.py) cycle so
REFUSED = {
    "dispatch": frozenset((UnitStatus.IN_PROGRESS,)),
    "close": frozenset(set(UnitStatus) - {UnitStatus.IN_PROGRESS}),
}

Span = tuple[datetime | None, Obligation]  # a blocking obligation and the time it opened


def host_veto(unit: UnitState, kind: str, when: datetime | None, spans: list[Span]) -> str | None:
    """Why a dispatch or close in the log counts for nothing: the host writes one only when the
    vetoes above pass, unsigned, so a line that a writer (a unit with the store's writer role, or
    sharing the operator's account) appended past them is judged again by the fold (design §15.0,
    §18). Its status before it must be one the host writes it from, and no blocking obligation
    may have held the unit at its time (`when`; `spans`, the unit's blocking obligations with the
    times they opened)."""
    status = unit.status
    if status in REFUSED[kind]:
        return f"host event: {kind} of {unit.id} while it was {status}, which no host writes (forged?)"
    if when is None:
        return f"host event: {kind} of {unit.id} without a UTC time (forged?)"
    for opened, ob in spans:
        if holding(ob, when, opened):
            return (
                f"host event: {kind} of {unit.id} while held by blocking obligation {ob.id} (opened "
                f"{ob.opened_at}): vetoed, so no host wrote it (forged?)"
            )
    return None
