"""The router: seed 000's five routing steps, in order, for every signal not yet routed."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Final, NamedTuple

from engine.base import clock, ids
from engine.base.errors import Refused
from engine.checkout.workspace import Workspace
from engine.commands.written import RoutedObligationEvent, RoutingEvent
from engine.log.events import UNREADABLE
from engine.read.fold import StoreReplaced, advance
from engine.read.load import load
from engine.read.model import OWED_TO, EventKind, State
from engine.read.queries import unrouted
from identity.policy import RoutingPolicy, Rule

RULE = "intelligence-signal"
_ROUTING: Final = EventKind.ROUTING.value


_TEXT = (str, type(None))
# a policy's floors as the router applies them, built once per policy object (not per signal):
# (name, the compiled pattern's search, the fields it looks at, at least, the rank of at least)
_Floors = list[tuple[str, Callable[[str], object], tuple[str, ...], str, int]]


class _Plan(NamedTuple):
    """What the router asks of a policy for every signal, built once per policy object: its
    floors compiled, each severity's rank, the intelligence-signal rule's and the blocking
    threshold's ranks."""

    floors: _Floors
    rank: dict[str, int]
    rule: Rule
    owed_rank: int  # the rank of the rule's atOrAbove
    blocks_rank: int  # the rank of blocksAtOrAbove
    timed: bool  # a floor is searched under the time limit: each signal gets SIGNAL_TIME_S for them


_PLANS: dict[int, tuple[RoutingPolicy, _Plan]] = {}


FLOOR_TIME_S: Final = 0.05  # one floor's search of one field: legitimate floors take microseconds
SIGNAL_TIME_S: Final = 0.2  # all of one signal's timed searches (a re-check: 100 floors took 6 s)
_BUDGET = threading.local()  # what is left of the signal's SIGNAL_TIME_S, per routing thread


def _searcher(pattern: str) -> tuple[Callable[[str], object], bool]:
    """The floor's search. One that is not linear in its text (identity.policy.bounded) is cut at
    FLOOR_TIME_S, and all of one signal's such searches at SIGNAL_TIME_S (the `regex` module's
    timeout: Python's `re` can be neither timed nor interrupted, and a pattern that backtracks held
    the router, with the decide lock, without end: an adversarial review). A search cut short, or
    not run once the signal's time is spent, counts as a match: the floor applies (fail closed: a
    floor only raises a severity); so does a floor this process cannot compile (the policy refuses
    one when it is read: identity.policy.compiles_timed). The shapes known to backtrack are refused
    there too (backtracks); this is the net under what a shape check misses. With the search,
    whether it is timed."""
    from identity.policy import bounded

    if bounded(pattern):  # linear in its text: `re` as it is, 1.4 µs a search cheaper
        return re.compile(pattern).search, False
    import regex

    try:
        search = regex.compile(pattern, regex.V0).search
    except Exception:  # noqa: BLE001 - never a traceback in every routing process: it applies
        return (lambda text: True), False

    def searched(text: str) -> object:
        left = getattr(_BUDGET, "left", SIGNAL_TIME_S)
        if left <= 0:
            return True
        started = time.perf_counter()
        try:
            return search(text, timeout=min(FLOOR_TIME_S, left))
        except TimeoutError:
            return True
        finally:
            _BUDGET.left = left - (time.perf_counter() - started)

    return searched, True


def _plan(policy: RoutingPolicy) -> _Plan:
    kept = _PLANS.get(id(policy))
    if kept is not None and kept[0] is policy:
        return kept[1]
    rank = {severity: policy.rank(severity) for severity in reversed(policy.severities)}  # the first wins
    rule = policy.rules[RULE]
    searches = [_searcher(f.pattern) for f in policy.floors]
    built = _Plan(
        [
            (f.name, search, tuple(f.fields), f.at_least, rank[f.at_least])
            for f, (search, _) in zip(policy.floors, searches, strict=True)
        ],
        rank,
        rule,
        rank[rule.at_or_above],
        rank[policy.blocks_at_or_above],
        any(timed for _, timed in searches),
    )
    if len(_PLANS) > 64:  # a long-lived process that read many policies
        _PLANS.clear()
    _PLANS[id(policy)] = (policy, built)
    return built


