"""`regulator status`: units with what holds them, and the signals not yet routed. Reads only."""

from __future__ import annotations

from engine.checkout.workspace import Workspace
from engine.read.ladder import stale_knowledge
from engine.read.model import State
from engine.read.queries import holds_index, unrouted
from engine.read.storeless import authentication, status_of, stores


def status(ws: Workspace, state: State) -> dict:
    """Without the stores (a clone, SPEC §16.2) nothing is known of the units' state: their status
    is `unknown`, `held` and `unrouted` are null, never `todo`, `false` or 0."""
    known = ws.has_stores
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
                "status": status_of(known, state, unit),
                "held": bool(blocked_by) if known else None,
                "blockedBy": blocked_by,
                "staleKnowledge": stale.get(unit_id, []),
            }
        )
    waiting = unrouted(state)
    return {
        "stores": stores(ws),
        # "names": person events are not proven (§15.1); "-unverified": the committed policy's word
        "authentication": authentication(ws),
        "clock": ws.authority().clock,
        "units": units,
        "unrouted": len(waiting) if known else None,
        "unroutedSignals": [{"id": s["id"], "subject": s["subject"]} for s in waiting],
    }
