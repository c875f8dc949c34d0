"""serve's door, the engine's half (design §22): a bearer lease token to the unit whose current
lease it is, and one engine.doors.api.UnitDoor per lease, kept between calls.

The door hashes the token (engine.commands.actors.lease_hash: the log keeps only hashes) and looks for the
unit whose current lease has that hash; none, and the caller answers 401 and writes nothing. The
unit id always comes from the lease found, never from the request. A door kept for a lease is
checked again on every request, so a lease closed, demoted or replaced stops working at once. Every
request that passes is a heartbeat (engine.checkout.heartbeat). A lease whose `unit run` is over
(engine.checkout.runs: its child exited, or the run died) is refused too, though the log keeps it current.

Concurrency: requests of different units run at once; the calls of one lease take turns on its
door (each keeps its reads, engine.doors.door.Kept, for one thread at a time); writes take `write_lock`,
which serve's router and tick take too, so every write of this process is serialized.
"""

from __future__ import annotations

import threading

import msgspec

from engine.base.errors import LeaseRefused, RegulatorError
from engine.checkout import heartbeat, runs
from engine.checkout.workspace import LEASE_FILE, Lease, Workspace, writer_lock
from engine.commands.actors import lease_hash
from engine.doors.api import UnitDoor
from engine.doors.door import Reads
from engine.read.load import load
from engine.read.model import EventKind, State
from engine.read.rules import lease_current

TOKEN_MAX = 512  # characters: a lease token is 43; anything much longer is not one


class Session(msgspec.Struct):
    """One lease's door, and the lock its calls take turns on."""

    door: UnitDoor
    lease_hash: str
    lock: threading.Lock = msgspec.field(default_factory=threading.Lock)

    @property
    def unit(self) -> str:
        return self.door.unit


class Unavailable(RegulatorError):
    """The stores cannot be read now: the door cannot tell whether the token is a lease (503)."""


def current_unit(state: State, hashed: str) -> str | None:
    """The unit whose current lease has this hash (in progress), or None."""
    for unit in state.units.values():
        if unit.lease == hashed and lease_current(state, unit.id, hashed):
            return unit.id
    return None


def lease_of(ws: Workspace, state: State, unit_id: str, token: str) -> Lease:
    """The Lease a lease file would hold for this unit's current lease (its dispatch's worktree)."""
    unit = state.units[unit_id]
    hashed = lease_hash(token)
    leased_at = ""
    for event in reversed(state.source.events(unit.history)):
        if event.get("kind") == EventKind.DISPATCH and event.get("leaseHash") == hashed:
            leased_at = str(event.get("at") or "")
            break
    worktree = ws.root / unit.worktree if unit.worktree else ws.root
    return Lease(
        unit=unit_id, lease=token, workspace=ws.root, leased_at=leased_at, path=worktree / LEASE_FILE
    )


def plausible(token: str | None) -> bool:
    """Could this be a lease token at all (checked before anything is looked up)?"""
    return (
        bool(token)
        and len(token or "") <= TOKEN_MAX
        and (token or "").isascii()
        and (token or "").isprintable()
    )


class HostDoor:
    """The door's sessions for one workspace."""

    def __init__(self, ws: Workspace, write_lock: threading.RLock | None = None) -> None:
        self.ws = ws
        self.write_lock = write_lock or writer_lock(ws.root)
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()  # the sessions table
        self._opening = threading.Lock()  # one fold of the units store at a time for new tokens
        self._misses: tuple[object, set[str]] = (None, set())  # (units store as folded, hashes not found)
        self._units: State | None = None  # the units store as _open last folded it, brought up to date
        self.reads = Reads()  # the read model every session's status and obligations answer from

    def sessions(self) -> int:
        with self._lock:
            return len(self._sessions)

    def authenticate(self, token: str | None) -> Session | None:
        """The session of the lease this token is the current lease of, checked now; None: not a
        lease (401). Unavailable: the stores cannot be read (the door cannot tell)."""
        if token is None or not plausible(token):
            return None
        hashed = lease_hash(token)
        with self._lock:
            session = self._sessions.get(hashed)
        if session is None:
            session = self._open(token, hashed)
            if session is None:
                return None
        else:
            try:
                with session.lock:
                    session.door.check()
            except LeaseRefused:  # not current, or its `unit run` over or elsewhere (check_lease)
                self._drop(hashed)
                return None
            except RegulatorError as exc:
                state = session.door._kept.state
                if state is not None and current_unit(state, hashed) is None:
                    self._drop(hashed)
                    return None
                raise Unavailable(str(exc)) from None
        heartbeat.beat(hashed)
        return session

    def _drop(self, hashed: str) -> None:
        with self._lock:
            self._sessions.pop(hashed, None)
        heartbeat.forget(hashed)

    def _open(self, token: str, hashed: str) -> Session | None:
        with self._opening:
            with self._lock:
                found = self._sessions.get(hashed)
            if found is not None:
                return found
            ws = self.ws
            try:
                ws.sync()  # PostgreSQL: what every host has appended, in the mirror
                key = ws.store("units").size()
                if self._misses[0] == key and hashed in self._misses[1]:
                    return None
                # what the units store gained since the last token this door looked up, folded onto
                # that (a fold from the first byte for each unknown token let any local account
                # that floods the socket with made-up tokens hold every token check behind it: an
                # adversarial review, 40-100 times slower calls for every unit on a 77 MB store)
                # final=False: a last line still being written waits to be read whole (as the
                # door's other reads; folded as final, a dispatch half-written was skipped for good
                # and its lease's token refused until serve restarted: an adversarial review)
                state = self._units = load(ws, stores=("units",), start=self._units, final=False)
            except RegulatorError as exc:
                self._units = None  # read again from the first byte next time
                raise Unavailable(str(exc)) from None
            unit_id = current_unit(state, hashed)
            if unit_id is not None and runs.elsewhere(ws, state.units[unit_id].run_on):
                unit_id = None  # another host's `unit run` runs it: only that host's door answers it
            if unit_id is None:
                if self._misses[0] != key:
                    self._misses = (key, set())
                if len(self._misses[1]) < 10_000:
                    self._misses[1].add(hashed)
                return None
            try:
                door = UnitDoor.bound(ws, lease_of(ws, state, unit_id, token), self.reads)
            except RegulatorError:
                return None  # not current by the time the door read it again
            session = Session(door, hashed)
            with self._lock:
                self._sessions[hashed] = session
            return session