def derive_severity(signal: dict, policy: RoutingPolicy) -> tuple[str, list[str]]:
    """Step 1: the reported severity, raised by every floor whose pattern the text matches (a
    field absent or empty is searched as ""). Floors look at subject, observation and rationale;
    never at the claim. (tests/test_perf_paths.py holds it to the loop over `policy.floors`.)"""
    severity = signal["reportedSeverity"]
    applied: list[str] = []
    get = signal.get
    plan = _plan(policy)
    if plan.timed:
        _BUDGET.left = SIGNAL_TIME_S
    rank = plan.rank[severity] if plan.floors else 0
    for name, search, fields, at_least, at_least_rank in plan.floors:
        for field in fields:
            if search(get(field) or ""):
                break
        else:
            continue
        applied.append(name)
        if at_least_rank > rank:
            severity, rank = at_least, at_least_rank
    return severity, applied


def unroutable(signal: dict, policy: RoutingPolicy) -> str | None:
    """Why a signal line cannot be routed as report_intelligence writes it (a line appended by hand
    with fields of the wrong type), or None. Such a line raises nothing (see D-65). A line the fold
    counted that does not read back whole (engine.log.events.EventMap) is one too (D-184)."""
    if signal.get("kind") == UNREADABLE:
        return "its line does not read back whole (a number out of range in a field the fold skips?)"
    if signal.get("reportedSeverity") not in policy.severities:
        return "reportedSeverity is not a severity of the routing policy"
    for name in ("subject", "observation", "rationale", "claim", "unit", "expiresAt"):
        if not isinstance(signal.get(name), _TEXT):
            return f"{name} is not text"
    units = signal.get("affectedUnits")
    if units is not None and not (isinstance(units, list) and all(isinstance(u, str) for u in units)):
        return "affectedUnits is not a list of unit ids"
    expires = signal.get("expiresAt")
    if expires and clock.moment(expires) is None:
        return "expiresAt is not a time"
    return None


QUESTION: Final = "question"  # the `type` of a signal that asks a person (ask_human, design §22)
ADVISORY = "advisory"


def route_question(signal: dict, policy: RoutingPolicy, now: datetime) -> RoutingEvent | None:
    """A question (a signal of type question) opens one advisory obligation of kind question on
    the asking unit, owed to S3, whatever its text says: it holds nothing. None where the line is
    not a question ask_human writes (it is then routed as any other signal)."""
    unit = signal.get("unit")
    if not isinstance(unit, str) or not isinstance(signal.get("question"), str):
        return None
    # the policy's own advisory, else its lowest severity: a question never blocks
    severity = ADVISORY if ADVISORY in policy.severities else policy.severities[0]
    return {
        "kind": EventKind.ROUTING.value,
        "signal": signal["id"],
        "reportedSeverity": None,
        "derivedSeverity": severity,
        "floors": [],
        "obligations": [
            {
                "id": ids.question_obligation_id(signal["id"]),
                "unit": unit,
                "severity": severity,
                "blocks": False,
                "owedTo": OWED_TO,
                "kind": "question",
            }
        ],
        "at": clock.iso(now),
        "outcome": "obligations",
        "reason": f"a question from {unit}, owed to {OWED_TO} ({severity}: it holds nothing)",
    }


