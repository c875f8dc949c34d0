"""Leases that expire (SPEC §23): heartbeats kept outside the stores, and the leader's duty that
records `lease-expired` for a lease past its time.

A lease made by `unit run` carries `expiresAt` and its `ttl`; one from before carries neither and
never expires. A heartbeat (a door call, `unit run`'s beat) moves a lease's time to the beat plus
its TTL; heartbeats are kept in `serve`'s memory (MemoryHeartbeats) and, on PostgreSQL, in a row of
`regulator.leases` (beat_sql), never in the log. After a restart of `serve` every lease gets one
full TTL of grace from the start (Heartbeats.started). Nothing is released by time: a lost unit is
held as before and may be dispatched again.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any, Protocol

from engine import clock, ids
from engine.load import load
from engine.model import EventKind, State, UnitState, UnitStatus
from engine.queries import unit_status
from engine.workspace import Workspace


class Heartbeats(Protocol):
    """Where a host keeps the heartbeats of leases (outside the stores)."""

    @property
    def started(self) -> datetime:
        """Since when this host keeps them: every lease gets a full TTL from here (the grace)."""
        ...

    def beat(self, lease_hash: str, at: datetime) -> None:
        """The lease (its hash, as the log keeps it) is alive at `at`."""
        ...

    def last(self, lease_hash: str) -> datetime | None:
        """The latest heartbeat known of the lease, or None."""
        ...


class MemoryHeartbeats:
    """Heartbeats in this process's memory (`serve` on files): lost with it, hence the grace."""

    def __init__(self, started: datetime | None = None) -> None:
        self._started = started or clock.now()
        self._beats: dict[str, datetime] = {}
        self._lock = threading.Lock()

    @property
    def started(self) -> datetime:
        return self._started

    def beat(self, lease_hash: str, at: datetime) -> None:
        with self._lock:
            before = self._beats.get(lease_hash)
            if before is None or at > before:
                self._beats[lease_hash] = at

    def last(self, lease_hash: str) -> datetime | None:
        with self._lock:
            return self._beats.get(lease_hash)


BEAT_SQL = (
    "INSERT INTO regulator.leases (lease_hash, beat_at) VALUES (%s, %s) "
    "ON CONFLICT (lease_hash) DO UPDATE SET beat_at = GREATEST(regulator.leases.beat_at, EXCLUDED.beat_at)"
)
LAST_SQL = "SELECT beat_at FROM regulator.leases WHERE lease_hash = %s"


def beat_sql(connection: Any, lease_hash: str, at: datetime) -> None:
    """A heartbeat on PostgreSQL: one row of `regulator.leases` per lease, its time moved forward
    only (hosts may beat out of order). The only SQL heartbeats run (`regulator store roles`
    grants it to `regulator_host`)."""
    connection.execute(BEAT_SQL, (lease_hash, at))


class PgHeartbeats:
    """Heartbeats kept by this host's memory and written through to `regulator.leases`, so the
    leader (another host, maybe) sees the beats every host received."""

    def __init__(self, connect: Any, started: datetime | None = None) -> None:
        self._memory = MemoryHeartbeats(started)
        self._connect = connect  # () -> a psycopg connection (autocommit) of the host's role

    @property
    def started(self) -> datetime:
        return self._memory.started

    def beat(self, lease_hash: str, at: datetime) -> None:
        self._memory.beat(lease_hash, at)
        with self._connect() as connection:
            beat_sql(connection, lease_hash, at)

    def last(self, lease_hash: str) -> datetime | None:
        here = self._memory.last(lease_hash)
        with self._connect() as connection:
            row = connection.execute(LAST_SQL, (lease_hash,)).fetchone()
        there = row[0] if row else None
        return max((t for t in (here, there) if t is not None), default=None)


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
        when = due(unit, beats)
        if when is not None and when <= now:
            found.append((unit, when))
    return found


def expire_leases(ws: Workspace, now: datetime, beats: Heartbeats) -> list[dict[str, Any]]:
    """The timed duty of lease expiry (SPEC §22, §23), run by the leader's tick: under the decide
    lock, one `lease-expired` host event per lease past its time, its id derived from the lease,
    so a run repeated (a retry, two hosts, a restart) writes once. Returns what it wrote."""
    written = []
    with ws.exclusive():
        state = load(ws)
        for unit, when in expiring(state, now, beats):
            event = {
                "kind": EventKind.LEASE_EXPIRED,
                "id": ids.expiry_id(unit.lease or ""),
                "unit": unit.id,
                "leaseHash": unit.lease,
                "expiredAt": clock.iso(when),
                "at": clock.iso(now),
            }
            written.append(ws.store("units").append(event))
    return written
