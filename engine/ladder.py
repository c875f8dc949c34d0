"""The ladder of seed 004 as the engine applies it. One function decides stale-knowledge; the
vetoes, status, Next-up, lint and every view ask it.
"""

from __future__ import annotations

from engine.state import State
from engine.workspace import Workspace
from registry.entries import Registers, load_registers


def registers_of(ws: Workspace, state: State) -> Registers:
    if state.registers is None:
        state.registers = load_registers(ws.root)
    return state.registers


def stale_knowledge(ws: Workspace, state: State) -> dict[str, list[str]]:
    """unit id → the unresolved findings (acknowledged or not) that name it, sorted."""
    flagged: dict[str, list[str]] = {}
    for finding in sorted(registers_of(ws, state).findings.values(), key=lambda e: e.id):
        if finding.fields["resolved"]:
            continue
        for unit_id in finding.fields.get("affects") or []:
            flagged.setdefault(unit_id, []).append(finding.id)
    return flagged
