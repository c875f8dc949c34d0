"""Connections to the PostgreSQL stores: URLs, one cached connection per thread, transactions
with retry, errors as one line."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.log.pg.sql import RETRIES, SESSION


def is_url(value: str | None) -> bool:
    return bool(value) and str(value).startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """The URL without its password (what store.yaml records and messages show)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise Refused(
            "this workspace's stores are on PostgreSQL: install the driver (from a checkout: pip install -e '.[postgresql]')"
        ) from None
    return psycopg


def _message(exc: Exception) -> str:
    diag = getattr(exc, "diag", None)
    text = getattr(diag, "message_primary", None) or str(exc).strip().splitlines()[0] if str(exc) else ""
    return text or type(exc).__name__


GRANTS_MISSING = "run `regulator store roles` as the schema owner"


def _denied(conn: Any, exc: Exception) -> str:
    """A refused privilege, with its real cause: the append-only trigger (its own words), a role
    the stores were never granted to (a read fails too: `store roles` has not run), or a role that
    may read but not write (regulator_reader). The server is asked which, on this error path only."""
    text = _message(exc)
    if "append-only" in text or "is a host event" in text:  # the trigger's own words say it all
        return f"{text}; nothing written"
    try:
        role, usage = conn.execute(
            "SELECT current_user, has_schema_privilege('regulator', 'USAGE')"
        ).fetchone()
        reads = (
            usage and conn.execute("SELECT has_table_privilege('regulator.events', 'SELECT')").fetchone()[0]
        )
    except Exception:  # the connection broke, or the schema is gone: say both causes
        return f"{text} (a reader role cannot write; a role with no grants cannot read: {GRANTS_MISSING})"
    if not reads:
        return f"{text} (role {role} has no grants on the stores: {GRANTS_MISSING})"
    return f"{text} (a reader role cannot write)"


# ---- connections --------------------------------------------------------------------------------

_CONNECTIONS: dict[tuple[str, int, int, str], Any] = {}
_LOCK = threading.Lock()


def connect(url: str, purpose: str = "main") -> Any:
    """A cached autocommit connection per process, thread and purpose; errors become one line."""
    key = (url, os.getpid(), threading.get_ident(), purpose)
    with _LOCK:
        conn = _CONNECTIONS.get(key)
        if conn is not None and not conn.closed:
            return conn
    conn = fresh(url)
    with _LOCK:
        _CONNECTIONS[key] = conn
    return conn


def session_options(url: str) -> str:
    """libpq's `options` for a connection: the URL's own, then every setting of SESSION (the
    last of a repeated setting wins, so ours do)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = str(conninfo_to_dict(url).get("options") or "")
    except Exception:  # a URL libpq cannot read: connect() says so
        given = ""
    ours = " ".join(f"-c {name}={value}" for name, value in SESSION.items())
    return f"{given} {ours}".strip()


def fresh(url: str) -> Any:
    """A connection of its own (not cached): for LISTEN, imports, tests. What it needs is set as
    it starts (engine.log.pg.sql.SESSION), whatever defaults a role gave itself (`ALTER ROLE ...
    SET`, which any role may do to itself): those apply to no regulator session."""
    psycopg = _psycopg()
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10, options=session_options(url))
    except psycopg.Error as exc:
        raise Refused(f"cannot reach the store at {redact(url)}: {_message(exc)}") from None


def _run(url: str, work: Callable[[Any], Any], purpose: str = "main", tx: bool = True) -> Any:
    """Run `work(conn)` in a transaction; serialization failures and deadlocks are retried, a
    broken connection is opened again once, anything else is a refusal (nothing written)."""
    psycopg = _psycopg()
    from psycopg import errors

    for attempt in range(RETRIES):
        conn = connect(url, purpose)
        try:
            if not tx:  # one read-only statement: autocommit is its own transaction
                return work(conn)
            with conn.transaction():
                return work(conn)
        except (errors.SerializationFailure, errors.DeadlockDetected, errors.UniqueViolation):
            # another append took the store's next line first (engine.log.pg.sql.CHECK_APPEND_SQL):
            # read the tail again and chain on it
            _pause(attempt)
            continue
        except psycopg.OperationalError as exc:
            if conn.closed and attempt == 0:
                continue
            raise Refused(f"store {redact(url)}: {_message(exc)}") from None
        except errors.InsufficientPrivilege as exc:
            raise Refused(f"store {redact(url)}: {_denied(conn, exc)}") from None
        except psycopg.Error as exc:
            raise Refused(f"store {redact(url)}: {_message(exc)}; nothing written") from None
    raise Refused(f"store {redact(url)}: still conflicting after {RETRIES} tries; nothing written")


def _pause(attempt: int) -> None:
    """A short random wait before trying again, growing with the tries, so appends that met on one
    line do not meet again on the next."""
    time.sleep(random.uniform(0, 0.002 * (attempt + 1)))


def now_text() -> str:
    return clock.iso(clock.now())


def check_url(value: str) -> str:
    if not is_url(value):
        raise BadInput(f"store {value!r} is not a postgresql:// URL")
    return value
