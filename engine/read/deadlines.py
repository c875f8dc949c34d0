"""When an obligation is due, and whether it is overdue (design §24): the one rule the deadline duty,
`obligations --overdue`, `--once` and the control room ask. An obligation of a severity that
routing.yaml's `deadlines` names is due that long after it opened; open after that, it is overdue
(nothing resolves it: a person does). A policy without deadlines makes nothing overdue."""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from datetime import datetime, timedelta
from itertools import islice

from engine.base import clock
from engine.read.model import Obligation, ObligationStatus

_OPEN = ObligationStatus.OPEN


class Deadlines:
    """The deadlines of the routing policy in force, judged at `now`. Canonical times
    (YYYY-MM-DDTHH:MM:SSZ) order as their text, so an obligation is judged overdue without parsing
    its time; its due time is computed once per distinct opening time (a listing of 100,000)."""

    def __init__(self, seconds: dict[str, int], now: datetime) -> None:
        self.seconds = seconds
        self.now = now
        # per severity: an obligation that opened before this is overdue at `now`
        self.before = {severity: clock.iso(now - timedelta(seconds=s)) for severity, s in seconds.items()}
        self._due: dict[tuple[str, str], str | None] = {}

    @classmethod
    def of(cls, policy: object, now: datetime) -> Deadlines:
        """From a RoutingPolicy (None, or one that cannot be read: no deadlines)."""
        seconds: dict[str, int] = {}
        deadline = getattr(policy, "deadline_seconds", None)
        for severity in getattr(policy, "deadlines", None) or {}:
            found = deadline(severity) if deadline is not None else None
            if found is not None:
                seconds[severity] = found
        return cls(seconds, now)

    def due(self, ob: Obligation) -> str | None:
        """When the obligation is (or was) due, as a canonical time; None without a deadline."""
        if ob.severity not in self.seconds:
            return None
        key = (ob.opened_at, ob.severity)
        if key not in self._due:
            opened = clock.moment(ob.opened_at)
            # past the calendar's end (a line no host wrote, a deadline of centuries): never due
            due = clock.later(opened, self.seconds[ob.severity]) if opened is not None else None
            self._due[key] = clock.iso(due) if due is not None else None
        return self._due[key]

    def overdue(self, ob: Obligation) -> bool:
        """Open past its deadline at `now`."""
        if ob.status != _OPEN:
            return False
        before = self.before.get(ob.severity)
        if before is None:
            return False
        opened = ob.opened_at
        if len(opened) == 20 and opened[-1] == "Z":  # canonical: compares as text
            return opened < before
        due = self.due(ob)
        moment = clock.moment(due) if due else None
        return moment is not None and self.now > moment


class OverdueCount:
    """How many open obligations are `Deadlines.overdue`, kept between counts of one growing
    state: once kept (`keep`, off the UI thread: the first pass costs a pass over every
    obligation), a count costs the obligations added since and those whose deadline passed since
    (the room's header counts on every append).

    Open obligations of a severity with a deadline and a canonical opening time wait in opening
    order, per severity; one is overdue once it opened before `Deadlines.before` (the comparison
    `overdue` makes). Any other is judged by `overdue` at every count. One found overdue stays so
    while open: time only moves on, and an account whose thresholds moved back, whose deadlines
    changed, or whose state lost an obligation is not used (`keep` starts it again). An obligation id
    opens once (engine.read.fold: the first line that opens it), so none is replaced in place."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start(None, ())

    def _start(self, of: dict[str, Obligation] | None, key: tuple[object, ...]) -> None:
        self.of, self.key = of, key
        self.before: dict[str, str] = {}
        self.seen = 0
        self.waiting: dict[str, tuple[list[str], list[Obligation]]] = {}
        self.late: list[Obligation] = []
        self.odd: list[Obligation] = []

    def _holds(self, obligations: dict[str, Obligation], judge: Deadlines, key: tuple[object, ...]) -> bool:
        """Whether the account kept is one for these obligations under these deadlines."""
        return (
            obligations is self.of
            and key == self.key
            and len(obligations) >= self.seen
            and not any(limit < self.before.get(severity, "") for severity, limit in judge.before.items())
        )

    def keep(self, obligations: dict[str, Obligation], judge: Deadlines) -> None:
        """Bring the account up to these obligations at the judge's time, started again if needed."""
        key = tuple(sorted(judge.seconds.items()))
        with self._lock:
            if not self._holds(obligations, judge, key):
                self._start(obligations, key)
            self._update(obligations, judge)

    def count(self, obligations: dict[str, Obligation], judge: Deadlines) -> int | None:
        """The count from the account kept, brought up to date; None where none is kept for these
        obligations and deadlines (the caller counts them with `overdue`)."""
        key = tuple(sorted(judge.seconds.items()))
        with self._lock:
            if not self._holds(obligations, judge, key):
                return None
            self._update(obligations, judge)
            return len(self.late) + sum(map(judge.overdue, self.odd))

    def _update(self, obligations: dict[str, Obligation], judge: Deadlines) -> None:
        self.before = dict(judge.before)
        for ob in islice(obligations.values(), self.seen, None):
            if ob.status != _OPEN or ob.severity not in judge.before:
                continue  # closed for good, or no deadline (deadlines that change start it again)
            opened = ob.opened_at
            if isinstance(opened, str) and len(opened) == 20 and opened[-1] == "Z":
                keys, items = self.waiting.setdefault(ob.severity, ([], []))
                at = bisect_right(keys, opened)
                keys.insert(at, opened)
                items.insert(at, ob)
            else:
                self.odd.append(ob)
        self.seen = len(obligations)
        for severity, (keys, items) in self.waiting.items():
            passed = bisect_left(keys, judge.before[severity])  # opened before it: overdue
            if passed:
                self.late.extend(items[:passed])
                del keys[:passed], items[:passed]
        self.late = [ob for ob in self.late if ob.status == _OPEN]
