"""The control room shows what time and the world brought in (design §24), under Pilot: overdue and
evidence-expired in the header and the views, the sensors with their last runs, and a prediction's
outcome recorded from the keyboard, signed."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from controlroom import header, readmodel
from controlroom.app import ControlRoom
from engine.checkout.workspace import Workspace
from tests.helpers import report_args, tick
from widgets.columns import form
from widgets.dialogs import TextScreen

SIZE = (150, 42)
LATER = "2026-12-05T12:00:00Z"


def lines_of(app: ControlRoom) -> list[str]:
    """The lines of the text page the room has open (a row's lifecycle)."""
    screen = app.screen
    assert isinstance(screen, TextScreen), screen
    return screen.lines


@pytest.fixture
def world(ws: Any, monkeypatch: Any) -> Any:
    """A workspace four days on: a finding expired under its two obligations, both overdue and
    re-asked; a command sensor that ran; a person's prediction awaiting its outcome."""
    r1 = ws.lease("r1")
    ws.run(*report_args(expires_at="2026-12-01T00:00:00Z"), cwd=r1, check=True)
    prediction = ws.root.parent / "prediction.json"
    prediction.write_text(
        json.dumps(
            {
                "subject": "the release slips",
                "claim": "The release slips past the 1st.",
                "observation": "three blockers open",
                "evidence": ["tracker"],
                "confidence": "medium",
                "reportedSeverity": "info",
                "prediction": {"resolvesAt": "2026-12-01T00:00:00Z"},
            }
        )
    )
    ws.run("signals", "report", "--json-input", str(prediction), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    line = {
        "subject": "disk filling",
        "claim": "c",
        "observation": "o",
        "evidence": ["df"],
        "confidence": "low",
    }
    script = ws.root.parent / "disk.py"
    script.write_text(f"print({json.dumps(json.dumps(line))})\n")
    ws.decide(
        "regulator/policy/sensors.yaml",
        f"sensors:\n  disk:\n    kind: command\n    command: [{sys.executable}, {script}]\n",
    )
    tick(ws, env={"REGULATOR_NOW": LATER})
    for name, value in ws.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REGULATOR_NOW", LATER)
    return ws


def run(app: ControlRoom, script: Any) -> None:
    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await script(pilot)

    asyncio.run(main())


def text(app: ControlRoom) -> list[str]:
    """The rows of the view on screen, whole (the table cuts long cells to the screen's width)."""
    return [" ".join(form(c, None) for c in readmodel.row(app.view, app.snap, key)) for key in app.table.keys]


def test_overdue_evidence_expired_and_sensors_are_shown(world: Any) -> None:
    app = ControlRoom(Workspace(world.root), "alice", watch=False)
    seen: dict[str, object] = {}

    async def script(pilot: Any) -> None:
        seen["obligations"] = text(app)
        await pilot.press("7")
        seen["sensors"] = text(app)
        await pilot.press("enter")
        await pilot.pause()
        seen["sensor lifecycle"] = "\n".join(lines_of(app))
        await pilot.press("escape")
        await pilot.press("1")
        app.table.cursor = next(
            i for i, k in enumerate(app.table.keys) if world_obligation(app, k).unit == "u1"
        )
        await pilot.press("enter")
        await pilot.pause()
        seen["lifecycle"] = "\n".join(lines_of(app))

    run(app, script)

    said = header.header_text(app.snap)
    assert "3 overdue" not in said  # the recheck opened at the tick: not overdue yet
    assert "2 overdue" in said and "2 evidence expired" in said
    rows = "\n".join(seen["obligations"])  # type: ignore[arg-type]
    # the most urgent mark before the subject, and how many more (D-319: all of them left no room
    # for the subject at 80 columns); the detail pane names each
    # no notify is set: paged no one (D-323)
    every = "(not paged, overdue, evidence expired, stale) vendor/left-pad.js"  # whole (D-324)
    assert rows.count(every) == 2 and "recheck: vendor/left-pad.js" in rows
    sensors = "\n".join(seen["sensors"])  # type: ignore[arg-type]
    assert "disk" in sensors and "2026-12-05T12:00:00Z" in sensors and "ok" in sensors
    assert "run: ok, 1 signal(s)" in seen["sensor lifecycle"]  # type: ignore[operator]
    lifecycle = seen["lifecycle"]
    assert "evidence expired (the signal expired 2026-12-01T00:00:00Z)" in lifecycle  # type: ignore[operator]
    assert "deadline escalated to alice" in lifecycle and "overdue since 2026-12-01T12:00:00Z" in lifecycle  # type: ignore[operator]


@pytest.mark.slow
def test_the_filter_finds_a_mark_a_row_does_not_show(world: Any) -> None:
    """D-319 shows a row's most urgent mark only (`(overdue +2)`): `/` still finds a row by each of
    its marks, so an operator can list every obligation whose evidence expired."""
    app = ControlRoom(Workspace(world.root), "alice", watch=False)
    seen: dict[str, list[str]] = {}

    async def script(pilot: Any) -> None:
        for needle in ("evidence expired", "stale", "overdue", "withdrawn"):
            await pilot.press("slash")
            await pilot.press(*needle, "enter")
            await pilot.pause(0.3)
            seen[needle] = text(app)
            await pilot.press("escape")

    run(app, script)
    assert len(seen["evidence expired"]) == 2 and all(
        "(not paged, overdue, evidence expired, stale)" in r for r in seen["evidence expired"]
    )
    assert len(seen["stale"]) == 2 and len(seen["overdue"]) == 2
    assert seen["withdrawn"] == []


def test_a_row_names_every_mark_where_there_is_room(world: Any) -> None:
    """D-324 (an operator's re-check of D-319): at 150 columns with the pane hidden a row still said
    `(overdue +1)` with 90 cells free. Where there is room, a row names every mark; where there is
    not, the most urgent and how many more."""
    app = ControlRoom(Workspace(world.root), "alice", watch=False)
    seen: dict[str, str] = {}

    async def script(pilot: Any) -> None:
        seen["pane"] = app.table.render_line(1).text
        await pilot.press("p")  # the pane hidden: the table has the width
        await pilot.pause()
        seen["wide"] = app.table.render_line(1).text

    run(app, script)
    assert "(not paged +3) vendor/left-pa" in seen["pane"], seen
    assert "(not paged, overdue, evidence expired, stale) vendor/left-pad.js" in seen["wide"], seen


def world_obligation(app: ControlRoom, key: Any) -> Any:
    return app.snap.state.obligations[key]


def test_a_prediction_outcome_is_recorded_from_the_keyboard_signed(world: Any) -> None:
    app = ControlRoom(Workspace(world.root), "alice", watch=False)
    seen: dict[str, object] = {}

    async def script(pilot: Any) -> None:
        from textual.widgets import Select

        from widgets.dialogs import OutcomeDialog

        await pilot.press("4")
        state = app.snap.state
        plain = next(k for k in app.table.keys if "prediction" not in state.signals[k])  # type: ignore[index]
        app.table.cursor = app.table.keys.index(plain)
        await pilot.press("o")  # no prediction: refused, said, no dialog
        await pilot.pause()
        seen["refused"] = not isinstance(app.screen, OutcomeDialog)
        predicted = next(k for k in app.table.keys if "prediction" in state.signals[k])  # type: ignore[index]
        app.table.cursor = app.table.keys.index(predicted)
        seen["row"] = " ".join(readmodel.row("signals", app.snap, predicted))
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OutcomeDialog)
        app.screen.query_one(Select).value = "yes"
        await pilot.click("#rationale")
        await pilot.press(*"slipped to the 9th")
        await pilot.click("#confirm")
        for _ in range(50):
            await pilot.pause(0.1)
            if any(e["kind"] == "prediction-outcome" for e in world.events("signals")):
                break
        seen["key"] = predicted

    run(app, script)
    assert seen["refused"]
    assert "(prediction awaits its outcome)" in seen["row"]  # type: ignore[operator]
    (event,) = [e for e in world.events("signals") if e["kind"] == "prediction-outcome"]
    assert event["signal"] == seen["key"] and event["cameTrue"] is True and event["by"] == "alice"
    assert event["rationale"] == "slipped to the 9th" and event["sig"].startswith("-----BEGIN SSH SIGNATURE")
    calibration = world.json("calibration")
    assert calibration == [
        {"source": "alice", "sourceKind": "person", "confidence": "medium", "cameTrue": 1, "didNotComeTrue": 0,
         "awaiting": 0, "pending": 0, "rate": 1.0}
    ]  # fmt: skip
