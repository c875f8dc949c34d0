"""`regulator status`: units with what holds them, and the signals not yet routed. Reads only."""

from __future__ import annotations

from engine.ladder import HeldBy, held
from engine.model import State
from engine.queries import unrouted
from engine.storeless import authentication, status_of, stores
from engine.workspace import Workspace


def status(ws: Workspace, state: State) -> dict:
    """Without the stores (a clone, SPEC §16.2) nothing is known of the units' state: their status
    is `unknown`, `held` and `unrouted` are null, never `todo`, `false` or 0."""
    known = ws.has_stores
    holding = held(ws, state)  # "held": an obligation or a finding, as everywhere (SPEC §26)
    units = []
    for unit_id in sorted(state.units):
        unit = state.units[unit_id]
        why = holding.get(unit_id, HeldBy())
        units.append(
            {
                "id": unit_id,
                "type": unit.contract.type if unit.contract else None,
                "status": status_of(known, state, unit),
                "held": bool(why.obligations or why.findings) if known else None,
                "blockedBy": [ob.id for ob in why.obligations],
                "staleKnowledge": list(why.findings),
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
