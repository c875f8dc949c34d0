"""The stores on PostgreSQL (SPEC §18): the same lines and chains, kept by the server.

The server holds every line of every store in one table, `regulator.events`, numbered per store
(`n`, 1, 2, 3 …: a reader resumes from a sequence number as a file reader resumes from a byte
offset). Triggers make the table INSERT/SELECT only, refuse an `at` more than 2 s from the
server's clock, record the server's clock beside it (`recorded_at`), check `prev` against the
store's last line and the SHA-256 of the line text as sent, and NOTIFY every append.

Readers read a local mirror: `.regulator/<store>.ndjson` holds the server's lines byte for byte,
brought up to date from the last sequence number mirrored (`.regulator/postgresql.json`), so every
fold, reference, checkpoint and `verify` reads exactly what it reads on files. The mirror is a
disposable cache: the server is the store.

psycopg is imported only when a postgresql store is selected (`regulator[postgresql]`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import mmap
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from engine import clock, hostkey, ids
from engine.errors import BadInput, Refused
from engine.events import STORES
from engine.store import (
    GENESIS,
    MAX_LINE,
    ReadResult,
    Store,
    _check_time,
    canonical,
    check_line,
    event_hash,
    locked,
    open_regular,
)

MARKER = "postgresql.json"
CHANNEL = "regulator"
SCHEMA_VERSION = 1
RETRIES = 8
SKEW_AT_S = 2  # the trigger's bound on |at - clock_timestamp()| (SPEC §18)

SCHEMA_SQL = """
CREATE SCHEMA regulator;
CREATE TABLE regulator.meta (
    instance text NOT NULL,
    version int NOT NULL,
    clock text NOT NULL CHECK (clock IN ('system', 'pinned')),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE regulator.events (
    store text NOT NULL CHECK (store IN ('signals', 'memory', 'units', 'identity')),
    n bigint NOT NULL,
    line text NOT NULL,
    sha256 text NOT NULL,
    hash text NOT NULL,
    prev text NOT NULL,
    at text,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (store, n)
);

CREATE FUNCTION regulator.refuse_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'regulator: % on %.% refused: the stores are append-only', TG_OP, TG_TABLE_SCHEMA,
        TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;

-- the owner's import session (store copy): the setting alone is not enough, the role must own the
-- table; the search_path is pinned so no temporary table can stand in for pg_class (D-73)
CREATE FUNCTION regulator.owner_importing() RETURNS boolean LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(pg_catalog.current_setting('regulator.import', true), '') = 'on'
        AND pg_catalog.pg_has_role(current_user, (SELECT c.relowner FROM pg_catalog.pg_class c
            WHERE c.oid = 'regulator.events'::pg_catalog.regclass), 'USAGE')
$$;

CREATE FUNCTION regulator.check_append() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body json;
    last_n bigint;
    last_hash text;
    importing boolean;
    pinned boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('regulator.store.' || NEW.store));
    IF NEW.sha256 IS DISTINCT FROM encode(sha256(convert_to(NEW.line, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'regulator: %: the line does not match its SHA-256 as sent', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    BEGIN
        body := NEW.line::json;
    EXCEPTION WHEN others THEN
        RAISE EXCEPTION 'regulator: %: the line is not JSON', NEW.store USING ERRCODE = 'check_violation';
    END;
    IF strpos(NEW.line, E'\n') > 0 OR strpos(NEW.line, E'\r') > 0 THEN
        RAISE EXCEPTION 'regulator: %: the line holds a raw line break', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    IF json_typeof(body) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'regulator: %: the line is not a JSON object', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    NEW.hash := body->>'hash';
    NEW.prev := body->>'prev';
    NEW.at := body->>'at';
    IF NEW.hash IS NULL OR NEW.prev IS NULL THEN
        RAISE EXCEPTION 'regulator: %: the line has no hash or prev', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT e.n, e.hash INTO last_n, last_hash FROM regulator.events e
        WHERE e.store = NEW.store ORDER BY e.n DESC LIMIT 1;
    IF NEW.prev IS DISTINCT FROM coalesce(last_hash, '') THEN
        RAISE EXCEPTION 'regulator: %: chain broken: prev does not name the store''s last line', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    NEW.n := coalesce(last_n, 0) + 1;
    NEW.recorded_at := clock_timestamp();
    importing := regulator.owner_importing();
    -- pinned only while every row says so: a decision to the system clock adds a 'system' row
    SELECT bool_and(m.clock = 'pinned') INTO pinned FROM regulator.meta m;
    IF NOT importing AND NOT coalesce(pinned, false) THEN
        IF NEW.at IS NULL OR NEW.at !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$' THEN
            RAISE EXCEPTION 'regulator: %: at must be a UTC time YYYY-MM-DDTHH:MM:SSZ', NEW.store
                USING ERRCODE = 'check_violation';
        END IF;
        IF abs(extract(epoch FROM (clock_timestamp() - NEW.at::timestamptz))) > 2 THEN
            RAISE EXCEPTION 'regulator: %: at % is more than 2 s from the server''s clock (%)', NEW.store,
                NEW.at, clock_timestamp() USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $$;

-- SPEC §26: the clock mode follows the decided policy. A later row of meta can only move the
-- database to the system clock (never back: pinned is init's, for tests and demos), and keeps the
-- instance, version and time of the server whatever the row sent says.
CREATE FUNCTION regulator.check_meta() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    first_instance text;
    first_version int;
BEGIN
    SELECT m.instance, m.version INTO first_instance, first_version FROM regulator.meta m
        ORDER BY m.created_at LIMIT 1;
    IF first_instance IS NULL THEN
        RETURN NEW;  -- create_schema's own row
    END IF;
    IF NEW.clock IS DISTINCT FROM 'system' THEN
        RAISE EXCEPTION 'regulator: the clock mode moves only to system' USING ERRCODE = 'check_violation';
    END IF;
    NEW.instance := first_instance;
    NEW.version := first_version;
    NEW.created_at := clock_timestamp();
    RETURN NEW;
END $$;

CREATE FUNCTION regulator.notify_append() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF regulator.owner_importing() THEN
        RETURN NULL;  -- the owner's import into an empty store: nobody is watching yet
    END IF;
    PERFORM pg_notify('regulator', NEW.store || ' ' || NEW.n);
    RETURN NULL;
END $$;

CREATE TRIGGER events_append BEFORE INSERT ON regulator.events
    FOR EACH ROW EXECUTE FUNCTION regulator.check_append();
CREATE TRIGGER events_notify AFTER INSERT ON regulator.events
    FOR EACH ROW EXECUTE FUNCTION regulator.notify_append();
CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE ON regulator.events
    FOR EACH ROW EXECUTE FUNCTION regulator.refuse_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON regulator.events
    FOR EACH STATEMENT EXECUTE FUNCTION regulator.refuse_change();
CREATE TRIGGER meta_append BEFORE INSERT ON regulator.meta
    FOR EACH ROW EXECUTE FUNCTION regulator.check_meta();
CREATE TRIGGER meta_no_change BEFORE UPDATE OR DELETE ON regulator.meta
    FOR EACH ROW EXECUTE FUNCTION regulator.refuse_change();
CREATE TRIGGER meta_no_truncate BEFORE TRUNCATE ON regulator.meta
    FOR EACH STATEMENT EXECUTE FUNCTION regulator.refuse_change();
REVOKE ALL ON ALL TABLES IN SCHEMA regulator FROM PUBLIC;
"""

ROLES_SQL = """
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_writer') THEN
        CREATE ROLE regulator_writer LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_reader') THEN
        CREATE ROLE regulator_reader LOGIN;
    END IF;
END $$;
GRANT USAGE ON SCHEMA regulator TO regulator_writer, regulator_reader;
GRANT SELECT ON regulator.meta, regulator.events TO regulator_writer, regulator_reader;
GRANT INSERT ON regulator.events, regulator.meta TO regulator_writer;
REVOKE UPDATE, DELETE, TRUNCATE ON regulator.meta, regulator.events FROM regulator_writer, regulator_reader;
"""


BLOCK = 1000  # lines per row of the catch-up COPY: the server joins them, in order, into one bytea
HEAD_SQL = """
SELECT s.store,
       (SELECT t.hash FROM regulator.events t WHERE t.store = s.store AND t.n = s.n) AS tail,
       l.n, l.hash
FROM unnest(%s::text[], %s::bigint[]) AS s(store, n)
LEFT JOIN LATERAL (
    SELECT e.n, e.hash FROM regulator.events e WHERE e.store = s.store ORDER BY e.n DESC LIMIT 1
) l ON true
"""
# each row: (the store's index in the arrays, the block's first n - 1, its lines, each with its
# newline, as the UTF-8 bytes the server holds): binary COPY, so nothing is escaped on the way.
# The blocks are ordered before their lines are joined (OFFSET 0 keeps that order underneath the
# join, so the server never sorts the lines themselves); the client checks the order anyway.
FETCH_SQL = """
COPY (
    SELECT k.i, k.lo,
           (SELECT convert_to(string_agg(e.line || E'\\n', '' ORDER BY e.n), 'UTF8')
            FROM regulator.events e
            WHERE e.store = k.store AND e.n > k.lo AND e.n <= least(k.lo + %(block)s, k.upto))
    FROM (
        SELECT s.i, s.store, s.upto, b.lo
        FROM unnest(%(names)s::text[], %(since)s::bigint[], %(upto)s::bigint[])
            WITH ORDINALITY AS s(store, since, upto, i)
        CROSS JOIN LATERAL generate_series(s.since, s.upto - 1, %(block)s) AS b(lo)
        ORDER BY s.i, b.lo
        OFFSET 0
    ) k
) TO STDOUT (FORMAT binary)
"""


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
            "this workspace's stores are on PostgreSQL: install the driver (pip install 'regulator[postgresql]')"
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
    if "append-only" in text:
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
    psycopg = _psycopg()
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        # what this session needs, whatever defaults a role gave itself (`ALTER ROLE ... SET`,
        # which a writer may do to its own role): text as UTF-8 (not bytes), and transactions that
        # may write where the grants allow it
        conn.execute(_SESSION)
    except psycopg.Error as exc:
        raise Refused(f"cannot reach the store at {redact(url)}: {_message(exc)}") from None
    with _LOCK:
        _CONNECTIONS[key] = conn
    return conn


_SESSION = "SET client_encoding = 'UTF8'; SET default_transaction_read_only = off"


def fresh(url: str) -> Any:
    """A connection of its own (not cached): for LISTEN, imports, tests."""
    psycopg = _psycopg()
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        conn.execute(_SESSION)
        return conn
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
        except (errors.SerializationFailure, errors.DeadlockDetected):
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


INSTANCE_SQL = """
SELECT (SELECT m.instance FROM regulator.meta m ORDER BY m.created_at LIMIT 1),
       CASE WHEN bool_and(clock = 'pinned') THEN 'pinned' ELSE 'system' END
FROM regulator.meta
"""
# the database moves to the system clock (idempotent: nothing when it is there already)
TO_SYSTEM_SQL = """
INSERT INTO regulator.meta (instance, version, clock)
SELECT m.instance, m.version, 'system' FROM regulator.meta m
WHERE NOT EXISTS (SELECT 1 FROM regulator.meta s WHERE s.clock = 'system')
ORDER BY m.created_at LIMIT 1
"""


def follow_clock(url: str) -> None:
    """SPEC §26: the clock mode the insert trigger checks follows the decided policy. Called when
    the workspace's decided clock is the system's (the decision that moves it there, the demo's
    too): the database stops taking times it would refuse on the system clock."""
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


def write_access(url: str) -> tuple[str, bool]:
    """(the role this connection acts as, whether it may append to the stores)."""

    def work(conn: Any) -> tuple[str, bool]:
        row = conn.execute(
            "SELECT current_user, has_table_privilege('regulator.events', 'INSERT')"
        ).fetchone()
        return str(row[0]), bool(row[1])

    return _run(url, work, tx=False)


# ---- the mirror ---------------------------------------------------------------------------------


class Mirror:
    """The local copy of a database's stores in one folder (a workspace's `.regulator/`)."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.folder = Path(folder)
        self.checked = False
        self._before: dict[str, int] = {}
        # (store, first line): mirror lines that were not the server's, fetched again
        self.mended: list[tuple[str, int]] = []

    @property
    def marker(self) -> Path:
        return self.folder / MARKER

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.ndjson"

    def _state(self) -> dict:
        try:  # a FIFO or device here is no state (never waited on): the mirror is fetched again
            fd = open_regular(self.marker)
        except (OSError, Refused):
            return {}
        try:
            with os.fdopen(fd, "rb") as file:
                return json.loads(file.read().decode("utf-8"))
        except (OSError, ValueError):
            return {}

    def _save(self, state: dict) -> None:
        temporary = self.folder / (MARKER + ".tmp")
        temporary.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.marker)

    def prepare(self) -> None:
        """Make the folder a mirror of this database, or check it is one. A folder holding file
        stores is never taken for a mirror: those are the stores themselves."""
        if self.checked:
            return
        ident, _ = instance(self.url)
        if self.folder.is_symlink():
            raise Refused(f"{self.folder} is a symlink; regulator opens its stores only where they are")
        self.folder.mkdir(mode=0o700, exist_ok=True)
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            if not state:
                held = [n for n in STORES if self.path(n).exists() and self.path(n).stat().st_size > 0]
                if held:
                    raise Refused(
                        f"{self.folder} holds file stores ({', '.join(held)}) but the workspace's store is "
                        f"{redact(self.url)}: to use the files, select them (REGULATOR_STORE=files for "
                        "the process, or decide `url: files` in regulator/policy/store.yaml); to move "
                        f"them to the server, `regulator store copy --to URL`, then move {self.folder.name}/ "
                        "aside"
                    )
            if state.get("instance") != ident:  # another database (or none yet): start over
                for name in STORES:
                    self.path(name).write_bytes(b"")
                    self.path(name).chmod(0o600)
                (self.folder / "readmodel.checkpoint").unlink(missing_ok=True)
                state = {"instance": ident, "url": redact(self.url), "stores": {}}
                self._save(state)
        self.checked = True
        self._before = self._counts()  # what was here before this process fetched (see `check`)
        self.sync()

    def sync(self, names: tuple[str, ...] = STORES) -> int:
        """Bring the mirror up to date from the last sequence number of each store; the number of
        lines gained. A mirror file that is not what was mirrored (edited, cut), or a server whose
        line at that number is not the one mirrored, is read again from the first line. One query
        asks for each store's tail; one binary COPY then streams the new lines of every store that
        has some, a block of lines at a time, straight into the mirror files. A mirror deleted
        since it was prepared (always safe) is made again and fetched from the first line."""
        if self.checked and not os.path.lexists(self.folder):
            self.checked = False
            self.prepare()
            return sum(self._counts()[name] for name in names)
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            stores = state.setdefault("stores", {})
            reset = False
            for name in names:
                n, size, _ = stores.get(name, [0, 0, GENESIS])
                try:
                    found = self.path(name).lstat()
                    actual = found.st_size
                except FileNotFoundError:
                    actual = -1
                else:
                    if not stat.S_ISREG(found.st_mode):  # a FIFO would block the fetch's write
                        raise Refused(f"{self.path(name)} is not a regular file; move it aside")
                if actual != size:
                    self._reset(name, stores)
                    reset = True
            params = (list(names), [stores.get(x, [0, 0, GENESIS])[0] for x in names])
            heads = _run(self.url, lambda conn: conn.execute(HEAD_SQL, params).fetchall(), tx=False)
            wanted: dict[str, tuple[int, str]] = {}  # store -> (the server's last n, its hash)
            for name, tail, last_n, last_hash in heads:
                n, _, last = stores.get(name, [0, 0, GENESIS])
                if n > 0 and tail != last:  # the server's line n is not the one mirrored
                    self._reset(name, stores)
                    reset, n = True, 0
                if last_n is not None and last_n > n:
                    wanted[name] = (last_n, last_hash)
            gained = _run(self.url, lambda conn: self._fetch(conn, stores, wanted)) if wanted else 0
            if gained or reset:
                self._save(state)
            return gained

    def _fetch(self, conn: Any, stores: dict, wanted: dict[str, tuple[int, str]]) -> int:
        """Stream lines (since, upto] of each wanted store into its mirror file. On any failure
        the files are cut back to what was mirrored."""
        names = list(wanted)
        since = [stores.get(x, [0, 0, GENESIS])[0] for x in names]
        upto = [wanted[x][0] for x in names]
        handles = [open(self.path(x), "ab") for x in names]  # noqa: SIM115 - closed below
        try:
            _blocks(conn, self.url, names, since, upto, lambda k, data: handles[k].write(data))
            for handle in handles:
                handle.flush()
        except BaseException:
            for name, handle in zip(names, handles, strict=True):
                with contextlib.suppress(OSError):
                    handle.truncate(stores.get(name, [0, 0, GENESIS])[1])
            raise
        finally:
            for handle in handles:
                handle.close()
        for k, name in enumerate(names):
            stores[name] = [upto[k], self.path(name).stat().st_size, wanted[name][1]]
        return sum(upto[k] - since[k] for k in range(len(names)))

    def recorded(self) -> dict[str, list]:
        """What the mirror records of each store: [last sequence number, file size, last hash]."""
        stores = self._state().get("stores", {})
        return {name: stores.get(name, [0, 0, GENESIS]) for name in STORES}

    def _reset(self, name: str, stores: dict) -> None:
        self.path(name).write_bytes(b"")
        stores[name] = [0, 0, GENESIS]

    # ---- the mirror's bytes are the server's (SPEC §15.4: a cache never decides) ---------------

    def _counts(self) -> dict[str, int]:
        stores = self._state().get("stores", {})
        return {name: int(stores.get(name, [0])[0]) for name in STORES}

    def before(self, name: str) -> int:
        """How many lines of the store were mirrored before this read fetches: the first read of a
        process takes the count from before `prepare` fetched."""
        if name in self._before:
            return self._before.pop(name)
        return self._counts()[name]

    def check(self, name: str, offset: int, line: int, before: int, *, again: bool = True) -> None:
        """Prove that the mirror bytes a reader is about to read (from `offset`, line `line`) are
        the server's, or fetch the store again from the first line. Lines this read's own fetch
        wrote (after `before`) came from the server just now. A read from the start hashes the
        file once and compares it with the seal the last such read left (SHA-256 of the first
        `size` bytes, MAC'd with the host key and bound to the database and line count), and
        compares each line mirrored since the seal with the SHA-256 the server keeps of it; a read
        from further on (the checkpoint vouches for the bytes before it, or this process read them)
        compares only the lines after it. A mismatch (a same-size edit of the mirror) is named by
        `verify` and warned of once; the reader reads the server's lines."""
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            stores = state.setdefault("stores", {})
            n, size, _ = stores.get(name, [0, 0, GENESIS])
            if offset > size:
                return  # the caller's cursor is past the mirror: it reads nothing, or reloads
            bad = self._first_bad(state, name, offset, line, min(before, n), n, size)
            if bad is None:
                return
            self._reset(name, stores)
            state.get("seals", {}).pop(name, None)
            self._save(state)
        self.sync((name,))
        self.mended.append((name, bad))
        print(
            f"regulator: warning: the local mirror {self.path(name)} differed from the server at line {bad} "
            "(edited in place); read again from the server",
            file=sys.stderr,
        )
        if again:  # every line is the server's now: seal them
            self.check(name, 0, 0, 0, again=False)

    def _first_bad(
        self, state: dict, name: str, offset: int, line: int, upto: int, n: int, size: int
    ) -> int | None:
        """The first line that is not the server's (0 when the seal does not hold yet no line
        differs), or None; a read from the start that finds none leaves a new seal."""
        seals = state.setdefault("seals", {})
        key = hostkey.read(self.folder, create=True)
        try:
            fd = open_regular(self.path(name))
        except OSError:
            return None  # no mirror file: the read finds nothing, as Store.read does
        with open(fd, "rb") as handle:
            if os.fstat(handle.fileno()).st_size < size:
                return 0  # cut since the lock was taken: it cannot be, unless edited
            data: Any = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) if size else b""
            try:
                hasher = hashlib.sha256() if offset == 0 else None
                start, first, broken = offset, line, False
                if hasher is not None:
                    vouched = _sealed(key, state.get("instance"), name, seals.get(name), data, hasher)
                    broken = vouched is None
                    if vouched is None:
                        hasher = None  # no new seal from this read: the store is fetched again
                    start, first = vouched or (0, 0)
                if upto > first:
                    wanted = self._digests(name, first, upto)
                    pieces = data[start:size].split(b"\n", upto - first)[: upto - first]
                    for k, (raw, want) in enumerate(zip(pieces, wanted, strict=False)):
                        if hashlib.sha256(raw).hexdigest() != want:
                            return first + 1 + k
                    if len(pieces) != len(wanted) or len(wanted) != upto - first:
                        return first + 1 + min(len(pieces), len(wanted))
                if not broken and _newlines(data, start, size) != n - first:
                    # bytes the record's size claims but its lines do not (postgresql.json edited
                    # to cover lines added to the file): the first line that is not the server's
                    wanted = self._digests(name, first, n)
                    pieces = data[start:size].split(b"\n")
                    for k, (raw, want) in enumerate(zip(pieces, wanted, strict=False)):
                        if hashlib.sha256(raw).hexdigest() != want:
                            return first + 1 + k
                    return first + 1 + min(len(pieces), len(wanted))
                if broken:
                    return 0
                if hasher is not None and key is not None:
                    with memoryview(data) as view:
                        hasher.update(view[start:size])
                    body = [n, size, hasher.hexdigest()]
                    if seals.get(name, [])[:3] != body:
                        seals[name] = [*body, _seal_mac(key, state.get("instance"), name, body)]
                        self._save(state)
            finally:
                if isinstance(data, mmap.mmap):
                    data.close()
        return None

    def prove(self, name: str, server: bytes) -> None:
        """`verify`'s own check, beside the seal: the mirror's bytes must be the first bytes of the
        server's. A seal is MAC'd with host.key, which a unit sharing the account can read and
        reseal an edited mirror with; the server's bytes it cannot forge. A mirror that is not the
        server's is fetched again and named (`mended`)."""
        try:
            fd = open_regular(self.path(name))
        except (OSError, Refused):
            return
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        if server.startswith(data):
            return
        mine, theirs = data.split(b"\n"), server.split(b"\n")
        bad = next((k for k, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), len(theirs) - 1)
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            self._reset(name, state.setdefault("stores", {}))
            state.get("seals", {}).pop(name, None)
            self._save(state)
        self.sync((name,))
        self.mended.append((name, bad + 1))

    def _digests(self, name: str, first: int, upto: int) -> list[str]:
        """The SHA-256 the server keeps of each of the store's lines first+1 … upto."""
        rows = _run(
            self.url,
            lambda conn: conn.execute(
                "SELECT sha256 FROM regulator.events WHERE store = %s AND n > %s AND n <= %s ORDER BY n",
                (name, first, upto),
            ).fetchall(),
            tx=False,
        )
        return [row[0] for row in rows]

    def appended(self, name: str, n: int, digest: str, line: str) -> None:
        """Our own append, committed as line `n`: mirrored at once when the mirror is at n - 1."""
        if not os.path.lexists(self.folder):  # deleted meanwhile: made again, the line with it
            self.sync((name,))
            return
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            stores = state.setdefault("stores", {})
            have, size, _ = stores.get(name, [0, 0, GENESIS])
            try:
                actual = self.path(name).stat().st_size
            except FileNotFoundError:
                actual = -1
            if have == n - 1 and actual == size:
                data = line.encode() + b"\n"
                with open(self.path(name), "ab") as handle:
                    handle.write(data)
                stores[name] = [n, size + len(data), digest]
                self._save(state)
                return
        self.sync((name,))


def _newlines(data: Any, start: int, end: int, piece: int = 1 << 22) -> int:
    """How many lines data[start:end] ends (an mmap has no count: a piece at a time)."""
    return sum(data[at : min(at + piece, end)].count(b"\n") for at in range(start, end, piece))


def _blocks(
    conn: Any,
    url: str,
    names: list[str],
    since: list[int],
    upto: list[int],
    take: Callable[[int, bytes], object],
) -> None:
    """Lines (since, upto] of each store, through one binary COPY (in the caller's transaction):
    `take(k, data)` for each block of store `names[k]` in order, every block checked to hold
    exactly its lines (refused if not: the caller keeps nothing of it)."""
    conn.execute("SET LOCAL jit = off")  # compiling the plan costs more than running it
    params = {"names": names, "since": since, "upto": upto, "block": BLOCK}
    with conn.cursor().copy(FETCH_SQL, params) as copy:
        copy.set_types(["int8", "int8", "bytea"])
        expect = list(since)  # the next block's first n - 1, per store
        for i, lo, data in copy.rows():
            k = i - 1
            lines = min(lo + BLOCK, upto[k]) - lo
            if lo != expect[k] or data is None or data.count(b"\n") != lines:
                raise Refused(
                    f"store {redact(url)}: {names[k]} lines {lo + 1}..{lo + lines} did not arrive whole"
                )
            take(k, data)
            expect[k] = lo + lines
    if expect != upto:
        raise Refused(f"store {redact(url)}: the server's lines ended early")


def _seal_mac(key: bytes, instance: object, name: str, body: list) -> str:
    text = json.dumps([instance, name, *body], separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _sealed(
    key: bytes | None, instance: object, name: str, seal: object, data: Any, hasher: Any
) -> tuple[int, int] | None:
    """(bytes, lines) of the mirror a valid seal vouches for, fed to `hasher`: (0, 0) without a
    seal this host made (none, another key's, or one the mirror has since outgrown by a fetch
    from the first line); None when the host's seal names bytes the mirror no longer holds."""
    if key is None or not isinstance(seal, list) or len(seal) != 4:
        return 0, 0
    lines, size, digest, mac = seal
    if not (isinstance(lines, int) and isinstance(size, int) and isinstance(mac, str)):
        return 0, 0
    if not hmac.compare_digest(mac, _seal_mac(key, instance, name, [lines, size, digest])):
        return 0, 0
    if size > len(data):
        return 0, 0
    with memoryview(data) as view:
        hasher.update(view[:size])
    if hasher.hexdigest() != digest:
        return None
    return size, lines


_MIRRORS: dict[tuple[str, Path], Mirror] = {}


def mirror(url: str, folder: Path) -> Mirror:
    key = (url, folder if isinstance(folder, Path) else Path(folder))
    found = _MIRRORS.get(key)
    if found is None:
        found = _MIRRORS[key] = Mirror(url, Path(folder))
    return found


# ---- the store ----------------------------------------------------------------------------------


class PgStore(Store):
    """A store kept by the server; reads go through the mirror file at `path`."""

    def __init__(self, url: str, folder: Path, name: str, *, mirrored: bool = True) -> None:
        super().__init__(Path(folder) / f"{name}.ndjson")
        self.url = url
        self.store = name
        self.mirror = mirror(url, Path(folder))
        self.mirrored = mirrored  # False: a writer that never reads (it keeps no mirror)

    def append(self, event: dict, *, assign_id: bool = False) -> dict:
        """The same line as the file store would write, chained to the server's last line of this
        store, in one transaction under the store's advisory lock."""
        name = self.store
        file_name = self.name

        def work(conn: Any) -> tuple[dict, int]:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("regulator.store." + name,))
            row = conn.execute(
                "SELECT hash, at FROM regulator.events WHERE store = %s ORDER BY n DESC LIMIT 1", (name,)
            ).fetchone()
            prev, last_at = (row[0], row[1]) if row else (GENESIS, None)
            written = dict(event)
            if "at" in written:
                written["at"] = _restamped(event)
            _check_time(file_name, written.get("at"), last_at)
            written["prev"] = prev
            if assign_id:
                written["id"] = ids.new_id(f"{file_name}\0{prev}\0{canonical(written).decode()}")
                written = {"id": written.pop("id"), **written}
            written["hash"] = event_hash(written)
            line = line_text(written)
            if not clock.pinned() and name == "identity":  # a decision may have moved the clock
                conn.execute(TO_SYSTEM_SQL)
            n = conn.execute(
                "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
                " VALUES (%s, %s, %s, '', '', now()) RETURNING n",
                (name, line, hashlib.sha256(line.encode()).hexdigest()),
            ).fetchone()[0]
            return written, n

        written, n = _run(self.url, work)
        if self.mirrored:
            self.mirror.appended(name, n, written["hash"], line_text(written))
        return written

    def append_unchanged(self, event: dict, unchanged: Mapping[str, str]) -> dict | None:
        """append(event, assign_id=True) in one round trip, if the stores named in `unchanged`
        still end with the lines of those hashes (what the caller's checks read: a unit's lease,
        the policy in force); None, and nothing written, when one of them has moved on or the
        one-trip path does not apply (a pinned clock, an event stamped before the store's last, a
        line the trigger refuses): the caller then reads again, checks again and calls append().

        The server builds the line around the store's tail: the client sends the canonical line
        and its hashed body cut where `prev` goes, the server takes the store's lock, reads the
        tail, joins the pieces, hashes them, inserts (the trigger checks the line as ever) and
        commits, in one simple query (each statement sees what committed before it, so the tail read
        after the lock is the store's last line)."""
        trip = _one_trip(self.store, self.name, event, unchanged)
        if trip is None:
            return None
        params, written = trip
        psycopg = _psycopg()
        from psycopg import errors

        conn = connect(self.url)
        try:
            cursor = psycopg.ClientCursor(conn)
            query, bound = _one_trip_query(conn, params)
            try:
                cursor.execute(query, bound)
            except errors.InvalidSqlStatementName:  # a new connection: prepare it (nothing was written)
                conn.execute(ONE_TRIP_PREPARE)
                cursor.execute(query, bound)
            while cursor.nextset():  # the last statement's result: the INSERT's
                pass
            row = cursor.fetchone()
        except errors.CheckViolation:
            return None  # append() says why (and stamps again an `at` that waited too long)
        except errors.InsufficientPrivilege as exc:
            raise Refused(f"store {redact(self.url)}: {_denied(conn, exc)}") from None
        except psycopg.OperationalError as exc:
            try:
                row = _written_after_all(self.url, self.store, written["id"])
            except Refused as unknown:
                raise Refused(
                    f"store {redact(self.url)}: the connection broke during an append ({_message(exc)}) and "
                    f"the store could not be asked whether it was written ({unknown}); `regulator verify` "
                    "and `regulator signals` show what it holds"
                ) from None
        except psycopg.Error as exc:
            raise Refused(f"store {redact(self.url)}: {_message(exc)}; nothing written") from None
        if row is None:
            return None
        n, prev, digest = row
        written["prev"], written["hash"] = prev, digest
        body = f"{params['h1']}{prev}{params['h2']}"  # canonical(written without its hash), by the cut
        if hashlib.sha256(body.encode()).hexdigest() != digest:  # the server joined another text
            raise Refused(
                f"store {redact(self.url)}: line {n} of {self.store} was written with a hash this "
                "client does not compute; run `regulator verify`"
            )
        if self.mirrored:
            self.mirror.appended(self.store, n, digest, line_text(written))
        return written

    def read(
        self, offset: int = 0, line: int = 0, *, final: bool = True, shape: type | tuple | None = None
    ) -> ReadResult:
        """From the mirror, brought up to date first (from its last sequence number), its bytes
        proven to be the server's (Mirror.check) or fetched again."""
        self.mirror.prepare()
        before = self.mirror.before(self.store)
        self.mirror.sync((self.store,))
        self.mirror.check(self.store, offset, line, before)
        return super().read(offset, line, final=final, shape=shape)

    def mended(self) -> list[int]:
        """Lines of the mirror this process found were not the server's, and fetched again."""
        return [line for name, line in self.mirror.mended if name == self.store]

    def whole(self) -> bytes:
        """The server's lines, not the mirror's: `verify` checks what the server holds. The mirror
        is compared with them too (Mirror.prove), whatever its seal says."""
        data = server_bytes(self.url, self.store)
        if self.mirrored:
            self.mirror.prove(self.store, data)
        return data


# one round trip: the store's lock, then the line built around the store's tail and inserted, in
# one simple query (one transaction; each statement sees what committed before it starts); the
# INSERT is a statement prepared once per connection
ONE_TRIP = "regulator_append_v1"
ONE_TRIP_PREPARE = f"""PREPARE {ONE_TRIP} (text, text, text, text, text, text, text, text, text[], text[]) AS
INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)
SELECT $1, l.line, encode(sha256(convert_to(l.line, 'UTF8')), 'hex'), '', '', now()
FROM (SELECT coalesce(t.hash, '') AS prev, t.at AS last_at FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.hash, e.at FROM regulator.events e WHERE e.store = $1
                         ORDER BY e.n DESC LIMIT 1) AS t ON true) AS p
CROSS JOIN LATERAL (SELECT encode(sha256(convert_to($2 || p.prev || $3, 'UTF8')), 'hex') AS hash) AS h
CROSS JOIN LATERAL (SELECT $4 || p.prev || $5 || h.hash || $6 AS line) AS l
WHERE p.prev ~ '^([0-9a-f]{{64}})?$'
  AND (p.last_at IS NULL OR p.last_at COLLATE "C" <= $7)
  AND encode(sha256(convert_to($2 || E'\\n' || $3 || E'\\n' || $4 || E'\\n' || $5 || E'\\n' || $6, 'UTF8')),
             'hex') = $8
  AND (SELECT coalesce(bool_and(coalesce((SELECT g.hash FROM regulator.events g WHERE g.store = s.store
                                           ORDER BY g.n DESC LIMIT 1), '') = s.tail), true)
       FROM unnest($9, $10) AS s(store, tail))
RETURNING n, prev, hash"""
ONE_TRIP_SQL = (  # the plan made once serves every line (a custom plan costs as much again)
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),"
    " pg_advisory_xact_lock(hashtext('regulator.store.' || %(store)s)); "
    f"EXECUTE {ONE_TRIP} (%(store)s, %(h1)s, %(h2)s, %(l1)s, %(l2)s, %(l3)s, %(at)s, %(sent)s, "
    "%(stores)s::text[], %(tails)s::text[])"
)
_CUT = "regulator-cut-" + os.urandom(16).hex()  # where prev and hash go: in no line by chance


