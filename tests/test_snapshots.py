"""Snapshots of every view at 80×24 and 150×42 on the demo workspace, and of the dialogs: fixed
clock (injected), size, theme; the cursor blink is turned off here, in the test."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from controlroom.app import ControlRoom
from controlroom.demo import build
from controlroom.views import VIEW_DEFS
from engine.base import clock
from engine.checkout.workspace import Workspace
from tests.helpers import NOW

SIZES = {"80x24": (80, 24), "150x42": (150, 42)}


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory) -> Workspace:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGULATOR_NOW", NOW)
        patch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
        return build(tmp_path_factory.mktemp("snap") / "fleet-repo", clock_mode="pinned")


@pytest.fixture
def demo_app(demo_ws, monkeypatch):
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    fixed = clock.parse_time(NOW)
    app = ControlRoom(demo_ws, "alice", watch=False, background_checks=False, now=lambda: fixed)
    app.live = "● live"
    return app


def keys_then_steady(*keys: str):
    """Press `keys`, then stop every text cursor blinking (a snapshot must not depend on timing)."""

    async def run_before(pilot) -> None:
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        for box in pilot.app.screen.query(Input):
            box.cursor_blink = False
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("view", [v.name for v in VIEW_DEFS])
def test_view_snapshot(snap_compare, demo_app, view, size):
    key = next(v.key for v in VIEW_DEFS if v.name == view)
    assert snap_compare(demo_app, run_before=keys_then_steady(key), terminal_size=SIZES[size])


def test_resolve_dialog_snapshot(snap_compare, demo_app):
    assert snap_compare(demo_app, run_before=keys_then_steady("r"), terminal_size=(150, 42))


def test_help_snapshot_80x24(snap_compare, demo_app):
    assert snap_compare(demo_app, run_before=keys_then_steady("question_mark"), terminal_size=(80, 24))


def test_decide_dialog_snapshot(snap_compare, demo_app):
    async def run_before(pilot) -> None:
        from textual.widgets import Select

        await pilot.press("2")
        pilot.app.table.cursor = pilot.app.table.keys.index("u3")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        pilot.app.screen.query_one(Select).value = "pause"
        for box in pilot.app.screen.query(Input):
            box.cursor_blink = False
        await pilot.pause()

    assert snap_compare(demo_app, run_before=run_before, terminal_size=(150, 42))
