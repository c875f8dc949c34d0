"""Who is acting: a unit (stamped from its lease, never from an argument) or a named person."""

from __future__ import annotations

import hashlib

import msgspec

from engine.base.errors import BadInput, LeaseRefused, Refused
from engine.base.limits import check_text
from engine.checkout import runs
from engine.checkout.workspace import Lease, Workspace, acting_as_unit
from engine.read.model import State
from engine.read.rules import lacks, lease_current, refuse, tool_lacking


class Actor(msgspec.Struct, frozen=True):
    unit: str | None = None
    person: str | None = None
    lease: Lease | None = None


def check_person(by: str | None, field: str = "--by", **texts: object) -> str:
    """The person acting, named. `texts` (option -> value): what the command requires besides, named in
    the same line where it is left out too (an operator's review: `--by`, then `--rationale`, one
    run each)."""
    if by is None:
        missing = [
            f"--{name.replace('_', '-')}" for name, value in texts.items() if value is None or value == ""
        ]
        more = f"; {', '.join(missing)}: required too" if missing else ""
        raise BadInput(f"{field}: name the person acting (e.g. --by alice){more}")
    return check_text(field, by, kind="name")


def lease_hash(token: str) -> str:
    """What the log keeps of a lease token (design §15.2): the token itself never reaches a store."""
    return hashlib.sha256(token.encode()).hexdigest()


def no_person_under_lease(lease: Lease | None, by: str | None) -> None:
    """A command given --by while a lease is in effect is refused (exit 2, design §15.2), a lease
    from the environment included (D-218)."""
    if lease is not None and by is not None:
        if lease.from_env:
            raise BadInput(f"a unit cannot act as a person: --by/--as is refused{acting_as_unit(lease.unit)}")
        raise BadInput(
            f"a unit cannot act as a person: --by/--as is refused under a lease ({lease.path}); "
            "persons act from their own shell, outside any leased worktree"
        )


def host_only(lease: Lease | None, unit_id: str | None = None) -> None:
    """Host operations are refused under a lease (exit 3); a unit may close only itself, except
    one `unit run` started: `unit run` closes it when it exits (D-218)."""
    if lease is not None and lease.from_env:
        raise Refused(f"a unit cannot run a host operation{acting_as_unit(lease.unit)}")
    if lease is not None and (unit_id is None or unit_id != lease.unit):
        raise Refused(f"a unit cannot run a host operation (under the lease of {lease.unit}); ask the host")


def through_door(lease: Lease, tool: str = "TOOL") -> None:
    """A unit `unit run` started writes through its door, never on the stores (exit 3, D-218);
    `tool`: the door's tool that does what the command would have."""
    if lease.from_env:
        raise Refused(
            f"a unit under `unit run` acts through its door: `regulator door call {tool}`"
            f"{acting_as_unit(lease.unit)}"
        )


def unit_or_person(lease: Lease | None, by: str | None, tool: str = "TOOL") -> Actor:
    """A unit-authored command takes a lease or --by, never both and never neither (exit 2);
    `tool`: the door's tool for it, named to a unit `unit run` started (through_door)."""
    no_person_under_lease(lease, by)
    if lease is None and by is None:
        raise BadInput(
            "no lease here and no --by: run inside a leased worktree, pass --lease FILE, "
            "or name a person with --by"
        )
    if lease is not None:
        through_door(lease, tool)
        return Actor(unit=lease.unit, lease=lease)
    return Actor(person=check_person(by))


def check_lease(ws: Workspace, state: State, lease: Lease) -> None:
    """A lease file is honoured only while it matches the unit's current lease, and, where a
    `unit run` holds that lease, only on its host while the run has its child (D-276: the one rule
    every way in asks, serve's door, the stdio door and a command given --lease)."""
    through_door(lease)
    unit = state.units.get(lease.unit)
    hashed = lease_hash(lease.lease)
    if unit is None or not lease_current(state, lease.unit, hashed):
        raise LeaseRefused(
            f"the lease in {lease.path} for unit {lease.unit} is not the unit's current lease "
            "(stale or edited); ask the host to dispatch the unit again"
        )
    if runs.elsewhere(ws, unit.run_on):
        raise LeaseRefused(
            f"the lease in {lease.path} for unit {lease.unit} belongs to a `unit run` on another host: "
            "only that host's door answers it"
        )
    if runs.over(ws, hashed, unit.run_on):
        raise LeaseRefused(
            f"the lease in {lease.path} for unit {lease.unit} belongs to a `unit run` that is over: "
            "it acts no more (its result, or a person's recovery decision, says what becomes of the unit)"
        )


def unit_tools(ws: Workspace, state: State, unit_id: str) -> tuple[str, str, tuple[str, ...]]:
    """(type, profile, tools) of a leased unit: type and profile as its dispatch recorded them
    (design §15.0; an edited contract grants nothing), tools from the profiles policy in force."""
    unit = state.units.get(unit_id)
    unit_type, profile_name = (unit.type, unit.profile) if unit is not None else (None, None)
    if unit_type is None or profile_name is None:
        raise Refused(f"unit {unit_id}'s dispatch recorded no type and profile; its lease grants nothing")
    profile = ws.profiles().profiles.get(profile_name)
    tools = profile.tools if profile is not None else ()
    return unit_type, profile_name, tools


def leased(ws: Workspace, state: State, lease: Lease, tool: str) -> tuple[str, str]:
    """(type, profile) of the unit whose lease calls `tool`: refused (exit 3) unless the lease is
    its current one and its profile grants the tool (engine.read.rules.tool_lacking)."""
    check_lease(ws, state, lease)
    unit_type, profile, tools = unit_tools(ws, state, lease.unit)
    refuse(tool_lacking(lease.unit, profile, tools, tool))
    return unit_type, profile


def require_grant(ws: Workspace, person: str, grant: str, doing: str) -> None:
    """Refused (exit 3) unless the person is named in the policy in force with the grant."""
    refuse(lacks(ws.people(), person, grant, doing))