def _one_trip(
    name: str, file_name: str, event: dict, unchanged: Mapping[str, str]
) -> tuple[dict[str, object], dict] | None:
    """The parameters of append_unchanged's query, and the line as written but for prev and
    hash; None where one trip cannot write what append() would (SPEC §15.3, §18): a pinned
    clock (ids and `at` then derive from the chain), an `at` that is not text, a line that is
    not plain UTF-8, or a cut that is not where prev and hash alone go."""
    if clock.pinned() or clock.fixed():
        return None
    at = _restamped(event)
    if not isinstance(at, str) or "id" in event:
        return None
    written = {"id": ids.new_id(file_name), **event}  # random (the clock is not fixed), first on the line
    if "at" in written:
        written["at"] = at
    written["prev"] = _CUT
    try:
        body = canonical(written).decode("utf-8")
        written["hash"] = _CUT
        line = line_text(written)
        line.encode("utf-8")
    except UnicodeError:
        return None
    h1, cut, h2 = body.partition(_CUT)
    l1, _, rest = line.partition(_CUT)
    l2, _, l3 = rest.partition(_CUT)
    if not cut or _CUT in h2 or body.count(_CUT) != 1 or line.count(_CUT) != 2:
        return None
    pieces = (h1, h2, l1, l2, l3)
    guards = sorted(unchanged.items())
    params: dict[str, object] = {
        "store": name,
        "at": at,
        "sent": hashlib.sha256("\n".join(pieces).encode()).hexdigest(),
        **dict(zip(("h1", "h2", "l1", "l2", "l3"), pieces, strict=True)),
        "stores": [store for store, _ in guards],
        "tails": [tail for _, tail in guards],
    }
    del written["hash"]
    return params, written


