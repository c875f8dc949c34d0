"""No store field is ever interpreted as markup or a terminal escape (issue 7, design §10, §13)."""

from __future__ import annotations

import contextlib
import io
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from controlroom import readmodel
from controlroom.lifecycle import lifecycle
from engine.base.text import escape, unescape
from engine.checkout.workspace import Workspace
from engine.read.model import MemoryEntry, Obligation, ObligationKind, ObligationStatus, State
from tests.helpers import MemoryEvents

hostile = st.one_of(
    st.sampled_from(
        [
            "[red]INJ[/red]",
            "[bold]x[/]",
            "\x1b[31mred\x1b[0m",
            "\x1b]0;title\x07",
            "[link=x]y[/link]",
            "\r\noverwrite",
            "\x9b31m",
            "[/]",
            ":smile:",
            "\\[escaped]",
            "\u202eevil\u202c",
            "\u2066isolate\u2069 \u200bzero\ufeff",
            "line\u2028separator\x85",
            "\\x1b is not ESC",
        ]
    ),
    st.text(
        alphabet=st.sampled_from(list("[]/\\\x1b\x07\x9b\r\n\t abcRED=:;0123456789\u202e\u2066\u200b\u2028")),
        min_size=1,
        max_size=30,
    ),
)
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\u2066", "\u200b", "\u2028", "\x85", "\ufeff")


def state_with(text: str) -> State:
    source = MemoryEvents()
    state = State(now=datetime(2026, 11, 29, 12, tzinfo=UTC), source=source)
    signal = {
        "kind": "signal",
        "id": "SIG1",
        "subject": text,
        "claim": text,
        "observation": text,
        "evidence": [text],
        "confidence": "low",
        "reportedSeverity": "advisory",
        "affectedUnits": ["u1"],
        "observedAt": "2026-11-29T12:00:00Z",
        "expiresAt": None,
        "rationale": text,
        "unit": None,
        "by": text,
        "at": "2026-11-29T12:00:00Z",
    }
    routing = {
        "kind": "routing",
        "signal": "SIG1",
        "reportedSeverity": "advisory",
        "derivedSeverity": "advisory",
        "floors": [],
        "outcome": "obligations",
        "reason": text,
        "obligations": [],
        "at": "2026-11-29T12:00:00Z",
    }
    state.signals["SIG1"] = source.add(signal)
    state.routings["SIG1"] = source.add(routing)
    disposition = {
        "kind": "disposition",
        "disposition": "no-action",
        "by": text,
        "rationale": text,
        "at": "2026-11-29T12:00:00Z",
    }
    state.obligations["ob1"] = Obligation(
        id="ob1",
        unit="u1",
        kind=ObligationKind.INTELLIGENCE,
        source="SIG1",
        severity="advisory",
        blocks=False,
        owed_to="S3",
        opened_at="2026-11-29T12:00:00Z",
        subject=text,
        status=ObligationStatus.RESOLVED,
        disposition="no-action",
        by=text,
        rationale=text,
        closed_at="2026-11-29T12:00:00Z",
        history=[state.routings.refs["SIG1"], source.add(disposition)],
    )
    state.memory["MEM1"] = MemoryEntry(
        event={
            "kind": "memory",
            "id": "MEM1",
            "subject": text,
            "note": text,
            "evidence": [text],
            "scope": [],
            "reviewBy": "2026-12-20",
            "unit": "u1",
            "revision": text,
            "at": "2026-11-29T12:00:00Z",
        },
        retraction={
            "kind": "retraction",
            "entry": "MEM1",
            "by": text,
            "reason": text,
            "at": "2026-11-29T12:00:00Z",
        },
    )
    return state


def rendered(line: str) -> str:
    """What a terminal would be sent for this line, drawn as the widgets draw it (plain Text)."""
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=400)
    with contextlib.redirect_stdout(io.StringIO()):
        console.print(Text(line), end="")
    return console.file.getvalue()  # type: ignore[attr-defined]  # the StringIO given above


