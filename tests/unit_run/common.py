"""What the `unit run` tests share (tests/unit_run/): a system-clock workspace, runs started in the
background (stopped after each test by the folder's conftest), the command an account can run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REGULATOR, make_workspace
from tests.serving import Serving

ROOT = Path(__file__).resolve().parents[2]  # the checkout
ALLOWED = {"PATH", "HOME", "LANG", "TERM", "TZ", "REGULATOR_DOOR", "REGULATOR_DOOR_TOKEN", "REGULATOR_UNIT"}


def system_workspace(folder: Path) -> Any:
    """A workspace on the system clock (leases expire in real time), its env without REGULATOR_NOW."""
    ws = make_workspace(folder, now=None, clock="system")
    ws.env.pop("REGULATOR_NOW", None)
    return ws


def script(folder: Path, name: str, text: str) -> Path:
    """A shell script the child runs (`regulator` named by its path: the child's PATH is the host's)."""
    path = folder / name
    path.write_text("#!/bin/sh\nset -e\nREG=" + REGULATOR + "\n" + text)
    path.chmod(0o755)
    return path


def run_unit(ws: Any, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = ws.run("unit", "run", *args, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


STARTED: list[subprocess.Popen] = []


def stop_runs() -> None:
    """A run a failed test left behind is stopped: SIGTERM reaches its child's group through it."""
    while STARTED:
        host = STARTED.pop()
        if host.poll() is None:
            host.send_signal(signal.SIGTERM)
            try:
                host.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(host.pid, signal.SIGKILL)


def start_unit(ws: Any, *args: str, env: dict | None = None) -> subprocess.Popen:
    """`unit run` in the background, in a session of its own (so a test can kill the host)."""
    merged = dict(ws.env, **(env or {}))
    host = subprocess.Popen(
        [REGULATOR, "unit", "run", *args],
        cwd=ws.root,
        env=merged,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    STARTED.append(host)
    return host


def alive(pid: int) -> bool:
    """The process runs (a zombie, killed and not yet reaped by whoever adopted it, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def row(ws: Any, unit: str) -> dict:
    return next(u for u in ws.json("status")["units"] if u["id"] == unit)


def account_cli() -> list[str]:
    """`regulator` as another account can run it: this venv's interpreter links under root's home
    (0700), so the system's python3 of the same version, with this checkout and the venv's
    site-packages on its path (skipped where there is none)."""
    system = Path("/usr/bin/python3")
    probe = subprocess.run(
        [str(system), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True
    )
    if probe.returncode != 0 or probe.stdout.decode().strip() != str(sys.version_info[:2]):
        pytest.skip("needs a /usr/bin/python3 of this Python's version (the account cannot run this venv's)")
    site = sysconfig.get_paths()["purelib"]
    code = f"import sys; sys.path[:0] = [{str(ROOT)!r}, {site!r}]; sys.argv[0] = 'regulator'; "
    return [str(system), "-c", code + "from controlroom.cli.start import run; run()"]


LEFTOVER = (
    "echo $REGULATOR_DOOR_TOKEN > {token}\n"
    "setsid sh -c 'echo $$ > {pid}.part; mv {pid}.part {pid}; while [ ! -e {go} ]; do sleep 0.1; done; "
    "{reg} door call remember --json-input {note} > {out}.part 2>&1; echo $? >> {out}.part; mv {out}.part {out}' "
    "< /dev/null > /dev/null 2>&1 &\n"
    "while [ ! -e {pid} ]; do sleep 0.1; done\n"
    "exit 1\n"
)
NOTE = {"subject": "TZ", "note": "left behind", "evidence": ["ci.log"], "reviewBy": "2026-12-20"}


def waiting_run(ws: Any, folder: Path, ttl: str) -> tuple[subprocess.Popen, list[str], Path]:
    """`unit run b1 --ttl TTL` of a child that waits until a file `finish` exists: the host
    process, the lines of its stderr as they come (read on a thread), and that file. Returns once
    the child runs."""
    import threading

    from tests.serving import wait_for

    ready, finish = folder / "ready", folder / "finish"
    agent = script(folder, "waits.sh", f"touch {ready}\nwhile [ ! -e {finish} ]; do sleep 0.1; done\n")
    host = start_unit(ws, "b1", "--ttl", ttl, "--", str(agent))
    said: list[str] = []

    def read() -> None:
        assert host.stderr is not None
        for line in host.stderr:
            said.append(line)

    threading.Thread(target=read, daemon=True).start()
    wait_for(ready.exists, "the child started")
    return host, said, finish


def tcp_serve(ws: Any) -> tuple[subprocess.Popen, str]:
    """`regulator serve --listen 127.0.0.1:0` of the workspace, and its door once it listens."""
    import json

    from tests.serving import wait_for

    proc = subprocess.Popen(
        [REGULATOR, "serve", "--listen", "127.0.0.1:0"], cwd=ws.root, env=ws.env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    info = ws.root / ".regulator" / "serve.json"
    door = wait_for(
        lambda: info.exists() and json.loads(info.read_text()).get("door"), "serve's TCP door", deadline=60
    )
    return proc, door


def serve_back_and_finish(ws: Any, sock: Any, finish: Any, host: Any) -> None:
    """serve started again on its socket, then the waiting child told to finish (`finish`
    touched) and its `unit run` (`host`) waited for; serve stopped after."""
    back = Serving(ws, sock=sock)
    try:
        finish.touch()
        host.communicate(timeout=60)
    finally:
        back.close()
