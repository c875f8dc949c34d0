"""Bugs the type checker found when the control room's modules were first checked (issue 15). Each
test here failed before: the room crashed, where the operator should have seen the row go."""

from __future__ import annotations

import pytest
import textual.constants

import controlroom.app as room
from controlroom.app import ControlRoom
from controlroom.views import RowKey
from engine.checkout.workspace import Workspace
from tests.room import demo_workspace, run, until

SIZE = (150, 42)  # wide enough that the detail pane is shown


@pytest.fixture
def demo(tmp_path, monkeypatch) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def detail(app: ControlRoom) -> str:
    return app._detail.text


def test_a_unit_whose_contract_is_removed_under_the_cursor_goes_without_a_crash(demo, monkeypatch):
    # a large view is sorted in a worker, and the rows shown stay until it is done: one of them may
    # name a unit whose contract file is gone by then (Contract | None: it was read as a Contract)
    monkeypatch.setattr(room, "ARRANGE_INLINE", 0)
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen = {}

    async def script(pilot):
        await pilot.press("2", "s")  # Units, sorted by priority
        assert await until(
            pilot, lambda: app._arranging is None and "sort: priority" in str(app._status.render())
        )
        app.table.cursor = app.table.keys.index("u3")
        await pilot.pause(0.2)
        seen["before"] = detail(app)
        (demo.root / "contracts" / "u3.json").unlink()
        syncs = app.syncs
        app.sync(registers=True)
        seen["synced"] = await until(pilot, lambda: app.syncs > syncs and app._arranging is None)
        await pilot.pause(0.2)
        seen["keys"] = list(app.table.keys)
        seen["after"] = detail(app)

    run(app, script)
    assert seen["synced"] and "unit u3" in seen["before"]
    assert "u3" not in seen["keys"] and "u4" in seen["keys"]
    assert "unit u3" not in seen["after"]


def test_a_lint_row_of_a_store_read_again_goes_without_a_crash(demo, monkeypatch):
    # a store replaced (a restore from backup) is read again into a snapshot whose checks have not
    # run yet (LintResult | None): a filtered view's rows stay until its worker is done
    monkeypatch.setattr(room, "ARRANGE_INLINE", 0)
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen = {}

    async def script(pilot):
        await pilot.press("5", "slash", *"notice", "enter")
        assert await until(pilot, lambda: app._arranging is None and RowKey("lint", "0") in app.table.keys)
        app.table.cursor = app.table.keys.index(RowKey("lint", "0"))
        await pilot.pause(0.2)
        seen["before"] = detail(app)
        path = demo.store("signals").path
        lines = path.read_bytes().splitlines(keepends=True)
        first_signal = next(i for i, raw in enumerate(lines) if b'"kind":"signal"' in raw)
        path.write_bytes(b"".join(lines[: first_signal + 1]))
        syncs = app.syncs
        app.sync()
        seen["reloaded"] = await until(pilot, lambda: app.syncs > syncs)
        await pilot.pause(0.2)
        seen["after"] = detail(app)
        # the checks run again for the new snapshot, and the lint rows come back
        seen["back"] = await until(
            pilot, lambda: RowKey("lint", "0") in app.table.keys and not app._arranging
        )

    run(app, script)
    assert seen["reloaded"] and "notice" in seen["before"]
    assert seen["back"]


def test_textuals_own_screenshot_hook_is_not_shadowed(demo, tmp_path, monkeypatch):
    # TEXTUAL_SCREENSHOT makes Textual call App.save_screenshot(path=..., filename=...); the
    # palette's screenshot once overrode that method with one that takes no arguments
    monkeypatch.setattr(textual.constants, "SCREENSHOT_DELAY", 0.1)
    monkeypatch.setattr(textual.constants, "SCREENSHOT_LOCATION", str(tmp_path))
    monkeypatch.setattr(textual.constants, "SCREENSHOT_FILENAME", "room.svg")
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)

    async def script(pilot):
        await until(pilot, lambda: (tmp_path / "room.svg").exists() or not app.is_running, 10)

    run(app, script)
    assert "<svg" in (tmp_path / "room.svg").read_text()
