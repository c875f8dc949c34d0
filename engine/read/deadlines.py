"""When an obligation is due, and whether it is overdue (design §24): the one rule the deadline duty,
`obligations --overdue`, `--once` and the control room ask. An obligation of a severity that
routing.yaml's `deadlines` names is due that long after it opened; open after that, it is overdue
(nothing resolves it: a person does). A policy without deadlines makes nothing overdue."""

from __future__ import annotations

from datetime import datetime, timedelta

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
            self._due[key] = (
                clock.iso(opened + timedelta(seconds=self.seconds[ob.severity]))
                if opened is not None
                else None
            )
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
