"""`regulator serve` and the mcp SDK (D-248): the extra checked whole at start, the SDK itself loaded
by a known lease's first call, and a broken, hanging or exiting SDK import that refuses calls and
never holds serve's stop. Real serve processes; the SDK's import is broken or slowed by a stand-in
package or a sitecustomize on PYTHONPATH."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import make_workspace, prepared
from tests.serving import (
    DEADLINE_S,
    REPORT,
    Serving,
    healthz,
    lock_waiters,
    raw_post,
    sdk_call,
    short_folder,
    token_of,
    wait_for,
)

CALL_STATUS = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "status", "arguments": {}},
}
FAILED = {"error": "the door cannot answer: its mcp SDK failed to load (see serve's log)"}


def two_leases(ws: Any) -> None:
    ws.lease("u1")
    ws.lease("r1")  # a research unit: its profile grants report_intelligence


@pytest.fixture
def leased(tmp_path: Path) -> Any:
    ws, _ = prepared(tmp_path, two_leases)  # u1 and r1 dispatched, once per test process
    return ws, token_of(ws.root / "wt" / "u1")


def sdk_loaded(serving: Serving) -> bool:
    """Whether serve has imported the mcp SDK: its pydantic core (which nothing else serve imports)
    is mapped into the process."""
    return "pydantic_core" in (Path("/proc") / str(serving.proc.pid) / "maps").read_text()


def site_with(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    site = tmp_path / "site"
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return {"PYTHONPATH": str(site)}


@pytest.mark.parametrize("hidden", ["mcp", "sse_starlette"])
def test_without_the_extra_serve_says_what_to_install_in_one_line(tmp_path: Path, hidden: str) -> None:
    """A Python without `mcp`, or without one of the distributions the SDK requires (a sitecustomize
    hides it as an uninstalled package is hidden: Python finds no such module): one line naming the
    pip command, exit 2 (as `regulator mcp`), nothing written. serve imports the SDK only later, so
    it looks for every module of the extra first."""
    ws = make_workspace(tmp_path)
    env = site_with(tmp_path, {"sitecustomize.py": f'import sys\nsys.modules["{hidden}"] = None\n'})
    before = ws.digest()
    for listen in ([], ["--listen", f"unix:{short_folder()}/d.sock"]):
        done = ws.run("serve", *listen, env=env)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr == (
            "regulator: regulator serve needs the optional extra mcp (the mcp SDK and uvicorn): "
            "pip install -e '.[mcp]' from a checkout\n"
        )
    assert not (ws.root / ".regulator" / "serve.json").exists() and ws.digest() == before


def test_the_sdk_is_loaded_by_a_known_leases_first_call_and_never_by_an_unknown_token(leased: Any) -> None:
    """serve starts and runs its duties without the mcp SDK (about half a second of CPU): /healthz and
    a call with a token the door does not know leave it unloaded; a unit's first call loads it and
    is answered."""
    ws, token = leased
    serving = Serving(ws, fork=False)  # what it imported: its own process, executed
    try:
        assert healthz(serving.sock)["leader"] is True
        assert raw_post(serving.sock, "rgl_" + "0" * 43, CALL_STATUS)[0] == 401
        assert not sdk_loaded(serving)
        status = sdk_call(serving.sock, token, "status")
        assert not status.is_error and status.structured_content["unit"] == "u1"
        assert sdk_loaded(serving)
    finally:
        serving.close()


@pytest.mark.parametrize(
    ("raising", "error"),
    [
        ('raise ImportError("a broken install")', "ImportError: a broken install"),
        ("raise SystemExit(3)", "SystemExit: 3"),
    ],
    ids=["ImportError", "SystemExit"],
)
def test_an_sdk_that_fails_to_load_refuses_every_call_and_says_why(
    tmp_path: Path, leased: Any, raising: str, error: str
) -> None:
    """A broken install (a stand-in `mcp` that fails on import, even by SystemExit): serve keeps
    running its duties; the first call and the next are refused (503, one JSON line), serve's log
    says why once, and nothing is written."""
    ws, token = leased
    serving = Serving(ws, env=site_with(tmp_path, {"mcp/__init__.py": raising + "\n"}))
    try:
        before = ws.digest()
        for _ in range(2):
            assert raw_post(serving.sock, token, CALL_STATUS) == (503, FAILED)
        said = [line["error"] for line in serving.lines() if line.get("door") == "sdk failed to load"]
        assert said == [error]
        health = healthz(serving.sock)
        assert health["leader"] is True and serving.proc.poll() is None
        # /healthz says the door is broken, and so do `--once` and the room (an operator's review:
        # it read as healthy while every unit's call was refused)
        assert health["doorError"] == f"the mcp SDK failed to load ({error}): every unit's call is refused"
        once = ws.run("controlroom", "--once").stdout.splitlines()
        assert once[2].startswith(
            f"serve (pid {serving.proc.pid}): its door is broken: the mcp SDK failed"
        ), once[:4]
        assert ws.digest() == before
        assert "Traceback" not in serving.log.read_text()
    finally:
        serving.close()


HANGING_IMPORT = """import os, sys, time
class Hang:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp.types":
            open(os.environ["SDK_IMPORT_BEGUN"], "w").close()
            time.sleep(600)
        return None
