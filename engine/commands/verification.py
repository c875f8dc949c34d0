"""`regulator verify`: every store's hash chain, every person event that counts for nothing, and
any checkpoint compared with a fresh fold of the stores (design §11, §15.1, §15.4); and dismissals.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.forking import Child, beside_json
from engine.base.leaving import keep
from engine.base.limits import check_text
from engine.checkout.workspace import Workspace
from engine.commands.actors import check_person
from engine.commands.rerouting import (
    Each,
    Named,
    RoutingPass,
    judge_routings,
    routing_pass,
    routings,
    store_lines,
)
from engine.log.events import STORES
from engine.log.files import open_regular
from engine.log.store import AS_IT_STANDS, BROKEN, EDITED, MOVED, SKIPPED, TAKEN
from engine.log.store import verify as verify_chain
from engine.read.model import EventKind
from engine.read.persons import time_before
from engine.read.storeless import ABSENT

CHECKPOINT = "readmodel.checkpoint"

if TYPE_CHECKING:
    from engine.checkout.authority import Authority
    from engine.read.model import State


class Finding(msgspec.Struct, frozen=True):
    """A line `verify` names: bad chain, unreadable, or a person event that counts for nothing."""

    store: str  # "signals.ndjson", ... or "readmodel.checkpoint"
    line: int
    message: str
    reading: str = AS_IT_STANDS  # what readers do with the line (engine.log.store.SKIPPED, …)
    dismissed: str | None = None  # "dismissed by alice at …: rationale"

    def __str__(self) -> str:
        where = self.store if self.store == CHECKPOINT else f"{self.store}:{self.line}"
        tail = f" [dismissed by {self.dismissed}]" if self.dismissed else ""
        return f"{where}: {self.message}{tail}"


def line_numbers(ws: Workspace, store: str, offsets: set[int]) -> dict[int, int]:
    """offset -> the number of the line starting there (or the last line before it), one pass."""
    found: dict[int, int] = {}
    wanted = sorted(offsets)
    k = 0
    last = 0
    for number, start, _ in store_lines(ws, store):
        while k < len(wanted) and wanted[k] < start:
            found[wanted[k]] = last
            k += 1
        if k < len(wanted) and wanted[k] == start:
            found[start] = number
            k += 1
        last = number
        if k == len(wanted):
            break
    for offset in wanted[k:]:
        found[offset] = last
    return found


def findings(
    ws: Workspace, state: State | None = None, *, host_events: bool = False, kept: bool = False
) -> list[Finding]:
    """Everything `verify` names, dismissed ones marked. `regulator verify` folds the stores afresh
    and compares any checkpoint with that fold; the control room and --once pass the state they
    hold (a checkpoint they restored carries MAC-checked results) and only check the MAC. What the
    host wrote unsigned is re-derived by `verify`, and by --once with `host_events` (one pass over
    every line: the open room leaves it out of its frequent refreshes). `kept`: the caller's
    process ends with its answer (`regulator verify`): the fold made here is left to that end
    (engine.base.leaving.keep, D-330), never asked by a caller that lives on."""
    return findings_later(ws, state, host_events=host_events, kept=kept)()


class Begun:
    """verify's passes over the stores' files, begun before a fold (`begin`): one forked child
    that checks the chains, judges every line's time and routes every routing record again, each
    line of signals.ndjson decoded once for all three (D-260)."""

    __slots__ = ("authority", "child", "stamps", "_answer")

    def __init__(
        self, authority: Authority, child: Child, stamps: dict[str, tuple[int, int, int, int]]
    ) -> None:
        self.authority = authority  # the policy in force they judge by
        # its answer: {"checked": the chains and the lines' times, "early": `rerouting.routing_pass`'s}
        self.child = child
        self.stamps = stamps  # each store's file as it stood when they began (_stamp)
        self._answer: Any = None

    def covers(self, ws: Workspace, state: State) -> bool:
        """Asked once `state` is folded (after they began): whether they judge what it folded.
        The same policy in force, and no store's file replaced or written at all since they began
        (device, inode, size and status change time as they were), so the fold read the bytes they
        read. An append counts too (a signal --once routed, a writer's line): a file written in
        place and then appended to is, by its status, only a file appended to."""
        return state.auth is self.authority and all(
            _stamp(ws, name) == stamp for name, stamp in self.stamps.items()
        )

    def _answered(self) -> Any:
        if self._answer is None:  # the child is asked once; its answer is kept for both halves
            self._answer = self.child()
        return self._answer

    def checked(self) -> list[list[Finding]]:
        """[the chains' findings, the lines' times], as `_chains_and_lines` gives them."""
        return _of_json(self._answered()["checked"])

    def early(self) -> dict[str, Any]:
        """`rerouting.routing_pass`'s answer, for `rerouting.judge_routings`."""
        answer: dict[str, Any] = self._answered()["early"]
        return answer

    def cancel(self) -> None:
        self.child.cancel()


_YIELD = 10  # how much `begin`'s children yield to their parent (os.nice)
_SETTLED_NS = 50_000_000  # a store changed more recently than this: `begin` leaves it to after the fold


def begin(ws: Workspace) -> Begun | None:
    """--once's re-derivation (`findings_later` with host_events), begun before its fold: the
    fold is one core's work alone, and the passes over every line need none of it. Only for
    stores that are files here, the policy in force known; `findings_later` uses them when they
    cover what its state folded (`Begun.covers`: no store written since they began), else ends
    them and begins again."""
    if ws.url is not None or not ws.has_stores:
        return None
    authority = ws.authority()
    if authority.unknown:
        return None
    stamps: dict[str, tuple[int, int, int, int]] = {}
    for name in STORES:
        stamp = _stamp(ws, name)
        # a file's status time moves by the kernel's clock tick (a few ms): changed within the
        # last _SETTLED_NS, it could change again in the same tick, unseen
        if stamp is None or time.time_ns() - stamp[3] < _SETTLED_NS:
            return None
        stamps[name] = stamp
    dismissed = _dismissed_lines(authority)
    # --once's own work (fold, rows, JSON) is the longer road and waits on nothing: it goes first,
    # these take what it leaves of the cores (docs/performance.md: 4.4 -> 3.8-4.0 s at 100,000)
    # one child, not one per pass: the two would share what --once leaves of the cores anyway, and
    # one decode of each signal line serves both (docs/performance.md)
    return Begun(authority, beside_json(lambda: _both(ws, authority, dismissed), nice=_YIELD), stamps)


def _both(ws: Workspace, authority: Authority, dismissed: dict[str, dict[int, str]]) -> dict[str, Any]:
    """`begin`'s child: the chains and the lines' times, and `rerouting.routing_pass`'s answer from the
    same decode of each line."""
    routing = RoutingPass(authority)
    parts = _chains_and_lines(ws, {}, dismissed, True, routing)
    return {"checked": _findings_json(parts), "early": routing.answer()}


def _named(found: list[Named]) -> list[Finding]:
    return [Finding("signals.ndjson", number, message, reading) for number, message, reading in found]


def _stamp(ws: Workspace, name: str) -> tuple[int, int, int, int] | None:
    """(device, inode, size, status change time in ns) of a store's file: any write to it, a
    truncation, a rename over it or a change of its times moves one of them."""
    try:
        st = os.stat(ws.store(name).path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns


def _as_json(work: Work) -> Callable[[], Any]:
    return lambda: _findings_json(work())


def _findings_json(parts: list[list[Finding]]) -> list[list[list[Any]]]:
    """Findings as a child sends them through its pipe (`_of_json` reads them back)."""
    return [[[f.store, f.line, f.message, f.reading] for f in part] for part in parts]


def _of_json(answer: Any) -> list[list[Finding]]:
    return [[Finding(str(a), int(b), str(c), str(d)) for a, b, c, d in part] for part in answer]


def _dismissed_lines(authority: Authority) -> dict[str, dict[int, str]]:
    """store -> line number -> the SHA-256 a signed dismissal names: such a line does not stop the
    check of its store (the lines after it are checked on, design §26); it is listed as dismissed
    (_mark_dismissed)."""
    dismissed: dict[str, dict[int, str]] = {}
    for (store_name, number), event in authority.dismissals.items():
        if isinstance(event.get("lineHash"), str):
            dismissed.setdefault(store_name, {})[number] = event["lineHash"]
    return dismissed


def findings_later(
    ws: Workspace,
    state: State | None = None,
    *,
    host_events: bool = False,
    begun: Begun | None = None,
    kept: bool = False,
) -> Callable[[], list[Finding]]:
    """`findings`, begun: the call returned waits for what still runs and gives the whole list, so
    a caller (--once) can do its own work meanwhile.

    Where what the host wrote unsigned is re-derived (`verify`, --once), the work is spread over
    the cores: one forked child checks the chains and judges every line's time (one decode of each
    line for both) from the start, while this process folds the stores (`verify`); a second child
    routes every routing record's signal again from the start too (`rerouting.routing_pass`), judged on the
    fold's account of which signal counts once the fold is done (`rerouting.judge_routings`; on PostgreSQL,
    whose mirrors the fold proves first, the child is forked after the fold). Elsewhere (the open
    room) the chains are checked here, in the caller's thread."""
    from engine.read.load import load

    # a PostgreSQL store's server bytes first: each mirror is proven against them (and fetched
    # again where it is not theirs) before the fold reads it, and the chains are checked on them
    server: dict[str, bytes] = (
        {name: ws.store(name).whole() for name in STORES} if state is None and ws.url else {}
    )
    authority = state.auth if state is not None else ws.authority()
    # re-derive what the host wrote unsigned, and the times (not when the policy in force is
    # unknown: what the host would have written rests on which person events count, and none is
    # judged then; identity.ndjson is named instead, below)
    derive = (state is None or host_events) and not authority.unknown
    if begun is not None and not (state is not None and derive and begun.covers(ws, state)):
        begun.cancel()  # what they read is not what was folded: begun again below
        begun = None
    dismissed = _dismissed_lines(authority)

    def chains_and_lines() -> list[list[Finding]]:
        return _chains_and_lines(ws, server, dismissed, derive)

    early: Callable[[], Any] | None
    checked: Work
    if begun is not None:
        checked, early = begun.checked, begun.early
    else:
        checked = _beside(chains_and_lines) if derive else _here(chains_and_lines)
        # every routing record routed again beside the fold, on the signals it reads (a file
        # store's lines are what the fold reads; a PostgreSQL mirror is proven by the fold first,
        # so there the re-routing waits for it), judged on the fold's account after it
        early = beside_json(lambda: routing_pass(ws, authority)) if derive and not ws.url else None
    fresh = state if state is not None else load(ws, cached=False)
    if kept:
        keep(fresh)  # 1,000,000 events' fold, not freed object by object before the answer (D-330)
    routed = _beside(lambda: [_named(routings(ws, fresh))]) if derive and early is None else None
    uncounted = [*fresh.auth.uncounted, *fresh.uncounted]
    mended = []
    for name in STORES:  # a mirror edited in place (fleet mode): read again from the server
        for number in ws.store(name).mended():
            where = f"line {number} was" if number else "its bytes were"
            mended.append(
                Finding(
                    f"{name}.ndjson",
                    number,
                    f"the local mirror: {where} not the server's (edited in place); read again from the server",
                )
            )

    def finish() -> list[Finding]:
        chains, times = checked()
        found = list(chains)
        kept = uncounted
        if any(f.store == "signals.ndjson" and f.reading == BROKEN for f in found):
            # a dispatch or close saw signals.ndjson's bytes as they were; edited since, the store
            # cannot say what that was: its break is named, not each host event judged on it, nor
            # those judged after them (as an identity store that does not verify, D-92; D-148)
            kept = [u for u in kept if not (u.store == "units" and u.reason.startswith("host event: "))]
        if fresh.auth.unknown:
            # identity.ndjson does not verify: no person event counts, and none is judged one by one
            # (each would read "bad signature" under a policy nobody decided), nor the host events
            # judged by them; the store is named once
            kept = [u for u in kept if u.reason.startswith("malformed")]
            if not any(f.store == "identity.ndjson" for f in found):
                found.append(Finding("identity.ndjson", 1, fresh.auth.unknown))
        lines = {
            name: line_numbers(ws, name, {u.offset for u in kept if u.store == name})
            for name in {u.store for u in kept}
        }
        for u in kept:
            if u.reason.startswith("host event: "):  # a dispatch or close past its vetoes (engine.read.fold)
                message = f"{u.reason.removeprefix('host event: ')}; it counts for nothing"
            else:
                what = "event" if u.reason.startswith("malformed") else "person event"
                message = f"{what} {u.reason}; it counts for nothing"
            found.append(Finding(f"{u.store}.ndjson", lines[u.store][u.offset], message, SKIPPED))
        found += mended + times
        if early is not None:  # judged now: --once did its own work while the pass ran
            found += _named(judge_routings(ws, fresh, early()))
        elif routed is not None:
            found += routed()[0]
        found.sort(key=lambda f: (f.store, f.line))
        found += _checkpoint(ws, fresh if state is None else None)
        return _mark_dismissed(ws, found)

    return finish


def _chains_and_lines(
    ws: Workspace,
    server: dict[str, bytes],
    dismissed: dict[str, dict[int, str]],
    lines: bool,
    routing: RoutingPass | None = None,
) -> list[list[Finding]]:
    """[the chains' findings, the lines' times and review-bys (`lines`)]: one read of each store,
    each line decoded once for both (engine.log.store.verify's `each`), and for `routing` too
    (signals.ndjson's lines, where given)."""
    from engine.log.store import shaped_reads
    from engine.read.fold import SHAPES

    judge = _HostLines(ws.authority().clock == "system") if lines else None
    chains: list[Finding] = []
    for name in STORES:
        each = judge.store(name) if judge is not None else None
        if routing is not None and name == "signals":
            each = routing.beside(each)
        shape = SHAPES.get(name)
        shaped = shaped_reads(shape) if shape is not None else None  # the stores the fold reads in a shape
        found = verify_chain(ws.store(name), server.get(name), dismissed.get(name), each, shaped)
        chains += [Finding(f.store, f.line, f.message, f.reading) for f in found]
    return [chains, judge.found if judge is not None else []]


Work = Callable[[], list[list[Finding]]]


def _here(work: Work) -> Work:
    """`work` done now, its answer kept for the call returned."""
    done = work()
    return lambda: done


def _beside(work: Work) -> Work:
    """`work` in a forked child while this process goes on (a pass over every line, or a
    re-routing of every signal: seconds at 100,000 obligations, which a second core hides); the
    call returned waits for its findings. The child only reads the stores' files (the identity it
    needs is read here first) and answers through a pipe in JSON. Without fork, or when the child
    fails, the work is done here when its answer is asked for."""
    done = beside_json(_as_json(work))
    return lambda: _of_json(done())


class _HostLines:
    """What no signature covers, judged line by line (design §15.0's shared account): no event is
    stamped in the future, nor (on the system clock) more than the allowed skew before the line
    before it; no memory entry is reviewed more than 90 days after it was recorded. Fed each event
    of each store in order (`store(name)` gives that store's feed). Readers still obey what is
    written; verify names it (exit 1)."""

    def __init__(self, system: bool) -> None:
        from engine.log.store import SKEW_S

        self.system = system  # the system clock: times are judged against the line before too
        self.found: list[Finding] = []
        self.now = clock.now()
        self.late = clock.iso(self.now + timedelta(seconds=SKEW_S))  # a canonical `at` after this: future

    def store(self, name: str) -> Each:
        from engine.commands.memory import MAX_REVIEW_DAYS

        store = f"{name}.ndjson"
        found, now, late, system = self.found, self.now, self.late, self.system
        # the last event's (text `hash`) hash, `at` and itself: a line is judged against it by
        # engine.read.persons.time_before, as the fold dates a person event (D-335)
        previous: list[Any] = [None, None, None]

        memory, kind = name == "memory", EventKind.MEMORY.value

        def each(number: int, _start: int, _size: int, event: dict) -> None:
            at = event.get("at")
            if system:
                last_hash, last_at, last = previous
                own = event.get("hash")
                if type(own) is str:  # an event: the next line is judged against it
                    previous[0], previous[1], previous[2] = own, at, event
                if isinstance(at, str):
                    before = last_at if event.get("prev") == last_hash else None
                    # canonical times in order and not ahead (most lines) say nothing: `_times` not asked
                    if not (
                        len(at) == 20
                        and at[-1] == "Z"
                        and at <= late
                        and type(before) is str
                        and len(before) == 20
                        and before[-1] == "Z"
                        and before <= at
                    ):  # out of order, or ahead: the one rule says what it is judged against
                        before = time_before(last, event)
                        found.extend(_times(store, number, at, before, now, late))
            if memory and event.get("kind") == kind:
                review_by = event.get("reviewBy")
                if (
                    type(review_by) is str
                    and len(review_by) == 10
                    and isinstance(at, str)
                    and len(at) == 20
                    and at[-1] == "Z"
                    and review_by <= _latest_review(at[:10])
                ):
                    return  # a canonical date no later than its limit (the usual entry): said by the text
                moment = clock.moment(at)
                try:
                    review = clock.parse_date(str(review_by), "reviewBy")
                except BadInput:
                    review = None
                if (
                    moment is not None
                    and review is not None
                    and (review - moment.date()).days > MAX_REVIEW_DAYS
                ):
                    found.append(
                        Finding(
                            store,
                            number,
                            f"review-by {review} is more than {MAX_REVIEW_DAYS} days after it was recorded",
                        )
                    )

        return each


@functools.lru_cache(maxsize=1024)
def _latest_review(day: str) -> str:
    """The last review-by date a memory entry recorded on `day` (YYYY-MM-DD) may name, as text
    (a canonical date orders as its text); "" when `day` is no date (every text is then past it)."""
    from engine.commands.memory import MAX_REVIEW_DAYS

    try:
        return (date.fromisoformat(day) + timedelta(days=MAX_REVIEW_DAYS)).isoformat()
    except (ValueError, OverflowError):
        return ""


def _times(store: str, number: int, at: str, previous: object, now: datetime, late: str) -> list[Finding]:
    """An `at` in the future, or more than the skew before the line before it (design §15.3). A
    canonical time (YYYY-MM-DDTHH:MM:SSZ) orders as its text, so most lines are judged without
    parsing; only a suspect or unusual one is."""
    from engine.log.store import SKEW_S

    canonical = len(at) == 20 and at[-1] == "Z"
    found = []
    if not canonical or at > late:
        moment = clock.moment(at)
        if moment is not None and (moment - now).total_seconds() > SKEW_S:
            found.append(Finding(store, number, f"stamped {at}, in the future"))
    ordered = canonical and isinstance(previous, str) and len(previous) == 20 and previous[-1] == "Z"
    if isinstance(previous, str) and (not ordered or previous > at):
        moment, before = clock.moment(at), clock.moment(previous)
        if moment is not None and before is not None and (before - moment).total_seconds() > SKEW_S:
            found.append(Finding(store, number, f"stamped {at}, before the line before it ({previous})"))
    return found


def _checkpoint(ws: Workspace, fresh: State | None) -> list[Finding]:
    """A checkpoint without this host key's MAC is forged (ignored by every read); one with it
    must fold to what the stores fold to."""
    from engine.read import checkpoint
    from engine.read.fold import StoreReplaced, advance

    authentic = checkpoint.authentic(ws)
    if authentic is None:
        return []
    if not authentic:
        return [
            Finding(
                CHECKPOINT,
                0,
                "no valid MAC of .regulator/host.key (forged, or from another host); ignored by every read and write",
            )
        ]
    if fresh is None:  # the control room and --once: the MAC is what they check
        return []
    restored = checkpoint.restore(ws, fresh.now)
    if restored is None:
        return []  # stale (the stores moved on from it): unused, nothing to compare
    try:
        advance(ws, restored)
    except StoreReplaced:  # what it folded must be judged again (engine.read.fold.Refold): unused
        return []
    if _extent(restored) != _extent(fresh):
        return []  # a writer appended since the fresh fold: the two read different logs (the next run compares)
    if _digest(restored) != _digest(fresh):
        return [Finding(CHECKPOINT, 0, "does not fold to what the stores fold to; ignored (delete it)")]
    return []


def _extent(state: State) -> dict[str, int]:
    """How far a state folded each store (bytes)."""
    return {name: cursor.offset for name, cursor in state.cursors.items()}


def _digest(state: State) -> tuple[object, ...]:
    return (
        sorted((o.id, o.status, o.disposition, o.by, o.blocks, o.unit) for o in state.obligations.values()),
        sorted((u.id, u.status, u.lease, u.recovery) for u in state.units.values() if u.history),
        sorted((k, e.retraction is not None) for k, e in state.memory.items()),
        list(state.unrouted_ids),
    )


def _mark_dismissed(ws: Workspace, found: list[Finding]) -> list[Finding]:
    dismissals = ws.authority().dismissals
    if not dismissals:
        return found
    out = []
    for f in found:
        event = dismissals.get((f.store.removesuffix(".ndjson"), f.line))
        if event is not None and event.get("lineHash") == _line_hash(
            ws, f.store.removesuffix(".ndjson"), f.line
        ):
            f = Finding(
                f.store,
                f.line,
                f.message,
                f.reading,
                f"{event.get('by')} at {event.get('at')}: {event.get('rationale')}",
            )
        out.append(f)
    return out


def _line_hash(ws: Workspace, store: str, line: int) -> str | None:
    for number, _, raw in store_lines(ws, store):
        if number == line:
            return hashlib.sha256(raw).hexdigest() if raw is not None else None
    return None


def dismissal_leaves(store: str, found: Iterable[Finding]) -> str:
    """What a line still does once dismissed, from all `verify` names on it (asked by `verify
    --dismiss`, the room's dialog and its report; D-209), by what each finding says readers do
    with it (`Finding.reading`, set where the finding is made). A dismissal changes no reader: a
    line no reader takes counts for nothing, and so does an identity line failing its hash or chain
    (the policy's fold leaves it out once dismissed); any other line is read as it stands."""
    readings = {f.reading for f in found}
    if store.removesuffix(".ndjson") == "identity" and BROKEN in readings:
        return "it still counts for nothing (the policy's fold leaves it out)"
    if TAKEN not in readings and SKIPPED in readings:
        return "it still counts for nothing"
    return (
        "readers still take it as it stands: dismissing undoes nothing (retract, resolve or decide "
        "what the line says)"
    )


def dismiss(ws: Workspace, target: str, by: str | None, rationale: str) -> tuple[dict, str]:
    """Append a signed dismissal of a named bad line: verify lists it as dismissed and exits 0
    for it (the log is append-only). Returns the dismissal and what the line still does
    (`dismissal_leaves`)."""
    from engine.commands.written import DismissalEvent
    from engine.read.rules import dismissing, refuse
    from engine.trust.signing import person_event, signer_for

    person = check_person(by, rationale=rationale)
    rationale = check_text("--rationale", rationale, kind="rationale")
    if not ws.has_stores:  # a clone: nothing verified, nothing to dismiss (design §16.2)
        raise BadInput(f"--dismiss {target}: {ABSENT}; dismiss on the host, where the stores are")
    store, _, number = target.partition(":")
    if store.endswith(".ndjson"):
        store = store.removesuffix(".ndjson")
    if store not in STORES or not number.isdigit():
        raise BadInput(
            f"--dismiss {target!r}: name a line as STORE:LINE (e.g. signals:42), as verify names it"
        )
    line = int(number)
    named = [f for f in findings(ws) if f.dismissed is None]
    problem = next((f for f in named if f.store.removesuffix(".ndjson") == store and f.line == line), None)
    if problem is None:
        raise BadInput(f"--dismiss {target}: verify names no undismissed problem on that line")
    if store == "identity" and problem.reading == BROKEN:
        # an identity line that fails its hash leaves the policy unknown: the grant and the key
        # are those of the policy in force just before that line (design §26)
        from engine.checkout.authority import before_line

        people = before_line(ws.root, line).people
        refuse(dismissing(people, person, line))
        signer = signer_for(ws, person, people)
        if signer is None:
            raise Refused(
                f"dismissing identity.ndjson line {line} needs {person}'s signature: {person} lists no key"
            )
    else:
        refuse(dismissing(ws.people(), person))
        signer = signer_for(ws, person)
    event: DismissalEvent = {
        "kind": EventKind.DISMISSAL.value,
        "store": store,
        "line": line,
        "lineHash": _line_hash(ws, store, line),
        "by": person,
        "rationale": rationale,
        "at": clock.iso(clock.now()),
    }
    with ws.exclusive():
        written = ws.store("identity").append(person_event(ws, signer, event))
    on_line = [f for f in named if f.store.removesuffix(".ndjson") == store and f.line == line]
    return written, dismissal_leaves(store, on_line)


class LiveChain(msgspec.Struct):
    """The hash chain of one store checked as lines arrive, for the open control room (design §26): a
    line that fails its hash or breaks the chain appears at once, as a bad line does, without
    hashing the whole store again. `offset`: where the next unchecked line starts."""

    offset: int
    line: int
    prev: set[str]

    @classmethod
    def at(cls, ws: Workspace, name: str, offset: int, line: int) -> LiveChain:
        """Start at the fold's cursor, chained to the last line before it that reads."""
        from engine.log.store import GENESIS, last_event

        prev = GENESIS
        try:
            with open(open_regular(ws.store(name).path), "rb", buffering=0) as handle:
                event = last_event(handle, offset)
                if event is not None:
                    prev = event["hash"]
        except (OSError, Refused):
            pass
        return cls(offset, line, {prev})

    def check(self, ws: Workspace, name: str, upto: int) -> list[Finding]:
        """Check the whole lines from `offset` up to byte `upto` (the fold's cursor); advance."""
        from engine.log.store import _event_of, event_hash, line_hash, read_lines

        found: list[Finding] = []
        if upto <= self.offset:
            return found
        store = f"{name}.ndjson"
        try:
            with open(open_regular(ws.store(name).path), "rb", buffering=0) as handle:
                handle.seek(self.offset)
                for start, raw in read_lines(handle):
                    if start >= upto:
                        break
                    self.line += 1
                    event, why = _event_of(raw)
                    if event is None:
                        continue  # no JSON object: a bad line, which the fold names
                    claimed = event.get("hash")
                    if claimed != (line_hash(event) if why is None else event_hash(event)):
                        found.append(Finding(store, self.line, EDITED, BROKEN))
                    elif event.get("prev") not in self.prev:
                        found.append(Finding(store, self.line, MOVED, BROKEN))
                    else:
                        self.prev = {claimed}
                        continue
                    # a bad line: the next may chain to what it claims or to the line before it
                    if isinstance(claimed, str):
                        self.prev = self.prev | {claimed}
        except (OSError, Refused):
            return found
        self.offset = upto  # the fold's cursor stands at the end of a whole line
        return found
