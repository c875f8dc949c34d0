"""Every operator action in one registry: its key, its view, and why it may not be taken now.

Pure: the app asks `why_not` to show an action disabled with its reason, the palette lists them,
and the same engine call as the CLI does the write.
"""

from __future__ import annotations

import msgspec

from controlroom.readmodel import Snapshot, sectioned
from controlroom.views import BY_VIEW, VIEW_DEFS, Key
from engine.read import rules


class Action(msgspec.Struct, frozen=True):
    name: str
    key: str
    label: str
    view: str
    grant: str
    short: str  # the footer's word for it (narrow terminals keep every key)


ACTIONS = (
    Action("resolve", "r", "resolve obligation", "obligations", "resolve", "resolve"),
    Action("retract", "x", "retract memory entry", "memory", "retract", "retract"),
    Action("decide", "d", "record recovery decision", "units", "decide", "decide"),
    Action("accept", "y", "accept proposal", "identity", "accept", "accept"),
    Action("reject", "n", "reject proposal", "identity", "accept", "reject"),
    Action("ack", "c", "acknowledge finding (commits)", "registers", "ack", "ack"),
    Action("resolve-finding", "r", "resolve finding (commits)", "registers", "ack", "resolve"),
    Action("dismiss", "d", "dismiss a line verify names (signed)", "registers", "accept", "dismiss"),
    Action("outcome", "o", "record prediction outcome", "signals", "resolve", "outcome"),
)
BY_NAME = {a.name: a for a in ACTIONS}


def why_not(action: Action, snap: Snapshot, key: Key | None) -> str | None:
    """None when the operator may take the action on this row; otherwise the reason, in words:
    the engine's rule for the action (engine.read.rules), as the command would refuse it."""
    if snap.person is None:
        return "no operator: start the control room with --as PERSON"
    if not snap.known:
        return "no regulator stores here (a clone): act on the host"
    people = snap.people
    if people is None:  # the interaction policy could not be read
        return "the interaction policy cannot be read (run `regulator identity verify`)"
    person = snap.person
    denied = rules.lacks(people, person, action.grant, action.label)
    if denied is not None:
        return denied.short
    if key is None:
        return "no row selected"
    state = snap.state
    kind, ident = sectioned(key)  # the other views' rows are keyed by the id itself (kind "")
    if action.name == "resolve":
        ob = None if kind else state.obligations.get(ident)
        if ob is None:
            return "no obligation selected"
        denied = rules.resolving(people, person, ob)
    elif action.name == "retract":
        entry = None if kind else state.memory.get(ident)
        if entry is None:
            return "no memory entry selected"
        denied = rules.retracting(people, person, entry)
    elif action.name == "decide":
        unit = None if kind else state.units.get(ident)
        if unit is None:
            return "no unit selected"
        denied = rules.deciding_unit(people, person, state, unit)
    elif action.name == "outcome":  # the answer is asked next: whether it may be "no" is judged then
        if kind or ident not in state.signals:
            return "no signal selected"
        denied = rules.recording_outcome(people, person, state, ident)
    elif action.name in ("ack", "resolve-finding"):
        from engine.read.ladder import registers_of

        finding = finding_of(snap, key)
        found = registers_of(snap.ws, state).findings.get(finding) if finding else None
        if found is None:
            return "select a finding"
        if action.name == "ack":
            from engine.read.ladder import unratified_in
            from registry.trunkwalk import TrunkFindings

            trunk = registers_of(snap.ws, state).trunk  # walked by the snapshot's worker, never here
            pending = unratified_in(trunk, found) if isinstance(trunk, TrunkFindings) else None
            denied = rules.acking(people, person, found, pending)
        else:
            from engine.read.ladder import holds_in, undecided_in

            trunk = registers_of(snap.ws, state).trunk  # walked by the snapshot's worker, never here
            denied = rules.resolving_finding(
                people, person, found, holds_in(snap.stale, found.id), undecided_in(trunk, found.path)
            )
    elif action.name == "dismiss":
        if kind not in ("bad", "verify"):
            return "select a bad store line or a verify finding"
        target = dismissable(snap, key)
        if target is None:
            return "verify does not name this line as a store line (a checkpoint is not dismissed)"
        return None
    else:
        if kind != "proposal" or ident not in state.proposals:
            return "select a proposal"
        verdict = "accepted" if action.name == "accept" else "rejected"
        denied = rules.deciding_proposal(people, person, state, ident, verdict)
    return None if denied is None else denied.short


def finding_of(snap: Snapshot, key: Key) -> str | None:
    """The finding a Registers row names: the finding itself, or a lint issue about one (the
    `awaits-ack` notice is where an operator looks for the ack)."""
    kind, ident = sectioned(key)
    if kind == "finding":
        return ident
    if kind == "lint" and snap.lint is not None and ident.isdigit() and int(ident) < len(snap.lint.issues):
        entry = snap.lint.issues[int(ident)].entry
        return entry if entry.startswith("F-") else None
    return None


def dismissable(snap: Snapshot, key: Key) -> str | None:
    """`STORE:LINE` of the line a Registers row names, when `verify` names it undismissed (what
    `verify --dismiss` takes); None otherwise."""
    kind, ident = sectioned(key)
    named = {(f.store, f.line) for f in snap.verify}  # undismissed only (readmodel.compute_checks)
    if kind == "verify" and ident.isdigit() and int(ident) < len(snap.verify):
        found = snap.verify[int(ident)]
        where = (found.store, found.line)
    elif kind == "bad" and ident.isdigit() and int(ident) < len(snap.state.problems):
        problem = snap.state.problems[int(ident)]
        where = (
            problem.store if problem.store.endswith(".ndjson") else f"{problem.store}.ndjson",
            problem.line,
        )
    else:
        return None
    if where not in named or not where[0].endswith(".ndjson"):
        return None
    return f"{where[0].removesuffix('.ndjson')}:{where[1]}"


def for_view(view: str) -> list[Action]:
    """The actions a view offers, in the order its definition lists them."""
    return [BY_NAME[name] for name in BY_VIEW[view].actions]


# each action belongs to the one view whose definition lists it
assert {(name, v.name) for v in VIEW_DEFS for name in v.actions} == {(a.name, a.view) for a in ACTIONS}