def _one_trip_query(conn: Any, params: dict[str, object]) -> tuple[str, dict[str, object] | None]:
    """ONE_TRIP_SQL with its parameters, quoted here where the connection reads text literals
    plainly (standard_conforming_strings, UTF-8: a quote doubled is all there is to it; the lines
    are JSON, which holds no NUL), else by psycopg (its literals, slower to make)."""
    info = conn.info
    plain = info.parameter_status("standard_conforming_strings") == "on" and info.encoding == "utf-8"
    texts = [v for v in params.values() if isinstance(v, str)]
    if not plain or any("\x00" in v for v in texts):
        return ONE_TRIP_SQL, params

    def quoted(value: object) -> str:
        if isinstance(value, list):
            return "ARRAY[" + ", ".join(map(quoted, value)) + "]"
        return "'" + str(value).replace("'", "''") + "'"

    return ONE_TRIP_SQL % {k: quoted(v) for k, v in params.items()}, None


def _written_after_all(url: str, name: str, event_id: str) -> tuple[int, str, str] | None:
    """The connection broke during a one-trip append: whether the line went in after all. Under
    the store's lock (an append still running on the server ends first), the store's last lines
    are searched for the line's id, which is random and first on the line."""

    def work(conn: Any) -> tuple[int, str, str] | None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("regulator.store." + name,))
        return conn.execute(
            "SELECT n, prev, hash FROM regulator.events WHERE store = %s AND n > coalesce((SELECT max(n)"
            " FROM regulator.events WHERE store = %s), 0) - 10000 AND starts_with(line, %s)",
            (name, name, '{"id":' + json.dumps(event_id) + ","),
        ).fetchone()

    return _run(url, work)


