"""The control room under Pilot (design §10): views, actions, grants, filter, lifecycle, live."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from controlroom.app import ControlRoom
from engine.checkout.workspace import Workspace
from engine.commands.actors import Actor
from engine.commands.proposals import decide, propose
from engine.read.load import load
from tests.helpers import NOW, REGULATOR, clean_env, report_args
from tests.room import demo_workspace, once_of

SIZE = (150, 42)


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def run(app: ControlRoom, script: Any) -> None:
    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await script(pilot)

    asyncio.run(main())


def line(app: ControlRoom, y: int) -> str:
    return app.table.render_line(y).text


def events(ws: Workspace, store: str) -> list[dict]:
    return ws.store(store).read().events


def test_keys_switch_views(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        for key, view in zip(
            "234561", ("units", "memory", "signals", "registers", "identity", "obligations"), strict=True
        ):
            await pilot.press(key)
            seen[view] = (app.view, len(app.table.keys))

    run(app, script)
    assert {v: s[0] for v, s in seen.items()} == {v: v for v in seen}
    assert seen["units"][1] == 8 and seen["memory"][1] == 3 and seen["signals"][1] == 2
    assert seen["obligations"][1] == 3


def test_help_lists_sort_and_all_only_where_they_act(demo: Any) -> None:
    """An operator's review: `?` listed `s` and `a` in every view, and pressed in Sensors they said
    "has one order" and "nothing to add". Each view's help lists the keys that act there."""
    app = ControlRoom(demo, "alice", watch=False)
    seen: dict[str, str] = {}

    async def script(pilot: Any) -> None:
        for key, view in (("7", "sensors"), ("2", "units"), ("3", "memory"), ("1", "obligations")):
            await pilot.press(key)
            await pilot.press("question_mark")
            seen[view] = "\n".join(app.screen.lines)  # type: ignore[attr-defined]
            await pilot.press("escape")

    run(app, script)
    sort, every = "cycle the sort of this view", "all rows (resolved, retracted) or only the live ones"
    assert sort not in seen["sensors"] and every not in seen["sensors"]
    assert sort in seen["units"] and every not in seen["units"]  # every unit is listed
    assert sort in seen["memory"] and every in seen["memory"] and "sorts: age, expiry, unit" in seen["memory"]
    assert sort in seen["obligations"] and every in seen["obligations"]


