"""Reading lines straight from the server, the decide lock, and LISTEN for appends."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from engine.base.errors import Refused
from engine.log.events import STORES
from engine.log.pg.connection import _message, _psycopg, _run, connect, fresh, redact
from engine.log.pg.sql import BLOCK, CHANNEL, FETCH_SQL


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
