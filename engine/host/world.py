"""The timed duties of design §24 (stale evidence, deadlines, due sensors) in serve's tick: each runs
inside the decide lock the tick holds, on the leader only, and logs its outcome as one JSON line
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
    register(_name, _logged(_duty))
