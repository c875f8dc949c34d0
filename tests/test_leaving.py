"""A short command's large read left to the process's end (engine.base.leaving, D-260): what `regulator
controlroom --once` prints and exits with is what it was, the exit hooks run, and a thread still
running is waited for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REGULATOR

KEPT = """
import atexit, sys
from engine.base import leaving

class Read:  # stands for a read of 100,000 obligations: says when it is freed
    def __del__(self):
        with open(sys.argv[1], "a") as out:
            out.write("freed\\n")

if sys.argv[2] == "armed":
    leaving.arm()
read = Read()
leaving.keep(read)
del read
atexit.register(lambda: print("exit hook", file=sys.stderr))
print("the answer")  # buffered: standard output is a pipe
leaving.leave(3)
"""


@pytest.mark.parametrize("armed", [True, False])
def test_a_kept_read_is_not_freed_and_the_answer_hooks_and_code_are_kept(tmp_path: Path, armed: bool) -> None:
    """Armed (the `regulator` script), a kept read is left to the process's end, yet the buffered
    answer is written, the exit hooks run and the exit code is the command's. Unarmed (any other
    caller of the command line, a test), nothing is kept: the read is freed as usual."""
    marks = tmp_path / "marks"
    done = subprocess.run(
        [sys.executable, "-c", KEPT, str(marks), "armed" if armed else "plain"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    assert done.stdout == "the answer\n"
    assert "exit hook" in done.stderr and "Traceback" not in done.stderr
    freed = marks.read_text() if marks.exists() else ""
    assert freed == ("" if armed else "freed\n")


def test_a_thread_still_running_is_waited_for() -> None:
    """A command that leaves a thread running (not a daemon) ends as any Python process does: the
    thread finishes its work before the process ends."""
    code = """
import sys, threading, time
from engine.base import leaving

def late():
    time.sleep(0.3)
    print("the thread's work", flush=True)

leaving.arm()
leaving.keep(object())
threading.Thread(target=late).start()
leaving.leave(4)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 4
    assert done.stdout == "the thread's work\n"


