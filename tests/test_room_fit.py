"""The control room, third cut (issue 31): what an operator sees at 80×24 and at 150×42. Each test
reads the screen as the terminal shows it (tests.room.screen_lines) or the state the room acts on."""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta
from typing import Any

import pytest

from controlroom.app import ControlRoom
from controlroom.views import BY_VIEW, VIEW_DEFS, RowKey
from engine.base import clock
from engine.checkout.workspace import Workspace
from engine.commands.actors import Actor
from engine.commands.proposals import propose
from engine.commands.signals import report_intelligence
from tests.helpers import NOW
from tests.room import demo_workspace, run, screen_lines, until
from widgets.columns import fit_columns
from widgets.hanging import hang

NARROW, WIDE = (80, 24), (150, 42)
FIXED = clock.parse_time(NOW)


@pytest.fixture
def demo(tmp_path: Any, monkeypatch: Any) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def room(ws: Workspace, later: timedelta = timedelta(0), **kwargs: Any) -> ControlRoom:
    """A room on the pinned clock (moved on by `later`) whose clock never ticks during a test: what
    changes on screen changed for another reason."""
    kwargs.setdefault("watch", False)
    kwargs.setdefault("background_checks", False)
    return ControlRoom(ws, "alice", now=lambda: FIXED + later, tick_seconds=3600, **kwargs)


def signal(
    ws: Workspace, subject: str, severity: str = "advisory", affects: tuple[str, ...] = ("u4",)
) -> None:
    report_intelligence(
        ws,
        {
            "subject": subject,
            "claim": "c",
            "observation": "o",
            "evidence": ["e"],
            "confidence": "high",
            "reportedSeverity": severity,
            "affectedUnits": list(affects),
        },
        Actor(person="alice"),
    )


def propose_routing(ws: Workspace) -> None:
    path = "regulator/policy/routing.yaml"
    text = (ws.root / path).read_text()
    propose(
        ws,
        path,
        (text + "# " + "a long comment line " * 6 + "\n").encode(),
        "document it",
        Actor(person="alice"),
    )


def select(app: ControlRoom, key: Any) -> None:
    app.table.cursor = app.table.keys.index(key)


# ---- bugs ------------------------------------------------------------------------------------------


