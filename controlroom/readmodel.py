"""What the control room shows, as plain rows: one source for the app, --once and screenshots.

It formats what the engine derives (held, stale, current, Next-up); it decides none of it. Rows
are computed on demand per key, so a table of 100,000 obligations formats only what is on screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import msgspec

from controlroom.views import BY_VIEW, Key, RowKey
from engine.base.cells import width
from engine.base.errors import RegulatorError
from engine.base.text import escape
from engine.checkout.workspace import Workspace
from engine.commands.proposals import marks, pending, verify_identity
from engine.commands.registers import lint
from engine.commands.verification import Begun, Finding, LiveChain, findings_later
from engine.read import freshness
from engine.read.contracts import Contract
from engine.read.deadlines import Deadlines, OverdueCount
from engine.read.ladder import registers_of
from engine.read.load import load
from engine.read.model import (
    MemoryStatus,
    Obligation,
    ObligationKind,
    ObligationStatus,
    State,
    UnitState,
    UnitStatus,
)
from engine.read.nextup import next_up
from engine.read.openpass import Open, open_pass
from engine.read.queries import (
    age,
    confined,
    days_left,
    memory_status,
    obligation_marks,
    unit_status,
)
from engine.read.rules import decision_of, undecided
from engine.read.vetoes import AWAITING_CLOSE, AWAITING_DECISION, READY_TO_CLOSE, holds, result_waits
from engine.read.worldfold import reporter_label, signal_mark_words
from registry.lint import LintResult, record_findings
from widgets.columns import form, forms

if TYPE_CHECKING:  # loaded on first use, where they are used
    from engine.checkout.authority import People
    from engine.trust.idhistory import HistoryVerdict
    from identity.policy import RoutingPolicy

EXPIRING_DAYS = 7
T = TypeVar("T")


class IdentityCheck(Protocol):
    """One governed file judged: by the decisions in the stores (engine.commands.proposals.FileCheck) or,
    in a clone, by git history (engine.trust.idhistory.HistoryCheck)."""

    @property
    def file(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    def problem(self) -> str: ...


@dataclass
class Snapshot:
    """The engine's state plus the checks --once reports, for one operator."""

    ws: Workspace
    state: State
    person: str | None = None
    lint: LintResult | None = None
    identity: Sequence[IdentityCheck] = ()
    verify: list[Finding] = field(default_factory=list)
    holds: dict[str, list[Obligation]] = field(default_factory=dict)  # unit -> the obligations holding it
    stale: dict[str, list[str]] = field(default_factory=dict)  # unit -> the unresolved findings flagging it
    # the stores' chains checked line by line as the room folds them (design §26): what they found
    # since the last full checks, which `verify` holds too until those checks run again
    live: list[Finding] = field(default_factory=list)
    chains: dict[str, LiveChain] = field(default_factory=dict)
    # the interaction policy's persons, read once per refresh (actions ask them per keypress);
    # None: the policy cannot be read
    people: People | None = None
    routing: RoutingPolicy | None = None  # the routing policy (its deadlines, design §24); None: unreadable
    known: bool = True  # the stores are here: without them (a clone) unit state is unknown (§16.2)
    history: HistoryVerdict | None = None  # without the stores: identity judged by git history
    routed: int | None = None  # --once: signals it routed before reading (None: it did not route)
    # --once: verify's re-derivation of what the host wrote, still running in a forked child
    # (`settle` waits for it and adds what it found to `verify`)
    pending: Callable[[], list[Finding]] | None = None
    # --once: the stores `settle` found a line of named in, dismissed or not (None: not settled)
    named: frozenset[str] | None = None
    not_routed: str | None = None  # --once: why it did not route (read-only, a reader role, ...)
    printed: bool = False  # --once: the rows are printed, with no key to press (a pointer names a command)
    serve: dict[str, object] | None = None  # --once: serve's state, asked once (controlroom.once.serve_of)
    # memory is counted once per change: (memory cursor, entries, today) when last counted, and
    # how many entries were expiring then
    _memory_marker: tuple[int, int, date] | None = None
    _expiring: int = 0
    overdue: OverdueCount = field(default_factory=OverdueCount)  # the header's, kept by the fold's worker
    # a pending proposal's marks (engine.commands.proposals.marks), counted by `derive`
    marks: dict[str, int] = field(default_factory=dict)
    generation: int = 0  # bumped whenever what the rows read changes (a fold, checks applied)
    # (what, args) -> ((generation, now), value); each `what` keeps one type of value
    _cache: dict[tuple[str, tuple[object, ...]], tuple[tuple[int, datetime], object]] = field(
        default_factory=dict
    )

    def cached(self, what: str, args: tuple[object, ...], compute: Callable[[], T]) -> T:
        """`compute()`, kept until the state or the clock moves: the fold's worker warms it, so the
        UI thread finds the header counts and a view's keys ready on a large workspace."""
        marker = (self.generation, self.state.now)
        hit = self._cache.get((what, args))
        if hit is not None and hit[0] == marker:
            return cast(T, hit[1])  # stored by this method under `what`, from a compute of type T
        value = compute()
        self._cache[(what, args)] = (marker, value)
        return value

    def check_appended(self) -> bool:
        """Check the hash chain of every line folded since the last call (engine.commands.
        verification.LiveChain); a line failing its hash or breaking the chain joins `verify` at
        once. True when one was found. The first call only marks where the stores stand."""
        found: list[Finding] = []
        for name, cursor in self.state.cursors.items():
            chain = self.chains.get(name)
            if chain is None:
                self.chains[name] = LiveChain.at(self.ws, name, cursor.offset, cursor.line)
                continue
            found += chain.check(self.ws, name, cursor.offset)
        if found:
            self.live += found
            self.verify = self.verify + found
            self.generation += 1
        return bool(found)

    def settle(self) -> None:
        """Wait for the checks still running (`pending`) and put the whole of verify's findings in
        `verify`, the undismissed ones, as applying the checks does."""
        pending, self.pending = self.pending, None
        if pending is not None:
            self.generation += 1
            found = pending()
            self.named = frozenset(f.store for f in found)
            self._verify_found([f for f in found if f.dismissed is None])

    def _verify_found(self, found: list[Finding]) -> None:
        """`verify` is what the full checks found, then what the live chain check found on lines
        folded after them (those the full checks named too are not named twice)."""
        covered = {(f.store, f.line) for f in found}
        self.live = [f for f in self.live if (f.store, f.line) not in covered]
        self.verify = found + self.live

    def hold(self) -> None:
        """What holds each unit, as engine.read.vetoes.holds decides it (one meaning: design §26)."""
        found = holds(self.ws, self.state)
        self.holds, self.stale = found.obligations, found.findings

    def keep_overdue(self) -> None:
        """Bring the header's overdue account up to the state (a first one passes over every obligation)."""
        self.overdue.keep(self.state.obligations, deadlines(self))

    def derive(self) -> None:
        """Recompute the indexes every row reads (cheap, one pass each)."""
        self.known = self.ws.has_stores
        self.hold()
        try:
            self.people = self.ws.people()
        except RegulatorError:
            self.people = None
        try:
            self.routing = self.ws.routing() if self.known else None
        except RegulatorError:
            self.routing = None
        self.marks = proposal_marks(self.ws, self.state)
        self.generation += 1  # last: a count made meanwhile is kept under the old generation


