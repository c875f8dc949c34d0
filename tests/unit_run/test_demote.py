"""A demote stops a running unit within moments (D-336, engine.host.beats): `unit run` asks the log
at every beat and looks at once when units.ndjson names its unit, so neither the periodic beat (up to
30 s away) nor a door a unit keeps busy (429 to every heartbeat) delays it; the run's last line names
who demoted it, when and why."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from engine.checkout.workspace import Workspace
from engine.doors.client import DoorClient
from engine.host.beats import Beats
from tests.helpers import one_line
from tests.serving import token_of, wait_for
from tests.unit_run.common import alive, row, script, start_unit, system_workspace

READY = "echo $$ > {ready}.part\nmv {ready}.part {ready}\n"

# a unit that fills its own lease's gate at the door: requests with its token whose bodies drip in,
# one byte a tenth of a second (under the door's read deadline), every connection made again at once
# when it ends or is refused (429): the run's heartbeats, through the same gate, get 429 (an
# adversarial review of D-336)
FLOOD = r"""
import os, socket, sys, threading, time
path, token = os.environ["REGULATOR_DOOR"][len("unix:"):], os.environ["REGULATOR_DOOR_TOKEN"]
head = ("POST /mcp HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer " + token + "\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 100\r\n\r\n").encode()
def hold():
    while True:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                s.sendall(head)
                s.settimeout(0.1)
                for _ in range(90):
                    try:
                        if s.recv(1):  # answered (429): again at once
                            break
                    except TimeoutError:
                        s.sendall(b" ")
        except OSError:
            time.sleep(0.01)
def answer():  # the status line of a whole request with the token, as the run's heartbeat sends it
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(head.replace(b"Content-Length: 100", b"Content-Length: 2") + b"{}")
        return s.recv(64).split(b"\r\n")[0]
for _ in range(60):
    threading.Thread(target=hold, daemon=True).start()
while b" 429 " not in answer():  # the gate full: a request with the token is refused at once
    time.sleep(0.1)
open(sys.argv[1] + ".part", "w").write(str(os.getpid()))
os.rename(sys.argv[1] + ".part", sys.argv[1])
time.sleep(600)
"""


def test_a_demote_stops_the_run_at_once_not_at_its_next_heartbeat(served: Any, tmp_path: Any) -> None:
    """With a 15-minute TTL the run beats every 30 s; the demote's line in units.ndjson makes it ask
    the log at once, so the child is stopped within the deadline, long before that beat; its line
    names the demote; nothing more is recorded."""
    ws, _ = served
    ready = tmp_path / "ready"
    agent = script(tmp_path, "long.sh", READY.format(ready=ready) + "exec sleep 600\n")
    host = start_unit(ws, "b1", "--ttl", "15m", "--", str(agent))  # its first beat, then one every 30 s
    wait_for(ready.exists, "the child started")
    ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "wrong \x1b[31mbrief", check=True)
    _, err = host.communicate(timeout=20)  # the periodic beat would come ~28 s after the demote
    assert host.returncode == 3, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("regulator: b1's lease ended (alice demoted b1 at "), err
    assert last.endswith(
        ": wrong \\x1b[31mbrief): the command was stopped (it exited 143); nothing more recorded"
    )
    assert not alive(int(ready.read_text()))  # the child is gone
    b1 = row(ws, "b1")
    assert (b1["status"], b1["result"]) == ("todo", None)
    assert not [e for e in ws.events("units") if e["kind"] == "result"]


def test_a_unit_that_keeps_its_doors_gate_full_is_stopped_by_its_demote(served: Any, tmp_path: Any) -> None:
    """The unit's requests hold its lease's gate, so the door answers the run's heartbeats 429 (never
    the 401 that used to stop it): the log's word stops the run all the same. Fails on the code that
    waited for the door's 401 (the run went on for minutes after the demote)."""
    ws, _ = served
    ready = tmp_path / "ready"
    flood = tmp_path / "flood.py"
    flood.write_text(FLOOD)
    agent = script(tmp_path, "flood.sh", f"exec {sys.executable} {flood} {ready}\n")
    host = start_unit(ws, "b1", "--ttl", "15m", "--", str(agent))  # a beat every 30 s
    wait_for(ready.exists, "the child started, its gate full (a request with its token gets 429)")
    ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "stop", check=True)
    _, err = host.communicate(timeout=15)
    assert host.returncode == 3, err
    assert "b1's lease ended (alice demoted b1 at " in err.strip().splitlines()[-1], err
    assert not alive(int(ready.read_text()))


def test_a_heartbeat_the_door_answers_401_ends_the_run(served: Any) -> None:
    """The door's own word still counts: a token that is no current lease gets 401, and the beat
    sets `refused`, which stops the run."""
    ws, serving = served
    beats = Beats(Workspace(ws.root), "b1", serving.url, "x" * 43, 900, print)
    assert beats.beat(DoorClient(serving.url, "x" * 43)) is None
    assert beats.refused.is_set()


