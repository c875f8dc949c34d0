"""A store write that fails part way (a full disk; here the file-size limit, which fails the same
`write` with the same partial line) leaves nothing behind: the command says it failed, the store's
bytes are what they were, and no later write completes the line and makes it count (an adversarial
review, D-335: a report cut off at its newline was completed by the next append and routed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests import helpers

SIGNALS = Path(".regulator") / "signals.ndjson"


def _report(root: Path, env: dict[str, str], limit: int | None = None) -> subprocess.CompletedProcess:
    argv = [helpers.REGULATOR, *helpers.report_args(by="alice", subject="disk filling")]
    if limit is not None:  # every file this process writes stops at `limit` bytes (EFBIG past it)
        argv = ["prlimit", f"--fsize={limit}", *argv]
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_write_cut_off_leaves_nothing_and_the_next_write_does_not_complete_it(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    # the report's line, measured in a copy: the same report writes the same bytes (pinned clock)
    twin = tmp_path / "twin"
    shutil.copytree(ws.root, twin, symlinks=True)
    before_twin = (twin / SIGNALS).stat().st_size
    assert _report(twin, ws.env).returncode == 0
    line = (twin / SIGNALS).stat().st_size - before_twin

    store = ws.root / SIGNALS
    before = store.read_bytes()
    signals_before = len(ws.json("signals"))
    # a few bytes of it, and all of it but its newline (the whole JSON object on disk)
    for limit in (len(before) + 10, len(before) + line - 1):
        done = _report(ws.root, ws.env, limit)
        assert done.returncode == 1, (limit, done.stdout, done.stderr)
        assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert (
            done.stderr
            == f"regulator: File too large (nothing of the line was kept): {store}; the command stopped there (exit 1)\n"
        )
        assert store.read_bytes() == before  # cut off again: nothing half-written
    # the next write, with room, is the only one that counts
    done = _report(ws.root, ws.env)
    assert done.returncode == 0, done.stderr
    assert (
        store.read_bytes().startswith(before) and store.read_bytes().count(b"\n") == before.count(b"\n") + 1
    )
    assert len(ws.json("signals")) == signals_before + 1
    assert ws.run("verify").returncode == 0


def test_a_line_killed_one_byte_short_of_its_newline_never_counts(tmp_path: Path) -> None:
    """A writer killed between its write and its cut-back (or any crash that leaves a whole JSON
    object without its newline): the next append ends that torn line with TORN_END, so no reader
    takes it, and chains to the line before it."""
    from engine.log.store import TORN_END, Store, verify

    path = tmp_path / "signals.ndjson"
    path.touch()
    store = Store(path)
    for n in range(3):
        store.append({"kind": "note", "n": n}, assign_id=True)
    twin = tmp_path / "twin.ndjson"
    twin.write_bytes(path.read_bytes())
    Store(twin).append({"kind": "note", "n": 99}, assign_id=True)  # the line the killed writer wrote
    killed = twin.read_bytes()[len(path.read_bytes()) :].removesuffix(b"\n")
    with open(path, "ab") as handle:
        handle.write(killed)  # all of it but its newline
    third = store.read().events[-1]
    written = store.append({"kind": "note", "n": 3}, assign_id=True)
    assert written["prev"] == third["hash"]  # the chain's tail was the last whole line
    assert path.read_bytes().endswith(
        killed + TORN_END + json.dumps(written, separators=(",", ":")).encode() + b"\n"
    )
    result = store.read()
    assert [e["n"] for e in result.events] == [0, 1, 2, 3]  # 99 is no event
    assert [(p.line, p.kind) for p in result.problems] == [(4, "malformed")]
    assert [(f.line, f.message) for f in verify(store)] == [
        (4, "unreadable line (torn write or garbage); readers skip it")
    ]


def test_what_a_host_event_saw_ends_at_the_whole_lines(ws: helpers.Workspace) -> None:
    """A dispatch decided while a report was being written (or after a torn tail was left) records
    where the whole lines end, never bytes that may be cut back: its `seen` was past the store's end
    once the failed write was cut back, and verify called the dispatch forged (a third review)."""
    store = ws.root / SIGNALS
    ws.run(*helpers.report_args(by="alice", subject="first", severity="info"), check=True)
    ws.run("signals", "route", check=True)  # nothing left for the dispatch to route first
    whole = store.stat().st_size
    with open(store, "ab") as handle:
        handle.write(b'{"kind":"signal","id":"torn","subject":"half a')  # a write in flight, or torn
    ws.run("unit", "dispatch", "u1", check=True)
    (dispatch,) = [e for e in ws.events("units") if e["kind"] == "dispatch"]
    assert dispatch["seen"]["signals"] == whole
    with open(store, "r+b") as handle:
        handle.truncate(whole)  # the failed write cut back
    assert ws.run("verify").returncode == 0
    assert [u["status"] for u in ws.json("status")["units"] if u["id"] == "u1"] == ["in-progress"]


def test_a_torn_line_before_a_person_event_does_not_date_it(tmp_path: Path) -> None:
    """On the system clock a person event is judged against the time of the event before it: a
    torn line between (`{"at":"9998-…"` left without its newline) is no event, and made a demote
    count for nothing as back-dated (a third review)."""
    ws = helpers.make_workspace(tmp_path, now=None, clock="system")
    ws.run("unit", "dispatch", "u1", check=True)
    with open(ws.root / ".regulator" / "units.ndjson", "ab") as handle:
        handle.write(b'{"at":"9998-12-31T23:59:59Z"')
    done = ws.run("unit", "demote", "u1", "--by", "alice", "--rationale", "stop")
    assert done.returncode == 0, done.stderr
    assert [u["status"] for u in ws.json("status")["units"] if u["id"] == "u1"] == ["todo"]
    verified = ws.run("verify")
    named = [line for line in verified.stdout.splitlines() if line.startswith("units.ndjson")]
    assert named == ["units.ndjson:2: unreadable line (torn write or garbage); readers skip it"], (
        verified.stdout
    )
