"""The SQL of the PostgreSQL stores: the schema, the roles, the upgrade, the catch-up reads, their
constants.

Schema 2 (design §22), every table in the schema `regulator`, owned by the role that ran `init`:
- `meta` (instance, version, clock, created_at): init's row; never changed but by `store upgrade`.
  A later row can only move the database to the system clock (design §26: the mode follows the
  decided policy): it keeps init's instance and version and the server's time, whatever it sent.
- `events` (store, n, line, sha256, hash, prev, at, recorded_at, written_by): every line of every
  store, numbered per store; INSERT only (triggers refuse UPDATE, DELETE, TRUNCATE). The trigger
  fills n, hash, prev, at from the line, recorded_at (the server's clock) and written_by (the
  session's login role, `session_user`; null on lines from before schema 2).
- `locks` (name): one row per exclusive decision, `decide`; held with SELECT ... FOR UPDATE (needs
  UPDATE: regulator_host's); the rows never change.
- `leader` (id = 1, holder, expires): the host running the timed duties and until when; renewed
  with `UPDATE ... WHERE holder = me OR expires < now()`; holder '' and expires -infinity: nobody.
- `leases` (lease, unit, expires, heartbeat): a unit's lease by its hash (never the token), when it
  expires (null: never) and when it was last seen; INSERT and UPDATE by regulator_host.
Roles: regulator_host (SELECT; INSERT on events; UPDATE on locks and leader; INSERT, UPDATE on
leases) and regulator_reader (SELECT). Units hold none.
"""

from __future__ import annotations

from engine.log.events import HOST_KINDS
from engine.log.store import MAX_LINE_BYTES

MARKER = "postgresql.json"
CHANNEL = "regulator"
SCHEMA_VERSION = 2  # 1: the first round's; 2: design §22 (roles, locks, leader, leases, the writer recorded)
RETRIES = 32  # conflicts retried (appends that met on one line, deadlocks), each after a short random pause
SKEW_AT_S = 2  # the trigger's bound on |at - clock_timestamp()| (design §18)
HOST_ROLE = "regulator_host"
READER_ROLE = "regulator_reader"
OLD_WRITER_ROLE = "regulator_writer"  # schema 1's hosts and units: `store upgrade` revokes its INSERT
DECIDE = "decide"  # the row of regulator.locks the decide lock holds

# Every connection's own settings, sent when it starts (libpq's `options`): they outrank what a
# role gave itself (`ALTER ROLE ... SET`), so no role's defaults change how a host's session runs:
# bounded waits and statements, text as UTF-8, transactions that may write where the grants allow,
# the server's default ordering of transactions, ISO dates, and functions and tables found only in
# the catalog (every table is named with its schema). idle_session_timeout 0: a LISTEN connection
# idles by design.
SESSION = {
    "statement_timeout": "30s",
    "lock_timeout": "5s",
    "idle_in_transaction_session_timeout": "60s",
    "idle_session_timeout": "0",
    "client_encoding": "UTF8",
    "default_transaction_read_only": "off",
    "default_transaction_isolation": "read\\ committed",
    "default_transaction_deferrable": "off",
    "standard_conforming_strings": "on",
    "DateStyle": "ISO",
    "IntervalStyle": "postgres",
    "TimeZone": "UTC",
    "search_path": "pg_catalog,pg_temp",
    "role": "none",
}


IS_HOST = f"""(pg_catalog.current_setting('is_superuser') = 'on'
        OR coalesce((SELECT pg_catalog.pg_has_role(current_user, r.oid, 'USAGE')
                     FROM pg_catalog.pg_roles r WHERE r.rolname = '{HOST_ROLE}'), false))"""


def _host_kinds_sql() -> str:
    """The host-event kinds (engine.log.events.HOST_KINDS) as an SQL array of text literals."""
    quoted = ", ".join("'" + kind.replace("'", "''") + "'" for kind in sorted(HOST_KINDS))
    return f"ARRAY[{quoted}]::text[]"


