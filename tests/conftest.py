from __future__ import annotations

import pytest

from tests.helpers import make_workspace


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch):
    """Snapshots and output must not depend on the caller's terminal settings."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path)
