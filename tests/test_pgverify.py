"""Fleet mode's trust gaps (issue 17; design §15, §18): what a unit holding the store's writer role
(before design §22; now a host's role, regulator_host, the only one that writes host events), or a
shell on a host, can do to the stores and the mirror, replayed with a real PostgreSQL server,
real `regulator` processes and a real git repository. Each forgery counts for nothing, `verify`
names it, and `controlroom --once` reports what `verify` would."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import REGULATOR, make_workspace, report_args

pytestmark = pytest.mark.usefixtures("pg_server")
LATER = "2026-11-29T13:00:00Z"  # an hour after the workspace's pinned clock (tests.helpers.NOW)


@pytest.fixture
def fleet(tmp_path: Path, pg_server: Any) -> Any:
    """A workspace on PostgreSQL (pinned clock) with the roles set up; u1 and u3 in progress and
    held by r1's blocking report, b1 still todo. Returns (workspace, host role URL, {unit: obligation})."""
    db = pg_server.database()
    url = pg_server.url(db)
    ws = make_workspace(tmp_path, store=url)
    roles = subprocess.run([REGULATOR, "store", "roles", "--url", url], capture_output=True, text=True)
    assert roles.returncode == 0, roles.stderr
    worktrees = {u: ws.lease(u) for u in ("u1", "u3", "r1")}
    ws.run(*report_args(), cwd=worktrees["r1"], check=True)
    ws.run("signals", "route", check=True)
    obligations = {o["unit"]: o["id"] for o in ws.json("obligations")}
    return ws, pg_server.url(db, "regulator_host"), obligations


def insert_as_writer(url: str, store: str, event: dict) -> None:
    """What a unit given the writer role (now: the host role) could do with psql: a well-chained line, past every check
    the engine makes before it writes (the trigger checks only chain, digest and time)."""
    import psycopg

    from engine.log.pg.store import line_text
    from engine.log.store import event_hash

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT hash FROM regulator.events WHERE store = %s ORDER BY n DESC LIMIT 1", (store,)
        ).fetchone()
        event = dict(event, prev=row[0] if row else "")
        event["hash"] = event_hash(event)
        line = line_text(event)
        conn.execute(
            "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
            " VALUES (%s, %s, %s, '', '', now())",
            (store, line, hashlib.sha256(line.encode()).hexdigest()),
        )