def proposal_marks(ws: Workspace, state: State) -> dict[str, int]:
    """Each pending proposal's marks: what accepting it would grant, run, move, loosen or hasten (the rows show
    `pending, N !`, as `identity show` does); -1 where the decided files cannot be read."""
    found: dict[str, int] = {}
    for ident in undecided(state.proposals, state.decisions):
        try:
            found[ident] = marks(ws, state.proposals[ident])
        except RegulatorError:
            found[ident] = -1
    return found


def evidence(snap: Snapshot, entry_id: str) -> freshness.Freshness:
    """Whether the files a memory entry cites changed since it was recorded (design §20): one
    history pass for every entry, kept until the state or the clock moves (the fold's worker
    warms it; engine.read.freshness keeps its answers per HEAD)."""

    def check() -> dict[str, freshness.Freshness]:
        return freshness.check(snap.ws.root, (e.event for e in snap.state.memory.values()))

    return snap.cached("evidence", (), check).get(entry_id, freshness.NO_PATH)


def snapshot(
    ws: Workspace,
    person: str | None = None,
    with_checks: bool = True,
    *,
    host_events: bool = False,
    start: State | None = None,
    later: bool = False,
    begun: Begun | None = None,
) -> Snapshot:
    """The state and, `with_checks`, the checks; `host_events` (--once) adds verify's re-derivation
    of what the host wrote unsigned (engine.commands.verification._host_events), `later` leaves its
    findings to `Snapshot.settle`. `start`: a state folded moments ago, brought up to now
    (engine.read.load.load). `begun`: that re-derivation's passes over the files, begun before the
    fold (engine.commands.verification.begin)."""
    snap = Snapshot(ws, load(ws, start=start), person)
    if with_checks:
        refresh_checks(snap, host_events=host_events, later=later, begun=begun)
    snap.derive()
    snap.check_appended()  # marks where each store's chain stands: the room checks what comes after
    return snap