@settings(max_examples=60, deadline=None)
@given(text=hostile)
def test_rows_and_lifecycles_show_store_text_literally(
    tmp_path_factory: pytest.TempPathFactory, text: Any
) -> None:
    snap = readmodel.Snapshot(Workspace(tmp_path_factory.getbasetemp()), state_with(text))
    lines = []
    for view, key in (("obligations", "ob1"), ("signals", "SIG1"), ("memory", "MEM1")):
        cells = readmodel.row(view, snap, key)
        lines += cells
        lines += lifecycle(view, snap, key)
    shown = "\n".join(lines)
    assert escape(text) in shown  # the text, escaped, is there to read
    assert f"  note: {escape(text)}" in lines  # escaped once: it reads back as the text
    for line in lines:
        assert not any(char in line for char in RAW), repr(line)
        out = rendered(line)
        # the only escape sequences on the wire are the console's own styling, never the text's
        assert "\x1b]" not in out and "\x07" not in out
        # markup is never parsed: every '[' of the text reaches the terminal
        assert out.count("[") >= line.count("[")


@settings(max_examples=40, deadline=None)
@given(text=hostile)
def test_cli_tables_escape_store_text(text: Any) -> None:
    from controlroom.printing import table

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        table(["id", "subject"], [["x", text]])
    printed = out.getvalue()
    assert not any(char in printed for char in RAW)
    assert escape(text).rstrip() in printed  # the table trims trailing blanks of its last column
    cell = printed.split("\n")[1][len("x   ") :]
    assert unescape(cell) == text.rstrip(" ")  # reversible: the cell reads back as the text


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_a_relayed_programs_output_keeps_its_layout_and_holds_no_hidden_character(text: str) -> None:
    """`terminal_safe` (a confined unit's output relayed to root's terminal): no character `hidden`
    names stays raw but the newline, tab and carriage return; text with none of them is unchanged;
    each escaped character reads as escape writes it."""
    from engine.base.text import hidden, terminal_safe

    shown = terminal_safe(text)
    assert not any(hidden(char) for char in shown if char not in "\n\t\r")
    if not any(hidden(char) for char in text if char not in "\n\t\r"):
        assert shown == text
    assert shown.count("\n") == text.count("\n")
    for char in text:
        if hidden(char) and char not in "\n\t\r":
            assert escape(char) in shown


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(min_value=1, max_value=400).map(lambda n: " " * n),
            st.sampled_from(
                [
                    "\u2800",
                    "\u00a0",
                    "\u3000",
                    "\u2003",
                    "x",
                    "fix a typo",
                    "\\x20",
                    "\n",
                    "\u17b4",
                    "\u0301",
                    "e\u0301",
                ]
            ),
        ),
        max_size=12,
    ).map("".join)
)
def test_no_one_line_field_draws_a_line_break_or_a_blank(text: str) -> None:
    """A wrapping display (the room's details and dialogs, a terminal) breaks a line at a run of
    spaces and drops the run, and draws the braille blank and the other spaces as nothing: an
    adversarial review faked a proposal's review with them. In a one-line field no run of spaces
    is longer than 16, no such character stays raw (the Khmer inherent vowels, zero width, and a
    combining mark with no base, a second review's), and the text still reads back exactly."""
    from engine.base.text import RUN

    shown = escape(text)
    assert " " * (RUN + 1) not in shown
    assert not any(char in shown for char in "\u2800\u00a0\u3000\u2003\n\u17b4")
    assert " \u0301" not in shown and not shown.startswith("\u0301")  # no mark without a base
    assert unescape(shown) == text
    if text.isascii() and text.isprintable() and " " * (RUN + 1) not in text and "\\" not in text:
        assert shown == text  # ordinary text, its runs of up to 16 spaces included, as it is


def test_a_routing_proposal_that_loosens_holds_is_marked(ws: Any) -> None:
    """An adversarial review: a proposal raising blocksAtOrAbove (fewer findings hold a unit) read
    as a plain `pending`, its effect only in the replay. `identity show` now marks it, as it marks
    a key, a grant or a command."""
    import json

    path = ws.root / "regulator/policy/routing.yaml"
    text = path.read_text()
    loose = text.replace("blocksAtOrAbove: blocking", "blocksAtOrAbove: critical").replace(
        "clock: pinned", "clock: system"
    )
    assert loose != text
    proposed = ws.root.parent / "routing.yaml"
    proposed.write_text(loose)
    done = ws.run(
        "identity", "propose", "--file", "regulator/policy/routing.yaml", "--content-from", str(proposed),
        "--rationale", "tidy", "--by", "alice", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = ws.run("identity", "show", json.loads(done.stdout)["id"])
    assert shown.returncode == 0, shown.stderr
    assert (
        "! blocksAtOrAbove: blocking -> critical (fewer findings hold a unit; proposed by person alice)"
        in shown.stdout
    )
    assert "! clock: pinned -> system" in shown.stdout
