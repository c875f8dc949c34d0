"""Snapshots of every view and every dialog at 80×24 and 150×42 on the demo workspace (with a pending
proposal, so the Identity view and its dialogs have one): fixed clock (injected), size and theme;
the cursor blink is turned off here, in the test. snap_compare runs the app itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.widgets import Input, Select

from controlroom.app import ControlRoom
from controlroom.demo import build
from controlroom.views import VIEW_DEFS, RowKey
from engine.base import clock
from engine.checkout.workspace import Workspace
from engine.commands.actors import Actor
from tests.helpers import NOW
from tests.room import until

SIZES = {"80x24": (80, 24), "150x42": (150, 42)}
PROPOSAL_ID = "01M8KJT9G0PR0P0SA1DEM0PAGE"
PREDICTION_ID = "01M8KJT9G0PREDCT10NDEM0PAG"
SHOWN_ROOT = "/tmp/regulator-demo-x/fleet-repo"  # where `?` says the workspace is, in a snapshot
FIXED = clock.parse_time(NOW)


def _demo(tmp_path_factory: pytest.TempPathFactory, name: str) -> Workspace:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGULATOR_NOW", NOW)
        patch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
        return build(tmp_path_factory.mktemp(name) / "fleet-repo", clock_mode="pinned")


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """The demo, and alice's proposal to document the routing policy (pending)."""
    from engine.base import ids
    from engine.commands.proposals import propose

    ws = _demo(tmp_path_factory, "snap")
    path = "regulator/policy/routing.yaml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGULATOR_NOW", NOW)
        # a person event's id derives from the workspace's id, which derives from its folder: the
        # folder differs from run to run, so the proposal's id is given here, as the clock is
        patch.setattr(ids, "new_id", lambda seed: PROPOSAL_ID)
        text = (ws.root / path).read_text() + "# floors are matched over subject, observation and rationale\n"
        propose(ws, path, text.encode(), "document where floors look", Actor(person="alice"))
    return ws


@pytest.fixture(scope="module")
def predicted_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """The demo with alice's prediction awaiting its outcome (what the outcome dialog is for)."""
    from engine.base import ids
    from engine.commands.router import route
    from engine.commands.signals import report_intelligence

    ws = _demo(tmp_path_factory, "predicted")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGULATOR_NOW", NOW)
        patch.setattr(ids, "new_id", lambda seed: PREDICTION_ID)  # as the proposal's, above
        report_intelligence(
            ws,
            {
                "subject": "the release slips",
                "claim": "The release slips past the 1st.",
                "observation": "three blockers open",
                "evidence": ["tracker"],
                "confidence": "medium",
                "reportedSeverity": "info",
                "prediction": {"resolvesAt": "2026-12-01T00:00:00Z"},
            },
            Actor(person="alice"),
        )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGULATOR_NOW", NOW)
        route(ws)  # before the room opens: its first frame does not wait on a routing worker
    return ws


QUESTION_ID = "01M8KJT9G0QUEST10NDEM0PAGE"


@pytest.fixture(scope="module")
def asked_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """The demo with r1's question to a person, routed (what the answer dialog is for, design §22)."""
    from controlroom.demo import worktree_of
    from engine.base import ids
    from engine.checkout.workspace import LEASE_FILE
    from engine.commands.router import route
    from engine.doors.api import UnitDoor

    ws = _demo(tmp_path_factory, "asked")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGULATOR_NOW", NOW)
        patch.setattr(ids, "new_id", lambda seed: QUESTION_ID)  # as the proposal's, above
        door = UnitDoor(worktree_of(ws.root, "r1") / LEASE_FILE)
        door.ask({"question": "Pin left-pad to upstream 1.3.0, or move the vendored copy to 2.0?"})
        route(ws)
    return ws


@pytest.fixture(scope="module")
def damaged_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """The demo with a line of garbage in the memory store (what the dismiss dialog is for)."""
    ws = _demo(tmp_path_factory, "damaged")
    with open(ws.store("memory").path, "ab") as handle:
        handle.write(b"not json: a line written by hand\n")
    return ws


