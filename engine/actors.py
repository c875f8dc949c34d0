"""Who is acting: a unit (stamped from its lease, never from an argument) or a named person."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import BadInput, Refused
from engine.limits import check_text
from engine.state import State, unit_status
from engine.workspace import Lease, Workspace


@dataclass(frozen=True)
class Actor:
    unit: str | None = None
    person: str | None = None
    lease: Lease | None = None


def check_person(by: str | None, field: str = "--by") -> str:
    if by is None:
        raise BadInput(f"{field}: name the person acting (e.g. --by alice)")
    return check_text(field, by, kind="name")


def unit_or_person(lease: Lease | None, by: str | None) -> Actor:
    """A unit-authored command takes a lease or --by, never both and never neither (exit 2)."""
    if lease is not None and by is not None:
        raise BadInput(
            "both a lease and --by given: a unit acts from its lease, a person with --by; give one"
        )
    if lease is None and by is None:
        raise BadInput(
            "no lease here and no --by: run inside a leased worktree, pass --lease FILE, "
            "or name a person with --by"
        )
    if lease is not None:
        return Actor(unit=lease.unit, lease=lease)
    return Actor(person=check_person(by))


def check_lease(state: State, lease: Lease) -> None:
    """A lease file is honoured only while it matches the unit's current lease."""
    unit = state.units.get(lease.unit)
    if unit is None or unit_status(state, unit) != "in-progress" or unit.lease != lease.lease:
        raise Refused(
            f"lease {lease.lease} for unit {lease.unit} is not the unit's current lease "
            "(stale or edited); ask the host to dispatch the unit again"
        )


def unit_tools(ws: Workspace, state: State, unit_id: str) -> tuple[str, str, tuple[str, ...]]:
    """(type, profile, tools) of a unit, from its contract and the profiles policy."""
    contract = state.contracts.get(unit_id)
    if contract is None:
        raise Refused(f"unit {unit_id} has no contract under contracts/; its lease grants nothing")
    profile = ws.profiles().profiles.get(contract.profile)
    tools = profile.tools if profile is not None else ()
    return contract.type, contract.profile, tools


def require_grant(ws: Workspace, person: str, grant: str, doing: str) -> None:
    policy = ws.interaction()
    if person not in policy.people:
        raise Refused(
            f"{person!r} is not a person in regulator/policy/interaction.yaml; "
            f"only a named person with the {grant} grant may {doing}"
        )
    if not policy.may(person, grant):
        raise Refused(f"{person} lacks the {grant} grant needed to {doing} (interaction.yaml)")
