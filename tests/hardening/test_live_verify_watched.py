"""A store line that fails its hash, appended by another process while the control room is open and
watching (design §26, issue 28), appears without anything but the room's own file watch: in the
header's count of verify findings and in the Registers view. (test_live_verify.py forces the sync
the watch would run; here nothing is forced.) Under Pilot, with the demo's workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controlroom.app import ControlRoom
from engine.checkout.workspace import Workspace
from tests.room import demo_workspace, run, until

FORGE = """
import json, sys
sys.path.insert(0, sys.argv[2])
from engine.log.store import Store
path = sys.argv[1]
prev, _, _ = Store(path)._tail()
line = {"kind": "note", "at": "2026-11-29T12:00:00Z", "prev": prev, "hash": "0" * 64}
with open(path, "a", encoding="utf-8") as handle:
    handle.write(json.dumps(line, separators=(",", ":")) + "\\n")
"""


@pytest.fixture
def demo(tmp_path: Any, monkeypatch: Any) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def test_a_line_failing_its_hash_shows_through_the_rooms_own_watch(demo: Any) -> Any:
    app = ControlRoom(demo, "alice", watch=True, background_checks=False)
    path = demo.store("signals").path
    root = str(Path(__file__).resolve().parents[2])
    seen: dict[str, Any] = {}

    def header() -> str:
        return str(app._topbar.render())

    async def script(pilot: Any) -> None:
        await pilot.press("5")  # Registers
        seen["before"] = header()
        await pilot.pause(0.5)  # the watch is running
        subprocess.run([sys.executable, "-c", FORGE, str(path), root], check=True, timeout=60)
        seen["line"] = len(path.read_text().splitlines())
        seen["live"] = await until(pilot, lambda: "verify finding" in header() or "vfy" in header())
        seen["header"] = header()
        seen["rows"] = [app.table.render_line(y).text for y in range(1, len(app.table.keys) + 1)]

    run(app, script)
    assert "verify finding" not in str(seen["before"]) and "vfy" not in str(seen["before"])
    assert seen["live"], seen["header"]
    assert any(f"signals.ndjson:{seen['line']}" in r and "does not match" in r for r in seen["rows"]), seen[
        "rows"
    ]
    assert json.loads(path.read_text().splitlines()[-1])["hash"] == "0" * 64
