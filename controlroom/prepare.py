"""What each action's dialog shows, read in a worker off Textual's event loop (a routing
proposal's replay of every signal, a proposal's review, the registers, the preview of every
recovery action): the UI only opens the dialog with it (`dialog`); and the engine call its answer
makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from controlroom import meanings, readmodel
from controlroom.actions import dismissable, finding_of
from controlroom.lifecycle import decision_preview
from controlroom.views import Key
from engine.checkout.workspace import Workspace
from widgets.dialogs import (
    AckDialog,
    Answer,
    DecideDialog,
    DismissDialog,
    OutcomeDialog,
    ProposalDialog,
    ResolveDialog,
    ResolveFindingDialog,
    RetractDialog,
)

if TYPE_CHECKING:
    from textual.screen import Screen


class ResolveContent(msgspec.Struct, frozen=True):
    obligation: str
    summary: str
    dispositions: dict[str, str]  # each allowed disposition and what it means, in the order shown
    question: bool = False  # a unit's question: answered, the answer signed (design §22)
    notes: tuple[str, ...] = ()  # what the write will not say (engine.commands.obligations.after_resolving)


class RetractContent(msgspec.Struct, frozen=True):
    entry: str
    summary: str


class DecideContent(msgspec.Struct, frozen=True):
    unit: str
    actions: dict[str, str]  # each recovery action and what it means
    previews: dict[str, list[str]]  # each action's preview (engine.read.rules.recovery), read ahead


class OutcomeContent(msgspec.Struct, frozen=True):
    signal: str
    summary: str
    resolves_at: str


class AckContent(msgspec.Struct, frozen=True):
    finding: str
    title: str
    path: str
    affects: list[str]
    resolve: bool = False  # `resolve-finding`: resolved, not acknowledged


class DismissContent(msgspec.Struct, frozen=True):
    target: str
    message: str
    leaves: str  # what the line still does once dismissed (engine.commands.verification.dismissal_leaves)


class ProposalContent(msgspec.Struct, frozen=True):
    proposal: str
    verdict: str  # accept | reject
    summary: str  # the proposer's rationale
    review: list[str]
    replay: list[str]  # accepting a routing policy: what it would have changed (design §20)
    subject: str = ""  # `FILE, proposed by unit r1`


Content = (
    ResolveContent
    | RetractContent
    | DecideContent
    | OutcomeContent
    | AckContent
    | DismissContent
    | ProposalContent
)


def content(snap: readmodel.Snapshot, name: str, key: Key) -> Content:
    """The dialog of action `name` on row `key`, from `snap` (whose state is the worker's own
    copy: readmodel.frozen). KeyError when the row is gone."""
    state, ws = snap.state, snap.ws
    if name == "resolve":
        from engine.read.model import ObligationKind
        from engine.read.rules import dispositions_for

        ob = state.obligations[readmodel.plain(key)]
        allowed = dispositions_for(ob)
        question = ob.kind == ObligationKind.QUESTION
        if question:  # a unit's question: answered first, the answer signed
            summary = f"question from {ob.unit or '(no unit)'}: {ob.subject}"
            allowed = ("answered", *[d for d in allowed if d != "answered"])
        else:
            summary = f"{ob.severity} on {ob.unit or '(no unit)'}: {ob.subject}"
        from engine.commands.obligations import after_resolving

        notes = tuple(after_resolving(ws, state, ob, lambda unit: bool(snap.stale.get(unit))))
        return ResolveContent(ob.id, summary, {d: meanings.DISPOSITIONS[d] for d in allowed}, question, notes)
    if name == "retract":
        entry_id = readmodel.plain(key)
        event = state.memory[entry_id].event
        return RetractContent(entry_id, f"{event['subject']}: {event['note']}")
    if name == "decide":
        from engine.read.model import RECOVERY_ACTIONS

        unit_id = readmodel.plain(key)
        previews = {action.value: decision_preview(snap, unit_id, action) for action in RECOVERY_ACTIONS}
        return DecideContent(unit_id, dict(meanings.RECOVERY), previews)
    if name == "outcome":
        signal_id = readmodel.plain(key)
        signal = state.signals[signal_id]
        return OutcomeContent(
            signal_id, f"{signal['subject']}: {signal['claim']}", signal["prediction"]["resolvesAt"]
        )
    if name in ("ack", "resolve-finding"):
        from engine.read.ladder import registers_of

        ident = finding_of(snap, key) or ""
        finding = registers_of(ws, state).findings[ident]
        affects = list(finding.fields.get("affects") or [])
        return AckContent(
            ident, finding.fields["title"], str(finding.path), affects, name == "resolve-finding"
        )
    if name == "dismiss":
        from engine.commands.verification import dismissal_leaves

        target = dismissable(snap, key) or ""
        store, _, line = target.partition(":")
        said = [f for f in snap.verify if f.store == f"{store}.ndjson" and str(f.line) == line]
        leaves = dismissal_leaves(store, said)
        return DismissContent(target, " · ".join(readmodel.row("registers", snap, key)[2:]), leaves)
    from engine.commands.proposals import proposed_by, review

    ident = readmodel.sectioned(key)[1]
    proposal = state.proposals[ident]
    verdict = "accept" if name == "accept" else "reject"
    replay: list[str] = []
    if verdict == "accept" and proposal["file"] == "regulator/policy/routing.yaml":
        from engine.commands.whatif import proposal_replay

        replay = proposal_replay(ws, proposal["content"], state)
    subject = f"{proposal['file']}, proposed by {proposed_by(proposal)}"
    return ProposalContent(ident, verdict, str(proposal["rationale"]), review(ws, proposal), replay, subject)


def write(
    ws: Workspace, person: str | None, found: Content, answer: Answer
) -> tuple[Callable[[], object], str]:
    """The engine call a confirmed dialog makes (the CLI's own), and what to tell the operator."""
    if isinstance(found, ResolveContent):
        from engine.commands.obligations import resolve

        ob_id, disposition = found.obligation, answer["disposition"]
        return (
            lambda: resolve(ws, ob_id, person, disposition, answer["rationale"]),
            f"obligation {ob_id} resolved: {disposition}",
        )
    if isinstance(found, RetractContent):
        from engine.commands.memory import retract

        entry_id = found.entry
        return lambda: retract(ws, entry_id, person, answer["reason"]), f"memory entry {entry_id} retracted"
    if isinstance(found, DecideContent):
        from engine.commands.units import decide

        unit_id, action = found.unit, answer["action"]
        return lambda: decide(
            ws, unit_id, action, person, answer["rationale"]
        ), f"{unit_id}: {action} recorded"
    if isinstance(found, OutcomeContent):
        from engine.commands.predictions import resolve_prediction

        signal_id, came_true = found.signal, answer["cameTrue"]
        said = "came true" if came_true == "yes" else "did not come true"
        return (
            lambda: resolve_prediction(ws, signal_id, came_true, person, answer["rationale"]),
            f"signal {signal_id}: the prediction {said} (recorded, signed)",
        )
    if isinstance(found, AckContent) and found.resolve:
        from engine.commands.registers import resolve_finding
        from engine.read.load import load

        finding = found.finding
        return (
            lambda: resolve_finding(
                ws, load(ws, stores=()), finding, person, answer["rationale"], commit=True
            ),
            f"{finding} resolved and committed",
        )
    if isinstance(found, AckContent):
        from engine.commands.registers import ack
        from engine.read.load import load

        finding = found.finding
        return (
            lambda: ack(ws, load(ws, stores=()), finding, person, commit=True),
            f"{finding} acknowledged and committed",
        )
    if isinstance(found, DismissContent):
        from engine.commands.verification import dismiss

        target = found.target
        return (
            lambda: dismiss(ws, target, person, answer["rationale"]),
            f"{target} dismissed (signed); {found.leaves}",
        )
    from engine.commands.proposals import decide as decide_proposal

    proposal, outcome = found.proposal, "accepted" if found.verdict == "accept" else "rejected"
    return (
        lambda: decide_proposal(ws, proposal, person, answer["rationale"], outcome),
        f"proposal {proposal} {outcome}" + (" and committed" if outcome == "accepted" else ""),
    )


def dialog(found: Content) -> Screen[Answer | None]:
    """The dialog that asks the operator's answer to what was prepared (widgets.dialogs)."""
    if isinstance(found, ResolveContent):
        return ResolveDialog(
            found.obligation, found.summary, found.dispositions, question=found.question, notes=found.notes
        )
    if isinstance(found, RetractContent):
        return RetractDialog(found.entry, found.summary)
    if isinstance(found, DecideContent):
        previews = found.previews
        return DecideDialog(found.unit, found.actions, lambda action: previews.get(action, []))
    if isinstance(found, AckContent):
        made = ResolveFindingDialog if found.resolve else AckDialog
        return made(found.finding, found.title, found.path, found.affects)
    if isinstance(found, OutcomeContent):
        return OutcomeDialog(found.signal, found.summary, found.resolves_at)
    if isinstance(found, DismissContent):
        return DismissDialog(found.target, found.message, found.leaves)
    return ProposalDialog(
        found.proposal, found.verdict, found.summary, found.review, found.replay, found.subject
    )