def test_a_resize_relayouts_the_header_and_tabs_in_the_same_frame(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        seen["wide"] = screen_lines(app)[:2]
        await pilot.resize_terminal(*NARROW)
        await pilot.pause()  # one frame: the clock never ticks here (tick_seconds=3600)
        seen["narrow"] = screen_lines(app)[:2]
        await pilot.resize_terminal(*WIDE)
        await pilot.pause()
        seen["wide again"] = screen_lines(app)[:2]

    run(app, script, size=WIDE)
    header, tabs = seen["narrow"]
    for part in ("2 blk", "3 held", "0 stale", "1 exp≤7d", "lint✓", "0 unrtd", "files"):
        assert part in header, header
    for v in VIEW_DEFS:  # every tab: whole, or cut with `…`
        assert v.title in tabs or f"{v.key} {v.title[:3]}" in tabs and "…" in tabs, tabs
    assert "1 Obligations" in tabs  # the current one whole
    assert (
        "lint ✓ · 0 unrouted" in seen["wide again"][0] and "regulator · fleet-repo" in seen["wide again"][0]
    )
    assert seen["wide again"] == seen["wide"]


def test_sort_filter_and_all_rows_are_whole_on_the_status_line_at_80x24(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("slash", *"left-pad", "enter", "s", "s", "a")
        await pilot.pause()
        seen["lines"] = screen_lines(app)

    run(app, script, size=NARROW)
    status = seen["lines"][-2]
    assert status.startswith(" 2 row(s) · sort: unit · filter: left-pad · all rows"), status


def test_the_column_a_view_is_sorted_by_stays_at_80x24(demo: Any) -> None:
    """An operator's review: Units sorted by priority at 80 columns had dropped `prio` (and the
    Signals sorted by unit their `from`), so the order could not be seen. The sorted column stays."""
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("2")
        seen["by id"] = app.table.render_line(0).text
        await pilot.press("s")
        await pilot.pause()
        seen["by priority"] = app.table.render_line(0).text
        await pilot.press("4", "s", "s")
        await pilot.pause()
        seen["signals by unit"] = app.table.render_line(0).text

    run(app, script, size=NARROW)
    assert "prio" not in seen["by id"].split(), seen["by id"]  # the least important drops, unsorted
    assert "prio" in seen["by priority"].split(), seen["by priority"]
    assert "from" in seen["signals by unit"].split(), seen["signals by unit"]


def test_a_first_visit_starts_at_its_own_first_row_and_a_return_where_it_was(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("down", "down")
        seen["obligations"] = app.table.cursor
        await pilot.press("2")
        seen["units"] = (app.table.cursor, app.table.current_key)  # type: ignore[assignment]
        await pilot.press("down", "3")
        seen["memory"] = app.table.cursor
        await pilot.press("2")
        seen["units again"] = app.table.cursor
        await pilot.press("1")
        seen["obligations again"] = app.table.cursor

    run(app, script, size=WIDE)
    assert seen["obligations"] == 2
    assert seen["units"] == (0, "b1") and seen["memory"] == 0  # not the previous view's row
    assert seen["units again"] == 1 and seen["obligations again"] == 2


def test_the_accept_dialog_opens_at_its_heading_with_its_commit_line_on_screen(demo: Any) -> None:
    propose_routing(demo)
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("6")
        select(app, next(k for k in app.table.keys if k.kind == "proposal"))  # type: ignore[union-attr]
        await pilot.press("y")
        await pilot.pause()
        seen["screen"] = "\n".join(screen_lines(app))
        seen["focused"] = app.focused.id if app.focused else None  # type: ignore[assignment]

    run(app, script, size=NARROW)
    assert "Accept proposal" in seen["screen"]
    assert "Accepting writes the file and commits it" in seen["screen"]
    assert "Accept " in seen["screen"] and "Cancel" in seen["screen"]  # the buttons too
    assert seen["focused"] == "rationale"


def test_the_decision_dialog_keeps_record_and_cancel_on_screen_at_80x24(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        from textual.widgets import Select

        await pilot.press("2")
        select(app, "u3")
        await pilot.press("d")
        await pilot.pause()
        app.screen.query_one(Select).value = "pause"
        await pilot.pause()
        seen["screen"] = screen_lines(app)
        seen["buttons"] = [app.screen.query_one(f"#{b}").region for b in ("confirm", "cancel")]  # type: ignore[misc]

    run(app, script, size=NARROW)
    text = "\n".join(seen["screen"])
    assert "Record" in text and "Cancel" in text and "pause: hold the unit" in text
    for region in seen["buttons"]:
        assert region.height > 0 and region.y >= 0 and region.bottom <= NARROW[1]  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "150x42"])
def test_toasts_never_cover_dialog_buttons(demo: Any, size: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        from textual.widgets._toast import Toast

        await pilot.press("r")
        await pilot.pause()
        for n in range(3):
            app.notify(f"a long notification number {n} " * 4, timeout=30)
        await pilot.pause(0.3)
        seen["toasts"] = [t.region for t in app.screen.query(Toast)]
        seen["buttons"] = [app.screen.query_one(f"#{b}").region for b in ("confirm", "cancel")]

    run(app, script, size=size, notifications=True)
    assert len(seen["toasts"]) == 3
    for toast in seen["toasts"]:
        for button in seen["buttons"]:
            assert not toast.overlaps(button), (toast, button)


def test_cells_cut_by_the_scrollbar_or_the_pane_keep_their_ellipsis(demo: Any) -> None:
    for n in range(30):
        signal(demo, f"a subject long enough to be cut at any width we draw, number {n:02d}")
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        assert await until(pilot, lambda: len(app.table.keys) == 33)  # routed as the room opened
        seen["narrow"] = screen_lines(app)
        seen["narrow text"] = app.table.scrollable_content_region.width  # type: ignore[assignment]
        await pilot.resize_terminal(*WIDE)
        await pilot.pause()
        seen["wide"] = screen_lines(app)
        seen["wide text"] = app.table.scrollable_content_region.width  # type: ignore[assignment]
        seen["pane"] = app._detail.region.x  # type: ignore[assignment]

    run(app, script, size=NARROW)
    cut = seen["narrow text"]
    assert cut < NARROW[0]  # type: ignore[operator]  # a scrollbar takes the last columns
    rows = [line for line in seen["narrow"] if "a subject long" in line]
    assert rows and all(line[:cut].rstrip().endswith("…") for line in rows)  # type: ignore[index]
    cut = seen["wide text"]
    assert cut <= seen["pane"]  # beside the pane
    rows = [line for line in seen["wide"] if "a subject long" in line]
    assert rows and all(line[:cut].rstrip().endswith("…") for line in rows)  # type: ignore[index]


def test_resolved_obligations_show_no_blocks_mark(demo: Any) -> None:
    from engine.commands.obligations import resolve

    target = next(o for o in demo_obligations(demo) if o.unit == "u1")
    resolve(demo, target.id, "alice", "accepted-risk", "known")
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("a")
        table = [line[: app.table.region.width] for line in screen_lines(app)]
        seen["row"] = next(line for line in table if target.id[-8:] in line)
        seen["open"] = next(line for line in table if "blocking" in line and "open" in line)

    run(app, script, size=WIDE)
    assert "■" not in seen["row"] and "accepted" in seen["row"] and "·" in seen["row"]
    assert "■" in seen["open"]


def demo_obligations(ws: Workspace) -> Any:
    from engine.read.load import load

    return list(load(ws).obligations.values())


# ---- frictions -------------------------------------------------------------------------------------


def test_tabs_are_whole_or_cut_with_an_ellipsis_and_the_footer_keeps_every_key(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("6")
        await pilot.pause()
        seen["80"] = screen_lines(app)
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        seen["60"] = screen_lines(app)

    run(app, script, size=NARROW)
    tabs = seen["60"][1]
    assert "6 Identity" in tabs  # the current tab whole
    for v in VIEW_DEFS:
        assert v.title in tabs or re.search(rf"{v.key} {v.title[0]}\S*…", tabs), tabs
    footer = seen["80"][-1]
    for key in (
        "y accept",
        "n reject",
        "⏎ lifecycle",
        "/ filter",
        "p pane",
        "? keys",
        "q quit",
        "^p palette",
    ):
        assert key in footer, footer


def test_units_give_the_title_more_room_than_the_id() -> None:
    columns = BY_VIEW["units"].columns
    titles = [c.title for c in columns]
    for available in (79, 87):  # 80×24 beside a scrollbar; 150×42 beside the pane
        shown, widths = fit_columns(columns, available)
        width = dict(zip((titles[i] for i in shown), widths, strict=True))
        assert width["title"] > width["id"], width


def test_with_the_pane_open_obligations_keep_blocks_and_id_before_status(demo: Any) -> None:
    """An operator's day: at 110 columns with the pane open, `id` and `blocks` were dropped while
    `status` (`open` on every live row) and a wide unit stayed. Now the status goes first."""
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        seen["header"] = app.table.render_line(0).text
        seen["pane"] = app._detail.display  # type: ignore[assignment]

    run(app, script, size=(110, 30))
    header = seen["header"].split()
    assert seen["pane"] and {"id", "unit", "blocks"} <= set(header) and "status" not in header, header


def test_modals_widen_at_150x42_so_a_diff_is_not_wrapped(demo: Any) -> None:
    propose_routing(demo)
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("6")
        select(app, next(k for k in app.table.keys if k.kind == "proposal"))  # type: ignore[union-attr]
        await pilot.press("y")
        await pilot.pause()
        seen["frame"] = app.screen.query_one("#frame").region.width
        seen["screen"] = screen_lines(app)  # type: ignore[assignment]

    run(app, script, size=WIDE)
    assert seen["frame"] >= 120
    added = [line for line in seen["screen"] if "+# a long comment line" in line]  # type: ignore[attr-defined]
    assert len(added) == 1 and "a long comment line a long comment line" in added[0]
    assert added[0].rstrip().rstrip("│█ ").endswith("a long comment line")  # whole on one line


def test_lifecycles_show_values_as_text_and_wrap_under_their_labels(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        select(app, RowKey("finding", "F-alert-path-dead"))
        await pilot.pause(0.2)
        seen["life"] = app._detail.text
        seen["screen"] = screen_lines(app)  # type: ignore[assignment]

    run(app, script, size=WIDE)
    assert "affects: release-hardening/manifest" in seen["life"] and "resolved: no" in seen["life"]
    assert "['" not in seen["life"] and "False" not in seen["life"]
    pane = [line.split("│", 1)[1] for line in seen["screen"] if "│" in line]
    title = next(i for i, line in enumerate(pane) if "  title: " in line)
    start = pane[title].index("title: ") + len("title: ")
    assert pane[title + 1][:start].strip() == "" and pane[title + 1][start] != " "  # under the label's text


def test_hang_indents_under_label_timestamp_key_or_item() -> None:
    assert hang("  claim: one two three four five six", 20) == [
        "  claim: one two",
        "         three four",
        "         five six",
    ]
    assert hang("2026-11-29T12:00:00Z routed: reported blocking, derived blocking", 50)[1].startswith(
        " " * 21 + "d"
    )
    assert hang("  /            filter this view as you type", 32)[1].startswith(" " * 15 + "as")
    assert hang("    - an item that wraps", 20)[1] == "      wraps"
    assert hang("prose goes back to its margin when it wraps", 20)[1] == "its margin when it"


def test_a_signals_lifecycle_carries_each_obligations_disposition(demo: Any) -> None:
    from engine.commands.obligations import resolve

    target = next(o for o in demo_obligations(demo) if o.unit == "u1")
    resolve(demo, target.id, "alice", "accepted-risk", "the fix lands upstream")
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("4")
        select(app, target.source)
        await pilot.press("enter")
        await pilot.pause()
        seen["life"] = "\n".join(app.screen.lines)  # type: ignore[attr-defined]

    run(app, script, size=WIDE)
    assert f"opened obligation {target.id} on u1" in seen["life"]
    assert "accepted-risk by alice: the fix lands upstream" in seen["life"]
    assert "open: awaiting a disposition" in seen["life"]  # u3's is still open


def test_help_explains_every_part_the_header_shows(demo: Any) -> None:
    signal(demo, "unrouted and blocking", "blocking", ("u1",))
    with open(demo.store("memory").path, "ab") as handle:
        handle.write(b"not json\n")
    # does not route (unrouted, would block, ro); three days on, the blocking ones are overdue
    app = room(demo, later=timedelta(days=3), read_only=True)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("question_mark")
        await pilot.pause()
        seen["help"] = "\n".join(app.screen.lines)  # type: ignore[attr-defined]
        seen["header"] = str(app._topbar.render())
        from controlroom.header import header_text

        seen["wide"] = header_text(app.snap, app.live, store=app.backend)  # every part, wide

    run(app, script, size=NARROW)
    import re

    assert "overdue" in seen["header"]
    legend = seen["help"].split("the header", 1)[1]
    assert "ro" in seen["header"].split() and "ro = read-only" in legend
    compact = seen["header"].split(" ro ", 1)[1].replace("\n", "·")  # two lines: nothing is cut
    for part in (p.strip() for p in compact.split("·")):
        word = re.sub(r"(?<![≤\w])\d+", "N", part)
        assert word in legend, (word, legend)
    for part in seen["wide"].split(" · "):
        word = re.sub(r"\d+", "N", part)
        assert any(word in line or word.split(" ")[0] in line for line in legend.splitlines()), word


def test_the_palette_lists_keys_once(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        seen["titles"] = [c.title for c in app.get_system_commands(app.screen)]

    run(app, script, size=WIDE)
    assert [t for t in seen["titles"] if "Keys" in t or "keys" in t] == ["Keys"]


def test_dialogs_explain_each_disposition_and_recovery_action(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        from textual.widgets import Select

        await pilot.press("r")
        await pilot.pause()
        choice = app.screen.query_one(Select)
        seen["dispositions"] = [str(label) for label, value in choice._options if isinstance(value, str)]
        choice.value = "no-action"
        await pilot.pause()
        seen["no-action"] = str(app.screen.query_one("#meaning").render())  # type: ignore[assignment]
        await pilot.press("escape", "2")
        select(app, "u3")
        await pilot.press("d")
        await pilot.pause()
        for action in ("retry", "repair"):
            app.screen.query_one(Select).value = action
            await pilot.pause()
            seen[action] = str(app.screen.query_one("#preview").render())  # type: ignore[assignment]

    run(app, script, size=NARROW)
    assert len(seen["dispositions"]) == 5 and all(" — " in label for label in seen["dispositions"])
    assert "no-action: nothing to do" in seen["no-action"]
    assert "run the same contract again" in seen["retry"] and "become rework" in seen["retry"]
    assert "fix what broke first" in seen["repair"] and "run the same contract again" not in seen["repair"]


def test_the_ack_dialog_says_the_units_stay_held(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        select(app, RowKey("finding", "F-alert-path-dead"))
        await pilot.press("c")
        await pilot.pause()
        seen["screen"] = " ".join(line.strip("█ ") for line in screen_lines(app))

    run(app, script, size=WIDE)
    assert "release-hardening/manifest) stays held" in seen["screen"]
    assert "until the finding is resolved" in seen["screen"]


def test_the_header_names_where_the_stores_are(demo: Any) -> None:
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        seen["wide"] = screen_lines(app)[0]
        await pilot.resize_terminal(*NARROW)
        await pilot.pause()
        seen["narrow"] = screen_lines(app)[0]

    run(app, script, size=WIDE)
    assert " · files · " in seen["wide"] and "·files·" in seen["narrow"]


def test_every_id_is_shown_by_its_last_characters_and_the_cli_takes_it(demo: Any) -> None:
    from engine.read.load import load

    state = load(demo)
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        for key in "134":
            await pilot.press(key)
            seen[key] = [app.table.render_line(y).text.split()[0] for y in range(1, len(app.table.keys) + 1)]

    run(app, script, size=WIDE)
    assert seen["1"] == [k[-8:] for k, o in state.obligations.items()]
    assert sorted(seen["3"]) == sorted(k[-8:] for k in state.memory)
    assert sorted(seen["4"]) == sorted(k[-8:] for k in state.signals)
    from tests.helpers import REGULATOR, clean_env

    shown = seen["1"][0]
    done = subprocess.run(
        [REGULATOR, "--root", str(demo.root), "obligation", "show", shown],
        capture_output=True,
        text=True,
        env=clean_env(REGULATOR_NOW=NOW, GIT_CONFIG_GLOBAL="/dev/null"),
    )
    assert done.returncode == 0 and next(iter(state.obligations)) in done.stdout, done.stderr


def test_all_rows_is_kept_per_view(demo: Any) -> None:
    from engine.commands.memory import retract
    from engine.commands.obligations import resolve

    state_obligation = next(o for o in demo_obligations(demo) if o.unit == "u1")
    resolve(demo, state_obligation.id, "alice", "no-action", "n")
    from engine.read.load import load

    entry = next(iter(load(demo).memory))
    retract(demo, entry, "alice", "wrong")
    app = room(demo)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("a")
        seen["obligations"] = len(app.table.keys)
        await pilot.press("3")
        seen["memory"] = (len(app.table.keys), screen_lines(app)[-2])  # type: ignore[assignment]
        await pilot.press("a", "1")
        seen["back"] = (len(app.table.keys), screen_lines(app)[-2])  # type: ignore[assignment]
        await pilot.press("2", "a")
        await pilot.pause()
        seen["units"] = [n.message for n in app._notifications]  # type: ignore[assignment]

    run(app, script, size=WIDE)
    assert seen["obligations"] == 3 and seen["memory"][0] == 2 and "live rows" in seen["memory"][1]  # type: ignore[index]
    assert seen["back"][0] == 3 and "all rows" in seen["back"][1]  # type: ignore[index]
    assert any("Units lists every row" in n for n in seen["units"])  # type: ignore[attr-defined]


def test_a_cell_of_two_forms_is_whole_where_it_fits_or_adds_little() -> None:
    """widgets.columns.form (D-324): the whole form where it fits, or where what it adds takes at
    most a third of the room; else the shorter; no limit (printed): whole; one form: itself."""
    from widgets.columns import FORMS, form, forms, line
    from widgets.columns import Column as Col

    every, first, text = "(overdue, advisory withdrawn) ", "(overdue +1) ", "jinja2 2.10"
    whole, short = every + text, first + text
    cell = forms(every, first, text)
    size = len(whole)  # 41: its marks (30 cells) are more than a third of 40
    assert [form(cell, w) for w in (20, size - 1, size, None)] == [short, short, whole, whole]
    # a long subject: every mark where they take at most a third of the room (30 of 90), else the
    # count (an operator's re-check: with the pane open they left 2 cells of a 24-cell subject)
    long = forms(every, first, "x" * 200)
    assert form(long, 90) == every + "x" * 200 and form(long, 89) == first + "x" * 200
    assert form("plain", 3) == "plain"
    shown = line((Col("subject", 0, 0, 10),), [cell], 30)
    assert shown.startswith(" (overdue +1) jinja2") and FORMS not in shown
