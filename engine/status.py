"""`regulator status`: units with what holds them, and the signals not yet routed. Reads only."""

from __future__ import annotations

from engine.ladder import stale_knowledge
from engine.state import State, holds_index, unit_status, unrouted
from engine.workspace import Workspace


def status(ws: Workspace, state: State) -> dict:
    holds = holds_index(state)
    stale = stale_knowledge(ws, state)
    units = []
    for unit_id in sorted(state.units):
        unit = state.units[unit_id]
        blocked_by = [ob.id for ob in holds.get(unit_id, [])]
        units.append(
            {
                "id": unit_id,
                "type": unit.contract.type if unit.contract else None,
                "status": unit_status(state, unit),
                "held": bool(blocked_by),
                "blockedBy": blocked_by,
                "staleKnowledge": stale.get(unit_id, []),
            }
        )
    waiting = unrouted(state)
    auth = ws.authority()
    return {
        "authentication": auth.authentication,  # "names": person events are not proven (§15.1)
        "clock": auth.clock,
        "units": units,
        "unrouted": len(waiting),
        "unroutedSignals": [{"id": s["id"], "subject": s["subject"]} for s in waiting],
    }
