"""The timed duties of design §24 (stale evidence, deadlines, due sensors) in serve's tick: each runs
on the leader only, takes the decide lock itself only around its writes (a sensor's command and a
notify run outside it: neither stalls another writer, D-240), and logs its outcome as one JSON line
(`{"written": n, "errors": [...], "note": ...}`)."""

from __future__ import annotations

from datetime import datetime

from engine.checkout.workspace import Workspace
from engine.commands.duty import Duty
from engine.commands.timed import DUTIES
from engine.host.duties import Duty as Logged
from engine.host.duties import register


def _logged(duty: Duty) -> Logged:
    def run(ws: Workspace, now: datetime) -> object:
        return duty(ws, now).json()

    return run


for _name, _duty in DUTIES.items():
    register(_name, _logged(_duty), locked=False)