class Checks(msgspec.Struct):
    """What the slow checks found (lint, identity verify, store verify), applied to a snapshot
    by whoever owns it: a worker computes them, the UI thread applies them."""

    lint: LintResult
    identity: Sequence[IdentityCheck]
    verify: list[Finding]
    history: HistoryVerdict | None
    registers: object  # registry.entries.Registers, as State.registers keeps it
    pending: Callable[[], list[Finding]] | None = None  # the findings, when still being found (--once)

    def apply(self, snap: Snapshot) -> None:
        snap.generation += 1
        snap._verify_found(self.verify)
        snap.lint, snap.identity, snap.history, snap.pending = (
            self.lint,
            self.identity,
            self.history,
            self.pending,
        )
        snap.state.registers = self.registers
        snap.hold()  # the registers just read (trunk's too) hold units


def frozen(state: State) -> State:
    """A copy of the containers the checks read (cheap: references, not events), so the fold can go
    on in one thread while the checks read in another. Its register cache starts empty."""
    import copy

    from engine.log.events import EventMap

    copied = copy.copy(state)
    for name in ("obligations", "units", "memory", "proposals", "unrouted_ids", "contracts"):
        setattr(copied, name, dict(getattr(state, name)))
    for name in ("decisions", "problems", "uncounted", "contract_problems"):
        setattr(copied, name, list(getattr(state, name)))
    for name in ("signals", "routings"):
        mapping = EventMap(state.source, getattr(state, name).field)
        mapping.refs = dict(getattr(state, name).refs)
        setattr(copied, name, mapping)
    copied.registers = None
    return copied


def compute_checks(
    ws: Workspace, state: State, *, host_events: bool = False, later: bool = False, begun: Begun | None = None
) -> Checks:
    """Lint, identity verify and store verify: slower (git, hashing). `state` is the checks' own
    (see `frozen`): nothing here writes into a state another thread reads. The store verify goes
    first: with `host_events` its re-derivation runs in a forked child while lint and identity run
    here. `later`: the findings are left to `Snapshot.settle` (--once builds its rows meanwhile)."""
    history = None
    verified = findings_later(ws, state, host_events=host_events, begun=begun)
    result = lint(ws, state)
    identity: Sequence[IdentityCheck]
    if ws.has_stores:
        identity = verify_identity(ws, state)
    else:  # a clone: the decisions are not here, their commits are (design §16.2)
        from engine.trust.idhistory import verify_history

        history = verify_history(ws)
        identity = list(history.files)
    if later:
        return Checks(result, identity, [], history, state.registers, verified)
    verify = [f for f in verified() if f.dismissed is None]
    return Checks(result, identity, verify, history, state.registers)