def room(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> ControlRoom:
    from controlroom.demo import KEY_DIR, OWNER
    from engine.trust import signing

    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    # opened with the demo's key, as `regulator demo` opens it (`?` names it), whichever test built
    # the module's workspace first
    monkeypatch.setattr(signing, "_explicit", ws.root / KEY_DIR / OWNER)
    app = ControlRoom(ws, "alice", watch=False, background_checks=False, now=lambda: FIXED)
    app.live = "● live"
    return app


async def steady(pilot: Any) -> None:
    """Stop every text cursor blinking (a snapshot must not depend on timing)."""
    await pilot.pause()
    for box in pilot.app.screen.query(Input):
        box.cursor_blink = False
    await pilot.pause()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("view", [v.name for v in VIEW_DEFS])
def test_view_snapshot(
    snap_compare: Any, demo_ws: Workspace, monkeypatch: pytest.MonkeyPatch, view: str, size: str
) -> None:
    key = next(v.key for v in VIEW_DEFS if v.name == view)

    async def run_before(pilot: Any) -> None:
        await pilot.press(key)
        await steady(pilot)

    assert snap_compare(room(demo_ws, monkeypatch), run_before=run_before, terminal_size=SIZES[size])


def _on(key: object) -> Callable[[Any], Awaitable[None]]:
    async def put(pilot: Any) -> None:
        pilot.app.table.cursor = pilot.app.table.keys.index(key)
        await pilot.pause()

    return put


def _first(kind: str) -> Callable[[Any], Awaitable[None]]:
    async def put(pilot: Any) -> None:
        pilot.app.table.cursor = next(
            i for i, k in enumerate(pilot.app.table.keys) if getattr(k, "kind", "") == kind
        )
        await pilot.pause()

    return put


async def _on_question(pilot: Any) -> None:
    """The Obligations view, on r1's question (its obligation's id derives from its signal's)."""
    from engine.base import ids

    await _on(ids.question_obligation_id(QUESTION_ID))(pilot)


async def _shown_root(pilot: Any) -> None:
    """`?` names the workspace's folder, which differs from run to run: a fixed one is shown."""
    app = pilot.app
    lines, root = app.help_lines, str(app.ws.root)
    app.help_lines = lambda: [line.replace(root, SHOWN_ROOT) for line in lines()]


def _choose(value: str) -> Callable[[Any], Awaitable[None]]:
    async def put(pilot: Any) -> None:
        # the dialog is read in a worker before it opens (controlroom.prepare)
        assert await until(pilot, lambda: bool(pilot.app.screen.query(Select)))
        pilot.app.screen.query_one(Select).value = value
        await pilot.pause()

    return put


# each dialog: the keys and steps that open it (a step is a key or a coroutine), and its workspace
DIALOGS: dict[str, tuple[tuple[object, ...], str]] = {
    "resolve": (("r", _choose("accepted-risk")), "demo_ws"),
    "retract": (("3", "x"), "demo_ws"),
    "decide": (("2", _on("u3"), "d", _choose("pause")), "demo_ws"),
    "accept": (("6", _first("proposal"), "y"), "demo_ws"),
    "reject": (("6", _first("proposal"), "n"), "demo_ws"),
    "ack": (("5", _on(RowKey("finding", "F-alert-path-dead")), "c"), "demo_ws"),
    "resolve-finding": (("5", _on(RowKey("finding", "F-alert-path-dead")), "r"), "demo_ws"),
    "dismiss": (("5", "d"), "damaged_ws"),
    "answer": ((_on_question, "r"), "asked_ws"),
    "outcome": (("4", _on(PREDICTION_ID), "o", _choose("yes")), "predicted_ws"),
    "lifecycle": (("enter",), "demo_ws"),
    "keys": ((_shown_root, "question_mark"), "demo_ws"),
}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("dialog", list(DIALOGS))
def test_dialog_snapshot(
    snap_compare: Any, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, dialog: str, size: str
) -> None:
    steps, fixture = DIALOGS[dialog]

    async def run_before(pilot: Any) -> None:
        for step in steps:
            if isinstance(step, str):
                await pilot.press(step)
            else:
                await step(pilot)  # type: ignore[operator]
        # a dialog the room reads in a worker opens a moment later (controlroom.prepare)
        assert await until(pilot, lambda: len(pilot.app.screen_stack) > 1)
        await steady(pilot)

    app = room(request.getfixturevalue(fixture), monkeypatch)
    assert snap_compare(app, run_before=run_before, terminal_size=SIZES[size])
