"""Leases that expire (design §23): heartbeats kept outside the stores, and the leader's duty that
records `lease-expired` for a lease past its time.

A lease made by `unit run` carries `expiresAt` and its `ttl`; one from before carries neither and
never expires. A heartbeat (every door call: engine.checkout.heartbeat; `unit run` calls the door while its
child lives) moves a lease's time to the beat plus its TTL; heartbeats are kept in `serve`'s memory
(ProcessHeartbeats) and, on PostgreSQL, in a row of `regulator.leases` (beat_sql), never in the log. After a restart of `serve` every lease gets one
full TTL of grace from the start (Heartbeats.started). Nothing is released by time: a lost unit is
held as before and may be dispatched again.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from engine.base import clock, ids
from engine.base.errors import Refused
from engine.checkout import heartbeat
from engine.checkout.workspace import Workspace
from engine.commands.units import seen
from engine.commands.written import LeaseExpiredEvent
from engine.host.duties import register
from engine.read.load import load
from engine.read.model import EventKind, State, UnitState, UnitStatus
from engine.read.queries import unit_status


class Heartbeats(Protocol):
    """What the lease duty asks of the heartbeats a host keeps (outside the stores)."""

    @property
    def started(self) -> datetime:
        """Since when this host keeps them: every lease gets a full TTL from here (the grace)."""
        ...

    def last(self, lease_hash: str) -> datetime | None:
        """The latest heartbeat known of the lease (its hash, as the log keeps it), or None."""
        ...


class ProcessHeartbeats:
    """The heartbeats this process's door received (engine.checkout.heartbeat: every door call is one),
    kept in its memory only: lost when `serve` stops, hence the grace from `started`."""

    def __init__(self, started: datetime) -> None:
        self._started = started

    @property
    def started(self) -> datetime:
        return self._started

    def last(self, lease_hash: str) -> datetime | None:
        return heartbeat.seen(lease_hash)


LEASES_SQL = """
CREATE TABLE IF NOT EXISTS regulator.leases (
    lease text PRIMARY KEY,
    unit text,
    expires timestamptz,
    heartbeat timestamptz NOT NULL DEFAULT clock_timestamp()
);
REVOKE ALL ON regulator.leases FROM PUBLIC;
DO $$ BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_host') THEN
        GRANT SELECT, INSERT, UPDATE ON regulator.leases TO regulator_host;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_writer') THEN
        GRANT SELECT, INSERT, UPDATE ON regulator.leases TO regulator_writer;
    END IF;
