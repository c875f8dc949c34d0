"""Running a command the policy declares (a sensor, `notify`), confined as units are (design §24):
its argument vector without a shell, an allowlisted environment, a time limit after which its
whole process group is killed, and its output read from a file, never held unbounded in a pipe."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import msgspec

ENVIRONMENT = ("PATH", "HOME", "LANG", "TERM", "TZ")  # what a declared command gets of the host's
MAX_OUTPUT = 64 << 20  # more standard output than this is not a sensor's report
MAX_STDERR = 16 << 20  # more standard error than this is a command out of control
WATCH_S = 0.2  # how often the output files' sizes are looked at while the command runs


class Ran(msgspec.Struct, frozen=True):
    """What a declared command did: its exit code (None when it did not run or was killed), its
    standard output, and why it failed in one line ("" when it ran to its end)."""

    code: int | None
    stdout: bytes
    problem: str = ""
    said: str = ""  # the last line it wrote on standard error (at most 200 characters), as text

    def exited(self, shown: str) -> str:
        """`shown` exited with its code, and what it said last on standard error, if anything."""
        return f"{shown} exited {self.code}" + (f": {self.said}" if self.said else "")


def run(argv: tuple[str, ...] | list[str], *, stdin: bytes, timeout: float, cwd: Path) -> Ran:
    """Run `argv` in `cwd` with `stdin`, at most `timeout` seconds; never raises for the command's
    own failure (a missing program, a crash, a timeout): that is the Ran's problem."""
    env = {name: os.environ[name] for name in ENVIRONMENT if name in os.environ}
    env.setdefault("PATH", os.defpath)
    # it leaves no bytecode in the workspace: a `__pycache__` beside a script is a file trunk does
    # not hold, which the next run's check (engine.commands.sensors.not_trunks) refuses (D-310)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    shown = " ".join(argv)[:200]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as err:
        given.write(stdin)
        given.seek(0)
        try:
            child = subprocess.Popen(  # noqa: S603 - an argument vector a decision declared, no shell
                list(argv),
                cwd=cwd,
                env=env,
                stdin=given,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: killed whole on timeout
                close_fds=True,
            )
        except OSError as exc:
            return Ran(None, b"", f"cannot run {shown}: {exc.strerror or exc}")
        _RUNNING.add(child.pid)
        try:
            code, over = _wait(child, timeout, out, err, shown)
        finally:
            _kill_group(child.pid)  # anything it left running in its group goes with it
            _RUNNING.discard(child.pid)
        if code is None:
            return Ran(None, b"", over or f"{shown}: killed after its {timeout:g} s time limit")
        if code < 0 and _STOPPING.is_set():  # not the command's own failure: the process running it stopped
            return Ran(None, b"", f"{shown}: killed unfinished, as the process running it stopped")
        said = _last_line(err)
        size = out.seek(0, os.SEEK_END)
        if size > MAX_OUTPUT:
            return Ran(code, b"", f"{shown}: printed {size} bytes, over the {MAX_OUTPUT} byte limit", said)
        out.seek(0)
        return Ran(code, out.read(), "", said)


def _wait(
    child: subprocess.Popen, timeout: float, out: IO[bytes], err: IO[bytes], shown: str
) -> tuple[int | None, str]:
    """The command's exit code; or None, killed: at its time limit (""), or as soon as its output
    files pass their limits (why, in one line). The files are looked at every WATCH_S: a command
    that floods its output until its time limit filled the temporary folder (an adversarial
    review); now it costs its limits and what it writes in WATCH_S more."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return child.wait(timeout=max(0.0, min(WATCH_S, deadline - time.monotonic()))), ""
        except subprocess.TimeoutExpired:
            pass
        for handle, limit, what in (
            (out, MAX_OUTPUT, "standard output"),
            (err, MAX_STDERR, "standard error"),
        ):
            if os.fstat(handle.fileno()).st_size > limit:
                _kill(child)
                return None, f"{shown}: wrote over {limit} bytes on its {what}; killed"
        if time.monotonic() >= deadline:
            _kill(child)
            return None, ""


def _last_line(err: IO[bytes]) -> str:
    """The last non-empty line of what a command wrote on standard error (read from its last 4 KiB
    only), at most 200 characters: a failed notify or sensor says why in its one error line (an
    operator's review: "exited 3" and nothing else). Text, not yet escaped: whoever shows it escapes."""
    size = err.seek(0, os.SEEK_END)
    err.seek(max(0, size - 4096))
    lines = [line.strip() for line in err.read().decode("utf-8", errors="replace").splitlines()]
    found = next((line for line in reversed(lines) if line), "")
    return found[:200]


# the process groups of the declared commands running now (a notify, a sensor's command): killed
# when this process exits (an adversarial review: `serve` stopped by SIGTERM mid-notify left the
# notify, in a session of its own, running on past its time limit with nothing to kill it)
_RUNNING: set[int] = set()
_STOPPING = threading.Event()  # kill_running was called: a command killed since was killed by it


@atexit.register
def kill_running() -> None:
    """Every declared command still running, killed with its process group."""
    _STOPPING.set()
    for pid in list(_RUNNING):
        _kill_group(pid)


def stop_on_signals() -> None:
    """SIGTERM, SIGHUP and SIGINT kill the declared commands this process runs, then end it (exit
    128 + the signal): a default SIGTERM or SIGHUP ends a process without its exit hooks, and left
    a notify or a sensor's command running past its time limit; Ctrl-C waited for them (an
    operator's review of `serve --once-tick` and `sensors run`). The main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, _frame: object) -> None:
        kill_running()
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)


def _kill(child: subprocess.Popen) -> None:
    _kill_group(child.pid)
    try:
        child.kill()
    except OSError:
        pass
    child.wait()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