HEAP = """
import sys
from engine.base import leaving

def resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

if sys.argv[1] == "armed":
    leaving.arm()
leaving.keep_heap()
before = resident()
block = bytearray(64 << 20)
block[:: 4096] = b"x" * len(block[:: 4096])  # every page touched
del block
print(resident() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="Linux's /proc")
def test_the_heap_is_kept_only_in_the_regulator_script() -> None:
    """`keep_heap` (--once): a 64 MiB block freed stays in the process's heap, for the next large
    block, where the process was armed; anywhere else (a long-lived caller) it goes back."""
    grown = {}
    for how in ("armed", "plain"):
        done = subprocess.run([sys.executable, "-c", HEAP, how], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        grown[how] = int(done.stdout)
    assert grown["armed"] > 60 << 20
    assert grown["plain"] < 16 << 20


def _read_by(
    ws: Any, env: dict[str, str], args: list[str], stop: int | None, blocking: bool = True
) -> tuple[bytes, str, int]:
    """`regulator ARGS` into a pipe of 4 KiB, its reader keeping the first `stop` bytes (every byte
    for None) and closing; the bytes read, standard error and the exit code."""
    import fcntl
    import os

    read, write = os.pipe()
    fcntl.fcntl(read, fcntl.F_SETPIPE_SZ, 4096)
    if not blocking:
        fcntl.fcntl(write, fcntl.F_SETFL, fcntl.fcntl(write, fcntl.F_GETFL) | os.O_NONBLOCK)
    if stop == 0:
        os.close(read)  # gone before the command starts
    command = subprocess.Popen([REGULATOR, *args], cwd=ws.root, env=env, stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    got = b""
    if stop != 0:
        with os.fdopen(read, "rb") as out:
            while stop is None or len(got) < stop:
                chunk = out.read1(512 if stop is None else stop - len(got))  # a slow reader, a short pipe
                if not chunk:
                    break
                got += chunk
    error = command.communicate(timeout=120)[1].decode()
    return got, error, command.returncode


def _streams(ws: Any, buffered: bool) -> dict[str, str]:
    env = {k: v for k, v in ws.env.items() if k != "PYTHONUNBUFFERED"}
    return env if buffered else {**env, "PYTHONUNBUFFERED": "1"}


def _twelve_long_reports(ws: Any) -> None:
    from tests.test_predictions import report

    for n in range(12):  # 1 KiB subjects: each listing more than the pipe, and Python's buffer, holds
        report(ws, by="alice", resolves=None, subject=f"{n} " + "the release slips. " * 50)
    ws.run("controlroom", "--once", "--json")  # the first routes the reports: the runs below do not


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_once_json_through_a_pipe_closed_early_and_in_full(ws: Any, buffered: bool) -> None:
    """`controlroom --once --json` read whole is one JSON document with its exit code; read by a
    reader that stops early (after 20 bytes, or short of the end by 100), it stops quietly and
    exits as it judged: no traceback, no "Exception ignored" from a last flush, no exit 120; into a
    non-blocking pipe it writes the whole document. Buffered streams or not (D-332)."""
    _twelve_long_reports(ws)
    whole = ws.run("controlroom", "--once", "--json")
    assert whole.returncode in (0, 1), whole.stderr
    document = json.loads(whole.stdout)
    assert document["exitCode"] == whole.returncode
    expected = whole.stdout.encode()
    assert len(expected) > 16000
    args = ["controlroom", "--once", "--json"]
    for stop, blocking in ((0, True), (20, True), (len(expected) - 100, True), (None, True), (None, False)):
        got, error, code = _read_by(ws, _streams(ws, buffered), args, stop, blocking)
        assert (error, code) == ("", whole.returncode), stop
        assert _but_now(got) == _but_now(expected[:stop]), stop  # the whole, or what was read of it


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_reader_that_leaves_never_changes_what_the_command_judged(ws: Any, buffered: bool) -> None:
    """Text output too (D-332): a reader gone before the first byte, or after 20 bytes of a listing
    longer than the pipe, leaves the command's own exit code: `verify` that found a bad line exits
    1, `signals` 0, quietly (before: 120 with "Exception ignored", or 1, by how far the buffer
    got); a non-blocking pipe gets the whole listing."""
    _twelve_long_reports(ws)
    listing = ws.run("signals")
    assert listing.returncode == 0 and len(listing.stdout) > 12000, listing.stderr
    env = _streams(ws, buffered)
    for stop in (0, 20):
        assert _read_by(ws, env, ["signals"], stop)[1:] == ("", 0), stop
    assert _read_by(ws, env, ["signals"], None, blocking=False) == (listing.stdout.encode(), "", 0)
    with (ws.root / ".regulator" / "signals.ndjson").open("a") as log:
        log.write("not an event\n")
    found = ws.run("verify")
    assert found.returncode == 1 and len(found.stdout) < 4000, found.stdout
    assert _read_by(ws, env, ["verify"], 0)[1:] == ("", 1)
    assert _read_by(ws, env, ["verify"], None) == (found.stdout.encode(), "", 1)


def test_an_output_in_another_encoding_is_written_as_its_stream_writes_it(ws: Any) -> None:
    """Standard output in an encoding other than UTF-8 takes the document through its own stream:
    UTF-16's one byte-order mark, not one per piece; a character ASCII has no bytes for is one line
    and exit 1, no traceback, and none of the JSON document (D-332)."""
    _twelve_long_reports(ws)
    judged = ws.run("controlroom", "--once", "--json").returncode
    done = subprocess.run(
        [REGULATOR, "controlroom", "--once", "--json"],
        cwd=ws.root,
        env={**ws.env, "PYTHONIOENCODING": "utf-16"},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == judged
    assert json.loads(done.stdout.decode("utf-16"))["exitCode"] == judged
    from tests.test_predictions import report

    report(ws, by="alice", resolves=None, subject="café ☃")
    for args in (["controlroom", "--once", "--json"], ["signals"]):
        done = subprocess.run(
            [REGULATOR, *args],
            cwd=ws.root,
            env={**ws.env, "PYTHONIOENCODING": "ascii"},
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 1, args
        # the document is one write, so nothing of it; the listing, the rows before that one
        assert done.stdout == b"" if args[0] == "controlroom" else b"caf" not in done.stdout, args
        assert done.stderr.decode() == (
            "regulator: its output could not be written (its encoding, ascii, has no bytes for a "
            "character in it): the command ran, its answer is lost (exit 1)\n"
        )


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_an_error_whose_reader_left_keeps_its_exit_code(ws: Any, buffered: bool) -> None:
    """Standard output and error into one pipe its reader closed (`2>&1 | …`): bad input still
    exits 2 and a refusal 3, nothing written (before: 120 with buffered streams, 1 without), and a
    listing with a warning 0; the help into a full disk is one line and exit 1 (before: then
    "Exception ignored", exit 120)."""
    import os

    env = _streams(ws, buffered)
    before = ws.digest()
    refused = ["unit", "decide", "u1", "--action", "retry", "--by", "bob", "--rationale", "x"]  # no grant
    assert ws.run(*refused).returncode == 3
    for args, code in ((["obligation", "show", "zzzzzzzz"], 2), (refused, 3)):
        read, write = os.pipe()
        os.close(read)
        ended = subprocess.run(
            [REGULATOR, *args], cwd=ws.root, env=env, stdout=write, stderr=write, timeout=60
        )
        os.close(write)
        assert ended.returncode == code, args
    assert ws.digest() == before
    with (ws.root / ".regulator" / "signals.ndjson").open("a") as log:
        log.write("not an event\n")
    warned = ws.run("signals")
    assert (warned.returncode, warned.stderr.startswith("regulator: warning: ")) == (0, True)
    read, write = os.pipe()
    os.close(read)
    ended = subprocess.run(
        [REGULATOR, "signals"], cwd=ws.root, env=env, stdout=write, stderr=write, timeout=60
    )
    os.close(write)
    assert ended.returncode == 0  # a warning its reader did not take changes nothing
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [REGULATOR, "--help"], env=env, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert (done.returncode, done.stderr) == (
        1,
        "regulator: No space left on device; the command stopped there (exit 1)\n",
    )


def _but_now(output: bytes) -> list[bytes]:
    """--once's lines but its time (`now`), which two runs differ in."""
    return [line for line in output.splitlines() if not line.startswith(b'  "now": ')]


