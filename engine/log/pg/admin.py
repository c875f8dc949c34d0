"""The schema owner's work on a database: create the schema and roles, what the stores are, the
owner-only import."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from engine.base.errors import Refused
from engine.log.pg.connection import _run, redact
from engine.log.pg.sql import ROLES_SQL, SCHEMA_SQL, SCHEMA_VERSION


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
    """`regulator store roles`: regulator_writer (SELECT, INSERT) and regulator_reader (SELECT)."""

    def work(conn: Any) -> None:
        if not schema_present(conn):
            raise Refused(f"{redact(url)} holds no regulator stores; run `regulator init --store URL` first")
        conn.execute(ROLES_SQL)

    _run(url, work)


def instance(url: str) -> tuple[str, str]:
    """(instance id, clock) of the database's stores; refused where there are none."""

    def work(conn: Any) -> tuple[str, str]:
        if not schema_present(conn):
            raise Refused(f"{redact(url)} holds no regulator stores; run `regulator init --store URL`")
        row = conn.execute("SELECT instance, clock FROM regulator.meta LIMIT 1").fetchone()
        if row is None:
            raise Refused(f"{redact(url)}: regulator.meta is empty; not a regulator store")
        return row[0], row[1]

    return _run(url, work)


def write_access(url: str) -> tuple[str, bool]:
    """(the role this connection acts as, whether it may append to the stores)."""

    def work(conn: Any) -> tuple[str, bool]:
        row = conn.execute(
            "SELECT current_user, has_table_privilege('regulator.events', 'INSERT')"
        ).fetchone()
        return str(row[0]), bool(row[1])

    return _run(url, work, tx=False)


def import_lines(url: str, stores: Mapping[str, list[bytes]]) -> dict[str, int]:
    """The owner-only import: every line as it was (its `at` kept), into an empty database, in
    one transaction. The trigger still checks each line's chain and SHA-256."""

    def work(conn: Any) -> dict[str, int]:
        if not schema_present(conn):
            raise Refused(f"{redact(url)} holds no regulator stores; run `regulator store init --store URL`")
        owner = conn.execute(
            "SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class"
            " WHERE oid = 'regulator.events'::regclass"
        ).fetchone()[0]
        if not owner:
            raise Refused(f"{redact(url)}: only the owner of regulator.events may import")
        if conn.execute("SELECT count(*) FROM regulator.events").fetchone()[0]:
            raise Refused(f"{redact(url)} already holds events: store copy loads only into an empty store")
        conn.execute("SET LOCAL regulator.import = 'on'")
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


def clock_pinned(url: str) -> bool:
    return instance(url)[1] == "pinned"
