"""`unit run`'s heartbeats (design §23): its lease beaten through serve's door while the child lives,
at once when units.ndjson names the unit, and the log's own word on the lease asked at every beat,
so that a demote or an expiry stops the run whatever the door answers (D-336)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import TYPE_CHECKING, Any

import msgspec

from engine.base import clock
from engine.base.errors import LeaseRefused, Refused, RegulatorError
from engine.checkout.workspace import Lease, Workspace

if TYPE_CHECKING:
    from collections.abc import Callable

    from engine.doors.door import Kept

BEAT_TIMEOUT_S = 10.0  # one heartbeat call to the door
NUDGE_GAP_S = 1.0  # a beat units.ndjson's lines ask for comes at most this often
RETRY_S = 2.0  # while the door does not answer, it is asked again this often
_GAINED_MAX = 1 << 20  # bytes of units.ndjson read for the unit's name at once; more: look
_RATIONALE_SHOWN = 200  # characters of a demote's rationale in the run's last line


class Beats:
    """One run's heartbeats: `watch` (files only), `judge` (the log's word) and `run` (the door's
    heartbeat) are its threads; `refused` set when the lease is over (the log says so, or the door
    answers 401), `done` set by the run when its child is gone."""

    def __init__(
        self, ws: Workspace, unit: str, door: str, token: str, ttl: int | None, say: Callable[[str], None]
    ) -> None:
        self.ws, self.unit, self.door, self.token, self.ttl, self.say = ws, unit, door, token, ttl, say
        self.refused = threading.Event()
        self.done = threading.Event()
        self.nudge = threading.Event()  # units.ndjson named the unit (or the run ended): look now
        self.named = b'"unit":' + msgspec.json.encode(unit)  # `"unit":"b1"`, as every line names it
        self.units_read = 0  # how much of units.ndjson the watch has looked at
        self._kept: Kept | None = None

    def every(self) -> float:
        ttl = self.ttl
        return 30.0 if ttl is None else max(0.5, min(ttl / 3, 30.0))

    def start(self) -> list[threading.Thread]:
        """The watch (files only) first, so that a demote after the first look finds it made; the
        log's judge and the door's heartbeat on threads of their own, so that a door call in flight
        (up to its timeout, where a unit keeps its lease's gate nearly full) never delays the log's
        word (an adversarial review: a stop 6 s late)."""
        threads = []
        if self.ws.url is None:
            with contextlib.suppress(OSError):
                self.units_read = (self.ws.state_dir / "units.ndjson").stat().st_size
            threads.append(threading.Thread(target=self.watch, name="units-watch", daemon=True))
        threads.append(threading.Thread(target=self.judge, name="lease-judge", daemon=True))
        threads.append(threading.Thread(target=self.run, name="heartbeat", daemon=True))
        for thread in threads:
            thread.start()
        return threads

    def stop(self, threads: list[threading.Thread]) -> None:
        """The heartbeat ends with its call in flight (at most the client's timeout): a daemon
        thread still inside the HTTP client when the interpreter finalizes can crash it (a SIGSEGV
        at exit was seen once in the suite, after the result was recorded)."""
        self.done.set()
        self.nudge.set()
        for thread in threads:
            thread.join(timeout=BEAT_TIMEOUT_S + 1)

    # ---- the heartbeat -----------------------------------------------------------------------------
    def judge(self) -> None:
        """The log's word on the lease (`lease_over`: a person demoted the unit, closed it or decided
        on it, the leader expired its lease), asked at every beat's time and at once when the watch
        says a line names the unit (at most once a second): over is a stop, whatever the door
        answers. A unit that fills its own lease's gate at the door gets the heartbeat a 429, never
        the 401 (an adversarial review of D-336). Never ends on an error: a judge that died would
        leave a demote to a door the unit keeps busy."""
        while not self.done.is_set():
            if self.lease_over():
                self.refused.set()
                return
            looked = time.monotonic()
            self.nudge.wait(self.every())
            self.nudge.clear()
            self.done.wait(max(0.0, looked + NUDGE_GAP_S - time.monotonic()))

    def run(self) -> None:
        """The door's heartbeat (a door call is one; a 401 means the lease is gone). A door that stops
        answering (serve stopped, restarting, or unable to read its stores) is said once, asked again
        every RETRY_S, and its return said once. Where serve runs again with another door, the
        heartbeat goes there (the lease kept, or its 401 stopping the run), while the unit, which
        keeps the door it was given, cannot reach it."""
        from engine.doors.client import DoorClient

        client = DoorClient(self.door, self.token, timeout=BEAT_TIMEOUT_S)
        unanswered = False
        moved: str | None = None
        while not self.done.is_set() and not self.refused.is_set():
            silence = self.beat(client)
            if self.refused.is_set():
                return
            if silence is not None and not unanswered and not self.done.is_set():
                self.say(self.unanswered(silence))
            elif silence is None and unanswered:
                self.say(f"{self.unit}: serve's door answers its heartbeat again")
            unanswered = silence is not None
            elsewhere = self.door_elsewhere() if silence is not None and not self.done.is_set() else None
            if elsewhere is not None:
                plain = elsewhere.startswith(
                    "http://"
                )  # anyone may have taken its port: no token there (D-259)
                if elsewhere != moved:
                    self.say(
                        f"warning: {self.unit}: serve runs again, with its door at {elsewhere}; this run's "
                        f"unit was given {self.door}, which no serve answers: start serve with "
                        f"--listen {self.door} (or stop this run and run the unit again); "
                        + (
                            "no heartbeat goes to a plain TCP door (anyone may have taken its port)"
                            if plain
                            else "its lease's heartbeats go to the new door meanwhile"
                        )
                    )
                moved = elsewhere
                if not plain:
                    self.beat(DoorClient(elsewhere, self.token, timeout=BEAT_TIMEOUT_S))
                    if self.refused.is_set():
                        return
            self.done.wait(min(self.every(), RETRY_S) if unanswered else self.every())

    def beat(self, client: Any) -> str | None:
        """One heartbeat: None where the door answered (a tool's error or bad input is an answer),
        else why not; a 401 (the lease is gone) sets `refused`, which stops the run."""
        from engine.doors.client import UNAUTHORIZED

        try:
            client.status()
        except Refused as exc:  # the door's own refusals and a door that cannot be reached
            if str(exc) == UNAUTHORIZED:
                self.refused.set()
                return None
            return str(exc)
        except RegulatorError:
            pass
        except Exception as exc:  # noqa: BLE001 - the heartbeat never dies of what a door answers
            return f"{type(exc).__name__}: {exc}"
        return None

    def lease_over(self) -> bool:
        """The log says the lease is not the unit's current one: judged as serve's door judges each
        call (engine.doors.door.Kept: the units store folded as it grew, then check_lease), in this
        process. A log that cannot be read now says nothing: the door's answer decides."""
        from engine.doors.door import Kept
        from engine.read.order import StoreReplaced

        for _ in range(2):  # a store replaced under the fold (StoreReplaced twice): read it again whole
            if self._kept is None:
                lease = Lease(self.unit, self.token, self.ws.root, "", self.ws.state_dir / "unit-run.lease")
                self._kept = Kept(self.ws, lease)
            try:
                self._kept.refresh(sync=self.ws.url is not None)
            except LeaseRefused:
                return True
            except StoreReplaced:
                self._kept = None
                continue
            except Exception:  # noqa: BLE001 - unreadable now (an adversarial review: a store renamed
                # under the fold killed the thread, and no demote stopped the run): the door decides
                self._kept = None
                return False
            return False
        return False

    def unanswered(self, why: str) -> str:
        ttl = self.ttl
        lapse = (
            "its lease does not lapse (--ttl none)"
            if ttl is None
            else f"a running serve that takes no call on the lease for {clock.format_duration(ttl)} lets it "
            "lapse (a serve started again counts from its start), and the run then stops its command"
        )
        return (
            f"warning: {self.unit}: serve's door did not answer its heartbeat ({why}): the unit's own door "
            f"calls fail until it does; {lapse}; a demote stops the run meanwhile"
        )

    def door_elsewhere(self) -> str | None:
        """The door of a serve that runs now where it is not this run's (started again on another
        --listen): its calls and heartbeats can never reach it."""
        from engine.host.instance import running

        try:
            info = running(self.ws)
        except (OSError, RegulatorError):
            return None
        door = info.get("door") if info else None
        return door if isinstance(door, str) and door != self.door else None

    # ---- the watch ---------------------------------------------------------------------------------
    def watch(self) -> None:
        """units.ndjson gained a line naming the unit (a demote, a lease released or expired, a
        decision): the beat comes at once, so that the run stops within moments of its lease's end,
        not at the next beat (up to 30 s later). On files only: on PostgreSQL each run would hold a
        LISTEN connection of the server's few. The periodic beat stays the guarantee: a watch that
        cannot be made (inotify's limits) is said once and leaves it."""
        from engine.host.watch import watch_files

        try:
            # and once a second without a change: a line appended before the watch was armed (a
            # loaded machine takes seconds to arm it) is found by its size (a decision in the suite)
            watch_files(self.ws, self.units_changed, self.done, stores=("units",), idle=True)
        except Exception as exc:  # noqa: BLE001 - the periodic beat covers what the watch would
            self.say(
                f"warning: {self.unit}: units.ndjson cannot be watched ({type(exc).__name__}: {exc}): a "
                f"demote stops this run at its next heartbeat (within {clock.format_duration(round(self.every()))})"
            )

    def units_changed(self) -> None:
        """Look only where the store gained a line naming this run's unit (`"unit":"b1"`): another
        unit's events wake no run (a unit writing as fast as its budget allows cannot make every run
        fold the log and call the door). A byte test of what the store gained, never a judgement
        (`lease_over` is that); a store that shrank, or gained more than one read, counts as naming it."""
        from engine.log.files import open_regular

        try:
            with open(open_regular(self.ws.state_dir / "units.ndjson"), "rb") as f:  # never a FIFO's wait
                size = os.fstat(f.fileno()).st_size
                if size < self.units_read or size - self.units_read > _GAINED_MAX:
                    found = True
                else:
                    f.seek(self.units_read)
                    found = self.named in f.read(size - self.units_read)
        except (OSError, RegulatorError):
            size, found = 0, True
        self.units_read = size
        if found:
            self.nudge.set()


def ended_by(ws: Workspace, unit_id: str, lease_hash: str) -> str:
    """What the log says ended a run's lease, for the run's last line: a person's demote or decision
    (who, when, why), a close, or the leader's expiry, the first after the dispatch that made the lease. Its
    texts as the store holds them: the command's error line is escaped whole where it is printed."""
    from engine.read.load import load
    from engine.read.queries import history

    try:
        state = load(ws, stores=("units",))
        unit = state.units.get(unit_id)
        events = history(state, unit) if unit is not None else []
    except RegulatorError:
        events = []
    ours = False
    for event in events:
        kind = event.get("kind")
        if kind == "dispatch":
            ours = event.get("leaseHash") == lease_hash
        elif not ours or "uncounted" in event:
            continue
        elif kind == "demote":
            return f"{event.get('by')} demoted {unit_id} at {event.get('at')}: {_why(event)}"
        elif kind == "decision":
            return f"{event.get('by')} decided {event.get('action')} for {unit_id} at {event.get('at')}: {_why(event)}"
        elif kind == "close":
            return f"{unit_id} was closed at {event.get('at')} (`regulator unit close`)"
        elif kind == "lease-expired":
            return f"it expired at {event.get('at')}: no heartbeat reached serve for its TTL"
    return "it is not the unit's current lease any more"


def _why(event: dict[str, Any]) -> str:
    why = str(event.get("rationale") or "")
    return why if len(why) <= _RATIONALE_SHOWN else why[:_RATIONALE_SHOWN] + "…"
