"""Issue 25's attacks that had no test of their own (design §22, §23), with real processes: a real
`serve`, the real `regulator` command, a real PostgreSQL server (tests/pg.py).

- A unit holds no database role: on a PostgreSQL fleet, `unit run` gives the child none of the
  host's database credentials (PGUSER, PGPASSWORD, REGULATOR_STORE), only the door and its token.
- The reader role (the room's, CI's) cannot terminate a host's session, change the host role's
  password or its session defaults (the writer role of the second round did all three).
- A 100 MB request to the door is answered and refused; nothing is written, `serve` keeps serving and
  never holds the request in memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REGULATOR, make_workspace
from tests.serving import REPORT, Serving, http, sdk_call, token_of

MIB = 1 << 20


@pytest.fixture
def fleet(tmp_path: Any, pg_server: Any) -> Any:
    """A workspace on PostgreSQL with its roles made, and the host's environment naming
    regulator_host by PGUSER with a password, as docs/fleet.md has a host do."""
    db = pg_server.database()
    ws = make_workspace(tmp_path, now=None, clock="system", store=pg_server.url(db))
    ws.env.pop("REGULATOR_NOW", None)
    assert ws.run("store", "roles", "--url", pg_server.url(db)).returncode == 0
    host = {
        "REGULATOR_STORE": f"postgresql:///{db}?host={pg_server.socket}",
        "PGUSER": "regulator_host",
        "PGPASSWORD": "the-hosts-secret",
        "PGDATABASE": db,
    }
    return ws, db, host


def test_a_unit_run_on_postgresql_gets_no_database_credentials(fleet: Any, tmp_path: Any) -> None:
    ws, _, host = fleet
    serving = Serving(ws, env=host)
    try:
        seen = tmp_path / "env.json"
        child = (
            f"import json, os, pathlib; pathlib.Path({str(seen)!r}).write_text(json.dumps(dict(os.environ)))"
        )
        done = subprocess.run(
            [REGULATOR, "unit", "run", "r1", "--ttl", "1m", "--", sys.executable, "-c", child],
            cwd=ws.root,
            env={**ws.env, **host},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        env = json.loads(seen.read_text())
        assert not [name for name in env if name.startswith("PG") or name == "REGULATOR_STORE"], env
        assert "the-hosts-secret" not in json.dumps(env) and "postgresql:" not in json.dumps(env)
        assert env["REGULATOR_DOOR"] == serving.url and env["REGULATOR_DOOR_TOKEN"]
    finally:
        serving.close()


def test_the_reader_cannot_terminate_a_host_nor_change_its_role(fleet: Any, pg_server: Any) -> None:
    import psycopg

    ws, db, host = fleet
    with (
        psycopg.connect(pg_server.url(db, "regulator_host"), autocommit=True) as hosting,
        psycopg.connect(pg_server.url(db, "regulator_reader"), autocommit=True) as reader,
    ):
        row = hosting.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        pid = row[0]
        for sql in (
            f"SELECT pg_terminate_backend({pid})",
            f"SELECT pg_cancel_backend({pid})",
            "ALTER ROLE regulator_host PASSWORD 'taken'",
            "ALTER ROLE regulator_host SET statement_timeout = '1ms'",
            f"ALTER ROLE regulator_host IN DATABASE \"{db}\" SET statement_timeout = '1ms'",
            "GRANT regulator_host TO regulator_reader",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(sql)
        assert hosting.execute("SELECT 1").fetchone() == (1,)  # the host's session is still there
    report = ws.run("signals", "report", "--subject", "s", "--claim", "c", "--observation", "o",
                    "--evidence", "e", "--confidence", "low", "--severity", "info", "--by", "alice",
                    env=host)  # fmt: skip
    assert report.returncode == 0, report.stderr


def rows(pg_server: Any, db: str) -> int:
    with pg_server.admin(db) as conn:
        return conn.execute("SELECT count(*) FROM regulator.events").fetchone()[0]


def peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("backend", ["files", "postgresql"])
def test_a_100_mb_request_to_the_door_is_refused_and_writes_nothing(
    backend: Any, tmp_path: Any, pg_server: Any
) -> Any:
    import anyio

    if backend == "files":
        ws = make_workspace(tmp_path)
        written = ws.digest
    else:
        db = pg_server.database()
        ws = make_workspace(tmp_path, store=pg_server.url(db))

        def written() -> str:
            return str(rows(pg_server, db))

    token = token_of(ws.lease("r1"))
    serving = Serving(ws)
    try:
        # the SDK loaded first (a forked serve holds it from the start, D-327): the peak compared is
        # the door's, answering
        assert sdk_call(serving.sock, token, "status").structured_content["unit"] == "r1"
        before, peak = written(), peak_kb(serving.proc.pid)
        arguments = {**REPORT, "subject": "x" * (100 * MIB)}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "report_intelligence", "arguments": arguments}}
        ).encode()  # fmt: skip
        line = json.dumps({**REPORT, "claim": "y" * (2 * MIB)})  # under the body limit, over a line's

        async def post(content: bytes) -> tuple[int, bytes]:
            async with http(serving.sock, token) as client:
                response = await client.post(
                    "http://door/mcp",
                    content=content,
                    headers={
                        "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream",
                    },
                )
                return response.status_code, response.content

        status, answer = anyio.run(post, body)
        assert status == 413 and answer, answer[:200]
        del body
        result = sdk_call(serving.sock, token, "report_intelligence", json.loads(line))
        assert result.is_error and result.structured_content["exitCode"] == 2
        assert written() == before
        assert peak_kb(serving.proc.pid) - peak < 64 * 1024  # never the 100 MB request in memory
        status_now = sdk_call(serving.sock, token, "status")  # still serving
        assert status_now.structured_content["unit"] == "r1"
    finally:
        serving.close()
