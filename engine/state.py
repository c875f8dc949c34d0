"""The read models, folded from the stores' events. One place derives each state.

`load` reads every store from the start; `advance` folds only what was appended since, so a live
view pays for new bytes only. Every view and command asks the functions at the bottom of this
module what is held, stale, current or waiting: nothing else decides those.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import ClassVar

import msgspec

from engine import clock
from engine.authority import GRANT_OF, Authority, Uncounted
from engine.contracts import (
    Contract,
    ContractFiles,
    contracts_of,
    load_contracts,
    prefetch,
    prefetch_threshold,
)
from engine.events import INDEX, STORES, EventMap, EventSource, refs
from engine.store import Problem
from engine.workspace import STORE_NAMES, Workspace

WAITING_ACTIONS = ("remediate", "replan", "clarify", "pause", "escalate")
ACTIONS = ("retry", "repair", "abort", *WAITING_ACTIONS)


class Obligation(msgspec.Struct):
    """One per routed obligation: 100,000 of them are built on a cold start of a large log, and a
    Struct is built in C (half a dataclass's time); mutable, as the fold closes them in place."""

    id: str
    unit: str | None
    kind: str  # "intelligence" (from a signal) or "recovery-decision" (from a unit decision)
    source: str  # the signal id, or the decision id
    severity: str
    blocks: bool
    owed_to: str
    opened_at: str
    subject: str = ""
    expires_at: datetime | None = None
    status: str = "open"  # open | resolved | escalated
    disposition: str | None = None
    by: str | None = None
    rationale: str | None = None
    closed_at: str | None = None
    history: list[int | dict] = []  # references (engine.events); see history(). A new list each


@dataclass(slots=True)
class UnitState:
    id: str
    contract: Contract | None
    status: str = "todo"  # todo | in-progress | closed | waiting | aborted (see unit_status)
    lease: str | None = None  # the current lease's hash (SPEC §15.2); the token is never stored
    worktree: str | None = None
    recovery: str | None = None  # the recovery-decision obligation a waiting unit waits on
    history: list[int | dict] = field(default_factory=list)  # references (engine.events)
    type: str | None = None  # as the current dispatch recorded them: a lease's grants (§15.0)
    profile: str | None = None


@dataclass(slots=True)
class MemoryEntry:
    event: dict
    retraction: dict | None = None


@dataclass
class Cursor:
    offset: int = 0
    line: int = 0


@dataclass
class State:
    now: datetime
    contracts: dict[str, Contract] = field(default_factory=dict)
    source: EventSource = field(default_factory=EventSource)
    signals: EventMap = None  # type: ignore[assignment]  # id -> signal event, held by reference
    routings: EventMap = None  # type: ignore[assignment]  # signal id -> its routing record
    obligations: dict[str, Obligation] = field(default_factory=dict)
    units: dict[str, UnitState] = field(default_factory=dict)
    memory: dict[str, MemoryEntry] = field(default_factory=dict)
    proposals: dict[str, dict] = field(default_factory=dict)
    decisions: list[dict] = field(default_factory=list)
    # closings read before the obligation they close (see _close), applied when it opens.
    # The stores are read one after another, so a decision can be folded before the routing
    # record it follows; this keeps the result the same whatever order the stores were read in.
    pending: dict[str, tuple] = field(default_factory=dict)
    unrouted_ids: dict[str, None] = field(default_factory=dict)  # signals awaiting routing, log order
    problems: list[Problem] = field(default_factory=list)
    contract_problems: list[str] = field(default_factory=list)
    cursors: dict[str, Cursor] = field(default_factory=dict)
    contract_files: ContractFiles = field(default_factory=ContractFiles)
    checkpointed: int = 0  # bytes of log the checkpoint this state came from (or wrote) covers
    registers: object = None  # registry.entries.Registers, read on first use (engine.ladder)
    # person events that count for nothing (unsigned where required, bad signature, replayed id)
    uncounted: list[Uncounted] = field(default_factory=list)
    person_ids: dict[str, set[str]] = field(default_factory=dict)  # store -> ids of person events
    auth: Authority = field(default_factory=Authority)  # the authority the person events were judged by
    verdicts: dict[int, tuple[dict, str | None]] = field(default_factory=dict)  # checked ahead (check_ahead)

    def __post_init__(self) -> None:
        if self.signals is None:
            self.signals = EventMap(self.source)
        if self.routings is None:
            self.routings = EventMap(self.source)

    def unit(self, unit_id: str) -> UnitState:
        found = self.units.get(unit_id)
        if found is None:
            found = self.units[unit_id] = UnitState(unit_id, self.contracts.get(unit_id))
        return found


# ---- folding ---------------------------------------------------------------------------------


class SignalsLine(msgspec.Struct):
    """What the fold reads of a line in signals.ndjson; the rest of the line is checked, not kept.
    Each default is what `dict.get` gave the fold before, so a missing field reads the same."""

    kind: object = None
    id: object = None
    subject: object = ""
    expiresAt: object = None  # noqa: N815 - the store's field name
    signal: object = None
    obligations: object = ()
    at: object = None
    obligation: object = None
    disposition: object = None
    by: object = None
    rationale: object = None


class SignalLine(msgspec.Struct, tag_field="kind", tag="signal"):
    """The three kinds the signals log holds decode into shapes of their own fields only (a third
    less to build and free than SignalsLine); a line of any other kind, or one these refuse (a
    repeated "kind", a kind that is not text), is read as SignalsLine instead."""

    kind: ClassVar[str] = "signal"
    id: object = None
    subject: object = ""
    expiresAt: object = None  # noqa: N815
    by: object = None  # a person-raised signal counts only as a person event does


class RoutingLine(msgspec.Struct, tag_field="kind", tag="routing"):
    kind: ClassVar[str] = "routing"
    signal: object = None
    obligations: object = ()
    at: object = None


class DispositionLine(msgspec.Struct, tag_field="kind", tag="disposition"):
    kind: ClassVar[str] = "disposition"
    obligation: object = None
    disposition: object = None
    by: object = None
    rationale: object = None
    at: object = None


PERSON_KINDS = {"units": ("decision", "demote"), "memory": ("retraction",)}
_PARALLEL = 32  # person events in one read before their signatures are checked on every core


def person_refs(name: str, events: list, refs: list[int]) -> list[int]:
    """The references of a read's person events (SPEC §15.1), found in one pass."""
    if name == "signals":
        return [
            at
            for e, at in zip(events, refs, strict=True)
            if type(e) is DispositionLine or (type(e) is SignalLine and e.by is not None)
        ]
    kinds = PERSON_KINDS.get(name)
    if not kinds:
        return []
    return [at for e, at in zip(events, refs, strict=True) if e.get("kind") in kinds]


def check_ahead(state: State, ws: Workspace, name: str, found: list[int]) -> None:
    """Check many person events' signatures at once, on every core (Ed25519 verification runs
    without the GIL): the fold then finds each verdict ready. Only what the fold would check."""
    if len(found) < _PARALLEL:
        return
    import os
    from concurrent.futures import ThreadPoolExecutor

    lines = [(*line, at) for line, at in zip(_read_back(ws.store(name).path, found), found, strict=True)]
    workers = max(1, min(4, os.cpu_count() or 1))
    size = -(-len(lines) // workers)
    chunks = [lines[k : k + size] for k in range(0, len(lines), size)]

    def judge(chunk: list) -> list:
        return [_judge(state, event, previous, name, at) for event, previous, at in chunk]

    with ThreadPoolExecutor(workers) as pool:
        verdicts = [v for part in pool.map(judge, chunks) for v in part]
    events = [event for event, _, _ in lines]
    state.verdicts.update(zip(found, zip(events, verdicts, strict=True), strict=True))


def _read_back(path, found: list[int]) -> list[tuple[dict, object]]:
    """Whole events at these references, each with the `at` of the line before it, read through
    one handle."""
    with open(path, "rb") as handle:
        return [_person_line(handle, at) for at in found]


_AT = re.compile(rb'"at":"([^"]*)"')


def _person_line(handle, at: int) -> tuple[dict, object]:
    """The event at a reference, and the `at` of the line before it (None for the first line)."""
    from engine.events import unreadable

    offset = at >> 2
    start = max(0, offset - 4096)
    handle.seek(start)
    before = handle.read(offset - start)
    line = handle.readline()
    try:
        event = msgspec.json.decode(line)
    except (ValueError, RecursionError):
        event = None
    if type(event) is not dict:
        return unreadable(at), None
    cut = before[:-1].rfind(b"\n")  # the line before this one (its newline ends `before`)
    found = _AT.findall(before[cut + 1 :]) if cut >= 0 or start == 0 else []
    return event, (found[-1].decode() if found else None)


def _judge(state: State, event: dict, previous: object, store: str, at: int) -> str | None:
    """Why a person event counts for nothing (grant, signature, or a time before its store's),
    judged under the policy in force at its place in the log (engine.authority.people_for)."""
    people = state.auth.people_for(store, at >> 2, event.get("at"))
    grant = GRANT_OF.get(event.get("kind")) if people.grants else None  # type: ignore[arg-type]
    reason = state.auth.check(event, people, grant)
    if reason is None and state.auth.clock == "system" and _backdated(event.get("at"), previous):
        reason = "back-dated (stamped before the line before it)"
    return reason


def _backdated(at: object, previous: object) -> bool:
    """More than the skew a store allows (SPEC §15.3) before the line before it."""
    if not isinstance(at, str) or not isinstance(previous, str) or at >= previous:
        return False
    from engine.store import SKEW_S

    try:
        return (clock.parse_time(previous) - clock.parse_time(at)).total_seconds() > SKEW_S
    except Exception:  # noqa: BLE001 - an unreadable time is not a back-dated one
        return False


def counts(state: State, store: str, at: int) -> bool:
    """Whether the person event at this reference counts (SPEC §15.1): signed by a key the policy
    in force at its time lists for the person (or unsigned where signatures are not required),
    and the first event of its store with its id. One that does not is kept in `uncounted`."""
    ready = state.verdicts.pop(at, None)
    if ready is not None:
        event, reason = ready
    else:
        with open(state.source.paths[at & 3], "rb") as handle:
            event, previous = _person_line(handle, at)
        reason = _judge(state, event, previous, store, at)
    event_id = event.get("id")
    if reason is None and isinstance(event_id, str):
        seen = state.person_ids.setdefault(store, set())
        if event_id in seen:
            reason = "replayed id (an event with this id came earlier)"
        else:
            seen.add(event_id)
    if reason is None:
        return True
    state.uncounted.append(Uncounted(store, at >> 2, reason, event_id if isinstance(event_id, str) else None))
    return False


def _fold_signals(state: State, events: list[SignalsLine], refs: list[int]) -> None:
    signals, routings, obligations = state.signals.refs, state.routings.refs, state.obligations
    waiting, pending = state.unrouted_ids, state.pending
    expiries: dict[str, datetime] = {}
    fresh: dict[str, SignalsLine] = {}  # this read's signals: a routing usually follows its signal closely
    for event, at in zip(events, refs, strict=True):
        kind = event.kind
        if kind == "signal":
            if event.by is not None and not counts(state, "signals", at):
                continue
            signals[event.id] = at
            fresh[event.id] = event
            if event.id not in routings:
                waiting[event.id] = None
        elif kind == "routing":
            signal_id = event.signal
            if signal_id in routings:
                continue  # a second router's duplicate: dropped
            routings[signal_id] = at
            waiting.pop(signal_id, None)
            signal = fresh.get(signal_id)
            if signal is not None:
                subject, expires = signal.subject, signal.expiresAt
            else:  # routed in a later read than its signal: read the signal back
                earlier = state.signals.get(signal_id, {})
                subject, expires = earlier.get("subject", ""), earlier.get("expiresAt")
            if expires and expires not in expiries:
                expiries[expires] = clock.parse_time(expires)
            for entry in event.obligations:
                ob_id = entry["id"]
                if ob_id in obligations:
                    continue
                # positional: this runs once per obligation in the log, the hottest constructor
                obligations[ob_id] = Obligation(
                    ob_id,
                    entry.get("unit"),
                    "intelligence",
                    signal_id,
                    entry["severity"],
                    bool(entry["blocks"]),
                    entry.get("owedTo", "S3"),
                    event.at,
                    subject,
                    expiries[expires] if expires else None,
                    "open",
                    None,
                    None,
                    None,
                    None,
                    [at],
                )
                if pending and ob_id in pending:
                    _close(obligations[ob_id], pending.pop(ob_id))
        elif kind == "disposition":
            ob = obligations.get(event.obligation)
            if not counts(state, "signals", at) or not _may_resolve(state, event, ob, at):
                if ob is not None:
                    ob.history.append(at)  # shown in its lifecycle, marked: it counts for nothing
                continue
            closing = ("resolved", event.disposition, event.by, event.rationale, event.at, at)
            if ob is None:
                # a recovery-decision obligation is opened in units.ndjson, folded after this store
                pending.setdefault(event.obligation, closing)
            elif ob.status == "open":
                _close(ob, closing)


def _may_resolve(state: State, event: DispositionLine, ob: Obligation | None, at: int) -> bool:
    """A disposition counts only from a person the policy lets resolve that severity (an
    obligation not yet folded is a recovery decision's: blocking)."""
    severity = ob.severity if ob is not None else "blocking"
    people = state.auth.people_for("signals", at >> 2, event.at)
    if not people.grants:  # no interaction policy known (a store without its identity): as before
        return True
    if isinstance(event.by, str) and severity in people.resolve.get(event.by, ()):
        return True
    state.uncounted.append(Uncounted("signals", at >> 2, f"by a person who may not resolve {severity}"))
    return False


def _close(ob: Obligation, closing: tuple) -> None:
    """closing: (status, disposition, by, rationale, closed at, reference to the closing event)."""
    ob.status, ob.disposition, ob.by, ob.rationale, ob.closed_at, at = closing
    ob.history.append(at)


def _fold_units(state: State, events: list[dict], refs: list[int]) -> None:
    obligations = state.obligations
    for event, at in zip(events, refs, strict=True):
        kind = event.get("kind")
        unit_id = event.get("unit")
        if not isinstance(unit_id, str):
            continue
        unit = state.unit(unit_id)
        unit.history.append(at)  # shown in the lifecycle even when it counts for nothing
        if kind in ("decision", "demote") and not counts(state, "units", at):
            continue
        if kind == "dispatch":
            # a first-round dispatch kept the token itself in the log: such a lease is not honoured
            unit.status, unit.lease, unit.worktree = (
                "in-progress",
                event.get("leaseHash"),
                event.get("worktree"),
            )
            unit.type, unit.profile = event.get("type"), event.get("profile")
        elif kind == "close":
            unit.status, unit.lease = "closed", None
        elif kind == "demote":
            unit.status, unit.lease = "todo", None
        elif kind == "decision":
            action = event.get("action")
            status = "escalated" if action in WAITING_ACTIONS else "resolved"
            closing = (
                status,
                event.get("disposition"),
                event.get("by"),
                event.get("rationale"),
                event.get("at"),
                at,
            )
            for ob_id in event.get("resolves", ()):
                ob = obligations.get(ob_id)
                if ob is None:
                    state.pending.setdefault(ob_id, closing)
                elif ob.status == "open":
                    _close(ob, closing)
            opened = event.get("opens")
            if opened:
                ob = Obligation(
                    id=opened["id"],
                    unit=unit_id,
                    kind="recovery-decision",
                    source=event["id"],
                    severity=opened["severity"],
                    blocks=True,
                    owed_to=opened.get("owedTo", "S3"),
                    opened_at=event["at"],
                    subject=f"recovery decision: {action} — {event.get('rationale', '')}",
                )
                ob.history.append(at)
                obligations[ob.id] = ob
                pending = state.pending.pop(ob.id, None)
                if pending is not None:
                    _close(ob, pending)
            unit.lease = None
            if action in ("retry", "repair"):
                unit.status, unit.recovery = "todo", None
            elif action == "abort":
                unit.status, unit.recovery = "aborted", None
            else:
                unit.status, unit.recovery = "waiting", opened["id"] if opened else None


def _fold_memory(state: State, events: list[dict], refs: list[int]) -> None:
    memory = state.memory
    for event, at in zip(events, refs, strict=True):
        kind = event.get("kind")
        if kind == "memory":
            memory[event["id"]] = MemoryEntry(event)
        elif kind == "retraction":
            if not counts(state, "memory", at):
                continue
            entry = memory.get(event.get("entry"))
            if entry is not None and entry.retraction is None:
                entry.retraction = event


def _fold_identity(state: State, events: list[dict], refs: list[int]) -> None:
    """Proposals and decisions as the authority counted them (engine.authority folds the whole
    store: a decision counts only under the policy in force before it)."""
    state.proposals = dict(state.auth.proposals)
    state.decisions = list(state.auth.decisions)


FOLDS = {
    "signals": _fold_signals,
    "units": _fold_units,
    "memory": _fold_memory,
    "identity": _fold_identity,
}
# (the usual shapes, the shape for any line): the other folds keep whole events (memory, proposals)
SHAPES = {"signals": (SignalLine | RoutingLine | DispositionLine, SignalsLine)}
ORDER = STORES  # the fold's order (signals before units), also the index a reference carries


def load(
    ws: Workspace, now: datetime | None = None, stores: tuple[str, ...] = ORDER, *, cached: bool = True
) -> State:
    """The read models now: from the checkpoint when it holds and the stores asked for are large
    enough to be worth it (engine.checkpoint), then whatever the stores gained since. With no
    checkpoint and a large log, a second process reads the contract files while this one folds
    (engine.contracts.Prefetch). A writer's load (inside the decide lock) offers its state for a
    new checkpoint, written once the command is done; a reader's never does."""
    from engine import checkpoint
    from engine.workspace import configure_clock

    configure_clock(ws)  # the clock follows the workspace read (REGULATOR_NOW only where pinned)
    now = now or clock.now()
    state = None
    size = sum(ws.store(name).size() for name in stores)
    if cached and size >= checkpoint.threshold():
        state = checkpoint.restore(ws, now)
    state = state or State(now=now)
    cold = prefetch_threshold()
    helper = prefetch(ws) if cold is not None and size >= cold and not state.contract_files.seen else None
    try:
        advance(ws, state, stores=stores)
        files = helper.files() if helper is not None else None
    finally:
        if helper is not None:
            helper.close()
    if files is not None:
        state.contract_files = files
        contracts = contracts_of(files.seen, state.contract_problems)
    else:
        contracts = load_contracts(ws, state.contract_problems, state.contract_files)
    attach_contracts(state, contracts)
    if ws.deciding():
        checkpoint.offer(ws, state)
    return state


def attach_contracts(state: State, contracts: dict[str, Contract]) -> None:
    """Give every unit its contract (a unit with events but no contract file keeps None)."""
    state.contracts = contracts
    for unit_id, unit in state.units.items():
        unit.contract = contracts.get(unit_id)
    for unit_id, contract in contracts.items():
        if unit_id not in state.units:
            state.units[unit_id] = UnitState(unit_id, contract)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Folding a large log allocates millions of objects that all stay alive: the cyclic collector
    would rescan them again and again (seconds on a million events) and find nothing to free."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # what was folded lives on: later collections need not walk it again
        if enabled:
            gc.enable()


def advance(
    ws: Workspace, state: State, *, final: bool = True, stores: tuple[str, ...] = ORDER
) -> dict[str, int]:
    """Fold what each store gained since the last read; returns how many events each gained.

    Signals fold before units so a decision finds the obligations it closes; within one store,
    log order is the order of events.
    """
    state.source.bind(tuple(ws.store(name).path for name in STORES))
    state.auth = ws.authority()
    gained: dict[str, int] = {}
    for name in ORDER:
        if name not in stores:
            continue
        assert name in STORE_NAMES
        cursor = state.cursors.setdefault(name, Cursor())
        store = ws.store(name)
        if store.size() < cursor.offset:  # replaced or truncated: the caller reloads in full
            raise StoreReplaced(name)
        with gc_paused():
            result = store.read(cursor.offset, cursor.line, final=final, shape=SHAPES.get(name))
            cursor.offset, cursor.line = result.offset, result.line
            if result.problems:
                state.problems.extend(result.problems)
                # in store order, then line: the same list however the log was read (a checkpoint)
                state.problems.sort(key=lambda p: (INDEX.get(p.store.removesuffix(".ndjson"), 9), p.line))
            at = refs(name, result.starts)
            check_ahead(state, ws, name, person_refs(name, result.events, at))
            FOLDS[name](state, result.events, at)
            state.verdicts.clear()
        gained[name] = len(result.events)
    return gained


class StoreReplaced(Exception):
    """A store is shorter than what was read of it: read everything again."""


# ---- the derived states: every command and view asks these -------------------------------


def history(state: State, holder: Obligation | UnitState) -> list[dict]:
    """An obligation's or a unit's events, oldest first, read back from the stores; a person event
    that counts for nothing carries `uncounted` (its reason)."""
    events = state.source.events(holder.history)
    if not state.uncounted:
        return events
    why = {(STORES.index(u.store) if u.store in STORES else -1, u.offset): u.reason for u in state.uncounted}
    out = []
    for ref, event in zip(holder.history, events, strict=True):
        reason = why.get((ref & 3, ref >> 2)) if type(ref) is int else None
        out.append(event if reason is None else {**event, "uncounted": reason})
    return out


def unit_status(state: State, unit: UnitState) -> str:
    """A waiting unit returns to todo once its recovery-decision obligation is dispositioned."""
    if unit.status == "waiting" and unit.recovery:
        ob = state.obligations.get(unit.recovery)
        if ob is not None and ob.status != "open":
            return "todo"
    return unit.status


def held_by(state: State, unit_id: str) -> list[Obligation]:
    """The open obligations that block this unit's dispatch and close."""
    return [
        ob for ob in state.obligations.values() if ob.unit == unit_id and ob.status == "open" and ob.blocks
    ]


def holds_index(state: State) -> dict[str, list[Obligation]]:
    """held_by for every unit at once (one pass), for listings."""
    index: dict[str, list[Obligation]] = {}
    for ob in state.obligations.values():
        if ob.status == "open" and ob.blocks and ob.unit:
            index.setdefault(ob.unit, []).append(ob)
    return index


def is_stale(state: State, ob: Obligation) -> bool:
    """Open, and the signal behind it has expired: shown as stale until dispositioned."""
    return ob.status == "open" and ob.expires_at is not None and ob.expires_at <= state.now


def unrouted(state: State) -> list[dict]:
    """Signals with no routing record yet, in log order (kept as the log is folded)."""
    return [state.signals[s_id] for s_id in state.unrouted_ids]


def unrouted_count(state: State) -> int:
    return len(state.unrouted_ids)


def memory_status(entry: MemoryEntry, today: date) -> str:
    """Current through its review-by day; expired from the day after; retracted overrides."""
    if entry.retraction is not None:
        return "retracted"
    if date.fromisoformat(entry.event["reviewBy"]) < today:
        return "expired"
    return "current"


def days_left(entry: MemoryEntry, today: date) -> int:
    return (date.fromisoformat(entry.event["reviewBy"]) - today).days
