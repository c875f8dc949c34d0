"""A `unit run`'s mark in `.regulator/runs/` (engine.checkout.runs): a run's sweep of old marks never
removes one whose `unit run` lives, since a missing mark reads as over (D-291, D-295)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.checkout import runs
from engine.checkout.workspace import Workspace
from tests.helpers import make_workspace


def test_a_sweep_keeps_a_live_runs_mark_that_was_not_yet_current(tmp_path: Path) -> None:
    """An adversarial review of D-291: run B read the current leases, run A dispatched and wrote its
    mark, then B's sweep removed A's (not in what B had read): A's live child was refused at every
    door. The sweep now removes only marks whose run is over (ended, or its `unit run` gone)."""
    ws = Workspace(make_workspace(tmp_path).root)
    folder = ws.state_dir / "runs"
    folder.mkdir(mode=0o700)
    live, ended, dead = "a" * 64, "e" * 64, "d" * 64
    runs.begin(ws, live, {live})  # this process is A's `unit run`, alive
    (folder / f"{ended}.json").write_text(json.dumps({"ended": True}))
    (folder / f"{dead}.json").write_text(json.dumps({"pid": 2**22 + 7, "started": "1", "ended": False}))
    runs.begin(ws, "b" * 64, {"b" * 64})  # B's sweep, with A's lease not among what it read
    assert sorted(p.stem for p in folder.glob("*.json")) == sorted([live, "b" * 64])
    assert not runs.over(ws, live, runs.host_id(ws))  # A's child still answered at the door
    assert runs.over(ws, ended, "x") and not runs.over(ws, ended, None)  # gone: over where a run made it
