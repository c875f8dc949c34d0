"""`unit run`'s watch of units.ndjson (D-336): only what the store gained that names the run's unit
makes it beat at once; a store that shrank or cannot be read does too (the beat is the judgement)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from engine.checkout.workspace import Workspace
from engine.host.unitrun import Supervisor


def _supervisor(root: Path, unit: str) -> Supervisor:
    (root / ".regulator").mkdir(parents=True)
    (root / ".regulator" / "units.ndjson").write_bytes(b'{"kind":"dispatch","unit":"b1"}\n')
    plan: Any = SimpleNamespace(unit=unit)
    run = Supervisor(plan, {}, "t" * 43, print, Workspace(root))
    run.units_read = (root / ".regulator" / "units.ndjson").stat().st_size
    return run


def _append(root: Path, line: bytes) -> None:
    with open(root / ".regulator" / "units.ndjson", "ab") as f:
        f.write(line)


def test_only_a_line_naming_the_unit_wakes_its_run(tmp_path: Path) -> None:
    run = _supervisor(tmp_path, "b1")
    _append(tmp_path, b'{"kind":"dispatch","unit":"b12"}\n{"kind":"close","unit":"a-b1"}\n')
    run._units_changed()
    assert not run.nudge.is_set()  # another unit's events, even ones whose id holds "b1"
    _append(tmp_path, b'{"kind":"demote","unit":"b1","by":"alice"}\n')
    run._units_changed()
    assert run.nudge.is_set()
    run.nudge.clear()
    run._units_changed()  # nothing gained since: no beat
    assert not run.nudge.is_set()


def test_a_store_that_shrank_or_is_not_a_file_wakes_the_run(tmp_path: Path) -> None:
    run = _supervisor(tmp_path, "b2")
    store = tmp_path / ".regulator" / "units.ndjson"
    store.write_bytes(b"")
    run._units_changed()
    assert run.nudge.is_set()
    run.nudge.clear()
    store.unlink()
    os.mkfifo(store)  # never waited on
    run._units_changed()
    assert run.nudge.is_set()
