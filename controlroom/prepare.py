"""What each action's dialog shows, read in a worker off Textual's event loop (a routing
proposal's replay of every signal, a proposal's review, the registers, the preview of every
recovery action): the UI only opens the dialog with it; and the engine call its answer makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controlroom import readmodel
from controlroom.actions import finding_of
from controlroom.lifecycle import decision_preview
from controlroom.views import Key
from engine.checkout.workspace import Workspace
from widgets.dialogs import Answer


@dataclass(frozen=True)
class ResolveContent:
    obligation: str
    summary: str
    dispositions: tuple[str, ...]


@dataclass(frozen=True)
class RetractContent:
    entry: str
    summary: str


@dataclass(frozen=True)
class DecideContent:
    unit: str
    actions: tuple[str, ...]
    previews: dict[str, list[str]]  # each action's preview (engine.read.rules.recovery), read ahead


@dataclass(frozen=True)
class AckContent:
    finding: str
    title: str
    path: str


@dataclass(frozen=True)
class ProposalContent:
    proposal: str
    verdict: str  # accept | reject
    summary: str
    review: list[str]
    replay: list[str]  # accepting a routing policy: what it would have changed (SPEC §20)


Content = ResolveContent | RetractContent | DecideContent | AckContent | ProposalContent


def content(snap: readmodel.Snapshot, name: str, key: Key) -> Content:
    """The dialog of action `name` on row `key`, from `snap` (whose state is the worker's own
    copy: readmodel.frozen). KeyError when the row is gone."""
    state, ws = snap.state, snap.ws
    if name == "resolve":
        from engine.commands.obligations import DISPOSITIONS

        ob = state.obligations[readmodel.plain(key)]
        return ResolveContent(ob.id, f"{ob.severity} on {ob.unit or '(no unit)'}: {ob.subject}", DISPOSITIONS)
    if name == "retract":
        entry_id = readmodel.plain(key)
        event = state.memory[entry_id].event
        return RetractContent(entry_id, f"{event['subject']}: {event['note']}")
    if name == "decide":
        from engine.read.model import RECOVERY_ACTIONS

        unit_id = readmodel.plain(key)
        previews = {action.value: decision_preview(snap, unit_id, action) for action in RECOVERY_ACTIONS}
        return DecideContent(unit_id, tuple(a.value for a in RECOVERY_ACTIONS), previews)
    if name == "ack":
        from engine.read.ladder import registers_of

        ident = finding_of(snap, key) or ""
        finding = registers_of(ws, state).findings[ident]
        return AckContent(ident, finding.fields["title"], str(finding.path))
    from engine.commands.proposals import review

    ident = readmodel.sectioned(key)[1]
    proposal = state.proposals[ident]
    verdict = "accept" if name == "accept" else "reject"
    replay: list[str] = []
    if verdict == "accept" and proposal["file"] == "regulator/policy/routing.yaml":
        from engine.commands.whatif import proposal_replay

        replay = proposal_replay(ws, proposal["content"], state)
    summary = f"{proposal['file']}: {proposal['rationale']}"
    return ProposalContent(ident, verdict, summary, review(ws, proposal), replay)


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
    if isinstance(found, AckContent):
        from engine.commands.registers import ack
        from engine.read.load import load

        finding = found.finding
        return (
            lambda: ack(ws, load(ws, stores=()), finding, person, commit=True),
            f"{finding} acknowledged and committed",
        )
    from engine.commands.proposals import decide as decide_proposal

    proposal, outcome = found.proposal, "accepted" if found.verdict == "accept" else "rejected"
    return (
        lambda: decide_proposal(ws, proposal, person, answer["rationale"], outcome),
        f"proposal {proposal} {outcome}" + (" and committed" if outcome == "accepted" else ""),
    )