# the insert trigger (schema 2). No lock of its own: two appends to one store that read the same
# last line number their lines the same, and the primary key (store, n) lets one in; the other
# gets a unique violation (or, when the other committed before its read, a prev that no longer
# names the last line: a serialization failure) and the client tries again, on a fresh tail.
CHECK_APPEND_SQL = f"""
CREATE OR REPLACE FUNCTION regulator.check_append() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    body json;
    kind text;
    last_n bigint;
    last_hash text;
    importing boolean;
    pinned boolean;
    size bigint;
BEGIN
    size := octet_length(NEW.line);
    IF size > {MAX_LINE_BYTES} THEN
        RAISE EXCEPTION 'regulator: %: a line of % bytes is over the limit of {MAX_LINE_BYTES} bytes (1 MiB)',
            NEW.store, size USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.sha256 IS DISTINCT FROM encode(sha256(convert_to(NEW.line, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'regulator: %: the line does not match its SHA-256 as sent', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    BEGIN
        body := NEW.line::json;
    EXCEPTION WHEN others THEN
        RAISE EXCEPTION 'regulator: %: the line is not JSON', NEW.store USING ERRCODE = 'check_violation';
    END;
    IF strpos(NEW.line, E'\\n') > 0 OR strpos(NEW.line, E'\\r') > 0 THEN
        RAISE EXCEPTION 'regulator: %: the line holds a raw line break', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    IF json_typeof(body) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'regulator: %: the line is not a JSON object', NEW.store
            USING ERRCODE = 'check_violation';
    END IF;
    importing := regulator.owner_importing();
    kind := body->>'kind';  -- of duplicate keys the last, as every reader of the line takes it
    IF kind = ANY ({_host_kinds_sql()}) AND NOT importing AND NOT regulator.is_host() THEN
        RAISE EXCEPTION 'regulator: %: % is a host event: only {HOST_ROLE} writes it (this session is %)',
            NEW.store, kind, current_user USING ERRCODE = 'insufficient_privilege';
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
            USING ERRCODE = 'serialization_failure';
    END IF;
    NEW.n := coalesce(last_n, 0) + 1;
    NEW.recorded_at := clock_timestamp();
    NEW.written_by := session_user;
    -- pinned only while every row says so: a decision to the system clock adds a 'system' row
    SELECT bool_and(m.clock = 'pinned') INTO pinned FROM regulator.meta m;
    IF NOT importing AND NOT coalesce(pinned, false) THEN
        IF NEW.at IS NULL OR NEW.at !~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T[0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}Z$' THEN
            RAISE EXCEPTION 'regulator: %: at must be a UTC time YYYY-MM-DDTHH:MM:SSZ', NEW.store
                USING ERRCODE = 'check_violation';
        END IF;
        IF abs(extract(epoch FROM (clock_timestamp() - NEW.at::timestamptz))) > {SKEW_AT_S} THEN
            RAISE EXCEPTION 'regulator: %: at % is more than {SKEW_AT_S} s from the server''s clock (%)',
                NEW.store, NEW.at, clock_timestamp() USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $$;
"""

# whether the session's role acts as a host: regulator_host itself, a role that has its
# privileges (a login role per host granted regulator_host, an owner granted it), or a superuser
# (which could drop the trigger anyway)
IS_HOST_SQL = f"""
CREATE OR REPLACE FUNCTION regulator.is_host() RETURNS boolean LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp AS $$
    SELECT {IS_HOST}
$$;
"""

# the rows hosts update (schema 2): exclusive decisions, leadership, leases. Only these change.
# (Made where missing: `serve` of an earlier build may have made regulator.leader already.)
#   regulator.locks   (name): one row per exclusive decision ('decide'); a decider holds its row
#                     with SELECT ... FOR UPDATE, which needs UPDATE (the reader cannot); the rows
#                     themselves never change (a trigger refuses it)
#   regulator.leader  (id = 1, holder, expires): the one host running the timed duties (design §22),
#                     renewed with UPDATE ... WHERE holder = me OR expires < now()
#   regulator.leases  (lease, unit, expires, heartbeat): a unit's lease by its hash (never the
#                     token), when it expires (null: never) and when it was last seen (design §23)
HOST_TABLES_SQL = f"""
CREATE TABLE IF NOT EXISTS regulator.locks (name text PRIMARY KEY);
INSERT INTO regulator.locks (name) VALUES ('{DECIDE}') ON CONFLICT (name) DO NOTHING;
CREATE OR REPLACE TRIGGER locks_no_change BEFORE UPDATE OR DELETE ON regulator.locks
    FOR EACH ROW EXECUTE FUNCTION regulator.refuse_change();
CREATE OR REPLACE TRIGGER locks_no_truncate BEFORE TRUNCATE ON regulator.locks
    FOR EACH STATEMENT EXECUTE FUNCTION regulator.refuse_change();
CREATE TABLE IF NOT EXISTS regulator.leader (
    id int PRIMARY KEY CHECK (id = 1),
    holder text NOT NULL,
    expires timestamptz NOT NULL
);
INSERT INTO regulator.leader (id, holder, expires) VALUES (1, '', '-infinity') ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS regulator.leases (
    lease text PRIMARY KEY,
    unit text,
    expires timestamptz,
    heartbeat timestamptz NOT NULL DEFAULT clock_timestamp()
);
REVOKE ALL ON regulator.locks, regulator.leader, regulator.leases FROM PUBLIC;
"""