def refresh_checks(
    snap: Snapshot, *, host_events: bool = False, later: bool = False, begun: Begun | None = None
) -> None:
    """The checks, run and applied in one thread (--once, screenshots, the first frame of tests)."""
    compute_checks(snap.ws, frozen(snap.state), host_events=host_events, later=later, begun=begun).apply(snap)


ID_CELLS = 8


def short_id(ident: str) -> str:
    """How the room and --once show an obligation, memory entry, signal or proposal id: its last
    8 characters, for every kind alike (a ULID's first characters are its time, shared by
    everything recorded in the same second; the CLI takes a unique ending of 6 or more: D-entry
    "room: ids by their last characters")."""
    return ident[-ID_CELLS:]


def expiry_bar(days: int, status: MemoryStatus, width: int = 8) -> str:
    """Days left as a bar: full at 90 days; expired and retracted read differently at a glance."""
    if status == MemoryStatus.RETRACTED:
        return status.value.ljust(width + 6)
    if status == MemoryStatus.EXPIRED:
        return ("×" * width) + f" {status.value}"
    filled = max(1, min(width, round(days / 90 * width)))
    mark = "!" if days <= EXPIRING_DAYS else ""
    return ("█" * filled + "░" * (width - filled)) + f" {days}d{mark}"


# ---- keys: which rows a view has, in order -------------------------------------------------------


def idle_reason(ws: Workspace, state: State, printed: bool = False) -> tuple[str, str]:
    """Why Next-up is empty, for its one row: (the todo units held or flagged, the units past todo),
    counted (an operator's review: the section emptied without a word; Enter names each). Printed
    (`--once`, a CI log), the pointer is the command that names each, not a key."""
    _, excluded = next_up(ws, state)
    if not excluded:
        return "no unit", "has a contract (contracts/UNIT.json)"
    each = "`regulator registry next-up --explain`" if printed else "Enter"
    if not ws.has_stores:  # a clone: no unit's status is known here (design §16.2)
        return "status unknown", f"no stores here: the host's room says ({each}: each unit)"
    held = sum(1 for u in excluded if not any(r.startswith("status ") for r in u["reasons"]))
    return f"{held} held or flagged", f"{len(excluded) - held} not todo ({each}: each unit and why)"


def sectioned(key: Key) -> tuple[str, str]:
    """(section, id) of a row key: a sectioned view's RowKey, or ("", id) for the others."""
    return (key.kind, key.ident) if isinstance(key, RowKey) else ("", key)


def plain(key: Key) -> str:
    """The id a row of a view keyed by the id itself (obligations, units, memory, signals) has; a
    sectioned key is no row there: KeyError, as for a row that is gone."""
    if isinstance(key, RowKey):
        raise KeyError(key)
    return key


def contract_of(unit: UnitState) -> Contract:
    """A listed unit's contract. Units are listed only with one, but a contract file removed while
    the row is on screen leaves the unit without: the row is gone (KeyError), not an error."""
    if unit.contract is None:
        raise KeyError(unit.id)
    return unit.contract


def unit_cell(snap: Snapshot, unit: UnitState) -> str:
    """A unit's status as the room and --once show it: for an in-progress unit whose result is
    recorded, what it waits for (`awaiting close`, `ready to close`, `awaiting decision`:
    engine.read.vetoes.result_waits), `unknown` without stores."""
    if not snap.known:
        return "unknown"
    held = snap.holds.get(unit.id, [])
    return result_waits(snap.state, unit, held, bool(snap.stale.get(unit.id))) or unit_status(
        snap.state, unit
    )


