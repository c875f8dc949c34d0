"""The schema owner's work on a database: create the schema and roles, upgrade it, what the stores
are and what a role may do, the owner-only import."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

import msgspec

from engine.base import clock, ids
from engine.base.errors import Refused
from engine.log.events import STORES, UPGRADE
from engine.log.pg.connection import _run, redact
from engine.log.pg.server import UPGRADE as RUN_UPGRADE
from engine.log.pg.sql import (
    CHECK_APPEND_SQL,
    HOST_ROLE,
    IS_HOST,
    IS_HOST_SQL,
    OLD_WRITER_ROLE,
    ROLES_SQL,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    TO_SYSTEM_SQL,
    UPGRADE_SQL,
)
from engine.log.store import GENESIS, canonical, event_hash, line_text


def schema_present(conn: Any) -> bool:
    return conn.execute("SELECT to_regclass('regulator.events') IS NOT NULL").fetchone()[0]


def create_schema(url: str, clock_mode: str = "system") -> str:
    """Create the schema (the connecting role owns it) in a database without one; its instance id."""
    instance = os.urandom(16).hex()

    def work(conn: Any) -> str:
        if schema_present(conn):
            raise Refused(f"{redact(url)} already holds regulator stores; nothing written")
        encoding = conn.execute("SHOW server_encoding").fetchone()[0]
        if encoding.upper() not in ("UTF8", "UTF-8"):
            raise Refused(f"{redact(url)}: the database's encoding is {encoding}; regulator needs UTF8")
        conn.execute(SCHEMA_SQL)
        conn.execute(
            "INSERT INTO regulator.meta (instance, version, clock) VALUES (%s, %s, %s)",
            (instance, SCHEMA_VERSION, clock_mode),
        )
        return instance

    return _run(url, work)


def check_empty(url: str) -> None:
    """The database is reachable and holds no regulator stores (refused otherwise)."""

    def work(conn: Any) -> None:
        if schema_present(conn):
            raise Refused(f"{redact(url)} already holds regulator stores; nothing written")

    _run(url, work, tx=False)


def create_roles(url: str) -> None:
    """`regulator store roles`: regulator_host (SELECT and INSERT on the events, UPDATE on the lock
    and leader rows, INSERT and UPDATE on the leases) and regulator_reader (SELECT)."""

    def work(conn: Any) -> None:
        if not schema_present(conn):
            raise Refused(f"{redact(url)} holds no regulator stores; run `regulator init --store URL` first")
        if _version(conn) < SCHEMA_VERSION:
            raise Refused(f"{redact(url)}: the schema is older than this regulator; {RUN_UPGRADE} first")
        if not _owner(conn):  # PostgreSQL turns a non-owner's GRANT into a warning: nothing granted,
            # and the command said the roles were ready (an adversarial review, as regulator_reader)
            raise Refused(
                f"{redact(url)}: this role does not own the stores' tables, so it can grant nothing; "
                "run `regulator store roles` as the schema's owner (nothing granted)"
            )
        conn.execute(ROLES_SQL)

    _run(url, work)


def _version(conn: Any) -> int:
    row = conn.execute("SELECT max(version) FROM regulator.meta").fetchone()
    return int(row[0] or 0)


def _owner(conn: Any) -> bool:
    """Whether this session's role has the privileges of regulator.events' owner."""
    return bool(
        conn.execute(
            "SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class"
            " WHERE oid = 'regulator.events'::regclass"
        ).fetchone()[0]
    )


class Upgraded(msgspec.Struct, frozen=True):
    """What `regulator store upgrade` did: the schema versions, and the mark it appended (None:
    the database was already at this version, nothing written)."""

    before: int
    after: int
    mark: dict | None
    writer_revoked: bool


def upgrade(url: str) -> Upgraded:
    """`regulator store upgrade`, as the schema's owner, in one transaction: the new objects of
    schema 2 (engine.log.pg.sql.UPGRADE_SQL), regulator_writer's INSERT revoked, and the `upgrade`
    mark appended to units.ndjson: `{"kind": "upgrade", "from", "schema", "marks", "by", "at"}`,
    `marks` the byte length of every store before it (the stores' lines, each with its newline, as
    a mirror holds them). A line before its store's mark was written under the earlier schema's
    rules and is judged by them. ALTER TABLE holds every append back until the mark is written,
    so the marks are exact."""

    def work(conn: Any) -> Upgraded:
        if not schema_present(conn):
            raise Refused(f"{redact(url)} holds no regulator stores; nothing to upgrade")
        if not _owner(conn):
            raise Refused(
                f"{redact(url)}: only the owner of regulator.events upgrades the schema; nothing written"
            )
        before = _version(conn)
        if before >= SCHEMA_VERSION:  # the trigger made again: a host-event kind added since is refused
            conn.execute(IS_HOST_SQL + CHECK_APPEND_SQL)
            return Upgraded(before, before, None, False)
        conn.execute("SET LOCAL statement_timeout = 0")  # the marks read every line once
        conn.execute("SET LOCAL lock_timeout = '60s'")  # each host's append in flight ends first
        conn.execute(UPGRADE_SQL)
        revoked = bool(
            conn.execute(
                "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", (OLD_WRITER_ROLE,)
            ).fetchone()[0]
        )
        sizes = dict(
            conn.execute(
                "SELECT store, sum(octet_length(line) + 1) FROM regulator.events GROUP BY store"
            ).fetchall()
        )
        marks = {name: int(sizes.get(name) or 0) for name in STORES}
        row = conn.execute(
            "SELECT hash FROM regulator.events WHERE store = 'units' ORDER BY n DESC LIMIT 1"
        ).fetchone()
        by = conn.execute("SELECT session_user").fetchone()[0]
        mark: dict = {
            "kind": UPGRADE,
            "from": before,
            "schema": SCHEMA_VERSION,
            "marks": marks,
            "by": str(by),
            "at": clock.iso(clock.now()),
            "prev": row[0] if row else GENESIS,
        }
        mark = {"id": ids.new_id(f"units.ndjson\0{mark['prev']}\0{canonical(mark).decode()}"), **mark}
        mark["hash"] = event_hash(mark)
        line = line_text("units.ndjson", mark)
        conn.execute("SET LOCAL regulator.import = 'on'")  # the owner's own line: a host event
        conn.execute(
            "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
            " VALUES ('units', %s, %s, '', '', now())",
            (line, hashlib.sha256(line.encode()).hexdigest()),
        )
        return Upgraded(before, SCHEMA_VERSION, mark, revoked)

    return _run(url, work)


INSTANCE_SQL = """
SELECT (SELECT m.instance FROM regulator.meta m ORDER BY m.created_at LIMIT 1),
       CASE WHEN bool_and(clock = 'pinned') THEN 'pinned' ELSE 'system' END
