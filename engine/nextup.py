"""Next-up (SPEC §8.3): the compiled work queue, and why each other unit is not in it."""

from __future__ import annotations

from engine.ladder import stale_knowledge
from engine.state import State, holds_index, unit_status
from engine.workspace import Workspace


def next_up(ws: Workspace, state: State) -> tuple[list[dict], list[dict]]:
    """(queue, excluded): todo units not flagged by a finding nor held, by priority then id."""
    holds = holds_index(state)
    stale = stale_knowledge(ws, state)
    queue: list[dict] = []
    excluded: list[dict] = []
    for unit_id, unit in state.units.items():
        if unit.contract is None:
            continue
        reasons: list[str] = []
        status = unit_status(state, unit)
        if status != "todo":
            reasons.append(f"status {status}")
        for finding in stale.get(unit_id, []):
            reasons.append(f"stale-knowledge: unresolved {finding}")
        for ob in holds.get(unit_id, []):
            reasons.append(f"held by {ob.severity} obligation {ob.id}")
        if reasons:
            excluded.append({"id": unit_id, "priority": unit.contract.priority, "reasons": reasons})
        else:
            queue.append({"id": unit_id, "priority": unit.contract.priority})
    queue.sort(key=lambda u: (u["priority"], u["id"]))
    excluded.sort(key=lambda u: (u["priority"], u["id"]))
    return queue, excluded