def test_the_log_says_the_lease_is_over_with_no_door_to_ask(tmp_path: Any) -> None:
    """`lease_over` judges by the units store as serve's door judges a call: current after the
    dispatch, over after a demote, with no door anywhere (its URL names no socket)."""
    ws = system_workspace(tmp_path)
    token = token_of(ws.lease("b1"))
    beats = Beats(Workspace(ws.root), "b1", "unix:/nowhere/d.sock", token, 900, print)
    assert not beats.lease_over()
    ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "stop", check=True)
    assert beats.lease_over()
    other = Beats(Workspace(ws.root), "b2", "unix:/nowhere/d.sock", "y" * 43, 900, print)
    assert other.lease_over()  # a token that never was b2's lease


def test_a_store_replaced_under_the_judge_never_ends_it(tmp_path: Any) -> None:
    """units.ndjson swapped between a longer and a shorter copy while the run's judge folds it (an
    unconfined unit can, as the host's account): no look raises (an adversarial review: a
    StoreReplaced escaped and killed the thread, and no demote stopped the run); once the store is
    itself again, the lease is current, and over after a demote."""
    ws = system_workspace(tmp_path)
    token = token_of(ws.lease("b1"))
    store = ws.root / ".regulator" / "units.ndjson"
    whole = store.read_bytes()
    pad = b"".join(b'"' + b"x" * 1_000_000 + b'"\n' for _ in range(20))  # bad lines: folded past, slowly
    longer, shorter = store.with_name("u.A"), store.with_name("u.B")
    longer.write_bytes(whole + pad)
    shorter.write_bytes(whole + pad[: len(pad) // 2])
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for source in (longer, shorter):
                step = store.with_name("u.t")
                step.unlink(missing_ok=True)
                os.link(source, step)
                os.rename(step, store)
            time.sleep(0.002)

    swapper = threading.Thread(target=swap)
    swapper.start()
    beats = Beats(Workspace(ws.root), "b1", "unix:/nowhere/d.sock", token, 900, print)
    try:
        verdicts = {beats.lease_over() for _ in range(30)}  # raises nothing, whatever it reads
    finally:
        stop.set()
        swapper.join()
        store.write_bytes(whole)
    assert verdicts <= {False}  # never a stop: the lease is current in every copy
    assert not beats.lease_over()
    ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "stop", check=True)
    assert beats.lease_over()


def test_a_unit_closed_or_decided_on_while_it_runs_is_stopped_and_its_line_says_so(
    served: Any, tmp_path: Any
) -> None:
    """A close, or a recovery decision, ends the run's lease as a demote does: the last line names
    it, never a door's refusal (an adversarial review: "the door refused it" after a close)."""
    ws, _ = served
    for unit, act, said in (
        ("b1", ["unit", "close", "b1"], "b1's lease ended (b1 was closed at "),
        (
            "r1",
            ["unit", "decide", "r1", "--action", "abort", "--by", "alice", "--rationale", "wrong brief"],
            "r1's lease ended (alice decided abort for r1 at ",
        ),
    ):
        ready = tmp_path / f"ready-{unit}"
        agent = script(tmp_path, f"{unit}.sh", READY.format(ready=ready) + "exec sleep 600\n")
        host = start_unit(ws, unit, "--ttl", "15m", "--", str(agent))
        wait_for(ready.exists, "the child started")
        ws.run(*act, check=True)
        _, err = host.communicate(timeout=20)
        assert host.returncode == 3, err
        assert said in err.strip().splitlines()[-1], err
        assert not alive(int(ready.read_text()))


def test_a_second_run_waits_until_the_demoted_runs_command_is_gone(served: Any, tmp_path: Any) -> None:
    """The demoted run's child ignores SIGTERM, so its stop takes the 5 s grace: a second `unit run`
    meanwhile is refused (exit 3, nothing dispatched) rather than working beside it in the same
    worktree (D-336's operator review); once the first has exited, it runs. A run of a unit whose run
    is live and current is the dispatch's to refuse (in progress: exit 2), as before."""
    ws, _ = served
    ready = tmp_path / "ready"
    agent = script(
        tmp_path,
        "stubborn.sh",
        "trap '' TERM\n" + READY.format(ready=ready) + "while :; do sleep 0.1; done\n",
    )
    first = start_unit(ws, "b1", "--ttl", "15m", "--", str(agent))
    wait_for(ready.exists, "the child started")
    current = ws.run("unit", "run", "b1", "--", "true")
    assert current.returncode == 2 and "in-progress" in one_line(current), current.stderr
    ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "stop", check=True)
    dispatches = len([e for e in ws.events("units") if e["kind"] == "dispatch"])
    second = ws.run("unit", "run", "b1", "--", "true")
    assert second.returncode == 3, second.stderr
    assert one_line(second).startswith(f"regulator: b1's last `unit run` (pid {first.pid}) has not ended"), (
        second.stderr
    )
    assert len([e for e in ws.events("units") if e["kind"] == "dispatch"]) == dispatches
    first.communicate(timeout=30)
    assert first.returncode == 3 and not alive(int(ready.read_text()))
    again = ws.run("unit", "run", "b1", "--", "true")
    assert again.returncode == 0, again.stderr
