"""A store line that fails its hash, appended while the control room is open, appears live (design
§26, issue 28): in the Registers view and in the header's count, as a bad line does; before, it
never appeared until the room was opened again. Under Pilot, with the demo's workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controlroom.app import ControlRoom
from engine.checkout.workspace import Workspace
from engine.log.store import Store
from tests.room import demo_workspace, run, until


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def header(app: ControlRoom) -> str:
    return str(app._topbar.render())


def rows(app: ControlRoom) -> list[str]:
    return [app.table.render_line(y).text for y in range(1, len(app.table.keys) + 1)]


def test_a_line_failing_its_hash_shows_live(demo: Workspace) -> None:
    app = ControlRoom(demo, "alice", watch=False, background_checks=False)
    path = demo.store("signals").path
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")  # Registers
        seen["before"] = header(app)
        prev, _, _ = Store(path)._tail()
        forged = {"kind": "note", "at": "2026-11-29T12:00:00Z", "prev": prev, "hash": "0" * 64}
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(forged, separators=(",", ":")) + "\n")
        seen["line"] = len(path.read_text().splitlines())
        app.sync()
        seen["live"] = await until(
            pilot, lambda: any(m in header(app) for m in ("1 verify finding(s)", "⚠1 vfy"))
        )
        seen["header"] = header(app)
        seen["rows"] = rows(app)

    run(app, script)
    assert "verify finding" not in seen["before"] and "vfy" not in seen["before"]
    assert seen["live"], seen["header"]
    assert any(f"signals.ndjson:{seen['line']}" in r and "does not match" in r for r in seen["rows"]), seen[
        "rows"
    ]
