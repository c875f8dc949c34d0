"""Dates are exactly YYYY-MM-DD and times exactly YYYY-MM-DDTHH:MM:SSZ (design §26, issue 28): every
other form is exit 2 with one line and nothing written, on the command line and through the MCP
door alike (one parser, engine.base.clock); and the door answers every request, deeply nested JSON and
lone surrogates included, with an error it can read (never silence)."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.base import clock
from engine.base.errors import BadInput
from engine.checkout.workspace import LEASE_FILE
from tests.helpers import REGULATOR, Workspace, one_line, remember_args, report_args

DATES = [
    "20261221",
    "2026-W52-1",
    "2026-355",
    " 2026-12-20",
    "2026-12-20 ",
    "2026-12-20T00:00:00Z",
    "٢٠٢٦-١٢-٢٠",
]
TIMES = [
    "20261129T100000Z",
    "2026-11-29T10:00:00+00:00",
    "2026-11-29T10:00:00",
    "2026-11-29 10:00:00Z",
    "2026-11-29T10:00Z",
    "2026-11-29T10:00:00.5Z",
    "2026-11-29",
    "2026-W48-7T10:00:00Z",
    "2026-11-29t10:00:00z",
]


@pytest.mark.parametrize("value", DATES)
def test_a_date_in_any_other_form_is_bad_input(value: str) -> None:
    with pytest.raises(BadInput, match="is not a calendar date YYYY-MM-DD"):
        clock.parse_date(value)


@pytest.mark.parametrize("value", TIMES)
def test_a_time_in_any_other_form_is_bad_input(value: str) -> None:
    with pytest.raises(BadInput, match="is not a time YYYY-MM-DDTHH:MM:SSZ"):
        clock.parse_time(value)


def test_the_exact_forms_read_and_impossible_ones_do_not() -> None:
    assert clock.iso(clock.parse_time("2026-11-29T10:00:00Z")) == "2026-11-29T10:00:00Z"
    assert clock.parse_date("2026-12-20").isoformat() == "2026-12-20"
    with pytest.raises(BadInput, match="not a calendar date"):
        clock.parse_date("2026-02-30")
    with pytest.raises(BadInput, match="not a real moment"):
        clock.parse_time("2026-11-29T24:00:00Z")


def nothing_written(ws: Workspace, *args: str, cwd: Path | None = None) -> str:
    before = ws.digest()
    done = ws.run(*args, cwd=cwd)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert ws.digest() == before
    return one_line(done)


@pytest.mark.parametrize("value", ["20261221", "2026-W52-1"])
def test_review_by_in_another_form_is_refused_on_the_command_line(ws: Workspace, value: str) -> None:
    worktree = ws.lease("u1")
    line = nothing_written(ws, *remember_args(review_by=value), cwd=worktree)
    assert "review-by" in line and "YYYY-MM-DD" in line


@pytest.mark.parametrize("flag", ["--observed-at", "--expires-at"])
def test_a_time_in_another_form_is_refused_on_the_command_line(ws: Workspace, flag: str) -> None:
    worktree = ws.lease("r1")
    value = "20261129T100000Z" if flag == "--observed-at" else "2027-01-01T00:00:00+00:00"
    line = nothing_written(ws, *report_args(), flag, value, cwd=worktree)
    assert "YYYY-MM-DDTHH:MM:SSZ" in line


# ---- the MCP door, spoken to as raw JSON-RPC lines ----------------------------------------------


class Door:
    """`regulator mcp --lease FILE` as a subprocess, one JSON-RPC message per line."""

    def __init__(self, ws: Workspace, unit: str) -> None:
        lease = ws.lease(unit) / LEASE_FILE
        self.process = subprocess.Popen(
            [REGULATOR, "mcp", "--lease", str(lease)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ws.env,
            cwd=ws.root.parent,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.buffer = b""
        os.set_blocking(self.stdout.fileno(), False)
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})  # fmt: skip
        assert "result" in self.reply(timeout=60)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.stdin.write(data + b"\n")
        self.stdin.flush()

    def reply(self, timeout: float = 15) -> dict:
        """The next message the server writes; fails (never waits forever) when none comes."""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                assert left > 0, f"no answer within {timeout} s"
                if selector.select(left):
                    chunk = self.stdout.read(1 << 16)
                    assert chunk, "the server closed its output"
                    self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def call(self, request_id: int, tool: str, arguments: dict) -> dict:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})  # fmt: skip
        return self.reply()

    def close(self) -> None:
        self.stdin.close()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()


@pytest.fixture
def door(ws: Workspace) -> Iterator[tuple[Workspace, Door]]:
    opened = Door(ws, "u1")
    yield ws, opened
    opened.close()


def tool_error(answer: dict) -> dict:
    result = answer["result"]
    assert result["isError"] is True, answer
    return result["structuredContent"]


def test_the_door_refuses_other_forms_and_answers_every_request(door: tuple[Workspace, Door]) -> None:
    """One server, every case in turn (each server start costs a second): a date in another form is
    a tool error with exit code 2 and nothing written; deeply nested JSON, a lone surrogate,
    invalid UTF-8 and garbage each get an answer (issue 28: the agent waited forever), and the door
    goes on serving after each."""
    ws, opened = door
    before = ws.digest()
    for n, value in enumerate(("20261221", "2026-W52-1")):
        args = {"subject": "s", "note": "n", "evidence": ["e"], "reviewBy": value}
        error = tool_error(opened.call(1 + n, "remember", args))
        assert error["exitCode"] == 2 and "YYYY-MM-DD" in error["error"]
    deep = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"status","arguments":'
        + (b'{"a":' * 100_000)
        + b"1"
        + b"}" * 100_000
        + b"}}"
    )
    opened.send(deep)
    answer = opened.reply()
    assert answer.get("id") == 7 and "error" in answer, answer
    assert opened.call(8, "status", {})["result"]["isError"] is False
    opened.send(
        b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"remember","arguments":'
        b'{"subject":"s\\ud800","note":"n","evidence":["e"],"reviewBy":"2026-12-20"}}}'
    )
    answer = opened.reply()
    assert answer.get("id") == 9 and ("error" in answer or tool_error(answer)["exitCode"] == 2), answer
    opened.send(
        b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"status","arguments":{"x":"\xff"}}}'
    )
    answer = opened.reply()
    assert answer.get("id") == 11 and ("error" in answer or answer["result"]["isError"]), answer
    opened.send(b"not json at all")
    assert opened.reply()["error"]["code"] == -32700
    assert opened.call(12, "status", {})["result"]["isError"] is False
    assert ws.digest() == before
