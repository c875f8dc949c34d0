"""The ladder of seed 004 as the engine applies it: one function decides stale knowledge, which
engine.read.vetoes.holds counts as a hold (the vetoes, status, Next-up, lint and every view ask it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from engine.checkout.workspace import Workspace
from engine.read.model import State
from registry.entries import Entry, Held, Registers, entry_or_none, load_registers
from registry.trunkwalk import TrunkChange, TrunkFindings, held_units, named_units

if TYPE_CHECKING:
    from collections.abc import Callable

    from registry.history import TrunkLog
    from registry.lint import Policy


def registers_of(ws: Workspace, state: State) -> Registers:
    if isinstance(state.registers, Registers):
        return state.registers
    registers = load_registers(ws.tree)
    unreadable = [i.path for i in registers.invalid_of("finding")]
    if unreadable:
        registers.held = trunk_holds_of(ws, unreadable)
    state.registers = registers
    return registers


def trunk_holds_of(ws: Workspace, paths: list[str]) -> dict[str, Held]:
    """An invalid finding holds as its last parseable version on trunk did (design §16.3): a merge
    conflict must not free the units it names. Git is asked only when a finding is invalid."""
    from engine.checkout.gitconfig import trunk_of
    from registry.history import trunk_holds

    found = trunk_holds(ws.tree, trunk_of(ws), paths, lambda path, text: entry_or_none("finding", path, text))
    return {path: Held(entry, commit) for path, (commit, entry) in found.items()}


def trunk_findings(ws: Workspace, state: State) -> TrunkFindings:
    """Trunk's findings since the baseline (registry.trunkwalk), walked once per read of the
    registers: what trunk holds, and each load-bearing change with whether it counts."""
    registers = registers_of(ws, state)
    if not isinstance(registers.trunk, TrunkFindings):
        registers.trunk = walk_trunk(ws)
    return registers.trunk


def walk_trunk(
    ws: Workspace, shared: Callable[[], TrunkLog | None] | None = None, trunk: str | None = None
) -> TrunkFindings:
    """The walk itself (kept between commands by engine.read.trunkcache), for trunk_findings or for
    a caller that walks while it reads the registers (lint, which gives it its history pass and
    the trunk its `--trunk` names)."""
    from engine.checkout.gitconfig import trunk_of
    from engine.read.trunkcache import walked

    def policy() -> Policy:
        from engine.trust.ackers import walk_policy

        return walk_policy(ws)

    # the policy is read on the first change that needs authorizing, or to check a kept walk
    # that asked it (a walk that authorizes nothing, the common `status`, never parses policy)
    return walked(ws, trunk or trunk_of(ws), policy, shared)


def unratified(ws: Workspace, state: State, entry: Entry) -> TrunkChange | None:
    """What a person's signed commit touching this finding, as it stands, would authorize unseen:
    the newest unauthorized change on trunk not yet decided afresh, with `lifts` the units trunk
    holds that the entry as it stands does not name (none: nothing to ratify, None). Asked by
    engine.read.rules.acking (D-225)."""
    return unratified_in(trunk_findings(ws, state), entry)


def unratified_in(trunk: TrunkFindings, entry: Entry) -> TrunkChange | None:
    """`unratified` of a walk already made (the room's snapshot holds one)."""
    lifted = trunk.holds.get(entry.path, frozenset()) - named_units(entry)
    if not lifted:
        return None
    unratified = [c for c in trunk.changes if c.path == entry.path and c.undecided]
    # the change that failed to lift those units names them; the newest such, else the newest
    behind = next(
        (c for c in reversed(unratified) if lifted & set(c.lifts)), unratified[-1] if unratified else None
    )
    if behind is None:  # narrowed here (a branch, the working tree), not on trunk: no commit to name
        return TrunkChange(entry.path, "", "", ("affects",), tuple(sorted(lifted)), None, "")
    return msgspec.structs.replace(behind, lifts=tuple(sorted(lifted)))


def undecided_in(trunk: TrunkFindings | object, path: str) -> bool:
    """Whether trunk holds a load-bearing change to the entry at `path` that no commit authorized
    and no later authorized commit decided afresh: lint's `unauthorized-change` on trunk, which a
    person's signed commit touching the entry ends (engine.read.rules.resolving_finding)."""
    if not isinstance(trunk, TrunkFindings):
        return False
    return any(c.path == path and c.undecided for c in trunk.changes)


def still_holds(ws: Workspace, state: State, finding_id: str) -> bool:
    """Whether a finding holds any unit (stale_knowledge's answer), resolved in its file or not."""
    return holds_in(stale_knowledge(ws, state), finding_id)


def holds_in(stale: dict[str, list[str]], finding_id: str) -> bool:
    """`still_holds` of a stale_knowledge answer already made (the room's snapshot holds one)."""
    return any(finding_id in ids for ids in stale.values())


def blind_why(ws: Workspace, state: State) -> str:
    """Why trunk's history cannot be read where the stores are, so that every finding holds what it
    names (stale_knowledge's fail-closed case, D-201); "" when it can, or in a clone."""
    if not ws.has_stores:
        return ""
    trunk = trunk_findings(ws, state)
    return "" if trunk.available else (trunk.why or "unavailable")


def stale_knowledge(ws: Workspace, state: State) -> dict[str, list[str]]:
    """unit id → the unresolved findings that hold it, sorted: the stricter of trunk and the
    working tree (design §26). A finding in the working tree holds what it names; trunk holds what
    its committed history holds (an unauthorized change there lifts nothing), so an edit that is
    not committed, or not authorized, can add a hold and never remove one. A finding that cannot
    be read here counts as its last parseable version on trunk. Where the stores are here and
    trunk's history cannot be read (a shallow or damaged repository, no trunk branch), no resolve
    or narrowing can be told authorized: every finding holds every unit it names, resolved or not
    (fail closed, D-201)."""
    registers = registers_of(ws, state)
    findings = list(registers.findings.values()) + [held.entry for held in registers.held.values()]
    trunk = trunk_findings(ws, state)
    blind = bool(blind_why(ws, state))
    flagged: dict[str, set[str]] = {}
    for finding in findings:
        for unit_id in named_units(finding) if blind else held_units(finding):
            flagged.setdefault(unit_id, set()).add(finding.id)
    names = trunk.ids()
    for path, units in trunk.holds.items():
        for unit_id in units:
            flagged.setdefault(unit_id, set()).add(names[path])
    return {unit_id: sorted(ids) for unit_id, ids in flagged.items()}
