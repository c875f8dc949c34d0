"""`unit run`'s watch of units.ndjson (D-336, engine.host.beats): only what the store gained that
names the run's unit (`"unit":"b1"`) makes it look at once; a store that shrank or cannot be read
does too (the look is the judgement, never the bytes)."""

from __future__ import annotations

import os
from pathlib import Path

from engine.checkout.workspace import Workspace
from engine.host.beats import Beats


def _beats(root: Path, unit: str) -> Beats:
    (root / ".regulator").mkdir(parents=True)
    (root / ".regulator" / "units.ndjson").write_bytes(b'{"kind":"dispatch","unit":"b1"}\n')
    beats = Beats(Workspace(root), unit, "unix:/nowhere", "t" * 43, 900, print)
    beats.units_read = (root / ".regulator" / "units.ndjson").stat().st_size
    return beats


def _append(root: Path, line: bytes) -> None:
    with open(root / ".regulator" / "units.ndjson", "ab") as f:
        f.write(line)


def test_only_a_line_naming_the_unit_wakes_its_run(tmp_path: Path) -> None:
    beats = _beats(tmp_path, "memory")  # a valid unit id that is also a key of every host event's `seen`
    _append(
        tmp_path,
        b'{"kind":"dispatch","unit":"memory2","seen":{"signals":1,"memory":0}}\n'
        b'{"kind":"close","unit":"a-memory","rationale":"memory"}\n{"kind":"result","by":"memory"}\n',
    )
    beats.units_changed()
    assert not beats.nudge.is_set()  # other units' events, though "memory" is in every one
    _append(tmp_path, b'{"kind":"demote","unit":"memory","by":"alice"}\n')
    beats.units_changed()
    assert beats.nudge.is_set()
    beats.nudge.clear()
    beats.units_changed()  # nothing gained since: no look
    assert not beats.nudge.is_set()


def test_a_store_that_shrank_or_is_not_a_file_wakes_the_run(tmp_path: Path) -> None:
    beats = _beats(tmp_path, "b2")
    store = tmp_path / ".regulator" / "units.ndjson"
    store.write_bytes(b"")
    beats.units_changed()
    assert beats.nudge.is_set()
    beats.nudge.clear()
    store.unlink()
    os.mkfifo(store)  # never waited on
    beats.units_changed()
    assert beats.nudge.is_set()


def test_a_line_appended_before_the_watch_is_armed_is_found(tmp_path: Path) -> None:
    """inotify reports nothing appended before it watches (a loaded machine takes seconds to arm
    it: a decision in the suite waited for the 30 s beat); the watch looks at the store's size once a
    second without a change, so the run is woken all the same."""
    import threading

    from tests.serving import wait_for

    beats = _beats(tmp_path, "b1")
    _append(tmp_path, b'{"kind":"decision","unit":"b1","action":"abort"}\n')  # before the watch
    watcher = threading.Thread(target=beats.watch, daemon=True)
    watcher.start()
    try:
        wait_for(beats.nudge.is_set, "the run woken by the line written before its watch", deadline=10)
    finally:
        beats.done.set()
        watcher.join(timeout=5)
