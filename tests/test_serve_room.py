"""The control room and serve (design §22), under Pilot: serve's state on the status line (from
serve.json and /healthz, or "serve not running"), and a unit's question answered with a key,
signed, through the engine function `obligation resolve` uses."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlroom.app import ControlRoom
from engine.checkout.workspace import locate
from engine.doors.api import UnitDoor
from engine.read.load import load
from tests.helpers import NOW, make_workspace
from tests.serving import Serving

SIZE = (150, 42)


@pytest.fixture
def asked(tmp_path: Any, monkeypatch: Any) -> Any:
    """A workspace where r1 asked a question, routed (the room routes what it finds unrouted)."""
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    ws = make_workspace(tmp_path)
    worktree = ws.lease("r1")
    door = UnitDoor(worktree / ".regulator-lease.json")
    question = door.ask(
        {"question": "Pin left-pad to 1.3.0 or move to 2.0?\n\x1b[31m[bold]", "options": ["1.3.0"]}
    )
    return ws, door, question


def status_line(app: ControlRoom) -> str:
    return str(app._status.render())


def test_a_question_is_answered_with_a_key_signed_and_the_unit_reads_it(asked: Any) -> None:
    ws, door, question = asked
    engine_ws, _ = locate(ws.root)
    app = ControlRoom(engine_ws, "alice", watch=False)
    seen: dict[str, object] = {}

    async def main() -> None:
        from textual.widgets import Select

        from widgets.dialogs import ResolveDialog

        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            deadline = asyncio.get_running_loop().time() + 20
            while question.obligation not in app.snap.state.obligations:  # routed by the room's sync
                assert asyncio.get_running_loop().time() < deadline, "the question was never routed"
                await pilot.pause(0.05)
            row = app.table.keys.index(question.obligation)
            seen["row"] = " ".join(app._row("obligations", question.obligation))
            app.table.cursor = row
            await pilot.pause()
            await pilot.press("r")
            assert isinstance(app.screen, ResolveDialog)
            seen["dialog"] = str(app.screen.query_one("Static").render())
            assert app.screen.query_one(Select).value == "answered"
            await pilot.click("#rationale")
            await pilot.press(*"Stay on 1.3.0")
            await pilot.click("#confirm")
            await pilot.pause()
            assert not isinstance(app.screen, ResolveDialog)

    asyncio.run(main())
    assert "? Pin left-pad" in str(seen["row"])
    assert "Answer question" in str(seen["dialog"])
    written = ws.events("signals")[-1]
    assert (written["kind"], written["disposition"], written["by"]) == ("disposition", "answered", "alice")
    assert written["rationale"] == "Stay on 1.3.0" and "sig" in written
    assert load(engine_ws).uncounted == []  # signed by alice's key: it counts
    answered = {o.id: o for o in door.obligations(include_closed=True)}[question.obligation]
    assert answered.answer == "Stay on 1.3.0"
    assert "Stay on 1.3.0" in door.context().text


def test_the_room_says_serve_is_not_running_then_shows_its_state(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    ws = make_workspace(tmp_path)
    engine_ws, _ = locate(ws.root)

    async def shown(app: ControlRoom, wanted: str, size: tuple[int, int] = SIZE) -> str:
        async with app.run_test(size=size) as pilot:
            deadline = asyncio.get_running_loop().time() + 20
            while wanted not in status_line(app):
                assert asyncio.get_running_loop().time() < deadline, status_line(app)
                await pilot.pause(0.05)
            return status_line(app)

    line = asyncio.run(shown(ControlRoom(engine_ws, "alice"), "serve not running"))
    # after the row count and the view's sort, filter and all/live rows (never cut: D-107)
    assert " · serve not running" in line
    serving = Serving(ws)
    try:
        line = asyncio.run(shown(ControlRoom(engine_ws, "alice"), "serve: leader"))
        # at 80 columns too, whole: today's tick by its time (the date cut it: `last tick 2026-1…`)
        narrow = asyncio.run(shown(ControlRoom(engine_ws, "alice"), "serve: leader", (80, 24)))
    finally:
        serving.close()
    assert "serve: leader · last tick 12:00:00Z" in line and "lag" not in line  # nothing behind: unsaid
    assert "serve: leader · last tick 12:00:00Z" in narrow, narrow


def test_a_question_reads_everywhere_a_signal_does(asked: Any) -> None:
    """A question has no claim nor severity: every listing and lifecycle shows it as a question."""
    ws, _, question = asked
    ws.run("signals", "route", check=True)
    listed = ws.run("signals")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "Pin left-pad" in line)
    assert row.split()[1] == "question", row  # its reported column, as the room says it (it said `-`)
    shown = ws.run("obligation", "show", question.obligation)
    assert shown.returncode == 0, shown.stderr
    assert "? Pin left-pad to 1.3.0 or move to 2.0?" in shown.stdout and "\x1b" not in shown.stdout
    once = ws.run("controlroom", "--once", "--json")
    assert once.returncode in (0, 1) and "Traceback" not in once.stderr
    engine_ws, _ = locate(ws.root)
    app = ControlRoom(engine_ws, "alice", watch=False)
    rows: dict[str, list[str]] = {}

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            for key, view in (("4", "signals"), ("1", "obligations")):
                await pilot.press(key)
                await pilot.pause()
                rows[view] = [" ".join(app._row(view, k)) for k in app.table.keys]
                app.table.cursor = len(app.table.keys) - 1
                await pilot.press("enter")  # the whole lifecycle of the row
                await pilot.pause()
                await pilot.press("escape")

    asyncio.run(main())
    assert any("question" in r and "Pin left-pad" in r for r in rows["signals"])
    assert any("? Pin left-pad" in r for r in rows["obligations"])


def test_a_serve_whose_loop_stopped_ticking_is_said_to_be_stuck() -> None:
    """An operator's day: serve's line compared no time, so a door that answered while its loop
    had stopped (no routing, no lease expiry, no deadlines) read as healthy. Past three ticks
    without one, the line says so first; a loop that ticks reads as before."""
    from datetime import timedelta

    from engine.base import clock
    from engine.host.instance import describe

    now = clock.parse_time("2026-12-06T10:00:00Z")
    state = {"running": True, "leader": True, "lag": {"signals": 0}}
    ticking = describe({**state, "lastTick": clock.iso(now - timedelta(seconds=9))}, now)
    assert ticking == "serve: leader · last tick 09:59:51Z"  # today's: the time alone; no lag, unsaid
    behind = describe({**state, "lag": {"signals": 120, "units": 7}, "lastTick": clock.iso(now)}, now)
    assert behind == "serve: leader · lag 127 B · last tick 10:00:00Z"
    yesterday = describe({**state, "lastTick": "2026-12-05T23:59:59Z"}, now.replace(hour=0, second=5))
    assert yesterday == "serve: leader · last tick 2026-12-05T23:59:59Z"
    stuck = describe({**state, "lastTick": clock.iso(now - timedelta(seconds=95))}, now)
    assert stuck.startswith("serve: no tick for 95s, its duties are not running")