# design §26: the clock mode the insert trigger checks follows the decided policy. A later row of
# meta can only move the database to the system clock (never back: pinned is init's, for tests and
# demos), and keeps init's instance and version and the server's time whatever the row sent.
META_SQL = """
CREATE OR REPLACE FUNCTION regulator.check_meta() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    first_instance text;
    first_version int;
BEGIN
    SELECT m.instance, m.version INTO first_instance, first_version FROM regulator.meta m
        ORDER BY m.created_at LIMIT 1;
    IF first_instance IS NULL THEN
        RETURN NEW;  -- init's own row
    END IF;
    IF NEW.clock IS DISTINCT FROM 'system' THEN
        RAISE EXCEPTION 'regulator: the clock mode moves only to system' USING ERRCODE = 'check_violation';
    END IF;
    NEW.instance := first_instance;
    NEW.version := first_version;
    NEW.created_at := clock_timestamp();
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS meta_append ON regulator.meta;
CREATE TRIGGER meta_append BEFORE INSERT ON regulator.meta
    FOR EACH ROW EXECUTE FUNCTION regulator.check_meta();
"""

# the database moves to the system clock (idempotent: nothing when it is there already)
TO_SYSTEM_SQL = """
INSERT INTO regulator.meta (instance, version, clock)
SELECT m.instance, m.version, 'system' FROM regulator.meta m
WHERE NOT EXISTS (SELECT 1 FROM regulator.meta s WHERE s.clock = 'system')
ORDER BY m.created_at LIMIT 1
"""

SCHEMA_SQL = f"""
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
    written_by text,
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
{IS_HOST_SQL}
{CHECK_APPEND_SQL}
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
CREATE TRIGGER meta_no_change BEFORE UPDATE OR DELETE ON regulator.meta
    FOR EACH ROW EXECUTE FUNCTION regulator.refuse_change();
CREATE TRIGGER meta_no_truncate BEFORE TRUNCATE ON regulator.meta
    FOR EACH STATEMENT EXECUTE FUNCTION regulator.refuse_change();
{META_SQL}
{HOST_TABLES_SQL}
REVOKE ALL ON ALL TABLES IN SCHEMA regulator FROM PUBLIC;
"""

# what each role may do (run by `store roles`, and by `store upgrade` for the roles that exist)
GRANTS_SQL = f"""
GRANT USAGE ON SCHEMA regulator TO {HOST_ROLE}, {READER_ROLE};
GRANT SELECT ON regulator.meta, regulator.events, regulator.locks, regulator.leader, regulator.leases
    TO {HOST_ROLE}, {READER_ROLE};
GRANT INSERT ON regulator.events, regulator.meta TO {HOST_ROLE};
GRANT UPDATE ON regulator.locks, regulator.leader TO {HOST_ROLE};
GRANT INSERT, UPDATE ON regulator.leases TO {HOST_ROLE};
REVOKE UPDATE, DELETE, TRUNCATE ON regulator.meta, regulator.events FROM {HOST_ROLE}, {READER_ROLE};
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON regulator.meta, regulator.events, regulator.locks,
    regulator.leader, regulator.leases FROM {READER_ROLE};
"""

ROLES_SQL = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{HOST_ROLE}') THEN
        CREATE ROLE {HOST_ROLE} LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER_ROLE}') THEN
        CREATE ROLE {READER_ROLE} LOGIN;
    END IF;
END $$;
{GRANTS_SQL}
"""

# schema 1 -> 2, as the owner, in one transaction (engine.log.pg.admin.upgrade appends the mark
# after it): the writer recorded beside each line from now on (older lines: null), the trigger
# that refuses host events from other roles and lines over 1 MiB and takes no lock, the host
# tables, the old writer role's INSERT revoked, and the new roles' grants where they exist
UPGRADE_SQL = f"""
ALTER TABLE regulator.events ADD COLUMN written_by text;
{IS_HOST_SQL}
{CHECK_APPEND_SQL}
{META_SQL}
{HOST_TABLES_SQL}
DO $$ BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{OLD_WRITER_ROLE}') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON regulator.events FROM {OLD_WRITER_ROLE};
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{HOST_ROLE}')
            AND EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER_ROLE}') THEN
        EXECUTE $grants${GRANTS_SQL}$grants$;
    END IF;
END $$;
ALTER TABLE regulator.meta DISABLE TRIGGER meta_no_change;
UPDATE regulator.meta SET version = {SCHEMA_VERSION};
ALTER TABLE regulator.meta ENABLE TRIGGER meta_no_change;
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