def run_marks(snap: Snapshot, unit: UnitState) -> str:
    """What a row says before a unit's title of how it runs: a started unit that is not confined
    (design §23, it could read the stores), and the outcome of the result its lease recorded."""
    if not snap.known:
        return ""
    marks = []
    if confined(snap.state, unit) is False:
        marks.append("unconfined")
    if unit.result is not None:
        marks.append(f"result {unit.result.outcome}")
    return " · ".join(marks) + " · " if marks else ""


def lint_of(snap: Snapshot) -> LintResult:
    """The lint result a lint row was listed from; a snapshot read again has none until its checks
    run: the row is gone (KeyError), not an error."""
    if snap.lint is None:
        raise KeyError("lint")
    return snap.lint


def keys(view: str, snap: Snapshot, show_all: bool = False) -> list[Key]:
    """The keys of a view in its first order (a copy: the caller may keep it), and the widths its
    table fits to them counted with them (content_widths: 10 ms at 100,000 obligations, which the
    fold's worker pays, not the UI thread, as it lists the keys)."""
    content_widths(snap, view)
    return list(snap.cached("keys", (view, show_all), lambda: _keys(view, snap, show_all)))


def _keys(view: str, snap: Snapshot, show_all: bool) -> list[Key]:
    state = snap.state
    if view == "obligations":
        if show_all:
            return list(state.obligations)
        return list(open_account(snap).keys)  # with the header's counts and the unit column's width
    if view == "units":
        return sorted(k for k, u in state.units.items() if u.contract is not None)
    if view == "memory":
        today = state.now.date()
        return [
            k
            for k, e in state.memory.items()
            if show_all or memory_status(e, today) != MemoryStatus.RETRACTED
        ]
    if view == "signals":
        return list(state.signals)
    if view == "registers":
        registers = registers_of(snap.ws, state)
        queue, _ = next_up(snap.ws, state, explain=False)
        # bad store lines first: what the stores could not say is the first thing to see (§16.3)
        out: list[Key] = [RowKey("bad", str(i)) for i in range(len(state.problems))]
        if state.bad_lines > len(state.problems):  # the rest are counted, not listed (design §26)
            out.append(RowKey("bad", "more"))
        out += [RowKey("verify", str(i)) for i in range(len(snap.verify))]
        out += [RowKey("next", u["id"]) for u in queue] or [RowKey("idle", "next-up")]  # empty: said why
        if snap.lint is not None:
            out += [RowKey("lint", str(i)) for i in range(len(snap.lint.issues))]
        out += [RowKey("finding", k) for k in sorted(registers.findings)]
        out += [RowKey("intake", k) for k in sorted(registers.intake)]
        out += [RowKey("retro", k) for k in sorted(registers.retro)]
        return out
    if view == "sensors":
        return list(sensor_rows(snap))
    if view == "identity":
        registers = registers_of(snap.ws, state)
        out = [RowKey("file", c.file) for c in snap.identity]
        out += [RowKey("proposal", k) for k in state.proposals]
        out += [RowKey("record", k) for k in sorted(registers.records)]
        # listed, never left out
        out += [RowKey("badrecord", i.path) for i in registers.invalid_of("record")]
        return out
    raise KeyError(view)


def row(view: str, snap: Snapshot, key: Key) -> list[str]:
    """The cells of one row, escaped: store text is never markup and never a terminal escape. A
    cell of two forms (a subject after every mark, or after the most urgent only) is its parts
    escaped, joined by widgets.columns.forms: the table shows the whole one where it fits (D-324)."""
    return [forms(*map(escape, c)) if isinstance(c, tuple) else escape(c) for c in _row(view, snap, key)]


def marked(words: list[str], text: str) -> tuple[str, str, str] | str:
    """A subject with its marks before it: every one, and the most urgent with how many more (an
    operator's review: all of them left no room for the subject at 80 columns; the first alone hid
    the rest where there was room, D-319, D-324)."""
    if not words:
        return text
    if len(words) == 1:
        return f"({words[0]}) {text}"
    return f"({', '.join(words)}) ", f"({words[0]} +{len(words) - 1}) ", text


