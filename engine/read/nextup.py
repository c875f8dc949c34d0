"""Next-up (design §8.3): the compiled work queue, and why each other unit is not in it."""

from __future__ import annotations

from engine.checkout.workspace import Workspace
from engine.read.ladder import registers_of
from engine.read.model import State, UnitStatus
from engine.read.queries import unit_status
from engine.read.vetoes import holds, result_waits

_TODO = UnitStatus.TODO  # bound once (engine.read.queries says why)


def next_up(ws: Workspace, state: State, explain: bool = True) -> tuple[list[dict], list[dict]]:
    """(queue, excluded): todo units not flagged by a finding nor held, by priority then id.

    Ids sort in code-point order (Python's str order). `excluded` is built only when asked for:
    the queue alone is what a scheduler polls. Without the stores (a clone, design §16.2) no unit is
    known to be todo: the queue is empty and every unit is excluded as `status unknown`.
    """
    known = ws.has_stores
    found = holds(ws, state)  # "held": an obligation or a finding, as everywhere (design §26)
    holding, stale = found.obligations, found.findings
    held = found.units()  # every held unit, asked once (Holds.held per unit was 10,000 calls)
    # a finding that cannot be read here holds as its last parseable trunk version: say so
    from_trunk = {
        held.entry.id: f" (invalid here: {path} holds as on trunk at {held.commit[:12]})"
        for path, held in registers_of(ws, state).held.items()
    }
    blind = found.blind if explain else ""  # why trunk cannot be read, where every finding holds
    ready: list[tuple[int, str]] = []
    excluded: list[dict] = []
    for unit_id, unit in state.units.items():
        contract = unit.contract
        if contract is None:
            continue
        status = unit_status(state, unit) if known else "unknown (no stores here)"
        if status == _TODO and unit_id not in held:
            ready.append((contract.priority, unit_id))
        elif explain:
            if known and status != _TODO:  # a recorded result: what it waits for, as `status` says
                status = result_waits(state, unit, holding.get(unit_id, []), unit_id in stale) or status
            reasons = [] if status == _TODO else [f"status {status}"]
            reasons += [
                f"stale-knowledge: finding {finding} (trunk history unavailable: {blind})"
                if blind
                else f"stale-knowledge: unresolved {finding}{from_trunk.get(finding, '')}"
                for finding in stale.get(unit_id, [])
            ]
            reasons += [f"held by {ob.severity} obligation {ob.id}" for ob in holding.get(unit_id, [])]
            excluded.append({"id": unit_id, "priority": contract.priority, "reasons": reasons})
    excluded.sort(key=lambda u: (u["priority"], u["id"]))
    return [{"id": unit_id, "priority": priority} for priority, unit_id in _in_order(ready)], excluded


def _in_order(ready: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """sorted(ready), faster: a fleet shares a few priorities, so (priority, id) tuples mostly tie
    and compare element by element; ids sorted per priority compare as plain strings."""
    buckets: dict[int, list[str]] = {}
    for priority, unit_id in ready:
        buckets.setdefault(priority, []).append(unit_id)
    return [(priority, unit_id) for priority in sorted(buckets) for unit_id in sorted(buckets[priority])]
