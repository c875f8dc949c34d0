"""Every operator action in one registry: its key, its view, and why it may not be taken now.

Pure: the app asks `why_not` to show an action disabled with its reason, the palette lists them,
and the same engine call as the CLI does the write.
"""

from __future__ import annotations

from dataclasses import dataclass

from controlroom.readmodel import Snapshot
from engine.proposals import decision_of
from engine.queries import memory_status, unit_status


@dataclass(frozen=True)
class Action:
    name: str
    key: str
    label: str
    view: str
    grant: str


ACTIONS = (
    Action("resolve", "r", "resolve obligation", "obligations", "resolve"),
    Action("retract", "x", "retract memory entry", "memory", "retract"),
    Action("decide", "d", "record recovery decision", "units", "decide"),
    Action("accept", "y", "accept proposal", "identity", "accept"),
    Action("reject", "n", "reject proposal", "identity", "accept"),
)
BY_NAME = {a.name: a for a in ACTIONS}


def why_not(action: Action, snap: Snapshot, key: str | None) -> str | None:
    """None when the operator may take the action on this row; otherwise the reason, in words."""
    if snap.person is None:
        return "no operator: start the control room with --as PERSON"
    if not snap.known:
        return "no regulator stores here (a clone): act on the host"
    from identity.policy import InteractionPolicy  # loaded already: the snapshot read the policy

    policy = snap.policy
    if not isinstance(policy, InteractionPolicy):  # None: it could not be read
        return "the interaction policy cannot be read (run `regulator identity verify`)"
    person = policy.people.get(snap.person)
    if person is None:
        return f"{snap.person} is not a person in interaction.yaml"
    if action.grant not in person.grants:
        return f"{snap.person} lacks the {action.grant} grant"
    if key is None:
        return "no row selected"
    state = snap.state
    if action.name == "resolve":
        ob = state.obligations.get(key)
        if ob is None:
            return "no obligation selected"
        if ob.status != "open":
            return f"already {ob.status} by {ob.by}"
        if ob.severity not in person.resolve:
            return f"{snap.person} may not resolve {ob.severity} (resolve: {', '.join(person.resolve) or 'none'})"
        return None
    if action.name == "retract":
        entry = state.memory.get(key)
        if entry is None:
            return "no memory entry selected"
        if memory_status(entry, state.now.date()) == "retracted":
            return "already retracted"
        return None
    if action.name == "decide":
        unit = state.units.get(key)
        if unit is None:
            return "no unit selected"
        status = unit_status(state, unit)
        if status not in ("todo", "in-progress", "waiting"):
            return f"the unit is {status}"
        return None
    kind, _, ident = key.partition(":")
    if kind != "proposal" or ident not in state.proposals:
        return "select a proposal"
    decided = decision_of(state, ident)
    if decided is not None:
        return f"already {decided['decision']} by {decided['by']}"
    return None


def for_view(view: str) -> list[Action]:
    return [a for a in ACTIONS if a.view == view]
