"""The hardening tests' shared fixture: F-x filed on trunk (tests/hardening/trunkfinding.py)."""

from __future__ import annotations

import pytest

from tests.hardening.trunkfinding import FINDING, finding
from tests.helpers import Workspace


@pytest.fixture
def filed(ws: Workspace) -> Workspace:
    """F-x, unresolved, affecting u1, committed on trunk (filing needs no authorization)."""
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    return ws