def route_signal(signal: dict, policy: RoutingPolicy, now: datetime, reasons: bool = True) -> RoutingEvent:
    """The routing record for one signal: pure, so routing twice decides the same thing.
    `reasons=False` (verify's re-routing, which compares what a record decides, not its words):
    every field the same but `reason`, left empty (tests/test_perf_paths.py proves it)."""
    if signal.get("type") == QUESTION:
        asked = route_question(signal, policy, now)
        if asked is not None:
            return asked if reasons else asked | {"reason": ""}
    plan = _plan(policy)
    rule = plan.rule

    def record(outcome: str, reason: str, derived: str | None = None, floors: list[str] | None = None,
               obligations: list[RoutedObligationEvent] | None = None) -> RoutingEvent:  # fmt: skip
        return {
            "kind": _ROUTING,
            "signal": signal["id"],
            "reportedSeverity": signal["reportedSeverity"] if derived is not None else None,
            "derivedSeverity": derived,
            "floors": floors or [],
            "obligations": obligations or [],
            "at": clock.iso(now),
            "outcome": outcome,
            "reason": reason,
        }

    problem = unroutable(signal, policy)
    if problem is not None:
        why = f"not routable: {problem} (a line report_intelligence did not write); raised nothing"
        return record("noted", why if reasons else "")
    derived, floors = derive_severity(signal, policy)  # 1
    derived_rank = plan.rank[derived]
    if derived_rank < plan.owed_rank:  # 2
        why = (
            f"derived severity {derived} is below the {RULE} rule "
            f"({rule.at_or_above} and above owed to {rule.owed_to}); raised nothing"
        )
        return record("noted", why if reasons else "", derived, floors)
    expires = signal.get("expiresAt")
    ending = clock.moment(expires) if expires else None  # a time: unroutable said so above
    if ending is not None and ending <= now:  # 3
        why = f"expiresAt {expires} is at or before routing time {clock.iso(now)}; stale intelligence raises nothing"
        return record("expired", why if reasons else "", derived, floors)
    units = signal.get("affectedUnits") or [signal.get("unit")]  # 4
    blocks = derived_rank >= plan.blocks_rank  # 5
    owed_to, sid = rule.owed_to, signal["id"]
    opened: list[RoutedObligationEvent] = [
        {
            "id": ids.obligation_id(sid, unit),
            "unit": unit,
            "severity": derived,
            "blocks": blocks,
            "owedTo": owed_to,
        }
        for unit in units
    ]
    if not reasons:
        return record("obligations", "", derived, floors, opened)
    named = ", ".join(u or "no unit" for u in units)
    hold = "blocks" if blocks else "does not block"
    why = (
        f"{len(units)} obligation(s) owed to {rule.owed_to} on {named}; {derived} "
        f"{hold} (blocksAtOrAbove {policy.blocks_at_or_above})"
    )
    return record("obligations", why, derived, floors, opened)


def pending(state: State, policy: RoutingPolicy, now: datetime) -> list[RoutingEvent]:
    """The routing record the router gives each signal not yet routed, at `now`, in log order:
    what it appends (route_locked), and what a reader that does not route judges holds on
    (engine.commands.whatif.route_in_memory). Pure: nothing is appended here."""
    return [route_signal(signal, policy, now) for signal in unrouted(state)]


def route_locked(ws: Workspace, state: State | None = None) -> list[dict]:
    """Route inside the caller's exclusive section: exactly one routing record per signal.

    A long-lived reader (the control room) passes its state: it is brought up to date under the
    lock by reading only what was appended, instead of reading the whole log again.
    """
    policy = ws.routing()
    if state is None:
        state = load(ws, stores=("signals",))
    else:
        try:
            advance(ws, state, final=False, stores=("signals",))
        except StoreReplaced as exc:  # cut shorter or rewritten since the caller read it
            raise Refused(f"{exc}.ndjson changed while it was read; run the command again") from None
    store = ws.store("signals")
    records = pending(state, policy, clock.now())
    if not records:
        return []
    # what the router decided on (design §22): every other store's length inside the decide lock (the
    # signals it routes are in its own store, before the record)
    seen = ws.marks(but="signals")
    return [store.append(record | {"seen": seen}) for record in records]


def route(ws: Workspace, state: State | None = None) -> list[dict]:
    with ws.exclusive():
        return route_locked(ws, state)