FROM regulator.meta
"""


def follow_clock(url: str) -> None:
    """design §26: the clock mode the insert trigger checks follows the decided policy. Called when
    the workspace's decided clock is the system's (the decision that moves it there, the demo's
    too): the database stops taking times it would refuse on the system clock. Idempotent."""
    _run(url, lambda conn: conn.execute(TO_SYSTEM_SQL))


def instance(url: str) -> tuple[str, str]:
    """(instance id, clock) of the database's stores; refused where there are none."""

    def work(conn: Any) -> tuple[str, str]:
        if not schema_present(conn):
            raise Refused(f"{redact(url)} holds no regulator stores; run `regulator init --store URL`")
        row = conn.execute(INSTANCE_SQL).fetchone()
        if row is None or row[0] is None:
            raise Refused(f"{redact(url)}: regulator.meta is empty; not a regulator store")
        return row[0], row[1]

    return _run(url, work)


class Access(msgspec.Struct, frozen=True):
    """What this connection's role may do to the stores (one question to the server)."""

    role: str
    insert: bool  # may append
    host: bool  # may append host events (regulator_host, a role with its privileges, a superuser)
    version: int  # the database's schema


def access(url: str) -> Access:
    def work(conn: Any) -> Access:
        row = conn.execute(
            f"SELECT current_user, has_table_privilege('regulator.events', 'INSERT'), {IS_HOST},"
            " (SELECT max(version) FROM regulator.meta)"
        ).fetchone()
        return Access(str(row[0]), bool(row[1]), bool(row[2]), int(row[3] or 0))

    return _run(url, work, tx=False)


def cannot_write(url: str) -> str | None:
    """Why this role may not write what a host writes, in words; None: it may. A database on an
    earlier schema takes no host's writes until it is upgraded (its decide lock is missing)."""
    found = access(url)
    if found.version < SCHEMA_VERSION:
        return f"the database's schema is older than this regulator: {RUN_UPGRADE}"
    if not found.insert:
        return f"this store's role ({found.role}) cannot write"
    if not found.host:
        return f"this store's role ({found.role}) cannot write host events (only {HOST_ROLE} does)"
    return None


def import_lines(url: str, stores: Mapping[str, list[bytes]]) -> dict[str, int]:
    """The owner-only import: every line as it was (its `at` kept), into an empty database, in
    one transaction. The trigger still checks each line's chain and SHA-256."""

    def work(conn: Any) -> dict[str, int]:
        if not schema_present(conn):
            raise Refused(f"{redact(url)} holds no regulator stores; run `regulator store init --store URL`")
        if not _owner(conn):
            raise Refused(f"{redact(url)}: only the owner of regulator.events may import")
        if conn.execute("SELECT count(*) FROM regulator.events").fetchone()[0]:
            raise Refused(f"{redact(url)} already holds events: store copy loads only into an empty store")
        conn.execute("SET LOCAL regulator.import = 'on'")
        conn.execute("SET LOCAL statement_timeout = 0")  # one COPY of every line, however many
        done: dict[str, int] = {}
        with conn.cursor().copy(
            "COPY regulator.events (store, line, sha256, hash, prev, recorded_at) FROM STDIN"
        ) as copy:
            for name, raws in stores.items():
                for raw in raws:
                    text = raw.decode("utf-8")
                    copy.write_row((name, text, hashlib.sha256(raw).hexdigest(), "", "", "now"))
                done[name] = len(raws)
        return done

    return _run(url, work)
