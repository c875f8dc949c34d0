"""One pass over the obligations: the open ones in the fold's order, how many block, are stale and
overdue, and every unit they name (the room's header counts, its obligations view's keys and its unit
column's width, asked together on every change: one loop, not three, D-333)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from engine.read.deadlines import Deadlines
from engine.read.model import Obligation, ObligationStatus

_OPEN = ObligationStatus.OPEN  # bound once: an enum member read from its class costs ~0.1 µs


class Open(NamedTuple):
    """What `open_pass` found."""

    keys: list[str]  # the open obligations' ids, in the fold's order
    blocking: int  # open ones that block
    stale: int  # open ones whose signal has expired (engine.read.queries.is_stale)
    overdue: int  # open ones past their deadline (Deadlines.overdue), or the kept count given
    units: set[str | None]  # the unit of every obligation, open or not (None: on no unit)


def open_pass(obligations: dict[str, Obligation], now: datetime, judge: Deadlines, kept: int | None) -> Open:
    """The obligations' open account at `now`. `kept`: the overdue count an account kept elsewhere
    already has (engine.read.deadlines.OverdueCount), else None: each open obligation is then
    judged here, as `Deadlines.overdue` judges it (a canonical opening time compared as text, any
    other asked of it). tests/test_openpass.py proves it equal to the three separate passes."""
    keys: list[str] = []
    add_key = keys.append
    units: set[str | None] = set()
    add_unit = units.add
    blocking = stale = overdue = 0
    before = judge.before if kept is None else None  # severity -> opened before this is overdue
    for key, ob in obligations.items():
        add_unit(ob.unit)
        if ob.status == _OPEN:
            add_key(key)
            blocking += ob.blocks
            if ob.expires_at is not None and ob.expires_at <= now:  # is_stale, inlined
                stale += 1
            if before:
                limit = before.get(ob.severity)
                if limit is not None and (
                    ob.opened_at < limit
                    if len(ob.opened_at) == 20 and ob.opened_at[-1] == "Z"
                    else judge.overdue(ob)
                ):  # Deadlines.overdue, inlined
                    overdue += 1
    return Open(keys, blocking, stale, overdue if kept is None else kept, units)
