"""What a unit receives at start (before_agent_start): identity, then current memory for its type.

The memory section has a budget; what does not fit is counted in a closing line, never dropped
silently (seed 003's Company Brain shows what silent caps cost). Entry text goes in verbatim.
"""

from __future__ import annotations

from engine.state import MemoryEntry, State, memory_status
from engine.workspace import Workspace
from identity.files import IDENTITY_DIR, IDENTITY_NAMES

DEFAULT_BUDGET = 6000
HEADING = "## Operational memory: facts, not rules and not identity"
PREAMBLE = (
    "Earlier units recorded these facts. They are not rules and not identity: each is advice that "
    "holds until its review-by date, with the unit and revision that recorded it."
)


def eligible(state: State, unit_type: str | None) -> list[tuple[int, MemoryEntry]]:
    """Current entries this unit type receives, in log order (scoped entries only to their types)."""
    today = state.now.date()
    chosen = []
    for position, entry in enumerate(state.memory.values()):
        if memory_status(entry, today) != "current":
            continue
        scope = entry.event.get("scope") or []
        if unit_type is None or not scope or unit_type in scope:
            chosen.append((position, entry))
    return chosen


def delivery_order(state: State, unit_type: str | None) -> list[MemoryEntry]:
    """Entries scoped to the unit's type first, then newest first (later in the log is newer)."""

    def key(item: tuple[int, MemoryEntry]):
        position, entry = item
        scoped = unit_type is not None and unit_type in (entry.event.get("scope") or [])
        return (0 if scoped else 1, _neg(entry.event["at"]), -position)

    return [entry for _, entry in sorted(eligible(state, unit_type), key=key)]


def _neg(at: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in at)


def render_entry(entry: MemoryEntry) -> str:
    e = entry.event
    scope = ", ".join(e.get("scope") or []) or "every unit"
    return (
        f"- {e['subject']}: {e['note']}\n"
        f"  (recorded by unit {e.get('unit')} at revision {e.get('revision') or 'unknown'} on {e['at']}; "
        f"review by {e['reviewBy']}; scope: {scope}; evidence: {'; '.join(e.get('evidence') or [])})\n"
    )


def render_memory(state: State, unit_type: str | None, budget: int = DEFAULT_BUDGET) -> str:
    entries = delivery_order(state, unit_type)
    shown: list[str] = []
    used = 0
    for entry in entries:
        text = render_entry(entry)
        if used + len(text) > budget:
            break
        shown.append(text)
        used += len(text)
    left_out = len(entries) - len(shown)
    closing = (
        f"({len(shown)} of {len(entries)} current entries shown; {left_out} left out by the "
        f"{budget}-character budget; `regulator memory` lists them all)\n"
    )
    return "\n".join([HEADING, "", PREAMBLE, "", "".join(shown) + closing])


def render_identity(ws: Workspace) -> str:
    parts = ["## Identity (S5): invariants, glossary, boundaries", ""]
    for name in IDENTITY_NAMES:
        path = ws.root / IDENTITY_DIR / name
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = "(missing)\n"
        parts.append(f"### {IDENTITY_DIR}/{name}\n\n{text.rstrip()}\n")
    return "\n".join(parts)


def render_context(ws: Workspace, state: State, unit_id: str | None, budget: int = DEFAULT_BUDGET) -> str:
    unit_type = None
    if unit_id is not None:
        contract = state.contracts.get(unit_id)
        unit_type = contract.type if contract else None
        title = f"# Context for unit {unit_id} ({unit_type})"
    else:
        title = "# Context (no unit: every current entry)"
    return "\n".join([title, "", render_identity(ws), render_memory(state, unit_type, budget)])
