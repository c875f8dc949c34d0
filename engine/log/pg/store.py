"""A store kept by the PostgreSQL server (PgStore): the same line as the file store would write,
appended in one round trip, chained to the server's last line."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.base import clock, ids
from engine.base.errors import BadInput, Refused
from engine.log.pg.connection import _denied, _message, _pause, _psycopg, _run, connect, redact
from engine.log.pg.mirror import mirror
from engine.log.pg.server import server_bytes
from engine.log.pg.sql import TO_SYSTEM_SQL
from engine.log.store import (
    GENESIS,
    MAX_LINE_BYTES,
    ReadResult,
    Store,
    _check_time,
    canonical,
    check_size,
    event_hash,
)
from engine.log.store import line_text as checked_line

# ---- the store ----------------------------------------------------------------------------------


class PgStore(Store):
    """A store kept by the server; reads go through the mirror file at `path`."""

    def __init__(self, url: str, folder: Path, name: str, *, mirrored: bool = True) -> None:
        super().__init__(Path(folder) / f"{name}.ndjson")
        self.url = url
        self.store = name
        self.mirror = mirror(url, Path(folder))
        self.mirrored = mirrored  # False: a writer that never reads (it keeps no mirror)

    def append(self, event: Mapping[str, Any], *, assign_id: bool = False) -> dict[str, Any]:
        """The same line as the file store would write, chained to the server's last line of this
        store, in one transaction. No lock: an append that another took the line number of first
        is tried again on the new tail (engine.log.pg.connection._run)."""
        name = self.store
        file_name = self.name
        check_size(file_name, event)

        def work(conn: Any) -> tuple[dict, int]:
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
            line = checked_line(file_name, written)
            if not clock.pinned() and name == "identity":  # a decision may have moved the clock (§26)
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
        and its hashed body cut where `prev` goes, the server reads the tail, joins the pieces,
        hashes them, inserts (the trigger checks the line as ever) and commits, in one simple
        query. Another append that took the same line number first makes the insert fail (the
        primary key; or a prev the trigger finds is no longer the last line): the query is sent
        again, reading the new tail, a few times, before the caller's slower path is left to it."""
        check_size(self.name, event)
        trip = _one_trip(self.store, self.name, event, unchanged)
        if trip is None:
            return None
        params, written = trip
        psycopg = _psycopg()
        from psycopg import errors

        conn = connect(self.url)
        pid = conn.info.backend_pid
        try:
            cursor = psycopg.ClientCursor(conn)
            query, bound = _one_trip_query(conn, params)
            for attempt in range(ONE_TRIP_TRIES):
                try:
                    try:
                        cursor.execute(query, bound)
                    except errors.InvalidSqlStatementName:  # a new connection: prepare it (nothing written)
                        conn.execute(ONE_TRIP_PREPARE)
                        cursor.execute(query, bound)
                except (errors.UniqueViolation, errors.SerializationFailure):
                    _pause(attempt)  # another append took the line: again, on the new tail
                    continue
                break
            else:
                return None
            while cursor.nextset():  # the last statement's result: the INSERT's
                pass
            row = cursor.fetchone()
        except errors.CheckViolation:
            return None  # append() says why (and stamps again an `at` that waited too long)
        except errors.InsufficientPrivilege as exc:
            raise Refused(f"store {redact(self.url)}: {_denied(conn, exc)}") from None
        except psycopg.OperationalError as exc:
            if not conn.broken:  # the server refused it (a timeout, say), the connection is fine
                raise Refused(f"store {redact(self.url)}: {_message(exc)}; nothing written") from None
            try:
                row = _written_after_all(self.url, self.store, written["id"], pid)
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
        self,
        offset: int = 0,
        line: int = 0,
        *,
        final: bool = True,
        shape: type | tuple | None = None,
        limit: int | None = None,
    ) -> ReadResult:
        """From the mirror, brought up to date first (from its last sequence number), its bytes
        proven to be the server's (Mirror.check) or fetched again."""
        self.mirror.prepare()
        before = self.mirror.before(self.store)
        self.mirror.sync((self.store,))
        self.mirror.check(self.store, offset, line, before)
        return super().read(offset, line, final=final, shape=shape, limit=limit)

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


# one round trip: the line built around the store's tail and inserted, in one simple query (one
# transaction); the INSERT is a statement prepared once per connection
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
ONE_TRIP_TRIES = 8  # conflicts the one-trip query is sent again for, before append() takes over
ONE_TRIP_SQL = (  # the plan made once serves every line (a custom plan costs as much again)
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true); "
    f"EXECUTE {ONE_TRIP} (%(store)s, %(h1)s, %(h2)s, %(l1)s, %(l2)s, %(l3)s, %(at)s, %(sent)s, "
    "%(stores)s::text[], %(tails)s::text[])"
)
_CUT = "regulator-cut-" + os.urandom(16).hex()  # where prev and hash go: in no line by chance


def _one_trip(
    name: str, file_name: str, event: dict, unchanged: Mapping[str, str]
) -> tuple[dict[str, object], dict] | None:
    """The parameters of append_unchanged's query, and the line as written but for prev and
    hash; None where one trip cannot write what append() would (design §15.3, §18): a pinned
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
    if len(line.encode("utf-8")) + 2 * 64 > MAX_LINE_BYTES:  # perhaps over with prev and hash: append() says
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


def _written_after_all(url: str, name: str, event_id: str, pid: int) -> tuple[int, str, str] | None:
    """The connection broke during a one-trip append: whether the line went in after all. Once the
    server's session that ran it (`pid`) has ended (its append committed or undone for good; its
    statement_timeout bounds the wait), the store's last lines are searched for the line's id,
    which is random and first on the line."""

    def ended(conn: Any) -> bool:
        return not conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()

    deadline = time.monotonic() + GONE_S
    while not _run(url, ended, tx=False):
        if time.monotonic() > deadline:
            raise Refused(f"the server's session {pid} that ran it has not ended after {GONE_S:.0f} s")
        time.sleep(0.05)

    def work(conn: Any) -> tuple[int, str, str] | None:
        return conn.execute(
            "SELECT n, prev, hash FROM regulator.events WHERE store = %s AND n > coalesce((SELECT max(n)"
            " FROM regulator.events WHERE store = %s), 0) - 10000 AND starts_with(line, %s)",
            (name, name, '{"id":' + json.dumps(event_id) + ","),
        ).fetchone()

    return _run(url, work, tx=False)


GONE_S = 40.0  # longer than any statement runs (the sessions' statement_timeout, 30 s)


def _restamped(event: Mapping[str, Any]) -> object:
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
    """The canonical line (engine.log.store.canonical_line) as text, without its newline."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))