def _restamped(event: dict) -> object:
    """The event's `at`; an unsigned event that waited a second or more for the store's lock is
    stamped again now (the server refuses an `at` more than 2 s off its clock). A signed person
    event keeps its `at`: the signature covers it."""
    at = event.get("at")
    if "sig" in event or not isinstance(at, str):
        return at
    now = clock.now()
    try:
        behind = (now - clock.read_time(at)).total_seconds()
    except BadInput:
        return at
    return clock.iso(now) if behind >= 1 else at


def line_text(event: dict) -> str:
    """The canonical line (engine.store.canonical_line) as text, without its newline; bad input
    when over engine.store.MAX_LINE (SPEC §26), as on files."""
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    if len(text) > MAX_LINE // 4:  # a character is at most 4 bytes: only a long line is encoded
        check_line(text.encode("utf-8", "surrogatepass") + b"\n")
    return text


# ---- the decide lock ----------------------------------------------------------------------------


@contextlib.contextmanager
def decide_lock(url: str) -> Iterator[None]:
    """One decider at a time across hosts: a transaction-scoped advisory lock, held on a
    connection of its own for the exclusive section (released at its end, or when the process
    dies and the server drops its connection)."""
    psycopg = _psycopg()
    conn = connect(url, "decide")
    try:
        tx = conn.transaction()
        tx.__enter__()
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('regulator.decide'))")
    except psycopg.Error as exc:
        with contextlib.suppress(Exception):
            conn.close()
        raise Refused(f"store {redact(url)}: {_message(exc)}") from None
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            tx.__exit__(None, None, None)


