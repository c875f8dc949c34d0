"""Snapshots of every view on the demo workspace: fixed clock, size, theme and cursor blink."""

from __future__ import annotations

import pytest

from controlroom.app import ControlRoom
from controlroom.demo import build
from tests.helpers import NOW

VIEW_KEYS = {
    "obligations": "1",
    "units": "2",
    "memory": "3",
    "signals": "4",
    "registers": "5",
    "identity": "6",
}


@pytest.fixture
def demo_app(tmp_path, monkeypatch):
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    ws = build(tmp_path / "fleet-repo", clock_mode="pinned")
    app = ControlRoom(ws, "alice", watch=False, background_checks=False)
    app.live = "● live"
    return app


@pytest.mark.parametrize("view", list(VIEW_KEYS))
def test_view_snapshot(snap_compare, demo_app, view):
    assert snap_compare(demo_app, press=[VIEW_KEYS[view]], terminal_size=(150, 42))


def test_resolve_dialog_snapshot(snap_compare, demo_app):
    assert snap_compare(demo_app, press=["r"], terminal_size=(150, 42))
