"""What one caller may take of `serve` (design §22; engine.host.limits): a real serve subprocess,
real sockets, and hostile clients running as another account. Connections that never finish their
request are capped per peer and closed after the read deadline, while another unit's call answers
and serve's log stays small; one unit's flood of calls does not starve another; a lease's writes
have a budget per minute, and a call past it writes nothing."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests import scratch
from tests.helpers import REGULATOR, accounts, make_workspace
from tests.serving import REPORT, Serving, sdk_call, token_of, wait_for

HARD_S = 30  # a hard timeout: the call answered at all, never a speed


@pytest.fixture
def account() -> Any:
    """A throwaway system account without a home (the hostile client runs as it), removed after."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd")
    name = f"regl{secrets.token_hex(3)}"
    accounts("useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)  # only its processes
        accounts("userdel", name)


def as_account(account: Any, script: str, *args: str) -> subprocess.Popen:
    """The system python running `script` as the account (stdlib only), in its own session."""
    return subprocess.Popen(
        ["/usr/bin/python3", "-c", script, *args],
        user=account.pw_uid,
        group=account.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


@pytest.fixture
def shared() -> Any:
    """A folder the account may write its findings to (in /tmp: pytest's folders are closed to it)."""
    folder = Path(tempfile.mkdtemp(prefix="regl-", dir=scratch.root()))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def door_call(serving: Serving, token: str, tool: str = "status") -> subprocess.CompletedProcess:
    """`regulator door call TOOL` as a unit's shell runs it, with a hard timeout."""
    env = dict(serving.env, REGULATOR_DOOR=serving.url, REGULATOR_DOOR_TOKEN=token)
    return subprocess.run(
        [REGULATOR, "door", "call", tool], env=env, capture_output=True, text=True, timeout=HARD_S
    )


HOLD = r"""
import json, pathlib, selectors, socket, sys, time
path, n, out = sys.argv[1], int(sys.argv[2]), pathlib.Path(sys.argv[3])
socks, failed = [], 0
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: d\r\n")
        socks.append(s)
    except OSError:
        failed += 1
        s.close()
def say(path, data):  # whole or not at all: the test reads it as soon as it exists
    part = pathlib.Path(str(path) + ".part")
    part.write_text(json.dumps(data))
    part.rename(path)
say(out, {"connected": len(socks), "failed": failed})
sel = selectors.DefaultSelector()
for s in socks:
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
left, end = len(socks), time.monotonic() + 90
while left and time.monotonic() < end:
    for key, _ in sel.select(1):
        try:
            data = key.fileobj.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj)
            key.fileobj.close()
            left -= 1
say(pathlib.Path(str(out) + ".end"), {"open": left})
"""


@pytest.mark.slow
def test_incomplete_connections_are_capped_per_peer_and_closed_while_another_unit_is_answered(
    account: Any, shared: Any, tmp_path: Any
) -> None:
    """~400 connections of one account, each a request's first lines and nothing more, against a
    serve allowed 256 open files: those past its cap are closed at once, the rest after the read
    deadline; a unit's door call from another account answers meanwhile; the log stays small."""
    ws = make_workspace(tmp_path)
    token = token_of(ws.lease("u1"))
    serving = Serving(ws, open_files=256)
    try:
        out = shared / "hold"
        hostile = as_account(account, HOLD, str(serving.sock), "400", str(out))
        held = wait_for(lambda: out.exists() and json.loads(out.read_text()), "the connections opened", 60)
        assert held["connected"] + held["failed"] == 400
        done = door_call(serving, token)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["unit"] == "u1"
        end = Path(str(out) + ".end")
        closed = wait_for(lambda: end.exists() and json.loads(end.read_text()), "serve closing them", 90)
        assert closed == {"open": 0}  # every one closed by serve: past the cap at once, the rest timed out
        hostile.wait(timeout=HARD_S)
        log = serving.log.read_text(errors="replace")
        assert "Traceback" not in log
        assert len(log) < 20_000, log[-2000:]
        assert door_call(serving, token).returncode == 0  # and serving still
    finally:
        serving.close()


FLOOD = r"""
import asyncio, collections, json, pathlib, sys
path, token, n, out, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4]), pathlib.Path(sys.argv[5])
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "status", "arguments": {}}}).encode()
request = (
    b"POST /mcp HTTP/1.1\r\nHost: d\r\nAuthorization: Bearer " + token.encode()
    + b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    + b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
)
seen = collections.Counter()

async def one():
    while not stop.exists():
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(request)
            await writer.drain()
            line = await reader.readline()
            parts = line.split(b" ")
            seen[parts[1].decode() if len(parts) > 2 else "closed"] += 1
            writer.close()
        except OSError:
            seen["error"] += 1
            await asyncio.sleep(0.01)
        if sum(seen.values()) >= n and not out.exists():
            out.write_text(json.dumps(seen))

async def main():
    await asyncio.gather(*(one() for _ in range(n)))
    pathlib.Path(str(out) + ".end").write_text(json.dumps(seen))

asyncio.run(main())
"""


def test_one_units_flood_of_calls_does_not_starve_another(account: Any, shared: Any, tmp_path: Any) -> None:
    """Unit r1 keeps 200 `status` calls in flight (from another account, so its connections count
    against its own cap); unit u1's one call answers within a hard timeout, and r1's calls past
    its gate are answered 429."""
    ws = make_workspace(tmp_path)
    r1, u1 = token_of(ws.lease("r1")), token_of(ws.lease("u1"))
    serving = Serving(ws)
    try:
        out, stop = shared / "flood", shared / "stop"
        flood = as_account(account, FLOOD, str(serving.sock), r1, "200", str(out), str(stop))
        wait_for(out.exists, "the flood under way", 60)
        try:
            done = door_call(serving, u1)
        finally:
            stop.touch()
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["unit"] == "u1"
        flood.wait(timeout=HARD_S)
        seen = json.loads(Path(str(out) + ".end").read_text())
        assert seen.get("429", 0) > 0 and seen.get("200", 0) > 0, seen
        assert "Traceback" not in serving.log.read_text(errors="replace")
    finally:
        serving.close()


def test_a_leases_writes_have_a_budget_and_a_call_past_it_writes_nothing(tmp_path: Any) -> None:
    ws = make_workspace(tmp_path)
    r1, u1 = token_of(ws.lease("r1")), token_of(ws.lease("u1"))
    serving = Serving(ws, args=("--unit-writes", "2", "--unit-write-bytes", "20000"))
    try:
        big = dict(REPORT, observation="x" * 30_000)
        before = ws.digest()
        refused = sdk_call(serving.sock, r1, "report_intelligence", big)
        assert refused.is_error
        text = refused.content[0].text
        assert "more than a lease may write in a minute (20000 bytes" in text, text
        assert ws.digest() == before
        for n in range(2):
            done = sdk_call(serving.sock, r1, "report_intelligence", dict(REPORT, subject=f"s{n}"))
            assert not done.is_error, done.content
        assert len([e for e in ws.events("signals") if e.get("subject") in ("s0", "s1")]) == 2
        before = ws.digest()
        refused = sdk_call(serving.sock, r1, "report_intelligence", dict(REPORT, subject="s3"))
        assert refused.is_error
        assert "write budget spent: at most 2 writes a minute per lease" in refused.content[0].text
        assert ws.digest() == before
        # another lease has a budget of its own; reads are not counted
        assert not sdk_call(serving.sock, r1, "status").is_error
        note = {"subject": "TZ", "note": "tests run in UTC", "evidence": ["ci.log"], "reviewBy": "2026-12-20"}
        assert not sdk_call(serving.sock, u1, "remember", note).is_error
    finally:
        serving.close()


@pytest.mark.parametrize("flag", ["--unit-writes", "--unit-write-bytes"])
def test_a_budget_that_is_not_positive_is_bad_input(tmp_path: Any, flag: Any) -> None:
    ws = make_workspace(tmp_path)
    done = ws.run("serve", "--listen", "unix:/tmp/nowhere.sock", flag, "0")
    assert done.returncode == 2 and f"{flag} 0: give a positive number" in done.stderr


def test_accept_errors_for_want_of_files_are_one_line_a_minute(capsys: Any) -> None:
    """asyncio reports a failed accept (EMFILE) through the loop's exception handler, with a
    traceback each time; the door's handler makes it one line a minute (the count since in it)."""
    import asyncio
    import errno

    from controlroom.door_http import Throttled, _quiet_accept_errors
    from engine.host.limits import ConnectionCaps

    async def main() -> None:
        _quiet_accept_errors(Throttled(), ConnectionCaps(8, 2))
        loop = asyncio.get_running_loop()
        for _ in range(1000):
            error = OSError(errno.EMFILE, "Too many open files")
            loop.call_exception_handler(
                {"message": "socket.accept() out of system resource", "exception": error}
            )

    asyncio.run(main())
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    said = json.loads(lines[0])
    assert (said["door"], said["error"], said["since"]) == ("accept", "Too many open files", 0)
