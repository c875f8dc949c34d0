"""On PostgreSQL the clock mode the insert trigger checks follows the decided policy (design §26, issue
28): a database made by `demo --store` kept `clock = 'pinned'` after the demo's decision to
`clock: system`, so a line stamped 2099 was accepted and every report after it refused, forever."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine.log.pg import admin as pg_admin
from engine.log.pg import store as pg_store
from engine.log.store import event_hash
from tests.helpers import NOW, REGULATOR, clean_env


def forged_line(conn: psycopg.Connection[Any], at: str) -> str:
    tail = conn.execute("SELECT hash FROM regulator.events WHERE store = 'signals' ORDER BY n DESC LIMIT 1")
    prev = (tail.fetchone() or [""])[0]
    event = {"kind": "note", "at": at, "prev": prev}
    event["hash"] = event_hash(event)
    return pg_store.line_text(event)


def insert(conn: psycopg.Connection[Any], text: str) -> None:
    conn.execute(
        "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
        " VALUES ('signals', %s, %s, '', '', now())",
        (text, hashlib.sha256(text.encode()).hexdigest()),
    )


def test_the_demos_decision_to_the_system_clock_moves_the_database(tmp_path: Path, pg_url: str) -> None:
    env = clean_env(REGULATOR_NOW=NOW, HOME=str(tmp_path))
    done = subprocess.run(
        [REGULATOR, "demo", "--dir", str(tmp_path / "demo"), "--once", "--store", pg_url],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    instance, mode = pg_admin.instance(pg_url)
    assert mode == "system"
    with psycopg.connect(pg_url, autocommit=True) as owner:
        with pytest.raises(psycopg.errors.CheckViolation, match="more than 2 s"):
            insert(owner, forged_line(owner, "2099-01-01T00:00:00Z"))
        # and it never moves back, nor takes another instance
        with pytest.raises(psycopg.errors.CheckViolation, match="moves only to system"):
            owner.execute("INSERT INTO regulator.meta (instance, version, clock) VALUES ('x', 1, 'pinned')")
        owner.execute(
            "INSERT INTO regulator.meta (instance, version, clock, created_at) "
            "VALUES ('forged', 9, 'system', '2000-01-01')"
        )
    assert pg_admin.instance(pg_url) == (instance, "system")


def test_a_pinned_database_stays_pinned_until_a_decision_moves_it(tmp_path: Path, pg_url: str) -> None:
    pg_admin.create_schema(pg_url, "pinned")
    assert pg_admin.instance(pg_url)[1] == "pinned"
    pg_admin.follow_clock(pg_url)
    pg_admin.follow_clock(pg_url)  # idempotent
    assert pg_admin.instance(pg_url)[1] == "system"
    with psycopg.connect(pg_url, autocommit=True) as owner:
        assert owner.execute("SELECT count(*) FROM regulator.meta").fetchone() == (2,)
