"""The PGUSER case of issue 28 (design §22, §26): on a host that selects its database role with
`PGUSER` (the URL names no user, as docs/fleet.md recommends), `regulator mcp --lease FILE
--print-config` printed a config whose server could not start (the agent host passes the server
only a whitelist of variables). On PostgreSQL the stdio door now refuses to start for a unit, with
or without `--print-config`: exit 3, one line pointing at `serve`, no config and no JSON-RPC on
stdout, nothing written, and no database credentials handed to the unit's process tree.
A real PostgreSQL server (tests/pg.py) and the real `regulator` command."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.helpers import REGULATOR, make_workspace, one_line

pytestmark = pytest.mark.usefixtures("pg_server")


def rows(pg_server: Any, db: str) -> int:
    with pg_server.admin(db) as conn:
        return conn.execute("SELECT count(*) FROM regulator.events").fetchone()[0]


@pytest.fixture
def pguser_host(tmp_path: Any, pg_server: Any) -> Any:
    """A fleet workspace whose host names its role by PGUSER alone (no user in the URL); r1 dispatched
    with a worktree and a lease by that host."""
    db = pg_server.database()
    ws = make_workspace(tmp_path, store=pg_server.url(db))
    assert ws.run("store", "roles", "--url", pg_server.url(db)).returncode == 0
    host = {
        "REGULATOR_STORE": f"postgresql:///{db}?host={pg_server.socket}",
        "PGUSER": "regulator_host",
        "PGPASSWORD": "the-hosts-secret",
    }
    worktree = ws.root / "wt" / "r1"
    worktree.mkdir(parents=True)
    done = ws.run("unit", "dispatch", "r1", "--worktree", str(worktree), env=host)
    assert done.returncode == 0, done.stderr
    return ws, db, host, worktree / ".regulator-lease.json"


@pytest.mark.parametrize("print_config", [True, False], ids=["print-config", "server"])
def test_the_stdio_door_refuses_to_start_on_postgresql_selected_by_pguser(
    pguser_host: Any, pg_server: Any, print_config: Any
) -> None:
    ws, db, host, lease = pguser_host
    before = rows(pg_server, db)
    args = [REGULATOR, "mcp", "--lease", str(lease), *(["--print-config"] if print_config else [])]
    # as the agent host would start it: stdin open (a server would wait on it), under a hard timeout
    done = subprocess.run(
        args, cwd=ws.root, env={**ws.env, **host}, input="", capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, (done.stdout, done.stderr)
    line = one_line(done)
    assert "PostgreSQL" in line and "regulator serve" in line
    assert done.stdout == ""  # no config, no JSON-RPC: nothing a harness could launch or read
    assert "the-hosts-secret" not in done.stderr and "regulator_host" not in done.stderr
    assert rows(pg_server, db) == before
