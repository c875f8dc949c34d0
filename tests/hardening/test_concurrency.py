"""Concurrent writers as real processes (design §11): whole lines, one chain, exactly one decision."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests import helpers
from tests.helpers import REGULATOR, remember_args, report_args


def spawn(ws: helpers.Workspace, *args: Any, cwd: Any = None) -> Any:
    return subprocess.Popen(
        [REGULATOR, *args],
        cwd=cwd or ws.root,
        env=ws.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


REPORTER = """
import sys
from engine.commands.actors import Actor
from engine.commands.signals import report_intelligence
from engine.checkout.workspace import Workspace
from pathlib import Path
ws = Workspace(Path(sys.argv[1]))
for i in range(25):
    report_intelligence(ws, {"subject": f"writer {sys.argv[2]} report {i}", "claim": "c", "observation": "o",
                             "evidence": ["e"], "confidence": "low", "reportedSeverity": "advisory",
                             "affectedUnits": ["u1"]}, Actor(person="alice"))
"""


def test_four_processes_times_25_reports(ws: helpers.Workspace) -> None:
    import sys

    procs = [
        subprocess.Popen([sys.executable, "-c", REPORTER, str(ws.root), str(w)], env=ws.env) for w in range(4)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    raw = ws.store("signals").read_bytes()
    assert raw.endswith(b"\n")
    events = [json.loads(line) for line in raw.splitlines()]
    assert len(events) == 100 and all(e["kind"] == "signal" for e in events)
    assert len({e["id"] for e in events}) == 100
    assert sorted(e["subject"] for e in events) == sorted(
        f"writer {w} report {i}" for w in range(4) for i in range(25)
    )
    done = ws.run("verify")
    assert done.returncode == 0, done.stdout


def test_three_routers_one_obligation_and_one_record_per_signal(ws: helpers.Workspace) -> None:
    for i in range(10):
        ws.run(*report_args(subject=f"s{i}", affects=["u1"]), "--by", "alice", check=True)
    procs = [spawn(ws, "signals", "route") for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    routings = [e for e in ws.events("signals") if e["kind"] == "routing"]
    assert (
        sorted(r["signal"] for r in routings) == sorted({r["signal"] for r in routings})
        and len(routings) == 10
    )
    assert len(ws.json("obligations")) == 10


def test_three_resolvers_exactly_one_disposition(ws: helpers.Workspace) -> None:
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    ob = ws.json("obligations")[0]["id"]
    procs = [
        spawn(ws, "obligation", "resolve", ob, "--by", "alice", "--disposition", d, "--rationale", f"by {d}")
        for d in ("no-action", "accepted-risk", "rework")
    ]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 3, 3]
    for code, err in results:
        if code == 3:
            assert len(err.strip().splitlines()) == 1 and "already resolved" in err
    dispositions = [e for e in ws.events("signals") if e["kind"] == "disposition"]
    assert len(dispositions) == 1


def test_memory_remember_and_retract_racing(ws: helpers.Workspace) -> None:
    u1 = ws.lease("u1")
    b1 = ws.lease("b1")
    procs = []
    for worktree in (u1, b1, u1):
        for i in range(3):
            procs.append(spawn(ws, *remember_args(subject=f"s{i}"), cwd=worktree))
    assert all(p.wait(timeout=120) == 0 for p in procs)
    entries = ws.events("memory")
    assert len(entries) == 9 and len({e["id"] for e in entries}) == 9
    target = entries[0]["id"]
    procs = [spawn(ws, "memory", "retract", target, "--by", "alice", "--reason", f"r{i}") for i in range(3)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes == [0, 3, 3]
    assert len([e for e in ws.events("memory") if e["kind"] == "retraction"]) == 1
    assert ws.run("verify").returncode == 0


def test_two_dispatchers_one_lease(ws: helpers.Workspace) -> None:
    procs = [spawn(ws, "unit", "dispatch", "u1") for _ in range(3)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes == [0, 2, 2]
    assert len([e for e in ws.events("units") if e["kind"] == "dispatch"]) == 1


CYCLER = """
import sys
from engine.read.checkpoint import flush
from engine.commands.units import demote, dispatch
from engine.checkout.workspace import Workspace
from pathlib import Path
ws = Workspace(Path(sys.argv[1]))
for i in range(15):
    dispatch(ws, sys.argv[2])
    flush()  # what the CLI does after each command: write the checkpoint outside the lock
    demote(ws, sys.argv[2], "alice", "cycle")
    flush()
"""

READER = """
import sys, json, time
from engine.read.load import load
from engine.read.status import status
from engine.checkout.workspace import Workspace
from pathlib import Path
ws = Workspace(Path(sys.argv[1]))
restored = 0
deadline = time.time() + 60
while time.time() < deadline and not Path(sys.argv[2]).exists():
    state = load(ws)  # restores whatever checkpoint is there, or reads the log
    status(ws, state)
    restored += state.checkpointed > 0
print(restored)
"""


def test_writers_checkpointing_while_readers_restore(ws: helpers.Workspace) -> None:
    """Three writers leave a checkpoint after every command while two readers restore them: no
    reader fails or sees a half-written one, and the end state equals a cold read of the log."""
    import sys

    env = dict(ws.env, REGULATOR_CHECKPOINT_BYTES="0")
    writers = [
        subprocess.Popen([sys.executable, "-c", CYCLER, str(ws.root), unit], env=env, stderr=subprocess.PIPE)
        for unit in ("u1", "u3", "r1")
    ]
    done = ws.root / "writers-done"
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, str(ws.root), str(done)], env=env, stdout=subprocess.PIPE
        )
        for _ in range(2)
    ]
    assert [p.wait(timeout=300) for p in writers] == [0, 0, 0], [
        p.stderr.read() if p.stderr else b"" for p in writers
    ]
    done.touch()
    assert [p.wait(timeout=300) for p in readers] == [0, 0]
    assert (
        sum(int(p.stdout.read() if p.stdout else b"0") for p in readers) > 0
    )  # they did restore checkpoints
    assert (ws.root / ".regulator" / "readmodel.checkpoint").exists()
    assert not list((ws.root / ".regulator").glob(".readmodel.checkpoint.*"))  # no temporary left
    warm = ws.json("status", env={"REGULATOR_CHECKPOINT_BYTES": "0"})
    cold = ws.json("status", env={"REGULATOR_CHECKPOINT": "off"})
    assert warm == cold
    events = ws.events("units")
    assert len(events) == 90 and [e["kind"] for e in events].count("demote") == 45
