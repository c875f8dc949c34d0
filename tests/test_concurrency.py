"""Real processes racing (design §5.3, §11): routing never duplicates, appends stay whole."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests import helpers
from tests.helpers import REGULATOR, report_args


def test_three_routers_at_once_never_duplicate(ws: helpers.Workspace) -> None:
    for i in range(6):
        ws.run(*report_args(subject=f"finding {i}"), "--by", "alice", check=True)
    procs = [
        subprocess.Popen(
            [REGULATOR, "signals", "route"],
            cwd=ws.root,
            env=ws.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    routings = [e for e in ws.events("signals") if e["kind"] == "routing"]
    assert len(routings) == 6
    assert len({r["signal"] for r in routings}) == 6
    obligations = ws.json("obligations")
    assert len(obligations) == 12 and len({o["id"] for o in obligations}) == 12
    assert ws.run("verify").returncode == 0


def test_cli_reports_torn_and_garbage_lines_and_verify_names_them(ws: helpers.Workspace) -> None:
    ws.run(*report_args(), "--by", "alice", check=True)
    signals = ws.store("signals")
    with open(signals, "ab") as f:
        f.write(b'{"kind":"signal","id":"TORN')
    done = ws.run("signals")
    assert done.returncode == 0
    assert "signals.ndjson:2: torn" in done.stderr
    ws.run(*report_args(subject="after the crash"), "--by", "alice", check=True)
    listed = ws.json("signals")
    assert [s["subject"] for s in listed] == ["vendor/left-pad.js", "after the crash"]
    done = ws.run("verify")
    assert done.returncode == 1
    assert "signals.ndjson:2:" in done.stdout and "cannot see a cut-off tail" in done.stdout
    assert done.stdout.count("signals.ndjson:") == 1


def test_verify_names_an_edited_middle_line(ws: helpers.Workspace) -> None:
    for i in range(3):
        ws.run(*report_args(subject=f"s{i}"), "--by", "alice", check=True)
    path = ws.store("signals")
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"s1"', '"s1-edited"')
    path.write_text("".join(lines))
    done = ws.run("verify")
    assert done.returncode == 1 and "signals.ndjson:2: content does not match" in done.stdout
    path.write_text(lines[0] + lines[2])
    done = ws.run("verify")
    assert done.returncode == 1 and "signals.ndjson:2: chain broken" in done.stdout


def test_verify_judges_the_routing_records_its_fold_read_not_those_appended_since(
    ws: helpers.Workspace, monkeypatch: Any
) -> None:
    """`verify` re-derives every routing record in a child, after its fold: a signal reported and
    routed by a host in between is the next run's, never "a routing record for no signal that
    counts (forged?)" for a signal the fold did not see."""
    from engine.checkout.workspace import Workspace
    from engine.commands.rerouting import routings
    from engine.read.load import load

    monkeypatch.setenv("REGULATOR_NOW", ws.env["REGULATOR_NOW"])
    ws.run(*report_args(subject="before the fold"), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    engine_ws = Workspace(ws.root)
    folded = load(engine_ws, cached=False)
    ws.run(*report_args(subject="after the fold"), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    assert [e["kind"] for e in ws.events("signals")].count("routing") == 2
    assert routings(engine_ws, folded) == []
    assert routings(engine_ws, load(engine_ws, cached=False)) == []
    assert ws.run("verify").returncode == 0


def test_a_store_cut_shorter_between_a_fold_and_its_routing_is_one_clear_refusal(
    ws: helpers.Workspace, monkeypatch: Any
) -> None:
    """--once folds signals.ndjson, then routes what is unrouted on that state: a store cut shorter
    in between (a writer with the account's shell) is refused in one line, as a load refuses it,
    never a traceback, and nothing is written."""
    from engine.base.errors import Refused
    from engine.checkout.workspace import Workspace
    from engine.commands.router import route_locked
    from engine.read.load import load

    monkeypatch.setenv("REGULATOR_NOW", ws.env["REGULATOR_NOW"])
    ws.run(*report_args(subject="one"), "--by", "alice", check=True)
    ws.run(*report_args(subject="two"), "--by", "alice", check=True)
    engine_ws = Workspace(ws.root)
    state = load(engine_ws, stores=("signals",))
    path = ws.store("signals")
    path.write_bytes(path.read_bytes().split(b"\n", 1)[0] + b"\n")
    before = ws.digest()
    with pytest.raises(Refused, match="signals.ndjson changed while it was read; run the command again"):
        route_locked(engine_ws, state)
    assert ws.digest() == before


def test_one_thread_of_a_process_decides_at_a_time_and_only_it_is_deciding(ws: helpers.Workspace) -> None:
    """A host writes from several threads (the door's, the router's, the tick's duties, which take
    the decide lock only around their writes, D-240). The decide lock is a process's, so exclusive()
    also takes the process's writer lock: while one thread is inside it, another is not `deciding`
    (it would write without the lock) and cannot take the writer lock; once it leaves, it can."""
    import threading

    from engine.checkout.workspace import Workspace, writer_lock

    engine_ws = Workspace(ws.root)
    link = ws.root.parent / "via-link"
    link.symlink_to(ws.root)
    other = Workspace(link)  # the same workspace, reached through a symlink
    inside, leave, seen = threading.Event(), threading.Event(), {}

    def holder() -> None:
        with engine_ws.exclusive():
            seen["holder deciding"] = engine_ws.deciding()
            inside.set()
            leave.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    assert inside.wait(60)

    def elsewhere() -> None:
        seen["other deciding"] = engine_ws.deciding() or other.deciding()
        seen["other took the writer lock"] = writer_lock(other.root).acquire(blocking=False)

    probe = threading.Thread(target=elsewhere)
    probe.start()
    probe.join(60)
    leave.set()
    thread.join(60)
    assert seen == {"holder deciding": True, "other deciding": False, "other took the writer lock": False}
    assert not engine_ws.deciding()
    with other.exclusive():  # free again, from any thread
        assert other.deciding()