def searched(view: str, snap: Snapshot, key: Key) -> str:
    """What `/` finds a row by, lower case: its cells in their whole forms, every mark of an
    obligation's among them (its row may show only the most urgent: `/withdrawn` still finds each
    with its advisory withdrawn, D-322)."""
    return " ".join(form(c, None) for c in row(view, snap, key)).lower()


def _cell(value: object) -> str:
    """A raw store value as a cell's text, as `escape` makes it (None is empty): a field a line
    that does not read back whole lacks is shown empty, never a KeyError."""
    return "" if value is None else str(value)


NO_UNIT = "(no unit)"  # an obligation on no unit (a recheck, a sensor's stall): its unit cell


def content_widths(snap: Snapshot, view: str) -> dict[str, int]:
    """The widest a column's cells are, for the columns whose defined width is only a ceiling (the
    unit ids): an operator's review found `u3` in a 14-cell column while the subject beside it was
    cut to nothing at 80 columns (D-319). Counted once per generation."""

    def obligations() -> dict[str, int]:
        named = open_account(snap).units  # a few strings, interned by the fold
        return {"unit": max((width(unit or NO_UNIT) for unit in named), default=0)}

    def units() -> dict[str, int]:
        return {"id": max((width(unit) for unit in snap.state.units), default=0)}

    compute = {"obligations": obligations, "units": units}.get(view)
    return snap.cached("widths", (view,), compute) if compute is not None else {}


