"""The control room's dialogs under Pilot (split from tests/test_controlroom_live.py): each one
collects the operator's answer, says what its action does first, and is driven by the keyboard at
80×24 as at full size."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from controlroom.app import ControlRoom
from controlroom.views import RowKey
from engine.checkout.workspace import Workspace
from engine.commands.actors import Actor
from engine.commands.proposals import propose
from tests.room import demo_workspace, opened, run, until
from widgets.dialogs import AckDialog, DecideDialog, ProposalDialog, ResolveDialog


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def notes(app: ControlRoom) -> list[str]:
    return [n.message for n in app._notifications]


def test_enter_in_a_one_line_field_submits(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    before = len(demo.store("signals").read().events)

    async def script(pilot: Any) -> None:
        from textual.widgets import Select

        await pilot.press("r")
        app.screen.query_one(Select).value = "accepted-risk"
        await pilot.pause()  # the meaning of the choice appears under it: the layout moves
        await pilot.click("#rationale")
        await pilot.press(*"known", "enter")
        assert await until(pilot, lambda: len(demo.store("signals").read().events) == before + 1)
        assert len(app.screen_stack) == 1

    run(app, script)
    assert demo.store("signals").read().events[-1]["disposition"] == "accepted-risk"


async def decide_on(pilot: Any, app: ControlRoom, unit: str) -> None:
    """The decide dialog open on `unit` from the Units view."""
    await pilot.press("2")
    app.table.cursor = app.table.keys.index(unit)
    await pilot.pause()
    await pilot.press("d")
    assert await opened(pilot, DecideDialog)


def test_the_decision_dialog_previews_what_changes(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        from textual.widgets import Select

        await decide_on(pilot, app, "u3")
        app.screen.query_one(Select).value = "pause"
        await pilot.pause()
        seen["pause"] = str(app.screen.query_one("#preview").render())
        app.screen.query_one(Select).value = "retry"
        await pilot.pause()
        seen["retry"] = str(app.screen.query_one("#preview").render())

    run(app, script)
    assert "2 open obligation(s) of u3 owed to S3 become escalated" in seen["pause"]
    assert "vendor/left-pad.js" in seen["pause"] and "upstream statement API" in seen["pause"]
    assert "opens a new blocking obligation on u3" in seen["pause"]
    assert "become rework" in seen["retry"] and "opens nothing" in seen["retry"]


def test_at_80x24_the_decision_dialog_takes_its_rationale_after_an_action(demo: Any) -> None:
    """An operator's review: at 80×24 the preview pushed the rationale off the dialog and out of
    Tab's turn: Tab, Tab, typing and Enter pressed Cancel, nothing recorded. The field now comes
    before the preview; Select, Tab, the rationale, Enter records the decision."""
    from textual.widgets import Select

    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    before = len(demo.store("units").read().events)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await decide_on(pilot, app, "u3")
        app.screen.query_one(Select).focus()
        await pilot.press("enter")  # the Select's list
        await pilot.pause()
        await pilot.press("down", "enter")  # its first action
        await pilot.pause()
        seen["action"] = app.screen.query_one(Select).value
        seen["region"] = app.screen.query_one("#rationale").region
        frame = app.screen.query_one("#frame")
        await pilot.press("pagedown")  # the preview below the dialog's edge, read by keys
        await pilot.pause()
        seen["scrolled"] = (frame.scroll_y, frame.max_scroll_y)
        await pilot.press("pageup")
        await pilot.pause()
        await pilot.press("tab", *"contain it", "enter")
        await until(pilot, lambda: len(app.screen_stack) == 1)

    run(app, script, size=(80, 24))
    assert seen["region"].bottom <= 24, seen["region"]  # on screen
    assert seen["scrolled"][1] > 0 and seen["scrolled"][0] > 0, seen["scrolled"]
    events = demo.store("units").read().events
    assert len(events) == before + 1, "nothing recorded"
    assert (events[-1]["kind"], events[-1]["unit"], events[-1]["action"], events[-1]["rationale"]) == (
        "decision",
        "u3",
        seen["action"],
        "contain it",
    )


def test_a_dialogs_choose_line_goes_once_a_choice_is_made(demo: Any) -> None:
    """An operator's review: "choose a disposition" stayed under the field once one was chosen."""
    from textual.widgets import Select

    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("r")
        assert await opened(pilot, ResolveDialog)
        await pilot.click("#confirm")
        await pilot.pause()
        seen["asked"] = str(app.screen.query_one("#why").render())
        app.screen.query_one(Select).value = "no-action"
        await pilot.pause()
        seen["chosen"] = str(app.screen.query_one("#why").render())

    run(app, script)
    assert seen["asked"] == "choose a disposition" and seen["chosen"] == ""


def test_the_answer_dialog_says_a_closed_unit_will_not_read_it(demo: Any) -> None:
    """An operator's review: a question of a unit whose lease is over was answered with no word
    that no one reads it. The dialog says so before the answer is written, in the engine's words."""
    from engine.commands.router import route
    from engine.commands.units import close
    from engine.doors.api import UnitDoor

    question = UnitDoor(demo.root / ".worktrees" / "r1" / ".regulator-lease.json").ask(
        {"question": "1.3 or 2.0?"}
    )
    route(demo)
    close(demo, "r1")
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        app.table.cursor = app.table.keys.index(question.obligation)
        await pilot.pause()
        await pilot.press("r")
        assert await opened(pilot, ResolveDialog)
        seen["notes"] = [str(n.render()) for n in app.screen.query(".note")]

    run(app, script)
    assert seen["notes"] == [
        "note: unit r1 is closed: its lease is over, so it will not read this answer (a unit reads answers "
        "only while its lease is current; it is recorded all the same)"
    ]


def test_the_accept_dialog_says_it_commits_and_shows_a_diff(demo: Any) -> None:
    path = "regulator/policy/routing.yaml"
    text = (demo.root / path).read_text()
    propose(demo, path, (text + "# a comment line\n").encode(), "document it", Actor(person="alice"))
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("6")
        app.table.cursor = next(
            i for i, k in enumerate(app.table.keys) if getattr(k, "kind", "") == "proposal"
        )
        await pilot.pause()
        await pilot.press("y")
        assert await opened(pilot, ProposalDialog)
        seen["commits"] = str(app.screen.query_one("#commits").render())
        seen["diff"] = "\n".join(str(s.render()) for s in app.screen.query("#diff Static"))

    run(app, script)
    assert "commits it to git" in seen["commits"]
    assert "+# a comment line" in seen["diff"] and "@@" in seen["diff"]


def test_ack_from_the_registers_view_commits(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    finding = demo.root / "findings" / "F-alert-path-dead.md"

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        app.table.cursor = app.table.keys.index(RowKey("finding", "F-alert-path-dead"))
        await pilot.pause()
        await pilot.press("c")
        assert await opened(pilot, AckDialog)
        assert "commits" in str(app.screen.query_one("#commits").render())
        await pilot.click("#confirm")
        assert await until(pilot, lambda: any("acknowledged" in n for n in notes(app))), notes(app)

    run(app, script)
    assert 'ack: "2026-11-29 alice"' in finding.read_text()
    log = subprocess.run(
        ["git", "-C", str(demo.root), "log", "-1", "--format=%B"], capture_output=True, text=True, check=True
    ).stdout
    assert "registry: ack F-alert-path-dead by alice" in log and "Authorized-by: alice" in log
