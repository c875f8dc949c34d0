"""`regulator status`: units with what holds them, and the signals not yet routed. Reads only."""

from __future__ import annotations

from typing import Any

from engine.checkout.workspace import Workspace
from engine.read.model import State, UnitResult
from engine.read.queries import confined, unrouted
from engine.read.storeless import authentication, status_of, stores
from engine.read.vetoes import AWAITING_CLOSE, holds, result_waits


def status(ws: Workspace, state: State, only: str | None = None) -> dict:
    """Without the stores (a clone, design §16.2) nothing is known of the units' state: their status
    is `unknown`, `held` and `unrouted` are null, never `todo`, `false` or 0. `only`: the row of
    that one unit (a unit's door asking its own status), the rest as for every unit."""
    known = ws.has_stores
    found = holds(ws, state)  # "held": an obligation or a finding, as everywhere (design §26)
    units = []
    for unit_id in sorted(state.units) if only is None else [only] if only in state.units else []:
        unit = state.units[unit_id]
        holding = found.obligations.get(unit_id, [])
        findings = found.findings.get(unit_id, [])
        blocked_by = [ob.id for ob in holding]
        waits = result_waits(state, unit, holding, bool(findings)) if known else None
        units.append(
            {
                "id": unit_id,
                "type": unit.contract.type if unit.contract else None,
                "status": status_of(known, state, unit),
                "held": bool(holding or findings) if known else None,
                "blockedBy": blocked_by,
                "staleKnowledge": list(findings),
                # design §23: null where nothing is known (not started, or no stores here)
                "awaitingClose": waits == AWAITING_CLOSE if known else None,
                # what its recorded result waits for: awaiting close, ready to close, awaiting decision
                "waitsFor": waits,
                "confined": confined(state, unit) if known else None,
                "result": result_json(unit.result) if known else None,
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
        "unroutedSignals": [{"id": s["id"], "subject": s.get("subject")} for s in waiting],
    }


def result_json(result: UnitResult | None) -> dict[str, Any] | None:
    """The result a unit's latest lease recorded, as every reader's JSON gives it."""
    if result is None:
        return None
    return {
        "id": result.id,
        "outcome": result.outcome,
        "summary": result.summary,
        "by": result.by,
        "exitCode": result.exit_code,
        "durationS": result.duration_s,
        "at": result.at,
    }