def once(ws: helpers.Workspace) -> tuple[int, dict]:
    done = ws.run("controlroom", "--once", "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def verify(ws: helpers.Workspace) -> tuple[int, list[str]]:
    done = ws.run("verify", "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, [
        f"{f['store']}:{f['line']}: {f['message']}" for f in json.loads(done.stdout)["findings"]
    ]


def units(ws: helpers.Workspace) -> dict[str, dict]:
    return {u["id"]: u for u in ws.json("status")["units"]}


# ---- (a) the mirror: a same-size edit is never read ---------------------------------------------------


def test_a_same_size_edit_of_the_mirror_is_read_again_from_the_server_and_named(fleet: Any) -> None:
    ws, _, obligations = fleet
    mirror = ws.store("signals")
    assert units(ws)["u1"]["held"] is True  # a read that leaves the mirror sealed

    def edit() -> None:  # the routing record's obligation for u1 now names b1: u1 would run free
        data = mirror.read_bytes()
        assert data.count(b'"unit":"u1"') == 1
        mirror.write_bytes(data.replace(b'"unit":"u1"', b'"unit":"b1"'))

    edit()
    done = ws.run("status", "--json")
    assert done.returncode == 0
    status = {u["id"]: u for u in json.loads(done.stdout)["units"]}
    assert status["u1"]["blockedBy"] == [obligations["u1"]] and status["b1"]["held"] is False
    assert "differed from the server at line 2 (edited in place)" in done.stderr
    assert b'"unit":"b1"' not in mirror.read_bytes()  # fetched again: the server's bytes

    edit()
    code, data = once(ws)
    assert code == 1
    assert any(r.startswith(f"u1 is in progress and held by blocking obligation {obligations['u1']}")
               for r in data["exitReasons"])  # fmt: skip
    assert {"store": "signals.ndjson", "line": 2} in [
        {k: v[k] for k in ("store", "line")} for v in data["verify"]
    ]

    edit()
    code, named = verify(ws)
    assert code == 1
    assert named == [
        "signals.ndjson:2: the local mirror: line 2 was not the server's (edited in place); read again from the server"
    ]
    assert verify(ws) == (0, [])  # the mirror is the server's again

    # a line mirrored after the seal (another process's append), edited in place: found too
    ws.run(*report_args(subject="second", severity="advisory", affects=["u3"]), "--by", "alice", check=True)
    data = mirror.read_bytes()
    assert data.count(b'"subject":"second"') == 1
    mirror.write_bytes(data.replace(b'"subject":"second"', b'"subject":"SECOND"'))
    done = ws.run("controlroom", "--once", "--json", "--read-only")
    assert done.returncode == 1, done.stderr
    assert [s["subject"] for s in json.loads(done.stdout)["signals"]][-1] == "second"
    assert "differed from the server at line 3" in done.stderr


# ---- (b) host events a writer forged: re-derived, counted for nothing, named -------------------------


def test_a_close_dispatch_or_disposition_the_writer_role_forged_counts_for_nothing(fleet: Any) -> None:
    ws, writer, obligations = fleet
    # u3 closed while held (past the veto), b1 closed without ever being dispatched, u1 dispatched
    # again over its lease with a token the forger knows, and alice's disposition without her key
    insert_as_writer(writer, "units", {"kind": "close", "unit": "u3", "leaseHash": None, "at": LATER})
    insert_as_writer(writer, "units", {"kind": "close", "unit": "b1", "leaseHash": None, "at": LATER})
    insert_as_writer(writer, "units", {"kind": "dispatch", "unit": "u1", "leaseHash": "0" * 64, "at": LATER})
    insert_as_writer(writer, "signals", {"id": "01FORGEDFORGEDFORGEDFORGED", "kind": "disposition",
                                         "obligation": obligations["u1"], "disposition": "no-action",
                                         "by": "alice", "rationale": "forged", "at": LATER})  # fmt: skip

    status = units(ws)
    assert status["u3"]["status"] == "in-progress" and status["u3"]["held"] is True
    assert status["b1"]["status"] == "todo"
    assert status["u1"]["status"] == "in-progress" and status["u1"]["blockedBy"] == [obligations["u1"]]
    open_ids = {o["id"] for o in ws.json("obligations")}
    assert open_ids == {obligations["u1"], obligations["u3"]}

    code, named = verify(ws)
    assert code == 1
    assert [n.split(": ", 1)[0] for n in named] == [
        "signals.ndjson:3", "units.ndjson:4", "units.ndjson:5", "units.ndjson:6"
    ]  # fmt: skip
    assert "person event unsigned" in named[0]
    assert "close of u3 without `seen`, after host events that record it" in named[1]  # design §22
    assert "close of b1 while it was todo" in named[2]
    assert "dispatch of u1 while it was in-progress" in named[3]

    code, data = once(ws)
    assert code == 1
    assert [f"{v['store']}:{v['line']}: {v['message']}" for v in data["verify"]] == named
    reasons = data["exitReasons"]
    assert any(r.startswith("u3 is in progress and held") for r in reasons)
    assert f"verify: {named[1]}" in reasons

    refused = ws.run("unit", "close", "u3")
    assert refused.returncode == 3 and "vetoed" in refused.stderr


# ---- (c) --once reports what verify re-derives ---------------------------------------------------------


def test_once_reports_the_host_events_verify_re_derives(fleet: Any) -> None:
    ws, writer, _ = fleet
    worktree = ws.root / "wt" / "r1"
    ws.run(*report_args(subject="quiet", affects=["u3"]), cwd=worktree, check=True)
    signal = ws.events("signals")[-1]["id"]
    # a routing record that lets a blocking report open nothing, written before the host routes
    insert_as_writer(writer, "signals", {"kind": "routing", "signal": signal, "reportedSeverity": "blocking",
                                         "derivedSeverity": "blocking", "floors": [], "obligations": [],
                                         "outcome": "noted", "reason": "nothing to see",
                                         "at": "2026-11-29T12:00:00Z"})  # fmt: skip
    code, named = verify(ws)
    assert code == 1 and len(named) == 1 and "(forged?)" in named[0]

    code, data = once(ws)
    assert code == 1
    assert [f"{v['store']}:{v['line']}: {v['message']}" for v in data["verify"]] == named
    assert f"verify: {named[0]}" in data["exitReasons"]
    text = ws.run("controlroom", "--once")
    assert text.returncode == 1 and f"- verify: {named[0]}" in text.stdout
    assert set(data) >= {"stores", "counts", "status", "obligations", "verify", "exitReasons", "exitCode"}


def test_a_fifo_in_place_of_the_mirror_state_is_no_state_and_never_waited_on(fleet: Any) -> None:
    import os

    ws, _, _ = fleet
    marker = ws.root / ".regulator" / "postgresql.json"
    assert marker.exists()
    before = {u: s["status"] for u, s in units(ws).items()}
    marker.unlink()
    os.mkfifo(marker)
    try:
        done = subprocess.run(
            [REGULATOR, "status", "--json"],
            cwd=ws.root,
            env=ws.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("status waited on a FIFO where the mirror's state belongs") from None
    assert "Traceback" not in done.stderr
    if done.returncode == 0:  # the mirror was taken as unknown and read again from the server
        assert {u["id"]: u["status"] for u in json.loads(done.stdout)["units"]} == before
    else:
        assert done.returncode == 3 and done.stderr.strip().count("\n") == 0, done.stderr


def test_a_mirror_resealed_with_the_host_key_is_still_named_by_verify(fleet: Any) -> None:
    """A unit sharing the account can read host.key: it edits the mirror and seals it again as a
    reader would. verify compares the mirror with the server's own bytes (which it reads for the
    chains anyway), names the first line that differs and fetches the store again."""
    import hashlib

    from engine.base import hostkey
    from engine.log.pg import mirror as pg_mirror

    ws, _, obligations = fleet
    mirror = ws.store("signals")
    assert units(ws)["u1"]["held"] is True  # a read that leaves the mirror sealed
    data = mirror.read_bytes()
    forged = data.replace(b'"unit":"u1"', b'"unit":"b1"')
    assert forged != data and len(forged) == len(data)
    mirror.write_bytes(forged)
    marker = ws.root / ".regulator" / "postgresql.json"
    state = json.loads(marker.read_text())
    key = hostkey.read(ws.root / ".regulator")
    assert key is not None
    n, size, _ = state["stores"]["signals"]
    body = [n, size, hashlib.sha256(forged[:size]).hexdigest()]
    state["seals"]["signals"] = [*body, pg_mirror._seal_mac(key, state["instance"], "signals", body)]
    marker.write_text(json.dumps(state, sort_keys=True))
    code, named = verify(ws)
    assert code == 1
    assert named == [
        "signals.ndjson:2: the local mirror: line 2 was not the server's (edited in place); read again from the server"
    ]
    assert b'"unit":"b1"' not in mirror.read_bytes()  # fetched again: the server's bytes
    assert units(ws)["u1"]["held"] is True
    assert verify(ws) == (0, [])
