"""What a timed duty is (design §22, §24): a plain function `(workspace, now) -> Outcome` that writes
host events with derived ids inside the decide lock (taken unless its caller, `serve`'s tick,
holds it already), so running it twice writes once."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime

import msgspec

from engine.checkout.workspace import Workspace


class Outcome(msgspec.Struct):
    """What one duty did, for `serve`'s log line (`{"at","duty","outcome","ms","host"}`) and
    `regulator tick`: the ids it wrote and the problems it met, one line each."""

    duty: str
    written: list[str] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    note: str = ""

    @property
    def outcome(self) -> str:
        if self.errors:
            return "error"
        return f"wrote {len(self.written)}" if self.written else "nothing to do"

    def json(self) -> dict[str, object]:
        """What serve logs as the duty's outcome (engine.host.duties.log_line)."""
        found: dict[str, object] = {"written": len(self.written)}
        if self.errors:
            found["errors"] = self.errors
        if self.note:
            found["note"] = self.note
        return found

    def line(self) -> str:
        said = f"{self.duty}: {self.outcome}"
        if self.note:
            said += f" ({self.note})"
        return said


Duty = Callable[[Workspace, datetime], Outcome]


@contextlib.contextmanager
def deciding(ws: Workspace) -> Iterator[None]:
    """The decide lock, unless this process already holds it (a duty run inside `serve`'s tick)."""
    if ws.deciding():
        yield
        return
    with ws.exclusive():
        yield
