"""The control room, second cut (issue 14): it never blocks, never shows a stale state, and keeps
the operator's habits. Each test here failed on the first cut."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from controlroom.app import WAITING, ControlRoom
from controlroom.views import RowKey
from engine.base import clock
from engine.checkout.workspace import Workspace
from engine.commands.actors import Actor
from engine.commands.proposals import propose
from engine.commands.signals import report_intelligence
from tests.helpers import NOW, REGULATOR, clean_env
from tests.room import demo_workspace, once_of, run, until

SIZE = (150, 42)


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def line(app: ControlRoom, y: int) -> str:
    return app.table.render_line(y).text


def header(app: ControlRoom) -> str:
    return str(app._topbar.render())


def notes(app: ControlRoom) -> list[str]:
    return [n.message for n in app._notifications]


def signal(ws: Workspace, subject: str, severity: str = "blocking", affects: list[str] | None = None) -> None:
    report_intelligence(
        ws,
        {
            "subject": subject,
            "claim": "c",
            "observation": "o",
            "evidence": ["e"],
            "confidence": "high",
            "reportedSeverity": severity,
            "affectedUnits": affects or [],
        },
        Actor(person="alice"),
    )


def test_a_signal_reported_while_no_room_was_open_shows_routed(demo: Any) -> None:
    signal(demo, "vendor/leftpad2.js", "blocking", ["u4"])
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        assert await until(pilot, lambda: not app.waiting and not app.snap.state.unrouted_ids), header(app)
        seen["header"] = header(app)
        await pilot.press("2")
        seen["u4"] = line(app, app.table.keys.index("u4") + 1)
        await pilot.press("1")
        seen["rows"] = [line(app, y) for y in range(1, len(app.table.keys) + 1)]

    run(app, script)
    assert "3 blocking" in seen["header"] and "4 held" in seen["header"]  # 3 by obligations, 1 by a finding
    assert "■" in seen["u4"]  # the unit shows its hold
    assert any("vendor/leftpad2.js" in row and "u4" in row for row in seen["rows"])


HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_keys_work_while_another_process_holds_the_decide_lock(demo: Any) -> None:
    app = ControlRoom(demo, "alice", background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(demo.state_dir / "decide.lock"), "4"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            signal(demo, "arrives while locked", "advisory", ["u4"])
            assert await until(pilot, lambda: app.waiting), "the room never said it was waiting"
            seen["header"] = header(app)
            seen["status"] = str(app._status.render())
            await pilot.press("2")
            await pilot.press("down")
            await pilot.pause()
            seen["view"] = app.view
            seen["cursor"] = app.table.cursor
            seen["holder alive"] = holder.poll() is None
        finally:
            holder.wait(timeout=20)
        assert await until(pilot, lambda: not app.waiting and not app.snap.state.unrouted_ids)
        seen["after"] = header(app)
        seen["waiting after"] = app.waiting

    run(app, script)
    assert "waiting" in seen["header"] and WAITING in seen["status"]
    assert seen["view"] == "units" and seen["cursor"] == 1 and seen["holder alive"]
    assert WAITING not in seen["after"] and seen["waiting after"] is False and "0 unrouted" in seen["after"]


def test_enter_opens_the_lifecycle_once(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("enter")
        await pilot.pause()
        seen["depth"] = len(app.screen_stack)
        await pilot.press("escape")
        await pilot.pause()
        seen["after esc"] = len(app.screen_stack)
        await pilot.press("enter")
        await pilot.press("q")
        await pilot.pause()
        seen["after q"] = len(app.screen_stack)

    run(app, script)
    assert seen == {"depth": 2, "after esc": 1, "after q": 1}


def test_a_commit_refreshes_lint(demo: Any) -> None:
    git = ["git", "-C", str(demo.root), "-c", "user.name=x", "-c", "user.email=x@example.invalid"]
    subprocess.run([*git, "checkout", "-q", "-b", "work"], check=True)
    finding = demo.root / "findings" / "F-alert-path-dead.md"
    app = ControlRoom(demo, "alice")
    seen: dict[str, Any] = {}

    def lint_rows() -> str:  # what the Registers view's lint rows say (their lifecycle, in full)
        issues = app.snap.lint.issues if app.snap.lint else []
        return "\n".join(i.message for i in issues if i.code == "unauthorized-change")

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        assert await until(pilot, lambda: "lint ✓" in header(app))
        finding.write_text(finding.read_text().replace("resolved: false", "resolved: true"))
        assert await until(pilot, lambda: "uncommitted change" in lint_rows()), lint_rows()
        seen["before"] = header(app)
        subprocess.run([*git, "commit", "-q", "-am", "resolve it"], check=True)  # only .git changes
        seen["refreshed"] = await until(pilot, lambda: "changed since trunk" in lint_rows())
        seen["rows"] = lint_rows()

    run(app, script)
    assert "lint ✗1" in seen["before"]
    assert seen["refreshed"], seen["rows"]


def test_the_clock_ticks_between_store_changes(demo: Any) -> None:
    now = [clock.parse_time(NOW)]
    app = ControlRoom(
        demo, "alice", watch=False, background_checks=False, now=lambda: now[0], tick_seconds=0.05
    )
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        seen["before"] = line(app, 1)
        now[0] += timedelta(minutes=4)
        assert await until(pilot, lambda: " 4m " in line(app, 1))
        now[0] += timedelta(days=26)  # the 5-day memory entry expires; the 30-day one comes within 7
        assert await until(pilot, lambda: "26d" in line(app, 1))
        seen["header"] = header(app)
        await pilot.press("3")
        seen["memory"] = [line(app, y) for y in range(1, 4)]

    run(app, script)
    assert " 0s " in seen["before"]
    assert "1 expiring ≤7d" in seen["header"]
    assert any("expired" in row for row in seen["memory"]) and any("4d!" in row for row in seen["memory"])


def test_cells_are_cut_with_an_ellipsis_by_terminal_cells(demo: Any) -> None:
    from engine.commands.obligations import resolve

    signal(demo, "漢字漢字 wide subject that is long enough to be cut at eighty columns", "advisory", ["u4"])
    from engine.commands.router import route
    from engine.read.load import load

    route(demo)
    target = next(o for o in load(demo).obligations.values() if o.unit == "u3" and o.severity == "advisory")
    resolve(demo, target.id, "alice", "accepted-risk", "known")
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("a")  # resolved rows too
        seen["rows"] = [line(app, y) for y in range(1, len(app.table.keys) + 1)]
        await pilot.press("2")
        seen["units"] = [line(app, y) for y in range(1, len(app.table.keys) + 1)]

    run(app, script, size=(80, 24))
    resolved = next(row for row in seen["rows"] if target.id[-8:] in row)
    assert "accepted…" in resolved  # not "accepted-"
    wide = next(row for row in seen["rows"] if "漢字" in row)
    assert cell_len(wide) == 80 and wide.rstrip().endswith("…")
    assert any(
        "release-hardeni…" in row
        for row in seen["units"]  # the id gives way to the title (16 cells)
    )


def test_a_wide_character_does_not_shift_the_columns_after_it(tmp_path: Path) -> None:
    from textual.app import App

    from widgets.columns import Column
    from widgets.table import LineTable

    columns = (Column("a", 6), Column("b", 4), Column("c", 0, 0, 4))
    rows = {"k1": ["漢字漢字漢字", "x", "end"], "k2": ["ab", "x", "end"]}

    class One(App[None]):
        def compose(self) -> Iterator[Any]:
            table: LineTable[str] = LineTable(columns)
            table.set_rows(list(rows), lambda key: rows[key])
            yield table

    app = One()
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with app.run_test(size=(40, 5)) as pilot:
            await pilot.pause()
            table = app.query_one(LineTable)
            seen["lines"] = [table.render_line(y).text for y in (1, 2)]

    asyncio.run(main())
    first, second = seen["lines"]
    assert first.startswith(" 漢字…   x")
    column_b = [cell_len(text[: text.index("x")]) for text in (first, second)]
    assert column_b[0] == column_b[1] == 9


@pytest.mark.parametrize("size", [1_000, 250_000])
def test_a_row_inserted_above_the_cursor_leaves_it_on_its_row(size: int) -> None:
    """A live update that puts a row above the cursor (a unit's new blocking report, sorted first)
    keeps the cursor, and what the action keys act on, on the row the operator chose, at any size
    (an adversarial review: from 200,000 rows the cursor kept its index and slid to another row)."""
    from textual.app import App

    from widgets.columns import Column
    from widgets.table import LineTable

    keys = [f"ob{i:07d}" for i in range(size)]

    class Many(App[None]):
        def compose(self) -> Iterator[Any]:
            yield LineTable((Column("id", 10), Column("subject", 0, 0, 10)))

    app = Many()
    seen: list[str | None] = []

    async def main() -> None:
        async with app.run_test(size=(60, 12)) as pilot:
            table: LineTable[str] = app.query_one(LineTable)
            table.set_rows(keys, lambda key: [key, "s"])
            table.cursor = 100
            await pilot.pause()
            seen.append(table.current_key)
            table.set_rows(["ob-new-blocking", *keys], lambda key: [key, "s"])
            await pilot.pause()
            seen.append(table.current_key)
            seen.append(table.render_line(table.cursor - round(table.scroll_y) + 1).text.split()[0])

    asyncio.run(main())
    assert seen == ["ob0000100", "ob0000100", "ob0000100"]


def test_the_cli_plain_table_cuts_by_cells(capsys: pytest.CaptureFixture[str]) -> None:
    from controlroom.printing import table

    table(["name", "kind", "note"], [["漢" * 30, "a", "x"], ["plain", "b", "y"]])
    lines = capsys.readouterr().out.splitlines()
    widths = [cell_len(text[: text.index(kind)]) for text, kind in zip(lines[1:], "ab", strict=True)]
    assert widths[0] == widths[1] == 42  # 40 cells, then two spaces: aligned whatever the width
    assert "…" in lines[1]


def add_bob(ws: Workspace) -> None:
    from tests.test_controlroom import add_bob as add

    add(ws)


def test_a_disabled_key_explains_itself(demo: Any) -> None:
    add_bob(demo)
    app = ControlRoom(demo, "bob", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("r")
        await pilot.pause()
        seen["notes"] = notes(app)
        seen["screens"] = len(app.screen_stack)

    run(app, script)
    assert seen["screens"] == 1
    assert any("bob may not resolve blocking" in n for n in seen["notes"]), seen["notes"]


def test_another_views_action_key_says_where_it_acts(demo: Any) -> None:
    """An operator's day: `d`, `y`, `c`, `x`, `o` and `n` pressed in Obligations did nothing and
    said nothing. Each says where it acts; `r` (this view's) still opens its dialog."""
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("d", "y")
        await pilot.pause()
        seen["notes"] = notes(app)
        seen["screens"] = len(app.screen_stack)

    run(app, script)
    assert seen["screens"] == 1  # nothing opened
    assert (
        "`d` here does nothing: record recovery decision in Units (press 2); dismiss a line verify names (signed) in Registers (press 5)"
        in seen["notes"]
    )
    assert "`y` here does nothing: accept proposal in Identity (press 6)" in seen["notes"]


def test_a_notification_leaves_the_status_line_readable(demo: Any) -> None:
    """An operator's day: a notification covered the status line (serve's state, the row count)
    for its seconds. It now sits above the status line and the footer."""
    from textual.widgets._toast import Toast

    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("d")  # another view's key: a notification says where it acts
        await pilot.pause(0.3)
        seen["toasts"] = [t.region for t in app.screen.query(Toast)]
        seen["status"] = app._status.region

    run(app, script, notifications=True)
    assert seen["toasts"], "no notification shown"
    assert not any(t.overlaps(seen["status"]) for t in seen["toasts"]), (seen["toasts"], seen["status"])


def test_filter_as_you_type_and_cursor_kept_per_view(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("2", "down", "down")
        seen["units cursor"] = app.table.current_key
        await pilot.press("1", "slash", *"upstream")
        await pilot.pause()
        seen["typed"] = len(app.table.keys)  # no Enter yet
        await pilot.press("enter", "2")
        seen["units back"] = app.table.current_key
        seen["units rows"] = len(app.table.keys)
        await pilot.press("1")
        seen["kept"] = (len(app.table.keys), app.filter_text)

    run(app, script)
    assert seen["typed"] == 1
    assert seen["units back"] == seen["units cursor"] and seen["units rows"] == 8
    assert seen["kept"] == (1, "upstream")


def test_s_cycles_the_sort(demo: Any) -> None:
    signal(demo, "a late blocking signal", "blocking", ["u4"])
    from engine.commands.router import route

    route(demo)
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: list[Any] = []

    async def script(pilot: Any) -> None:
        for _ in range(3):
            seen.append([app.snap.state.obligations[str(k)].severity for k in app.table.keys])
            seen.append([app.snap.state.obligations[str(k)].unit for k in app.table.keys])
            seen.append(str(app._status.render()))
            await pilot.press("s")

    run(app, script)
    assert "sort: age" in seen[2] and "sort: severity" in seen[5] and "sort: unit" in seen[8]
    assert seen[0] == ["blocking", "blocking", "advisory", "blocking"]  # the log's order
    assert seen[3] == ["blocking", "blocking", "blocking", "advisory"]
    assert seen[7] == ["u1", "u3", "u3", "u4"] and seen[6][1:3] == ["blocking", "advisory"]


def test_units_sorted_by_priority_and_status_put_what_comes_first_first(demo: Any) -> None:
    """An operator's review: the units' `status` sort was alphabetical (closed first, lost after
    in-progress); a lost lease and a waiting unit come first, what is over last."""
    from controlroom import readmodel
    from engine.commands.units import close

    close(demo, "b1")
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: list[Any] = []

    async def script(pilot: Any) -> None:
        await pilot.press("2", "s")
        state = app.snap.state
        seen.append([state.units[str(k)].contract.priority for k in app.table.keys])  # type: ignore[union-attr]
        await pilot.press("s")
        seen.append(str(app._status.render()))
        seen.append([readmodel.unit_cell(app.snap, state.units[str(k)]) for k in app.table.keys])

    run(app, script)
    priorities = seen.pop(0)  # by priority: lower first, as Next-up dispatches (it was reversed)
    assert priorities == sorted(priorities) and priorities[0] < priorities[-1], priorities
    assert "sort: status" in seen[0]
    order = [
        "lost",
        "awaiting decision",
        "waiting",
        "ready to close",
        "awaiting close",
        "in-progress",
        "todo",
    ]
    order += ["closed", "aborted"]
    assert len(set(seen[1])) >= 2 and seen[1] == sorted(seen[1], key=order.index), seen[1]
    assert seen[1][-1] == "closed"  # a closed unit last, not first


def test_bad_store_lines_have_a_section(demo: Any) -> None:
    with open(demo.store("memory").path, "ab") as handle:
        handle.write(b"not json at all\n")
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        seen["first"] = line(app, 1)
        await pilot.press("enter")
        await pilot.pause()
        seen["life"] = "\n".join(getattr(app.screen, "lines", []))

    run(app, script)
    assert "memory.ndjson:" in seen["first"] and "bad line" in seen["first"]
    assert "line skipped" in seen["life"]


def test_an_empty_next_up_says_why(demo: Any) -> None:
    """An operator's review: Next-up emptied without a word once every todo unit was dispatched or
    held. Its section keeps one row that counts why, and Enter names each unit and its reason."""
    from engine.commands.units import dispatch

    for unit in ("u4", "cat-1", "rec-1"):  # the demo's queue, dispatched
        (demo.root / "wt" / unit).mkdir(parents=True)
        dispatch(demo, unit, demo.root / "wt" / unit)
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        app.table.cursor = app.table.keys.index(RowKey("idle", "next-up"))
        await pilot.pause()
        seen["row"] = app.table.render_line(app.table.cursor + 1).text
        await pilot.press("enter")
        await pilot.pause()
        seen["life"] = "\n".join(getattr(app.screen, "lines", []))

    run(app, script)
    assert not [k for k in app.table.keys if isinstance(k, RowKey) and k.kind == "next"]
    assert "Next-up: none ready" in seen["row"] and "1 held or flagged" in seen["row"], seen["row"]
    assert "7 not todo" in seen["row"], seen["row"]
    assert "Next-up is empty" in seen["life"]
    assert "release-hardening/manifest: stale-knowledge: unresolved F-alert-path-dead" in seen["life"]
    assert "u4: status in-progress" in seen["life"]
    # printed for CI (`--once`), the row points at the command, not at a key (an operator's review)
    once = once_of(demo)
    assert "7 not todo (`regulator registry next-up --explain`: each unit and why)" in once.stdout
    assert "Enter" not in once.stdout, once.stdout


def test_the_palette_screenshot_saves_a_file(
    demo: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)

    async def script(pilot: Any) -> None:
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Screenshot")
        await pilot.pause(0.3)
        await pilot.press("enter")
        assert await until(pilot, lambda: list(tmp_path.glob("regulator-*.svg")))

    run(app, script)
    saved = list(tmp_path.glob("regulator-obligations-*.svg"))
    assert len(saved) == 1 and "<svg" in saved[0].read_text()


def test_at_80_by_24_nothing_important_is_lost(demo: Any) -> None:
    path = "regulator/policy/routing.yaml"
    propose(demo, path, (demo.root / path).read_bytes() + b"# x\n", "pending one", Actor(person="alice"))
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        seen["header"] = header(app)
        seen["obligations"] = line(app, 1)
        seen["pane"] = app._detail.display
        await pilot.press("p")
        seen["pane after p"] = app._detail.display
        await pilot.press("p", "6")
        seen["identity"] = [line(app, y) for y in range(1, len(app.table.keys) + 1)]

    run(app, script, size=(80, 24))
    for part in ("2 blk", "3 held", "0 stale", "1 exp≤7d", "lint✓", "0 unrtd", "○"):  # 3: a finding holds one
        assert part in seen["header"], seen["header"]
    assert "vendor/left-pad" in seen["obligations"]
    assert seen["pane"] is False and seen["pane after p"] is True
    assert any("pending" in row for row in seen["identity"])
    assert any("as decided" in row for row in seen["identity"])


def test_check_action_before_the_first_frame(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False)
    assert app.check_action("act", ("resolve",)) is True  # not yet mounted: no table to ask
    assert app.check_action("act", ("retract",)) is False  # another view's action


def test_once_json_carries_memory_signals_and_obligation_times(demo: Any) -> None:
    signal(demo, "unrouted until once", "advisory", ["u4"])
    env = clean_env(REGULATOR_NOW=NOW, REGULATOR_SIGNING_KEY=str(demo.root / ".demo-keys" / "alice"))
    done = subprocess.run(
        [REGULATOR, "--root", str(demo.root), "controlroom", "--once", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    data = json.loads(done.stdout)
    assert {"counts", "status", "obligations", "lint", "nextUp", "exitReasons", "exitCode"} <= set(data)
    assert data["routed"] == 1
    ob = next(o for o in data["obligations"] if o["unit"] == "u4")
    assert ob["subject"] == "unrouted until once" and ob["opened"] == NOW
    assert ob["kind"] == "intelligence"  # as `obligations --json` says it (a question reads `question`)
    soon = next(m for m in data["memory"] if m["subject"] == "package mirror")
    assert soon["daysLeft"] == 5 and soon["status"] == "current"
    # every entry's days left to its review-by date, as `memory --all` says them: negative once expired
    from datetime import date

    today = date.fromisoformat(NOW[:10])
    assert all(m["daysLeft"] == (date.fromisoformat(m["reviewBy"]) - today).days for m in data["memory"])
    later = subprocess.run(  # 40 days on: it expired 35 days ago (it said 0 on every day past)
        [REGULATOR, "--root", str(demo.root), "controlroom", "--once", "--json"],
        env={**env, "REGULATOR_NOW": "2027-01-08T00:00:00Z"},
        capture_output=True,
        text=True,
    )
    gone = next(m for m in json.loads(later.stdout)["memory"] if m["subject"] == "package mirror")
    assert (gone["status"], gone["daysLeft"]) == ("expired", -35)
    assert {s["outcome"] for s in data["signals"]} == {"obligations"} and len(data["signals"]) == 3
    done = subprocess.run(
        [REGULATOR, "--root", str(demo.root), "controlroom", "--once"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert "routed: nothing was unrouted" in done.stdout.splitlines()[1]


def test_a_large_view_is_filtered_and_sorted_in_a_worker(demo: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import controlroom.app as room

    monkeypatch.setattr(room, "ARRANGE_INLINE", 0)  # the demo's three rows count as many
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("slash", *"upstream")
        seen["filtered"] = await until(pilot, lambda: len(app.table.keys) == 1)
        seen["status"] = str(app._status.render())
        await pilot.press("escape", "s", "s")
        seen["sorted"] = await until(pilot, lambda: app._arranging is None and len(app.table.keys) == 3)
        seen["rows"] = "sort: unit" in str(app._status.render())

    run(app, script)
    assert seen["filtered"] and seen["sorted"] and seen["rows"]
    assert "filtering and sorting" not in seen["status"]


def test_quitting_never_waits_for_another_writer(demo: Any) -> None:
    app = ControlRoom(demo, "alice", background_checks=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(demo.state_dir / "decide.lock"), "15"],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        signal(demo, "arrives while locked", "advisory", ["u4"])
        seen["waiting"] = await until(pilot, lambda: app.waiting)
        seen["left"] = time.monotonic()

    try:
        run(app, script)
        closed = time.monotonic() - seen["left"]
        still_held = holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
    assert seen["waiting"] and still_held
    assert closed < 5, f"the room took {closed:.1f} s to close"
    events = demo.store("signals").read().events
    late = next(e["id"] for e in events if e.get("subject") == "arrives while locked")
    assert not any(e.get("kind") == "routing" and e.get("signal") == late for e in events)  # abandoned


def test_an_ack_commit_refuses_to_carry_uncommitted_register_changes(demo: Any) -> None:
    """A unit's uncommitted edit to the finding (or to intake) must not ride along in the person's
    signed ack commit: the ack is refused (exit 3), nothing is written, nothing is committed."""
    from engine.base.errors import Refused
    from engine.commands.registers import ack
    from engine.read.load import load

    finding = demo.root / "findings" / "F-alert-path-dead.md"
    edited = finding.read_text().replace("release-hardening/manifest", "u4", 1)
    finding.write_text(edited)
    head = subprocess.run(
        ["git", "-C", str(demo.root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout
    with pytest.raises(Refused, match="not committed"):
        ack(demo, load(demo), "F-alert-path-dead", "alice", commit=True)
    assert finding.read_text() == edited  # no ack line written either
    after = subprocess.run(
        ["git", "-C", str(demo.root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout
    assert after == head
