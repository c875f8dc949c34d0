"""The control room's side of design §20: memory marked `evidence changed`, and the accept dialog of a
routing.yaml proposal showing the replay. Under Pilot, on the demo workspace."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlroom.app import ControlRoom
from engine.checkout.workspace import LEASE_FILE, read_lease
from engine.commands.actors import Actor
from engine.commands.memory import remember
from engine.commands.proposals import propose
from engine.read.load import load
from tests.helpers import git
from tests.room import demo_workspace, opened

SIZE = (150, 42)


async def accept_dialog(pilot: Any, app: ControlRoom, proposal: str) -> None:
    """The Identity view, the cursor on the proposal, `y`: its accept dialog open."""
    from controlroom.views import RowKey
    from widgets.dialogs import ProposalDialog

    await pilot.press("6")
    await pilot.pause()
    app.table.cursor = app.table.keys.index(RowKey("proposal", proposal))
    await pilot.pause()
    await pilot.press("y")
    assert await opened(pilot, ProposalDialog)


def run(app: ControlRoom, script: Any, size: tuple[int, int] = SIZE) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await script(pilot)

    asyncio.run(main())


def test_room_marks_changed_evidence_and_shows_the_replay_before_accepting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = demo_workspace(tmp_path, monkeypatch)
    (ws.root / "src").mkdir()
    (ws.root / "src/a.py").write_text("one\ntwo\nthree\n")
    git(ws.root, "add", "src/a.py")
    git(ws.root, "commit", "-q", "-m", "a")
    git(ws.root / ".worktrees" / "u1", "merge", "-q", "--ff-only", "main")  # u1's worktree has it too
    lease = read_lease(ws.root / ".worktrees" / "u1" / LEASE_FILE)
    fields = {
        "subject": "a.py",
        "note": "line 3 says three",
        "evidence": ["src/a.py:3"],
        "reviewBy": "2026-12-20",
    }
    cited = remember(ws, fields, lease)["id"]
    (ws.root / "src/a.py").write_text("one\ntwo\nTHREE\n")
    git(ws.root, "commit", "-q", "-am", "edit a")

    policy = yaml.safe_load((ws.root / "regulator/policy/routing.yaml").read_text())
    policy["floors"].append({"name": "statements", "pattern": "statement", "atLeast": "blocking"})
    proposal = propose(
        ws,
        "regulator/policy/routing.yaml",
        yaml.safe_dump(policy).encode(),
        "raise statements",
        Actor(person="alice"),
    )["id"]
    stores = {name: ws.store(name).path.read_bytes() for name in ("signals", "memory", "units", "identity")}

    app = ControlRoom(ws, "alice", watch=False)
    seen: dict = {}

    async def script(pilot: Any) -> None:
        from textual.widgets import Input, Static

        await pilot.press("3")
        keys = app.table.keys
        seen["rows"] = {k: app.table.render_line(i + 1).text for i, k in enumerate(keys)}
        app.table.cursor = keys.index(cited)
        await pilot.pause()
        await pilot.pause(0.2)  # the detail pane follows the cursor when the keys pause
        seen["detail"] = str(app.query_one("#detail-text", Static).content).splitlines()
        await accept_dialog(pilot, app, proposal)
        seen["dialog"] = "\n".join(str(s.content) for s in app.screen.query(Static))
        await pilot.press("o", "k")  # what the operator types lands in the rationale
        seen["typed"] = app.screen.query_one("#rationale", Input).value
        await pilot.press("escape")
        await pilot.pause()

    run(app, script)
    marked = [k for k, text in seen["rows"].items() if "⚠ evidence" in text]  # the cell is cut at its width
    mirror = next(k for k, e in load(ws).memory.items() if e.event["subject"] == "package mirror")
    assert sorted(marked) == sorted([cited, mirror])  # the demo's own changed entry, and this one
    assert any("evidence changed since" in line and line.endswith(": src/a.py") for line in seen["detail"])
    assert seen["typed"] == "ok"
    dialog = seen["dialog"]
    assert "1 of 2 signal(s) would route differently under the proposed policy" in dialog
    assert "before: obligations, advisory (no floor): u3 does not block" in dialog
    assert "after:  obligations, blocking (statements): u3 blocks" in dialog
    assert {name: ws.store(name).path.read_bytes() for name in stores} == stores


def test_a_units_rationale_cannot_bury_what_accepting_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adversarial review: unit r1 proposed interaction.yaml adding its own key to alice's, with a
    rationale of space runs and braille blanks that a wrapping display drew as a harmless review
    (a typo fix, a fake diff) above 200 blank lines, so that the real `! adds signing key` line and
    diff were below the screen while the operator typed `ok` and Enter. At 80×24 the dialog now
    shows the commit warning and the `!` line before the operator's field, and the unit's rationale
    as one escaped line in a box of its own."""
    from tests.helpers import make_key
    from tests.room import screen_lines

    ws = demo_workspace(tmp_path, monkeypatch)
    key = make_key(tmp_path / "keys", "unit").with_suffix(".pub").read_text().strip()
    path = ws.root / "regulator/policy/interaction.yaml"
    evil = path.read_text().replace("    keys:\n", f"    keys:\n    - {key}\n", 1)
    # and the file's own first line drawn as fake diff lines by runs of spaces (a second review)
    evil = "# typo fix in the header" + " " * 400 + "-# proposl" + " " * 400 + "+# proposal\n" + evil
    assert evil != path.read_text()
    fake = [
        "fix a typo in the header comment; nothing else changes.",
        "\u2800",
        "--- a",
        "+++ b",
        "-# proposl",
    ]
    rationale = (" " * 300).join(fake + ["\u2800"] * 150)
    lease = read_lease(ws.root / ".worktrees" / "r1" / LEASE_FILE)
    proposal = propose(
        ws, "regulator/policy/interaction.yaml", evil.encode(), rationale, Actor(unit="r1", lease=lease)
    )["id"]
    app = ControlRoom(ws, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await accept_dialog(pilot, app, proposal)
        await pilot.pause(0.2)
        seen["screen"] = screen_lines(app)
        seen["diff"] = "\n".join(str(s.render()) for s in app.screen.query("#diff Static"))

    run(app, script, size=(80, 24))
    screen = "\n".join(seen["screen"])
    assert "commits it to git" in screen
    assert "! adds signing key" in screen and "(proposed by unit r1)" in screen, screen
    assert "regulator/policy/interaction.yaml, proposed by unit r1" in screen  # who, at the top
    assert screen.index("! adds signing key") < screen.index("Your rationale")
    assert "fix a typo" not in screen.split("Their rationale")[0]  # the unit's words only in their box
    assert "\\x20" in screen or "fix a typo" not in screen
    assert "\u2800" not in screen
    assert "# typo fix in the header" + " " * 16 + "\\x20" in seen["diff"] and " " * 17 not in seen["diff"]