# ---- reading lines straight from the server -----------------------------------------------------


def lines(url: str, name: str, since: int = 0) -> list[tuple[int, str]]:
    """(n, line) of one store after sequence number `since`, from the server."""
    return _run(
        url,
        lambda conn: conn.execute(
            "SELECT n, line FROM regulator.events WHERE store = %s AND n > %s ORDER BY n", (name, since)
        ).fetchall(),
        tx=False,
    )


def server_bytes(url: str, name: str) -> bytes:
    """Every line of one store as the server holds it, each with its newline (one binary COPY)."""

    def work(conn: Any) -> bytes:
        last = conn.execute("SELECT max(n) FROM regulator.events WHERE store = %s", (name,)).fetchone()[0]
        parts: list[bytes] = []
        if last:
            _blocks(conn, url, [name], [0], [last], lambda _, data: parts.append(data))
        return b"".join(parts)

    return _run(url, work)


def counts(url: str) -> dict[str, int]:
    rows = _run(
        url,
        lambda conn: conn.execute("SELECT store, count(*) FROM regulator.events GROUP BY store").fetchall(),
    )
    found: dict[str, int] = {name: 0 for name in STORES}
    return found | dict(rows)


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


# ---- live ---------------------------------------------------------------------------------------


def follow(url: str, on_append: Callable[[], None], stop: threading.Event, timeout: float = 0.5) -> None:
    """LISTEN for appends and call `on_append` (at most once per batch of notifications) until
    `stop` is set. Never polls the table: the server says when there is something to read."""
    conn = fresh(url)
    try:
        conn.execute(f"LISTEN {CHANNEL}")
        while not stop.is_set():
            got = False
            for _ in conn.notifies(timeout=timeout, stop_after=1):
                got = True
            if got:
                with contextlib.suppress(Exception):
                    for _ in conn.notifies(timeout=0.02):  # the rest of a burst, in one read
                        pass
                on_append()
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def clock_pinned(url: str) -> bool:
    return instance(url)[1] == "pinned"


def now_text() -> str:
    return clock.iso(clock.now())


def check_url(value: str) -> str:
    if not is_url(value):
        raise BadInput(f"store {value!r} is not a postgresql:// URL")
    return value
