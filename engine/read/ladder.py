"""The ladder of seed 004 as the engine applies it. One function decides stale-knowledge; the
vetoes, status, Next-up, lint and every view ask it.
"""

from __future__ import annotations

from engine.checkout.workspace import Workspace
from engine.read.model import State
from registry.entries import Held, Registers, entry_or_none, load_registers


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
    """An invalid finding holds as its last parseable version on trunk did (SPEC §16.3): a merge
    conflict must not free the units it names. Git is asked only when a finding is invalid."""
    from engine.checkout.gitconfig import trunk_of
    from registry.history import trunk_holds

    found = trunk_holds(ws.tree, trunk_of(ws), paths, lambda path, text: entry_or_none("finding", path, text))
    return {path: Held(entry, commit) for path, (commit, entry) in found.items()}


def stale_knowledge(ws: Workspace, state: State) -> dict[str, list[str]]:
    """unit id → the unresolved findings (acknowledged or not) that name it, sorted. A finding
    that cannot be read here counts as its last parseable version on trunk."""
    registers = registers_of(ws, state)
    findings = list(registers.findings.values()) + [held.entry for held in registers.held.values()]
    flagged: dict[str, list[str]] = {}
    for finding in sorted(findings, key=lambda e: e.id):
        if finding.fields["resolved"]:
            continue
        for unit_id in finding.fields.get("affects") or []:
            ids = flagged.setdefault(unit_id, [])
            if finding.id not in ids:
                ids.append(finding.id)
    return flagged
