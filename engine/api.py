"""The Python API for a host harness: what the CLI does on a unit's behalf, without the CLI."""

from __future__ import annotations

from pathlib import Path

from engine import delivery, memory, signals, state
from engine.actors import Actor
from engine.workspace import Workspace, locate, read_lease


def open_workspace(root: str | Path) -> Workspace:
    ws, _ = locate(Path(root))
    return ws


def render_context(root: str | Path, unit: str | None = None, budget: int = delivery.DEFAULT_BUDGET) -> str:
    """Exactly what `regulator context UNIT` prints: what the unit receives at start."""
    ws = open_workspace(root)
    return delivery.render_context(ws, state.load(ws), unit, budget)


def remember(
    lease_file: str | Path,
    subject: str,
    note: str,
    evidence: list[str],
    review_by: str,
    scope: list[str] | None = None,
) -> str:
    """Record a memory entry for the unit holding this lease; returns the entry id."""
    lease = read_lease(Path(lease_file))
    ws, _ = locate(lease_file=Path(lease_file))
    fields = {
        "subject": subject,
        "note": note,
        "evidence": list(evidence),
        "reviewBy": review_by,
        "scope": list(scope or []),
    }
    return memory.remember(ws, fields, lease)["id"]


def report_intelligence(lease_file: str | Path, **fields) -> str:
    """report_intelligence for the unit holding this lease, with seed 000's field names."""
    lease = read_lease(Path(lease_file))
    ws, _ = locate(lease_file=Path(lease_file))
    return signals.report_intelligence(ws, fields, Actor(unit=lease.unit, lease=lease))["id"]
