"""The ladder of seed 004 as the engine sees it: which units a finding flags stale-knowledge."""

from __future__ import annotations

from engine.state import State
from engine.workspace import Workspace


def stale_knowledge(ws: Workspace, state: State) -> dict[str, list[str]]:
    """unit id → the unresolved findings that name it. (Registers arrive with issue 4.)"""
    return {}
