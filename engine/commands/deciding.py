"""The write skeleton, once: every command that appends a decided event runs `deciding`.

    load (once) -> the rule -> the person's key -> the decide lock -> route -> fold what others
    appended meanwhile -> the rule again -> the caller prepares its one event and appends it

The state is loaded once, before the lock (a refusal waits for no other writer and asks for no
passphrase); under the lock it is only brought up to date, so the rule is judged on everything
appended before this write, and on every signal routed (a veto sees each one).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from engine.base import clock
from engine.checkout.workspace import Workspace
from engine.commands.router import route_locked
from engine.log.events import STORES
from engine.read import checkpoint
from engine.read.fold import ORDER, StoreReplaced, advance
from engine.read.load import load
from engine.read.model import State
from engine.read.rules import Denied, refuse
from engine.trust.signing import person_event, signer_for

if TYPE_CHECKING:
    from engine.base.sshsig import Signer

Rule = Callable[[State], Denied | None]


class Turn(msgspec.Struct):
    """A writer's turn under the decide lock: the state as it is now, and the person's signer."""

    ws: Workspace
    state: State
    person: str | None = None
    signer: Signer | None = None

    def signed(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """A person's event as it will be appended: its id, its workspace, its signature."""
        return person_event(self.ws, self.signer, event)


def _nothing(state: State) -> Denied | None:
    return None


@contextlib.contextmanager
def deciding(
    ws: Workspace,
    rule: Rule = _nothing,
    *,
    stores: tuple[str, ...] = ORDER,
    person: str | None = None,
    route: bool = True,
    first: bool = False,
) -> Iterator[Turn]:
    """Hold the decide lock with the state of `stores` up to date and `rule` passed on it; the
    caller appends inside. `person` signs (their key is made ready before the lock, and the rule
    is asked once before it too: nothing refused asks for a key; `first` asks it there without a
    person); `route` routes every pending signal first (a unit's transition)."""
    ws.require_stores()  # a clone: refused before anything is read
    if route:
        ws.routing()  # the policy the router routes by: refused here when it cannot be known
    state = load(ws, stores=stores, final=False)  # a line being written now is read whole below
    if person is not None or first:
        refuse(rule(state))
    signer = signer_for(ws, person) if person is not None else None
    with ws.exclusive():
        walked = sys.modules.get("engine.read.trunkcache")  # loaded only if trunk was walked
        if walked is not None:
            walked.keep(ws)  # the walk the rule made before the lock (a reader keeps none)
        if route:
            route_locked(ws, state)
        # whole lines only (final=False), here too: a report appended without this lock may be in
        # flight, and a write that fails is cut back (D-335); a host event's `seen` records where
        # the whole lines end, never bytes that may yet be taken back (an adversarial review)
        try:
            advance(ws, state, stores=stores, final=False)
        except StoreReplaced:  # a mirror fetched again from its server: read it whole
            state = load(ws, stores=stores, cached=False, final=False)
        state.now = clock.now()
        refuse(rule(state))
        if set(stores) == set(STORES):
            checkpoint.offer(ws, state)
        yield Turn(ws, state, person, signer)
