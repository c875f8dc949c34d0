"""Transitional names: the read side now lives in engine.model (types), engine.fold (events ->
model), engine.load (one load) and engine.queries (what views and commands ask). This module only
re-exports them for code written against the old layout; import from those modules instead."""

from __future__ import annotations

from engine.fold import ORDER, SHAPES, StoreReplaced, advance
from engine.load import attach_contracts, load
from engine.model import (
    RECOVERY_ACTIONS,
    WAITING_ACTIONS,
    MemoryEntry,
    Obligation,
    State,
    UnitState,
)
from engine.queries import (
    days_left,
    held_by,
    history,
    holds_index,
    is_stale,
    memory_status,
    unit_status,
    unrouted,
    unrouted_count,
)

__all__ = [
    "ORDER",
    "RECOVERY_ACTIONS",
    "SHAPES",
    "WAITING_ACTIONS",
    "MemoryEntry",
    "Obligation",
    "State",
    "StoreReplaced",
    "UnitState",
    "advance",
    "attach_contracts",
    "days_left",
    "held_by",
    "history",
    "holds_index",
    "is_stale",
    "load",
    "memory_status",
    "unit_status",
    "unrouted",
    "unrouted_count",
]
