"""A writer killed mid-append (design §11): readers skip the torn line, nothing earlier is lost, the
next append starts on its own line, and `verify` reports the torn line and nothing else."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from tests import helpers
from tests.helpers import report_args

# Takes the store's lock as a real append does, writes half a line, and dies by SIGKILL holding it.
DYING_WRITER = """
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b'{"id":"01TORN","kind":"signal","subject":"half a')
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_mid_append(ws: helpers.Workspace) -> None:
    for i in range(3):
        ws.run(*report_args(subject=f"before {i}"), "--by", "alice", check=True)
    before = ws.store("signals").read_bytes()
    proc = subprocess.run([sys.executable, "-c", DYING_WRITER, str(ws.store("signals"))])
    assert proc.returncode == -signal.SIGKILL
    listed = ws.run("signals", "--json")
    assert listed.returncode == 0
    assert [s["subject"] for s in json.loads(listed.stdout)] == ["before 0", "before 1", "before 2"]
    assert "signals.ndjson:4: torn" in listed.stderr
    # the lock died with the writer: the next append goes through and lands whole on its own line
    done = ws.run(*report_args(subject="after"), "--by", "alice")
    assert done.returncode == 0, done.stderr
    raw = ws.store("signals").read_bytes()
    assert raw.startswith(before)
    lines = raw.split(b"\n")
    assert (
        lines[3] == b'{"id":"01TORN","kind":"signal","subject":"half a~'  # ended by TORN_END (D-335)
        and json.loads(lines[4])["subject"] == "after"
    )
    assert [s["subject"] for s in ws.json("signals")] == ["before 0", "before 1", "before 2", "after"]
    verified = ws.run("verify")
    assert verified.returncode == 1
    problems = [
        line
        for line in verified.stdout.splitlines()
        if line.startswith(("signals", "memory", "units", "identity"))
    ]
    assert problems == ["signals.ndjson:4: unreadable line (torn write or garbage); readers skip it"]
    ws.run("signals", "route", check=True)
    assert len(ws.json("obligations")) == 8
