"""Schema 1 of the PostgreSQL stores, as the first and second rounds made it (engine/log/pg/sql.py
before design §22), verbatim: what `regulator store upgrade` is tested on. Never edited: a database
made by that code holds exactly this."""

VERSION = 1

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
    SELECT m.clock = 'pinned' INTO pinned FROM regulator.meta m LIMIT 1;
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
GRANT INSERT ON regulator.events TO regulator_writer;
REVOKE UPDATE, DELETE, TRUNCATE ON regulator.meta, regulator.events FROM regulator_writer, regulator_reader;
"""