@pytest.mark.parametrize("closed", ["2>&-", ">&-"])
def test_once_with_a_standard_stream_closed_exits_as_it_judged(ws: Any, closed: str) -> None:
    """Started with standard error (or output) closed, as a launcher may start it, `controlroom
    --once` still exits with what it judged (a review: a closed standard error made it exit 1)."""
    judged = ws.run("controlroom", "--once", "--json").returncode
    done = subprocess.run(
        f"{REGULATOR} controlroom --once --json {closed}", shell=True, cwd=ws.root, env=ws.env, timeout=120
    )
    assert done.returncode == judged == 0


FULL = (
    "its output could not be written (No space left on device): the command ran, its answer is lost (exit 1)"
)


def to_full(ws: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """`regulator ARGS > /dev/full`."""
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [REGULATOR, *args],
            cwd=ws.root,
            env=ws.env,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["status", "--json"],
        ["obligations"],
        ["controlroom", "--once"],
        ["controlroom", "--once", "--json"],
        ["unit", "schema"],
    ],
)
def test_an_output_that_cannot_be_written_is_one_line(ws: Any, args: list[str]) -> None:
    """Standard output on a full device (`> /dev/full`): one line that says the answer is lost,
    exit 1, never a traceback (each of these printed one before)."""
    done = to_full(ws, *args)
    assert done.returncode == 1
    assert done.stderr == f"regulator: {FULL}\n"