def _row(view: str, snap: Snapshot, key: Key) -> list[str | tuple[str, str, str]]:
    state = snap.state
    if view == "obligations":
        ob = state.obligations[plain(key)]
        # the most urgent mark before the subject, and how many more (the detail pane lists them):
        # at its end a cell cut them off (an operator's day); all of them before it left no room for
        # the subject at 80 columns (an operator's review, D-319)
        question = "? " if ob.kind == ObligationKind.QUESTION else ""  # a unit's, awaiting an answer
        subject = marked(obligation_marks(state, ob, deadlines(snap).overdue(ob)), question + ob.subject)
        status = ob.status if ob.status != ObligationStatus.RESOLVED else (ob.disposition or ob.status)
        return [
            short_id(ob.id),
            ob.unit or NO_UNIT,
            ob.severity,
            "■" if ob.blocks and ob.status == ObligationStatus.OPEN else "·",  # a closed one holds nothing
            age(state, ob.opened_at),
            status,
            subject,
        ]
    if view == "units":
        unit_id = plain(key)
        unit = state.units[unit_id]
        contract = contract_of(unit)
        held = [short_id(ob.id) for ob in snap.holds.get(unit_id, [])] + snap.stale.get(unit_id, [])
        return [
            unit_id,
            contract.type,
            unit_cell(snap, unit),
            # an obligation or a finding holds it
            "■" if snap.holds.get(unit_id) or snap.stale.get(unit_id) else "",
            str(contract.priority),
            ", ".join(held),
            run_marks(snap, unit) + contract.title,
        ]
    if view == "memory":
        entry_id = plain(key)
        entry = state.memory[entry_id]
        e = entry.event
        today = state.now.date()
        status = memory_status(entry, today)
        return [
            short_id(entry_id),
            status,
            expiry_bar(days_left(entry, today), status),
            e["reviewBy"],
            e.get("unit") or "?",
            ",".join(e.get("scope") or []) or "every unit",
            ("⚠ evidence changed · " if evidence(snap, entry_id).status == freshness.CHANGED else "")
            + f"{e['subject']}: {e['note']}",
        ]
    if view == "signals":
        signal_id = plain(key)
        s = state.signals[signal_id]
        routing = state.routings.get(signal_id)
        return [
            short_id(signal_id),
            reporter_label(s),
            s.get("reportedSeverity") or str(s.get("type") or "-"),  # a unit's question has none
            _cell(routing.get("derivedSeverity")) if routing else "-",
            _cell(routing.get("outcome")) if routing else "unrouted",
            marked(signal_mark_words(state, signal_id, s), _cell(s.get("subject"))),
        ]
    if view == "sensors":
        r = sensor_rows(snap)[plain(key)]
        if r["runs"] is None:  # no stores here (a clone): no run is known
            return [r["name"], r["kind"], r["every"], "unknown", "unknown", "?", "unknown", "no stores here"]
        errors = f"{r['errorCount']} error(s): {r['errors'][0]}" if r["errors"] else ""
        return [
            r["name"],
            r["kind"],
            r["every"],
            r["lastRun"] or "never",
            r["outcome"] or "-",
            str(r["raised"]),
            r["nextRun"] or "due now",
            errors or f"{len(r['signals'])} signal(s) last run, {r['runs']} run(s)",
        ]
    if view == "registers":
        kind, ident = sectioned(key)
        registers = registers_of(snap.ws, state)
        if kind == "bad" and ident == "more":
            more = state.bad_lines - len(state.problems)
            return [
                "store",
                "…",
                "bad lines",
                f"and {more} more bad line(s), counted, not listed (`regulator verify`)",
            ]
        if kind == "bad":
            problem = state.problems[int(ident)]
            return ["store", f"{problem.store}:{problem.line}", f"bad line: {problem.kind}", problem.message]
        if kind == "verify":
            finding = snap.verify[int(ident)]
            return ["store", f"{finding.store}:{finding.line}", "verify", finding.message]
        if kind == "next":
            contract = contract_of(state.units[ident])
            return ["next-up", ident, f"priority {contract.priority}", contract.title]
        if kind == "idle":
            return [
                "next-up",
                "Next-up: none ready",
                *idle_reason(snap.ws, state, snap.printed),
            ]  # named where `register` is dropped
        if kind == "lint":
            issue = lint_of(snap).issues[int(ident)]
            return ["lint", issue.entry, f"{issue.level}: {issue.code}", issue.message]
        if kind == "finding":
            f = registers.findings[ident].fields
            state_text = (
                "resolved" if f["resolved"] else ("acknowledged" if f["ack"].strip() else "awaits ack")
            )
            return [
                "finding",
                ident,
                state_text,
                f"{f['title']} → {', '.join(f.get('affects') or []) or '-'}",
            ]
        if kind == "retro":
            from engine.commands.retro import summary

            retro = registers.retro[ident]
            return ["retro", ident, f"since {retro.fields['since']}", summary(retro)]
        f = registers.intake[ident].fields
        return ["intake", ident, f["disposition"], f["title"]]
    if view == "identity":
        kind, ident = sectioned(key)
        if kind == "file":
            check = next(c for c in snap.identity if c.file == ident)
            return [
                "file",
                ident,
                "as decided" if check.ok else "DIFFERS (hand edit)",
                "" if check.ok else check.problem(),
            ]
        if kind == "proposal":
            p = state.proposals[ident]
            d = decision_of(state, ident)
            verdict = f"{d['decision']} by {d['by']}" if d else pending(snap.marks.get(ident, 0))
            return ["proposal", short_id(ident) + " " + p["file"], verdict, _cell(p.get("rationale"))]
        registers = registers_of(snap.ws, state)
        if kind == "badrecord":
            invalid = registers.invalid[ident]
            return ["record", invalid.id, "INVALID", f"{invalid.code}: {invalid.problem}"]
        r = registers.records[ident].fields
        axes = "/".join(f"{v}" for v in (r.get("status") or {}).values()) or "no status axes"
        open_findings = record_findings(registers).get(ident, [])
        flag = "".join(
            f" ⚑ {f.id}" + ("" if f.fields["ack"].strip() else " (awaits ack)") for f in open_findings
        )
        return ["record", ident, axes, r["label"] + flag]
    raise KeyError(view)