END $$;
"""
BEAT_SQL = (
    "INSERT INTO regulator.leases (lease, heartbeat) VALUES (%s, %s) "
    "ON CONFLICT (lease) DO UPDATE SET heartbeat = GREATEST(regulator.leases.heartbeat, EXCLUDED.heartbeat)"
)
LAST_SQL = "SELECT heartbeat FROM regulator.leases WHERE lease = %s"
BEAT_EVERY_S = 1.0  # a lease's beats written to PostgreSQL at most this often (a door call is one)


def beat_sql(connection: Any, lease_hash: str, at: datetime) -> None:
    """A heartbeat on PostgreSQL: the lease's row of `regulator.leases`, its time moved forward
    only (hosts beat out of order). The one statement heartbeats write."""
    connection.execute(BEAT_SQL, (lease_hash, at))


def ensure_table(url: str) -> None:
    """Create regulator.leases where it is missing (needs CREATE on the schema: its owner; one
    place, LEASES_SQL, to move into the schema's upgrade with regulator.leader)."""
    from engine.log.pg import connection as pg_connection

    def present(conn: Any) -> bool:
        return bool(conn.execute("SELECT to_regclass('regulator.leases') IS NOT NULL").fetchone()[0])

    if pg_connection._run(url, present, tx=False):
        return
    try:
        pg_connection._run(url, lambda conn: conn.execute(LEASES_SQL))
    except Refused:
        if not pg_connection._run(url, present, tx=False):
            raise


class PgHeartbeats(ProcessHeartbeats):
    """On PostgreSQL every host's door beats: each beat is written through to `regulator.leases`
    (at most once a second per lease), so the leader, whichever host it is, sees them all."""

    def __init__(self, url: str, started: datetime) -> None:
        super().__init__(started)
        self.url = url
        self._written: dict[str, float] = {}
        self._lock = threading.Lock()
        ensure_table(url)
        heartbeat.on_beat(self.record)

    def record(self, lease_hash: str, at: datetime) -> None:
        """engine.checkout.heartbeat's callback: write the beat through, throttled per lease."""
        from engine.log.pg import connection as pg_connection

        moment = time.monotonic()
        with self._lock:
            if moment - self._written.get(lease_hash, -BEAT_EVERY_S) < BEAT_EVERY_S:
                return
            self._written[lease_hash] = moment
        pg_connection._run(self.url, lambda conn: beat_sql(conn, lease_hash, at), "heartbeat")

    def last(self, lease_hash: str) -> datetime | None:
        from engine.log.pg import connection as pg_connection

        here = heartbeat.seen(lease_hash)
        row = pg_connection._run(
            self.url, lambda conn: conn.execute(LAST_SQL, (lease_hash,)).fetchone(), tx=False
        )
        there = row[0] if row else None
        return max((t for t in (here, there) if t is not None), default=None)


_KEPT: dict[tuple[Path, str | None], ProcessHeartbeats] = {}


def heartbeats_for(ws: Workspace) -> ProcessHeartbeats:
    """This process's heartbeats for the workspace, started at the first ask (serve's first tick,
    at its start)."""
    key = (ws.root, ws.url)
    found = _KEPT.get(key)
    if found is None:
        now = clock.now()
        found = _KEPT[key] = PgHeartbeats(ws.url, now) if ws.url is not None else ProcessHeartbeats(now)
    return found


def due(unit: UnitState, beats: Heartbeats) -> datetime | None:
    """When the unit's current lease expires, or None if it never does (no `expiresAt`: a lease
    from before; or one whose recorded time cannot be read, which keeps it: fail closed)."""
    if unit.expires_at is None or unit.ttl is None or not unit.lease:
        return None
    recorded = clock.moment(unit.expires_at)
    if recorded is None:
        return None
    ttl = timedelta(seconds=unit.ttl)
    last = beats.last(unit.lease)
    times = [recorded, beats.started + ttl] + ([last + ttl] if last is not None else [])
    return max(times)


def expiring(state: State, now: datetime, beats: Heartbeats) -> list[tuple[UnitState, datetime]]:
    """The in-progress units whose lease is past its time and whose result is not recorded (an
    awaiting-close unit never expires), in id order, each with the time its lease expired."""
    found = []
    for unit_id in sorted(state.units):
        unit = state.units[unit_id]
        if unit.result is not None or unit_status(state, unit) != UnitStatus.IN_PROGRESS:
            continue
        try:
            when = due(unit, beats)
        except (OverflowError, TypeError, ValueError):  # no time a host wrote: it never expires (fail
            continue  # closed), and the other units' leases expire as ever
        if when is not None and when <= now:
            found.append((unit, when))
    return found


def expire_leases_locked(ws: Workspace, now: datetime, beats: Heartbeats) -> list[dict[str, Any]]:
    """Inside the decide lock: one `lease-expired` host event per lease past its time, its id
    derived from the lease, so a run repeated (a retry, two hosts, a restart) writes once."""
    state = load(ws)
    written = []
    for unit, when in expiring(state, now, beats):
        event: LeaseExpiredEvent = {
            "kind": EventKind.LEASE_EXPIRED.value,
            "id": ids.expiry_id(unit.lease or ""),
            "unit": unit.id,
            "leaseHash": unit.lease,
            "expiredAt": clock.iso(when),
            "at": clock.iso(now),
            "seen": seen(ws, state),
        }
        written.append(ws.store("units").append(event))
    return written


def expire_leases(ws: Workspace, now: datetime, beats: Heartbeats) -> list[dict[str, Any]]:
    """The lease duty on its own, taking the decide lock (tests, tools); serve's tick runs it
    through `lease_duty`, already inside the lock."""
    with ws.exclusive():
        return expire_leases_locked(ws, now, beats)


def lease_duty(ws: Workspace, now: datetime) -> object:
    """The timed duty of lease expiry (design §22, §23), as serve's tick runs it (in the lock)."""
    written = expire_leases_locked(ws, now, heartbeats_for(ws))
    return {"expired": [event["unit"] for event in written]}


def heartbeat_duty(ws: Workspace, now: datetime) -> object:
    """On every host, leader or not: keep this host's heartbeats from its first tick (the grace's
    start) and, on PostgreSQL, write its door's beats through to `regulator.leases`, so the leader,
    whichever host it is, sees the beats every host received."""
    heartbeats_for(ws)
    return None


register("lease-heartbeats", heartbeat_duty, leader_only=False)
register("lease-expiry", lease_duty)
