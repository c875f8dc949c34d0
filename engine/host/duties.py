"""The timed duties of `serve`'s tick (design §22): a small registry of named callables.

A duty is `run(ws, now) -> outcome`: it looks at the stores at `now` and writes what is due through
the same engine functions as the CLI, with deterministic event ids, so that a duty run twice (a
retry, two hosts, a restart) writes once. The tick runs each registered duty in registration order,
**inside the decide lock** (`ws.exclusive()`): a duty writes through the `*_locked` engine functions
(e.g. `engine.commands.router.route_locked`) and never takes the lock again. A duty that runs
something slow (a sensor's command, a notify) is registered `locked=False` and takes the lock itself
only around its writes (`engine.commands.duty.deciding`), so that nothing outside the host waits on
it (D-240). Its outcome is any JSON value
(None reads "ok"); it is logged as one JSON line. A duty that raises is logged as one line
(outcome "failed" and the error) and run again on the next tick; it never stops the loop or the
duties after it.

To add a duty (the lease expiry of §23, stale evidence, deadlines and sensors of §24), register it
once, at import of the module that defines it:

    from engine.host.duties import register

    def expire_leases(ws: Workspace, now: datetime) -> object:
        ...                      # inside ws.exclusive(): append what is due, return what was done
        return {"expired": n}

    register("lease-expiry", expire_leases)

and name that module in DUTY_MODULES below, so `serve` imports it. `leader_only=True` (the default)
runs it only on the host that holds leadership (PostgreSQL: the `regulator.leader` row; files: the
one `serve`); `leader_only=False` runs it on every host (routing, which is exactly-once anyway).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import socket
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

import msgspec

from engine.base import clock
from engine.base.errors import RegulatorError
from engine.checkout.workspace import Workspace

Duty = Callable[[Workspace, datetime], object]

# the modules whose import registers duties (each calls register() at import); serve imports them
DUTY_MODULES: list[str] = ["engine.host.leases", "engine.host.world"]


class Registered(msgspec.Struct, frozen=True):
    name: str
    run: Duty
    leader_only: bool = True
    locked: bool = True  # run inside the decide lock; False: the duty takes it around its writes


_DUTIES: dict[str, Registered] = {}


def register(name: str, run: Duty, *, leader_only: bool = True, locked: bool = True) -> None:
    """Add a duty to every tick (a second registration of a name replaces the first)."""
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"a duty's name is one word: {name!r}")
    _DUTIES[name] = Registered(name, run, leader_only, locked)


def unregister(name: str) -> None:
    _DUTIES.pop(name, None)


def registered() -> list[Registered]:
    """The duties, in registration order, their modules imported first."""
    for module in DUTY_MODULES:
        importlib.import_module(module)
    return list(_DUTIES.values())


HOST = socket.gethostname()


def log_line(
    duty: str, outcome: object, ms: float, error: str | None = None, out: TextIO | None = None
) -> dict:
    """One JSON line on stderr per duty run: {"at", "duty", "outcome", "ms", "host"} (and "error")."""
    line: dict[str, Any] = {
        "at": clock.iso(clock.now()),
        "duty": duty,
        "outcome": outcome,
        "ms": round(ms, 1),
        "host": HOST,
    }
    if error is not None:
        line["error"] = error
    stream = out or sys.stderr
    try:
        stream.write(json.dumps(line, default=str) + "\n")
        stream.flush()
    except (OSError, ValueError):  # a closed stderr never stops the loop
        pass
    return line


def run_one(ws: Workspace, duty: Registered, now: datetime) -> dict:
    """Run one duty (inside the decide lock unless it takes the lock itself); never raises: its
    outcome or its failure, logged."""
    start = time.perf_counter()
    try:
        with ws.exclusive() if duty.locked else contextlib.nullcontext():
            outcome = duty.run(ws, now)
    except RegulatorError as exc:
        return log_line(duty.name, "failed", (time.perf_counter() - start) * 1000, str(exc))
    except Exception as exc:  # a bug in a duty: the whole trace on stderr, then the one line
        traceback.print_exc(file=sys.stderr)
        return log_line(
            duty.name, "failed", (time.perf_counter() - start) * 1000, f"{type(exc).__name__}: {exc}"
        )
    try:
        json.dumps(outcome)
    except (TypeError, ValueError):
        outcome = str(outcome)
    return log_line(duty.name, "ok" if outcome is None else outcome, (time.perf_counter() - start) * 1000)


def run_duties(ws: Workspace, now: datetime, *, leader: bool) -> list[dict]:
    """One tick's duties: every registered duty (the leader-only ones only on the leader), each at
    the tick's time or the clock's, the later: a duty after a slow one (a notify's 30 s, a sensor's
    command) stamps what it writes after what that one wrote, never before it (an adversarial
    review: the store refused the sensors duty's run, stamped before the escalation's page)."""
    return [
        run_one(ws, duty, max(now, clock.now())) for duty in registered() if leader or not duty.leader_only
    ]