def sensor_rows(snap: Snapshot) -> dict[str, dict]:
    """The declared sensors with their last runs (engine.commands.sensors.listing), by name; none when the
    sensors policy cannot be read (the header says so through identity verify)."""

    def compute() -> dict[str, dict]:
        from engine.commands.sensors import listing

        try:
            return {r["name"]: r for r in listing(snap.ws, snap.state)}
        except RegulatorError:
            return {}

    return snap.cached("sensors", (), compute)


def deadlines(snap: Snapshot) -> Deadlines:
    """The routing policy's deadlines at the state's time (none when it cannot be read)."""
    return snap.cached("deadlines", (), lambda: Deadlines.of(snap.routing, snap.state.now))


def open_account(snap: Snapshot) -> Open:
    """One pass over the obligations for the header's counts, the obligations view's keys and its
    unit column (engine.read.openpass), whichever asks first; the overdue count from the account
    the fold's worker keeps where it keeps one (engine.read.deadlines.OverdueCount)."""

    def compute() -> Open:
        state, judge = snap.state, deadlines(snap)
        return open_pass(state.obligations, state.now, judge, snap.overdue.count(state.obligations, judge))

    return snap.cached("open", (), compute)


# ---- sorting: `s` cycles through a view's sorts ------------------------------------------------

SEVERITY_RANK = {"critical": 0, "blocking": 1, "advisory": 2, "info": 3}
# units by status as their cell says it (unit_cell): what a person must act on first (a lost lease,
# a failed run's decision, a recovery decision, a close), then the work running, the queue, what is
# over (an operator's review: the order was alphabetical, then a failed run sorted among the running)
STATUS_RANK: dict[str, int] = {
    UnitStatus.LOST: 0,
    AWAITING_DECISION: 1,
    UnitStatus.WAITING: 2,
    READY_TO_CLOSE: 3,
    AWAITING_CLOSE: 4,
    UnitStatus.IN_PROGRESS: 5,
    UnitStatus.TODO: 6,
    UnitStatus.CLOSED: 7,
    UnitStatus.ABORTED: 8,
}


def sort_keys(view: str, snap: Snapshot, view_keys: list[Key], sort: str) -> list[Key]:
    """`view_keys` in the order `sort` names; the view's first sort is the order keys() gives."""
    sorts = BY_VIEW[view].sorts
    if not sorts or sort == sorts[0]:
        return view_keys
    state = snap.state
    rank = SEVERITY_RANK
    if view == "obligations":
        obs = state.obligations
        if sort == "severity":

            def by_severity(k: Key) -> tuple[int, str]:
                ob = obs[plain(k)]
                return rank.get(ob.severity, 9), ob.opened_at

            return sorted(view_keys, key=by_severity)

        def by_unit(k: Key) -> tuple[str, str]:
            ob = obs[plain(k)]
            return ob.unit or "~", ob.opened_at

        return sorted(view_keys, key=by_unit)
    if view == "signals":
        sig = state.signals
        if sort == "severity":
            return sorted(view_keys, key=lambda k: rank.get(sig[plain(k)].get("reportedSeverity") or "", 9))

        def by_source(k: Key) -> str:
            s = sig[plain(k)]
            return s.get("unit") or f"~{s.get('by')}"

        return sorted(view_keys, key=by_source)
    if view == "memory":
        mem = state.memory
        if sort == "expiry":
            return sorted(view_keys, key=lambda k: mem[plain(k)].event["reviewBy"])
        return sorted(view_keys, key=lambda k: mem[plain(k)].event.get("unit") or "~")
    if view == "units":
        units = state.units
        if sort == "priority":
            # lower first, as Next-up dispatches (an operator's review: the room put the last first)
            return sorted(view_keys, key=lambda k: (contract_of(units[plain(k)]).priority, plain(k)))
        return sorted(
            view_keys, key=lambda k: (STATUS_RANK.get(unit_cell(snap, units[plain(k)]), 9), plain(k))
        )
    return view_keys