def test_resolve_with_dialog_writes_the_disposition(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    before = len(events(demo, "signals"))

    async def script(pilot: Any) -> None:
        from textual.widgets import Select

        from widgets.dialogs import ResolveDialog

        target = app.table.current_key
        await pilot.press("r")
        assert isinstance(app.screen, ResolveDialog)
        app.screen.query_one(Select).value = "accepted-risk"
        await pilot.pause()  # the meaning of the choice appears under it: the layout moves
        await pilot.click("#rationale")
        await pilot.press(*"fix lands upstream")
        await pilot.click("#confirm")
        await pilot.pause()
        assert not isinstance(app.screen, ResolveDialog)
        assert app.snap.state.obligations[target].status == "resolved"

    run(app, script)
    written = events(demo, "signals")
    assert len(written) == before + 1
    assert written[-1]["kind"] == "disposition" and written[-1]["by"] == "alice"
    assert (written[-1]["disposition"], written[-1]["rationale"]) == ("accepted-risk", "fix lands upstream")
    # the room signs its operator's action with the operator's key (design §15.1), and it counts
    from engine.base import sshsig
    from engine.checkout.authority import signed_bytes

    keys = demo.authority().people.keys["alice"]
    assert sshsig.verify(written[-1]["sig"], signed_bytes(written[-1]), keys)
    assert load(demo).uncounted == []


def test_cancel_writes_nothing(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    before = demo.store("signals").path.read_bytes()

    async def script(pilot: Any) -> None:
        await pilot.press("r")
        await pilot.press("escape")
        await pilot.pause()

    run(app, script)
    assert demo.store("signals").path.read_bytes() == before


def add_bob(ws: Workspace) -> None:
    import yaml

    path = ws.root / "regulator/policy/interaction.yaml"
    policy = yaml.safe_load(path.read_text())
    policy["people"]["bob"] = {"grants": ["resolve"], "resolve": ["info", "advisory"]}
    proposal = propose(
        ws,
        "regulator/policy/interaction.yaml",
        yaml.safe_dump(policy).encode(),
        "bob joins",
        Actor(person="alice"),
    )
    decide(ws, proposal["id"], "alice", "bob joins the desk", "accepted")


def test_action_without_grant_is_disabled_with_reason(demo: Any) -> None:
    add_bob(demo)
    app = ControlRoom(demo, "bob", watch=False)
    signals_before = demo.store("signals").path.read_bytes()
    observed: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        from widgets.dialogs import ResolveDialog

        observed["check"] = app.check_action("act", ("resolve",))
        await pilot.press("r")
        await pilot.pause()
        observed["dialog"] = isinstance(app.screen, ResolveDialog)
        detail = app._detail.text
        observed["detail"] = detail
        await pilot.press("3")
        observed["retract"] = app.check_action("act", ("retract",))

    run(app, script)
    assert observed["check"] is None  # shown, disabled
    assert observed["dialog"] is False
    assert "disabled" in observed["detail"] and "bob may not resolve blocking" in observed["detail"]
    assert observed["retract"] is None
    assert demo.store("signals").path.read_bytes() == signals_before


def test_read_only_hides_every_write(demo: Any) -> None:
    app = ControlRoom(demo, "alice", read_only=True, watch=False)
    checks: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        checks["resolve"] = app.check_action("act", ("resolve",))
        await pilot.press("3")
        checks["retract"] = app.check_action("act", ("retract",))

    run(app, script)
    assert checks == {"resolve": False, "retract": False}


def test_a_read_only_screenshot_routes_nothing_and_says_read_only(ws: Any, tmp_path: Path) -> None:
    """README: `--read-only` "hides every write and does not route"; so does its screenshot (an
    operator's review: `--read-only --screenshot` routed the waiting signal and pictured a room
    that offered `r resolve`)."""
    ws.run(*report_args(affects=["u1"], severity="blocking"), "--by", "alice", check=True)
    before = ws.digest()
    svg = tmp_path / "ro.svg"
    done = ws.run("controlroom", "--as", "alice", "--read-only", "--screenshot", str(svg))
    assert done.returncode == 0, done.stderr
    assert ws.digest() == before  # the signal still waits: nothing routed, nothing written
    assert ws.json("status")["unrouted"] == 1
    text = svg.read_text().replace("&#160;", " ")
    assert "read-only" in text
    done = ws.run("controlroom", "--as", "alice", "--screenshot", str(svg))  # not read-only: routes
    assert done.returncode == 0 and ws.json("status")["unrouted"] == 0


def test_filter_narrows_the_view(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    counts: list[Any] = []

    async def script(pilot: Any) -> None:
        counts.append(len(app.table.keys))
        await pilot.press("slash")
        await pilot.press(*"upstream")
        await pilot.press("enter")
        await pilot.pause()
        counts.append(len(app.table.keys))
        counts.append(line(app, 1))
        await pilot.press("escape")
        counts.append(len(app.table.keys))

    run(app, script)
    assert counts[0] == 3 and counts[1] == 1 and "upstream statement API" in counts[2] and counts[3] == 3


def test_enter_opens_the_lifecycle(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    shown: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        from widgets.dialogs import TextScreen

        await pilot.press("enter")
        await pilot.pause()
        shown["screen"] = isinstance(app.screen, TextScreen)
        shown["lines"] = getattr(app.screen, "lines", [])

    run(app, script)
    text = "\n".join(shown["lines"])
    assert shown["screen"]
    assert "signal" in text and "routed: reported blocking" in text and "opened on u1" in text


def test_retract_asks_for_confirmation(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    before = demo.store("memory").path.read_bytes()
    state: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        from widgets.dialogs import RetractDialog

        await pilot.press("3")
        key = app.table.current_key
        assert isinstance(key, str)
        await pilot.press("x")
        assert isinstance(app.screen, RetractDialog)
        # the field to confirm in does not show the answer (it read as filled in: an operator's review)
        state["placeholder"] = app.screen.query_one("#typed", Input).placeholder
        await pilot.click("#reason")
        await pilot.press(*"wrong fact")
        await pilot.click("#confirm")
        await pilot.pause()
        state["still_open"] = isinstance(app.screen, RetractDialog)
        state["unchanged"] = demo.store("memory").path.read_bytes() == before
        await pilot.click("#typed")
        await pilot.press(*key[-4:])
        await pilot.click("#confirm")
        await pilot.pause()
        state["key"] = key

    run(app, script)
    assert state["still_open"] and state["unchanged"]
    assert (
        state["key"][-4:] not in state["placeholder"] and state["placeholder"] == "the id's last 4 characters"
    )
    last = events(demo, "memory")[-1]
    assert last["kind"] == "retraction" and last["entry"] == state["key"] and last["reason"] == "wrong fact"


def test_a_signal_appended_by_another_process_appears(demo: Any) -> None:
    app = ControlRoom(demo, "alice")
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("4")
        start = len(app.table.keys)
        env = clean_env(REGULATOR_NOW=NOW, REGULATOR_SIGNING_KEY=str(demo.root / ".demo-keys" / "alice"))
        done = subprocess.run(
            [
                REGULATOR,
                "--root",
                str(demo.root),
                *report_args(subject="[red]INJ[/red]", severity="advisory", affects=None),
                "--by",
                "alice",
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr

        def routed() -> bool:
            return any(r["signal"] == app.table.keys[-1] for r in app.snap.state.routings.values())

        # the row, then its routing: on a loaded machine the room may show the signal on one fold
        # and route it on the next (the README command's run failed once on the moment between)
        deadline = time.monotonic() + 20
        while (len(app.table.keys) == start or not routed()) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        seen["rows"] = (start, len(app.table.keys))
        seen["line"] = line(app, len(app.table.keys))
        seen["routed"] = routed()

    run(app, script)
    assert seen["rows"][1] == seen["rows"][0] + 1
    assert "[red]INJ[/red]" in seen["line"]  # shown literally, never as markup
    assert seen["routed"]  # the control room routed it: the operator sees obligations


def test_markup_and_escapes_in_store_text_are_literal(demo: Any) -> None:
    from engine.commands.signals import report_intelligence

    report_intelligence(
        demo,
        {
            "subject": "[red]INJ[/red] \x1b[31mred",
            "claim": "c",
            "observation": "o",
            "evidence": ["e"],
            "confidence": "low",
            "reportedSeverity": "advisory",
        },
        Actor(person="alice"),
    )
    app = ControlRoom(demo, "alice", watch=False)
    text: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("4")
        text["row"] = line(app, 3)
        await pilot.press("end")
        await pilot.press("enter")
        await pilot.pause()
        text["life"] = "\n".join(getattr(app.screen, "lines", []))

    run(app, script)
    assert "[red]INJ[/red] \\x1b[31mred" in text["row"]
    assert "\x1b" not in text["row"] and "[red]INJ[/red]" in text["life"] and "\x1b" not in text["life"]


def test_once_exit_codes(demo: Any) -> None:
    env = clean_env(REGULATOR_NOW=NOW, REGULATOR_SIGNING_KEY=str(demo.root / ".demo-keys" / "alice"))
    done = once_of(demo)
    assert done.returncode == 1
    assert "u1 is in progress and held by blocking obligation" in done.stdout
    assert "vendor/left-pad.js" in done.stdout
    done = subprocess.run(
        [REGULATOR, "--root", str(demo.root), "controlroom", "--once", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["exitCode"] == 1 and len(data["exitReasons"]) == 2
    for ob in [o for o in data["obligations"] if o["blocks"] and o["status"] == "open"]:
        subprocess.run(
            [
                REGULATOR,
                "--root",
                str(demo.root),
                "obligation",
                "resolve",
                ob["id"],
                "--by",
                "alice",
                "--disposition",
                "accepted-risk",
                "--rationale",
                "known",
            ],
            env=env,
            check=True,
        )
    done = subprocess.run(
        [REGULATOR, "--root", str(demo.root), "controlroom", "--once", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    data = json.loads(done.stdout)
    assert done.returncode == 0, data["exitReasons"]
    assert data["exitReasons"] == [] and data["lint"]["errors"] == []


def test_replaced_store_reloads_and_a_corrupt_line_is_reported(demo: Any) -> None:
    app = ControlRoom(demo, "alice")
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("4")
        path = demo.store("signals").path
        seen["before"] = len(app.table.keys)
        # a garbage line appended by someone else: reported in the header, never a crash
        with open(path, "ab") as handle:
            handle.write(b"this is not json\n")
        deadline = time.monotonic() + 20
        while "bad line" not in str(app._topbar.render()) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        seen["header"] = str(app._topbar.render())
        # the store replaced by a shorter one (a restore from backup): read again in full
        lines = path.read_bytes().splitlines(keepends=True)
        first_signal = next(i for i, raw in enumerate(lines) if b'"kind":"signal"' in raw)
        path.write_bytes(b"".join(lines[: first_signal + 1]))
        deadline = time.monotonic() + 20
        while len(app.table.keys) != 1 and time.monotonic() < deadline:
            await pilot.pause(0.05)
        seen["after"] = len(app.table.keys)

    run(app, script)
    assert seen["before"] == 2
    assert "1 bad line(s)" in seen["header"]
    assert seen["after"] == 1


def test_a_new_contract_appears_in_the_units_view(demo: Any) -> None:
    app = ControlRoom(demo, "alice")
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("2")
        seen["before"] = len(app.table.keys)
        (demo.root / "contracts" / "u7.json").write_text(
            json.dumps({"id": "u7", "type": "implement", "profile": "implement", "title": "late arrival"})
        )
        deadline = time.monotonic() + 20
        while len(app.table.keys) == seen["before"] and time.monotonic() < deadline:
            await pilot.pause(0.05)
        seen["after"] = list(app.table.keys)

    run(app, script)
    assert "u7" in seen["after"] and len(seen["after"]) == seen["before"] + 1


def test_closing_the_room_leaves_a_checkpoint_the_next_start_reads(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.read import checkpoint

    monkeypatch.setenv("REGULATOR_CHECKPOINT_BYTES", "0")  # the demo's log is small
    path = checkpoint.path_of(demo)
    seen: dict = {}

    async def rows(pilot: Any) -> None:
        app = pilot.app
        seen.setdefault("rows", []).append([line(app, y) for y in range(1, 8)])
        seen.setdefault("restored", []).append(app.snap.state.checkpointed > 0)

    run(ControlRoom(demo, "alice", read_only=True, watch=False, background_checks=False), rows)
    assert not path.exists()  # read-only: nothing written, not even a cache
    run(ControlRoom(demo, "alice", watch=False, background_checks=False), rows)
    assert path.exists()
    run(ControlRoom(demo, "alice", watch=False, background_checks=False), rows)
    assert seen["restored"] == [False, False, True]
    assert seen["rows"][2] == seen["rows"][1] == seen["rows"][0]


def test_dialogs_show_store_text_escaped(demo: Any) -> None:
    from engine.checkout.workspace import LEASE_FILE, read_lease
    from engine.commands.memory import remember

    lease = read_lease(demo.root / ".worktrees" / "u1" / LEASE_FILE)
    hostile = {
        "subject": "[red]INJ[/red] \u202eevil",
        "note": "\x1b]52;c;ZXZpbA==\x07 line\nbreak \\x1b",
        "evidence": ["e"],
        "reviewBy": "2026-12-20",
    }
    entry = remember(demo, hostile, lease)["id"]
    app = ControlRoom(demo, "alice", watch=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        from textual.widgets import Static

        from widgets.dialogs import RetractDialog

        await pilot.press("3")
        app.table.cursor = app.table.keys.index(entry)
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, RetractDialog)
        seen["dialog"] = "\n".join(str(s.content) for s in app.screen.query(Static))

    run(app, script)
    shown = seen["dialog"]
    assert "[red]INJ[/red] \\u202eevil: \\x1b]52;c;ZXZpbA==\\x07 line\\nbreak \\\\x1b" in shown
    assert not any(char in shown for char in ("\x1b", "\x07", "\u202e"))


def test_a_signal_that_does_not_read_back_whole_is_a_row_not_a_crash(demo: Any) -> None:
    """A signal appended by hand with a number out of range where the fold's shape does not look
    (D-184): the signals view shows its row (its id, no subject), and the room goes on."""
    from engine.log.store import event_hash

    event = {"kind": "signal", "id": "sx-out-of-range", "subject": "hand", "reportedSeverity": "info",
             "unit": None, "by": None, "at": "2026-11-29T12:00:00Z", "pad": float("inf")}  # fmt: skip
    store = demo.store("signals")
    event["prev"] = store._tail()[0]
    event["hash"] = event_hash(event)  # chained as a writer with the account's shell would
    with open(store.path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(event, separators=(",", ":")).replace("Infinity", "1e999") + "\n")
    app = ControlRoom(demo, "alice", watch=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("4")
        await pilot.pause()
        seen["rows"] = len(app.table.keys)
        seen["lines"] = [line(app, y) for y in range(12)]

    run(app, script)
    assert seen["rows"] == 3  # the demo's two, and this one
    assert any(" of-range " in text for text in seen["lines"]), seen["lines"]  # its id, by its last 8