sys.meta_path.insert(0, Hang())
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_hanging_sdk_import_never_holds_serves_stop(tmp_path: Path, leased: Any, sig: int) -> None:
    """The SDK's import hangs (a sitecustomize sleeps 600 s in it, as a stuck filesystem would): the
    unit's call waits; a SIGTERM or SIGINT still stops serve well before the import could end, the
    waiting call is answered 503 "serve is stopping", and serve's log ends with its stopped line and
    holds no traceback."""
    ws, token = leased
    begun = tmp_path / "begun"
    env = site_with(tmp_path, {"sitecustomize.py": HANGING_IMPORT}) | {"SDK_IMPORT_BEGUN": str(begun)}
    serving = Serving(ws, env=env)
    try:
        answered: list[tuple[int, dict | None]] = []
        call = threading.Thread(target=lambda: answered.append(raw_post(serving.sock, token, CALL_STATUS)))
        call.start()
        wait_for(begun.exists, "the SDK's import begun")
        serving.proc.send_signal(sig)
        serving.proc.wait(timeout=DEADLINE_S)  # a hard deadline: the import would take 600 s
        call.join(timeout=DEADLINE_S)
        assert serving.proc.returncode == 0
        assert answered == [(503, {"error": "serve is stopping: call again once it is back"})]
        text = serving.log.read_text()
        assert "Traceback" not in text and json.loads(text.splitlines()[-1])["serve"] == "stopped"
        assert not serving.sock.exists()
    finally:
        serving.close()


def refuses(sock: Path) -> bool:
    """Whether serve's socket refuses a connection (uvicorn stops listening as its stop begins)."""
    import socket

    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(sock))
        except (ConnectionRefusedError, FileNotFoundError):
            return True
    return False


def test_a_report_in_flight_when_serve_stops_is_answered_and_written_once(leased: Any) -> None:
    """A second adversarial review: once the SDK had loaded, serve's stop ended its session manager at
    once, so a unit's report in flight got an error after its write was made, and a unit that tried
    again wrote it twice. Held at the signals store's lock while serve's stop begins (SIGTERM, its
    socket refusing), the report is answered with its id once the lock is let go, and written once."""
    import fcntl

    ws, _ = leased
    token = token_of(ws.root / "wt" / "r1")
    serving = Serving(ws)
    try:
        assert raw_post(serving.sock, token, CALL_STATUS)[0] == 200  # the SDK loaded
        store = ws.store("signals")
        report = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        report["params"] = {"name": "report_intelligence", "arguments": REPORT | {"subject": "held at stop"}}
        answered: list[tuple[int, dict | None]] = []
        with open(store, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            call = threading.Thread(target=lambda: answered.append(raw_post(serving.sock, token, report)))
            call.start()
            wait_for(lambda: lock_waiters(store) >= 1, "the report waiting at the signals store's lock")
            serving.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: refuses(serving.sock), "serve's stop begun")
        call.join(timeout=DEADLINE_S)
        serving.proc.wait(timeout=DEADLINE_S)
        ((status, body),) = answered
        assert status == 200 and body is not None and "error" not in body, body
        written = [e for e in ws.events("signals") if e.get("subject") == "held at stop"]
        assert [e["id"] for e in written] == [body["result"]["structuredContent"]["id"]]
        assert "Traceback" not in serving.log.read_text()
    finally:
        serving.close()


def half_sent(sock: Path, token: str) -> None:
    """A POST to the door with a lease's token whose body stops halfway, then the connection closed."""
    import socket

    body = json.dumps(CALL_STATUS).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(sock))
        client.sendall(head + body[: len(body) // 2])


def test_requests_a_lease_breaks_off_are_one_log_line_a_minute_not_a_traceback_each(leased: Any) -> None:
    """A second adversarial review: each request a lease's holder broke off mid-body made the SDK log
    a traceback, as often as it liked. The SDK's own log goes to serve's door lines: one line a
    minute per kind, its message without the traceback; the door answers on."""
    ws, token = leased
    serving = Serving(ws)
    try:
        assert raw_post(serving.sock, token, CALL_STATUS)[0] == 200  # the SDK loaded
        for _ in range(5):
            half_sent(serving.sock, token)
        said = wait_for(
            lambda: [line for line in serving.lines() if line.get("door") == "sdk error"],
            "the SDK's log line",
        )
        assert len(said) == 1 and "Traceback" not in serving.log.read_text()
        assert raw_post(serving.sock, token, CALL_STATUS)[0] == 200
    finally:
        serving.close()


def malformed(sock: Path, request: bytes) -> None:
    """Bytes h11 cannot parse sent to the door, with no token; whatever comes back is read."""
    import socket

    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(str(sock))
        client.sendall(request)
        with contextlib.suppress(OSError):
            while client.recv(4096):
                pass


def test_requests_no_one_can_parse_are_one_log_line_a_minute_not_a_traceback_each(leased: Any) -> None:
    """A third adversarial review: any local account, no token needed, made uvicorn log a 30-line
    traceback for each chunked body h11 could not parse, and a line for each malformed request line
    (21 MB of log in 10 s). uvicorn's log goes to serve's door lines as the SDK's does: one line a
    minute, its message without the traceback; serve's duty lines stay one JSON object a line."""
    ws, token = leased
    serving = Serving(ws)
    try:
        for _ in range(20):
            malformed(
                serving.sock,
                b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            )
            malformed(serving.sock, b"NOT HTTP AT ALL\r\n\r\n")
        said = wait_for(
            lambda: [line for line in serving.lines() if line.get("door") == "http error"],
            "uvicorn's log line",
        )
        assert len(said) == 1, said
        text = serving.log.read_text()
        assert "Traceback" not in text and "Invalid HTTP request" not in text.replace(
            said[0]["message"], "", 1
        )
        assert all(line.startswith("{") for line in text.splitlines()), text[:2000]
        assert raw_post(serving.sock, token, CALL_STATUS)[0] == 200
    finally:
        serving.close()