def test_a_write_whose_answer_cannot_be_printed_stands(ws: Any) -> None:
    """A report whose output meets a full device is written all the same, and the line says the
    command ran: the operator is not led to report it twice."""
    path = ws.root.parent / "report.json"
    path.write_text(
        json.dumps(
            {
                "subject": "the disk",
                "claim": "full",
                "observation": "df",
                "evidence": ["df"],
                "confidence": "high",
                "reportedSeverity": "info",
            }
        )
    )
    before = ws.run("signals", "--json").stdout
    done = to_full(ws, "signals", "report", "--json-input", str(path), "--by", "alice")
    assert (done.returncode, done.stderr) == (1, f"regulator: {FULL}\n")
    listed = json.loads(ws.run("signals", "--json").stdout)
    assert len(listed) == len(json.loads(before)) + 1
    assert listed[-1]["subject"] == "the disk"


def test_verify_keeps_its_fold_only_for_a_process_that_ends_with_it(ws: Any, monkeypatch: Any) -> None:
    """D-330: `regulator verify` leaves the fold it makes to its process's end
    (`findings(ws, kept=True)`); the room, `serve` and `--once` ask the same `findings` while they
    live on and keep nothing, armed or not: a long-lived process that kept each read would grow
    with every refresh."""
    from engine.base import leaving
    from engine.checkout.workspace import Workspace
    from engine.commands import verification
    from engine.read.model import State

    monkeypatch.setattr(leaving, "_ARMED", [True])  # as the `regulator` script arms it
    monkeypatch.setattr(leaving, "_KEPT", [])
    workspace = Workspace(ws.root)
    assert verification.findings(workspace) == verification.findings(workspace, kept=True) == []
    assert len(leaving._KEPT) == 1 and type(leaving._KEPT[0]) is State


def test_a_log_that_was_full_for_a_moment_keeps_its_lines(tmp_path: Any) -> None:
    """serve's standard error a non-blocking pipe full when it starts, its reader catching up
    later: the lines that could not go out wait in the buffer and follow (`printing.say`, D-332),
    the `listening` line among them; standard error is not pointed at /dev/null for a full pipe
    (a review: one failed line silenced the whole log, tracebacks included)."""
    import fcntl
    import os
    import signal
    import threading
    import time

    from tests.helpers import make_workspace
    from tests.serving import short_folder, wait_for

    ws = make_workspace(tmp_path)
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETFL, fcntl.fcntl(write, fcntl.F_GETFL) | os.O_NONBLOCK)
    filled = 0
    try:
        while True:
            filled += os.write(write, b"#" * 4096)
    except BlockingIOError:
        pass
    sock = short_folder() / "d.sock"
    env = {k: v for k, v in ws.env.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        [REGULATOR, "serve", "--listen", f"unix:{sock}"],
        cwd=ws.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=write,
        process_group=0,
    )
    os.close(write)
    got: list[bytes] = []
    try:
        # serve.json is written just before the `listening` line is said: that line meets the full pipe
        wait_for((ws.root / ".regulator" / "serve.json").exists, "serve listening")
        time.sleep(0.5)  # not a measure: the line said, before the reader starts
        reader = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(read, 65536), b"")))
        reader.start()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(read)
    lines = [json.loads(line) for line in b"".join(got).replace(b"#", b"").decode().splitlines() if line]
    assert [x.get("serve") for x in lines if "serve" in x] == ["listening", "stopped"]
    assert filled > 0


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_the_engines_own_warning_whose_reader_left_changes_nothing(tmp_path: Path, buffered: bool) -> None:
    """`REGULATOR_NOW` on a workspace on the system's clock: the engine warns it is ignored
    (engine.base.clock). Into a closed `2>&1` that warning leaves `status` its exit 0 (before: 1)."""
    import os

    from tests.helpers import make_workspace

    ws = make_workspace(tmp_path, clock="system")
    env = {**_streams(ws, buffered), "REGULATOR_NOW": "2020-01-01T00:00:00Z"}
    done = subprocess.run(
        [REGULATOR, "status"], cwd=ws.root, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "REGULATOR_NOW ignored" in done.stderr
    read, write = os.pipe()
    os.close(read)
    ended = subprocess.run(
        [REGULATOR, "status"], cwd=ws.root, env=env, stdout=write, stderr=write, timeout=60
    )
    os.close(write)
    assert ended.returncode == 0
