"""Person events in the fold (design §15.1): which lines of a read are person events, and whether
each counts: signed by a key the policy in force at its place lists for the person, with the grant
its kind needs, not back-dated, the first of its id. Judged here for engine.read.fold, by threads
ahead of it (check_ahead) or by the forked child (engine.read.prejudge), always by `_judge`."""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from itertools import compress, repeat
from pathlib import Path
from typing import IO, Any

from engine.base import clock
from engine.checkout.authority import GRANT_OF, Uncounted
from engine.checkout.workspace import Workspace
from engine.log.events import unreadable
from engine.log.lines import whole
from engine.log.store import SKEW_S, event_hash, last_event
from engine.read.kinds import DispositionLine, SignalLine
from engine.read.model import EventKind, State
from engine.read.worldfold import OutcomeLine

_KIND = operator.attrgetter("kind")
PERSON_KINDS = {
    "units": (EventKind.DECISION.value, EventKind.DEMOTE.value),
    "memory": (EventKind.RETRACTION.value,),
}
PERSON_STORES = ("signals", *PERSON_KINDS)  # the stores whose lines may be person events
_PARALLEL = 32  # person events in one read before their signatures are checked on every core


def person_refs(name: str, events: Sequence[Any], at_refs: list[int]) -> list[int]:
    """The references of a read's person events (design §15.1), found in one pass."""
    if name == "signals":
        return [
            at
            for e, at in zip(events, at_refs, strict=True)
            if type(e) is DispositionLine
            or (type(e) is SignalLine and e.by is not None)
            or type(e) is OutcomeLine
        ]
    kinds = PERSON_KINDS.get(name)
    if not kinds:
        return []
    if len(events) != len(at_refs):
        raise ValueError("one reference per event")
    # `e.kind in kinds` (units, read as UnitsLine) or `e.get("kind") in kinds` (memory, whole
    # events) for every event, in C: 800,000 of them in the bench
    found = map(_KIND, events) if name == "units" else map(dict.get, events, repeat("kind"))
    return list(compress(at_refs, map(kinds.__contains__, found)))


def check_ahead(state: State, ws: Workspace, name: str, found: list[int]) -> None:
    """Check many person events' signatures at once, on every core (Ed25519 verification runs
    without the GIL): the fold then finds each verdict ready. Only what the fold would check."""
    if len(found) < _PARALLEL:
        return
    from concurrent.futures import ThreadPoolExecutor

    lines = [(*line, at) for line, at in zip(_read_back(ws.store(name).path, found), found, strict=True)]
    workers = max(1, min(4, os.cpu_count() or 1))
    size = -(-len(lines) // workers)
    chunks = [lines[k : k + size] for k in range(0, len(lines), size)]

    def judge(chunk: list[tuple[dict[str, Any], object, int]]) -> list[str | None]:
        return [_judge(state, event, previous, name, at) for event, previous, at in chunk]

    with ThreadPoolExecutor(workers) as pool:
        verdicts = [v for part in pool.map(judge, chunks) for v in part]
    events = [event for event, _, _ in lines]
    state.verdicts.update(zip(found, zip(events, verdicts, strict=True), strict=True))


def _read_back(path: Path, found: list[int]) -> list[tuple[dict[str, Any], object]]:
    """Whole events at these references, each with the `at` of the line before it, read through
    one handle."""
    with open(path, "rb") as handle:
        return [_person_line(handle, at) for at in found]


_BEFORE = 4096  # the first piece read back for the event before (most lines are shorter)


def _person_line(handle: IO[bytes], at: int) -> tuple[dict[str, Any], object]:
    """The event at a reference, and the `at` of the event before it: the last line before it that
    is an event (a JSON object with a text `hash`), as the append that wrote it judged its time
    against (Store._tail), where the event chains to it; None for the first, or where the line
    before is not the one its `prev` names (a line put there by a writer without the lock: the
    chain breaks there, and `verify` names it). A torn or garbage line between counts for nothing
    (adversarial reviews: `{"at":"9998-…"` left torn, or a line slipped in under a demote's append,
    made the demote "back-dated", D-335). verify's time judge asks the same
    (engine.commands.verification._HostLines)."""
    offset = at >> 2
    handle.seek(offset)
    line = handle.readline()
    try:
        event = whole(line)
    except (ValueError, RecursionError):
        event = None
    if type(event) is not dict:
        return unreadable(at), None
    return event, time_before(last_event(handle, offset, _BEFORE) if offset else None, event)


def time_before(before: dict[str, Any] | None, event: dict[str, Any]) -> object:
    """The time a line is judged against (D-335): the `at` of the event before it where the line
    chains to it (its `prev` names that event's hash) and that event's content gives its hash; else
    None (the first line, a line slipped in, a line whose hash is a copy): the one rule the fold's
    person events and verify's time judge (engine.commands.verification._HostLines) ask."""
    if before is None or before.get("hash") != event.get("prev") or event_hash(before) != before["hash"]:
        return None
    return before.get("at")


def _judge(state: State, event: dict[str, Any], previous: object, store: str, at: int) -> str | None:
    """Why a person event counts for nothing (grant, signature, or a time before its store's),
    judged under the policy in force at its place in the log (engine.checkout.authority.people_for)."""
    people = state.auth.people_for(store, at >> 2, event.get("at"))
    grant = GRANT_OF.get(event.get("kind")) if people.grants else None  # type: ignore[arg-type]
    reason = state.auth.check(event, people, grant)
    if reason is None and state.auth.clock == "system" and _backdated(event.get("at"), previous):
        reason = "back-dated (stamped before the line before it)"
    return reason


def _backdated(at: object, previous: object) -> bool:
    """More than the skew a store allows (design §15.3) before the line before it."""
    if not isinstance(at, str) or not isinstance(previous, str) or at >= previous:
        return False
    try:
        return (clock.read_time(previous) - clock.read_time(at)).total_seconds() > SKEW_S
    except Exception:  # noqa: BLE001 - an unreadable time is not a back-dated one
        return False


def counts(state: State, store: str, at: int) -> bool:
    """Whether the person event at this reference counts (design §15.1): signed by a key the policy
    in force at its time lists for the person (or unsigned where signatures are not required),
    and the first event of its store with its id. One that does not is kept in `uncounted`."""
    ready = state.verdicts.pop(at, None)
    if ready is None and state.prejudged is not None:  # the forked child's, from the same bytes
        told = state.prejudged(store, at)
        if told is not None:
            ready = ({"id": told[0]} if told[0] is not None else {}, told[1])
        else:  # none from the child: checked here with the rest of its piece, if the child stopped
            ready = state.verdicts.pop(at, None)
    if ready is not None:
        event, reason = ready
    else:
        with open(state.source.paths[at & 3], "rb") as handle:
            event, previous = _person_line(handle, at)
        reason = _judge(state, event, previous, store, at)
    event_id = event.get("id")
    if isinstance(event_id, str):
        # an id once in the log is spent, whether its event counted or not: a copy appended later
        # never counts (an adversarial review: a voided demote's copy counted, D-335)
        seen = state.person_ids.setdefault(store, set())
        if reason is None and event_id in seen:
            reason = "replayed id (an event with this id came earlier)"
        seen.add(event_id)
    if reason is None:
        return True
    state.uncounted.append(Uncounted(store, at >> 2, reason, event_id if isinstance(event_id, str) else None))
    return False
