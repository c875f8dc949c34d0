"""serve's loop (design §22): routing within moments of an append, and the timed duties every 10 s.

Threads, no event loop, so the door's server (controlroom.door_http) runs beside it:
- the watcher: on files, an inotify watch of `.regulator/` (watchfiles, a 30 ms debounce); on
  PostgreSQL, LISTEN on the stores' NOTIFY channel (engine.log.pg.server.follow). Either only pokes;
- the router: on each poke, folds what the signals store gained since its last pass (never the
  whole log again) and, only when a signal is unrouted, routes it inside the decide lock;
- the ticker: at once on start and every TICK_S, the route pass then the registered duties
  (engine.host.duties), leader-only ones only while this host leads;
- the leader (PostgreSQL only): claims or renews `regulator.leader` every RENEW_S
  (engine.host.leader); on files the one serve (its lock) leads.
Every write of this process takes `write_lock` (the door's writes too, and Workspace.exclusive takes
it), so they are serialized.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from datetime import datetime
from typing import Any, TextIO

from engine.base import clock
from engine.base.errors import RegulatorError
from engine.checkout.workspace import Workspace, writer_lock
from engine.commands.router import route_locked
from engine.host import leader as host_leader
from engine.host.duties import log_line, run_duties
from engine.host.watch import watch_files
from engine.log.events import STORES
from engine.read.fold import StoreReplaced, advance
from engine.read.model import State, UnitStatus
from engine.read.queries import unit_status

TICK_S = 10.0


class Host:
    """One workspace's loop. `start()` runs its threads; `stop()` ends them (leadership released)."""

    def __init__(self, ws: Workspace, *, out: TextIO | None = None, tick_s: float = TICK_S) -> None:
        self.ws = ws
        self.url = ws.url
        self.out = out or sys.stderr
        self.tick_s = tick_s
        self.write_lock = writer_lock(ws.root)  # the door's writes and the tick's take it too
        self.me = host_leader.new_holder()
        self.leader = self.url is None  # files: the one serve (its lock) leads
        self.last_tick: str | None = None
        self.units = 0
        self._route_state: State | None = None
        self._identity_size = -1
        self._noted: dict[str, int] = {}
        self._stop = threading.Event()
        self._poke = threading.Event()
        self._tick_now = threading.Event()
        self._threads: list[threading.Thread] = []

    # ---- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        runs = [("router", self._router), ("watch", self._watch), ("ticker", self._ticker)]
        if self.url is not None:
            runs.append(("leader", self._leadership))
        for name, target in runs:
            thread = threading.Thread(target=target, name=f"regulator-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        from engine.base import confine

        self._stop.set()
        self._poke.set()
        self._tick_now.set()
        confine.kill_running()  # a notify or a sensor's command under way: the ticker waits on it
        for thread in self._threads:
            thread.join(timeout=5)
        if self.url is not None and self.leader:
            with contextlib.suppress(RegulatorError):
                host_leader.release(self.url, self.me)
            self.leader = False

    def poke(self) -> None:
        """Something was appended: route what is unrouted now (the router thread does it)."""
        self._poke.set()

    # ---- routing -------------------------------------------------------------------------------
    def route_pass(self) -> int:
        """Fold what the signals store gained; route inside the decide lock only if a signal is
        unrouted. Returns how many routing records this pass appended."""
        ws = self.ws
        with self.write_lock:
            if self.url is not None:
                ws.sync()  # PostgreSQL: what every host appended, in the mirror
            state = self._folded()
            written = 0
            if state.unrouted_ids:
                with ws.exclusive():
                    written = len(route_locked(ws, state))
            self._note_sizes()
            return written

    def _folded(self) -> State:
        """The router's state, brought up to date by what the signals store gained (from the first
        byte again where the store was replaced or the identity store changed: the policy in force
        decides which person-raised signals count)."""
        ws = self.ws
        identity = ws.store("identity").size()
        state = self._route_state
        if state is None or identity != self._identity_size:
            state = State(now=clock.now())
        try:
            advance(ws, state, stores=("signals",), final=False)
        except StoreReplaced:
            state = State(now=clock.now())
            advance(ws, state, stores=("signals",), final=False)
        self._route_state, self._identity_size = state, identity
        return state

    def _note_sizes(self) -> None:
        self._noted = {name: self.ws.store(name).size() for name in STORES}

    def _router(self) -> None:
        while not self._stop.is_set():
            self._poke.wait()
            self._poke.clear()
            if self._stop.is_set():
                return
            start = time.perf_counter()
            try:
                routed = self.route_pass()
            except RegulatorError as exc:
                log_line("route", "failed", (time.perf_counter() - start) * 1000, str(exc), self.out)
                self._stop.wait(0.5)  # then the next poke, or the tick, tries again
                continue
            except Exception as exc:  # noqa: BLE001 - a bug never stops the loop: one line, then on
                log_line("route", "failed", (time.perf_counter() - start) * 1000, repr(exc), self.out)
                self._stop.wait(0.5)
                continue
            if routed:
                log_line("route", {"routed": routed}, (time.perf_counter() - start) * 1000, None, self.out)

    # ---- watching ------------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                if self.url is not None:
                    from engine.log.pg import server as pg_srv

                    pg_srv.follow(self.url, self.poke, self._stop)
                else:
                    watch_files(self.ws, self.poke, self._stop)
            except Exception as exc:  # noqa: BLE001 - the watch comes back; the tick covers the gap
                log_line("watch", "failed", 0, f"{type(exc).__name__}: {exc}", self.out)
                self._stop.wait(1.0)
            else:
                if not self._stop.is_set():
                    self._stop.wait(0.5)

    # ---- the tick ------------------------------------------------------------------------------
    def tick(self, now: datetime | None = None) -> list[dict]:
        """The route pass, then every registered duty (leader-only ones on the leader), each in
        the decide lock and logged; then one line for the tick. Never raises."""
        start = time.perf_counter()
        lines: list[dict] = []
        try:
            routed = self.route_pass()
            lines.append(
                log_line("route", {"routed": routed}, (time.perf_counter() - start) * 1000, None, self.out)
            )
        except Exception as exc:  # noqa: BLE001
            lines.append(
                log_line("route", "failed", (time.perf_counter() - start) * 1000, str(exc), self.out)
            )
        moment = now or clock.now()
        # each duty takes the decide lock (and with it write_lock) as it writes: a slow sensor or
        # notify runs outside both, never stalling the door's writes or another process's (D-240)
        lines += run_duties(self.ws, moment, leader=self.leader)
        self.units = self._count_units()
        self.last_tick = clock.iso(moment)
        outcome = {"leader": self.leader, "duties": len(lines) - 1}
        lines.append(log_line("tick", outcome, (time.perf_counter() - start) * 1000, None, self.out))
        return lines

    def _count_units(self) -> int:
        from engine.read.load import load

        try:
            state = load(self.ws, stores=("units",))
        except Exception:  # noqa: BLE001 - the count is for /healthz only
            return self.units
        return sum(1 for unit in state.units.values() if unit_status(state, unit) == UnitStatus.IN_PROGRESS)

    def _ticker(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._tick_now.wait(self.tick_s)
            self._tick_now.clear()

    # ---- leadership (PostgreSQL) ---------------------------------------------------------------
    def claim_leadership(self) -> bool:
        """Create the leader row's table where missing, then claim or renew; False on any error
        (fail closed: a host that cannot tell does not lead)."""
        assert self.url is not None
        try:
            host_leader.ensure_table(self.url)
            return host_leader.claim(self.url, self.me)
        except RegulatorError as exc:
            log_line("leader", "failed", 0, str(exc), self.out)
            return False

    def _leadership(self) -> None:
        while not self._stop.is_set():
            leads = self.claim_leadership()
            if leads != self.leader:
                self.leader = leads
                log_line("leader", "took leadership" if leads else "lost leadership", 0, None, self.out)
                if leads:
                    self._tick_now.set()  # the duties at once, not at the next tick
            self._stop.wait(host_leader.RENEW_S)

    # ---- health --------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """GET /healthz: {"leader", "lag": {store: bytes appended that serve has not looked at
        since}, "lastTick", "units": units in progress at the last tick}."""
        lag: dict[str, int] = {}
        for name in STORES:
            try:
                size = self.ws.store(name).size()
            except OSError:
                size = 0
            lag[name] = max(0, size - self._noted.get(name, 0))
        return {"leader": self.leader, "lag": lag, "lastTick": self.last_tick, "units": self.units}


def once_tick(ws: Workspace, out: TextIO | None = None) -> list[dict]:
    """`serve --once-tick`: one tick; on PostgreSQL the timed duties only if this host can take
    leadership (released again at once). What the duties raised (a sensor's signals, a recheck) is
    routed before it exits, with a second `route` line where it routed any: a running serve routes
    it on its watch within the second, and cron would otherwise leave it unrouted for a whole
    interval (an operator's review)."""
    host = Host(ws, out=out)
    if host.url is not None:
        host.leader = host.claim_leadership()
    try:
        lines = host.tick()
        start = time.perf_counter()
        try:
            routed = host.route_pass()
        except Exception as exc:  # noqa: BLE001 - logged as the tick's own route pass is
            lines.append(log_line("route", "failed", (time.perf_counter() - start) * 1000, str(exc), out))
        else:
            if routed:
                ms = (time.perf_counter() - start) * 1000
                lines.append(log_line("route", {"routed": routed, "after": "duties"}, ms, None, out))
        return lines
    finally:
        if host.url is not None and host.leader:
            with contextlib.suppress(RegulatorError):
                host_leader.release(host.url, host.me)
