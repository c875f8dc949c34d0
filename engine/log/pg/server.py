"""Reading lines straight from the server, the decide lock (a row lock on regulator.locks), and
LISTEN for appends."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from engine.base.errors import Refused
from engine.log.events import STORES
from engine.log.pg.connection import _denied, _message, _psycopg, _run, connect, fresh, redact
from engine.log.pg.sql import BLOCK, CHANNEL, DECIDE, FETCH_SQL, HOST_ROLE


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


# ---- the decide lock ----------------------------------------------------------------------------

LOCK_SQL = "SELECT name FROM regulator.locks WHERE name = %s FOR UPDATE"
KEEPALIVE_S = 20.0  # the holder's transaction speaks this often (idle_in_transaction_session_timeout: 60 s)
WAIT_S = 120.0  # how long a decider waits for another host's section before it gives up (exit 3)
UPGRADE = "run `regulator store upgrade` as the schema's owner"


@contextlib.contextmanager
def decide_lock(url: str) -> Iterator[None]:
    """One decider at a time across hosts: the `decide` row of regulator.locks, held FOR UPDATE in
    a transaction on a connection of its own for the exclusive section (released at its end, or
    when the process dies and the server drops its connection). A row lock needs UPDATE on the
    table, which only regulator_host holds: the reader role cannot take it, nor block a host by
    taking any advisory lock. The wait is in slices of the session's lock_timeout (5 s), up to
    WAIT_S; while held, the transaction speaks every KEEPALIVE_S so that a long section is never
    taken for an idle one (60 s)."""
    psycopg = _psycopg()
    from psycopg import errors

    conn = connect(url, "decide")
    deadline = time.monotonic() + WAIT_S
    while True:
        tx = conn.transaction()
        try:
            tx.__enter__()
            held = conn.execute(LOCK_SQL, (DECIDE,)).fetchone()
        except errors.LockNotAvailable as exc:
            with contextlib.suppress(Exception):
                tx.__exit__(type(exc), exc, None)
            if time.monotonic() < deadline:
                continue
            raise Refused(
                f"store {redact(url)}: another host has held the decide lock for more than {WAIT_S:.0f} s; "
                "nothing written"
            ) from None
        except psycopg.Error as exc:
            with contextlib.suppress(Exception):
                tx.__exit__(type(exc), exc, None)
            raise Refused(f"store {redact(url)}: {_lock_problem(conn, exc)}") from None
        if held is None:
            with contextlib.suppress(Exception):
                tx.__exit__(None, None, None)
            raise Refused(f"store {redact(url)}: regulator.locks has no {DECIDE!r} row; {UPGRADE}")
        break
    stop = threading.Event()
    keeper = threading.Thread(target=_keep_alive, args=(conn, stop), name="regulator-decide", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()
        with contextlib.suppress(Exception):
            tx.__exit__(None, None, None)


def _keep_alive(conn: Any, stop: threading.Event) -> None:
    while not stop.wait(KEEPALIVE_S):
        try:
            conn.execute("SELECT 1")
        except Exception:  # the connection is gone: so is the lock; the section's writes still chain
            return


def _lock_problem(conn: Any, exc: Exception) -> str:
    """Why the decide lock could not be taken, in words: a schema from before the lock rows, a role
    that may not lock them (the reader), or the server's own words."""
    from psycopg import errors

    if isinstance(exc, errors.UndefinedTable):
        return f"the database's schema is older than this regulator (no regulator.locks); {UPGRADE}"
    if isinstance(exc, errors.InsufficientPrivilege):
        return f"{_denied(conn, exc)}: only {HOST_ROLE} takes the decide lock"
    return _message(exc)


def decide_lock_held(url: str) -> bool:
    """Does another process hold the decide lock right now? A probe that never waits: the row is
    locked NOWAIT and let go at once. False where this role may not lock it (a reader, which
    writes nothing anyway) or the schema has no lock rows yet."""
    psycopg = _psycopg()
    from psycopg import errors

    conn = connect(url, "probe")
    try:
        with conn.transaction():
            conn.execute(LOCK_SQL + " NOWAIT", (DECIDE,))
    except errors.LockNotAvailable:
        return True
    except psycopg.Error:
        return False
    return False


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
