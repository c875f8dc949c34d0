"""The control room: a Textual application over the engine's read models (SPEC §10).

Nothing slow runs on Textual's event loop. Folding, routing, writes, lint and verify run in thread
workers (`@work(thread=True)`) that post typed messages; the UI owns what it shows and applies
their results. The fold writes into the room's state only while holding `lock`, and the UI reads
it only while holding it too, so a fold never changes a dict the screen is iterating; waiting for
another writer's decide lock happens outside it, so the room keeps drawing and taking keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input

from controlroom import meanings, readmodel
from controlroom.actions import ACTIONS, BY_NAME, Action, dismissable, finding_of, for_view, why_not
from controlroom.lifecycle import decision_preview, lifecycle
from controlroom.views import BY_VIEW, VIEW_DEFS, VIEWS, Key
from engine.base import clock
from engine.base.cells import fit, width
from engine.base.errors import RegulatorError
from engine.base.text import escape
from engine.checkout.workspace import Workspace
from engine.read import checkpoint
from engine.read.contracts import load_contracts
from engine.read.fold import StoreReplaced, advance
from engine.read.load import attach_contracts
from engine.read.queries import unrouted_count
from widgets.detail import DetailPane
from widgets.dialogs import (
    AckDialog,
    Answer,
    DecideDialog,
    DismissDialog,
    OutcomeDialog,
    ProposalDialog,
    ResolveDialog,
    ResolveFindingDialog,
    RetractDialog,
    TextScreen,
)
from widgets.fitline import FitLine, fit_parts, fit_tabs
from widgets.table import LineTable

REGISTER_DIRS = ("findings", "intake", "records", "retro", "contracts", "regulator")
GIT_PARTS = ("HEAD", "index", "packed-refs", "refs")  # a commit, a checkout, a fetch, a staged file
WAITING = "waiting for another writer"
DETAIL_MIN_WIDTH = 110  # narrower than this, the detail pane starts hidden (`p` shows it)


# ---- what workers tell the UI ---------------------------------------------------------------------
class Synced(Message):
    """A fold finished on `snap` (the room's state, updated under its lock)."""

    def __init__(self, snap: readmodel.Snapshot, changed: bool, routed: int) -> None:
        super().__init__()
        self.snap, self.changed, self.routed = snap, changed, routed


class Ticked(Message):
    """The clock moved (the header counted again in the worker): the UI redraws."""

    def __init__(self, snap: readmodel.Snapshot) -> None:
        super().__init__()
        self.snap = snap


class Reloaded(Message):
    """A whole new snapshot, read in a worker: the UI swaps it in."""

    def __init__(self, snap: readmodel.Snapshot) -> None:
        super().__init__()
        self.snap = snap


class Checked(Message):
    """Lint, identity verify and store verify, computed on a copy: the UI applies them."""

    def __init__(self, snap: readmodel.Snapshot, checks: readmodel.Checks, seq: int) -> None:
        super().__init__()
        self.snap, self.checks, self.seq = snap, checks, seq


class WriterWait(Message):
    """Another process holds the decide lock (True), or this room got its turn (False)."""

    def __init__(self, waiting: bool) -> None:
        super().__init__()
        self.waiting = waiting


class Written(Message):
    """An operator's write finished: `ok` and what to tell the operator."""

    def __init__(self, ok: bool, text: str) -> None:
        super().__init__()
        self.ok, self.text = ok, text


class Arranged(Message):
    """A view's rows filtered and sorted in a worker."""

    def __init__(self, request: Arrangement, keys: list[Key]) -> None:
        super().__init__()
        self.request, self.keys = request, keys


@dataclass(frozen=True)
class Arrangement:
    """What a view's rows are filtered and sorted by, and which state they were read from."""

    view: str
    needle: str
    sort: str
    show_all: bool
    snap: int
    generation: int
    plain: bool  # no filter, the first sort: the keys as the view lists them


ARRANGE_INLINE = 2_000  # rows filtered or sorted on the UI thread; more go to a worker


def arrange(
    snap: readmodel.Snapshot,
    request: Arrangement,
    keys: list[Key],
    cancelled: Callable[[], bool] = lambda: False,
) -> list[Key] | None:
    """The rows of a view filtered by `request.needle` (in any cell) and sorted; None if cancelled."""
    if request.needle:
        kept = []
        for i, key in enumerate(keys):
            if i % 1000 == 0 and cancelled():
                return None
            if request.needle in " ".join(readmodel.row(request.view, snap, key)).lower():
                kept.append(key)
        keys = kept
    if request.sort:
        keys = readmodel.sort_keys(request.view, snap, keys, request.sort)
    return keys


class Abandoned(Exception):
    """The room closed while a worker waited for another writer: nothing was written."""


@dataclass
class ViewState:
    """What the operator set on one view, kept when they switch away and back."""

    filter: str = ""
    cursor: Key | None = None
    sort: int = 0
    show_all: bool = False  # `a`: resolved or retracted rows too


def _bindings() -> list[BindingType]:
    """Generated from the view definitions and the action registry: one source for keys, the
    footer, `?` help and the palette."""
    out: list[BindingType] = [Binding(v.key, f"view('{v.name}')", v.title, show=False) for v in VIEW_DEFS]
    out += [Binding(a.key, f"act('{a.name}')", a.short, tooltip=a.label) for a in ACTIONS]
    out += [
        Binding("enter", "lifecycle", "lifecycle"),
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("s", "sort", "sort"),
        Binding("a", "toggle_all", "all"),
        Binding("p", "toggle_pane", "pane"),
        Binding("question_mark", "keys", "keys"),
        Binding("q", "quit", "quit"),
    ]
    return out


NOT_IN_EVERY_VIEW = ("sort", "toggle_all")
GENERAL_KEYS = (
    ("up/down j/k", "move · pgup/pgdn page · home/end first/last"),
    ("enter", "the whole lifecycle of the row"),
    ("/", "filter this view as you type; enter keeps it, esc clears (kept per view)"),
    ("s", "cycle the sort of this view"),
    ("a", "this view: all rows (resolved, retracted) or only the live ones"),
    ("p", "show or hide the detail pane"),
    ("ctrl+p", "command palette: every view and action"),
    ("q", "quit"),
)


class ControlRoom(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "regulator"
    BINDINGS: ClassVar[list[BindingType]] = _bindings()

    def __init__(
        self,
        ws: Workspace,
        person: str | None = None,
        read_only: bool = False,
        view: str = "obligations",
        watch: bool = True,
        background_checks: bool = True,
        now: Callable[[], datetime] | None = None,
        tick_seconds: float = 15.0,
        welcome: str | None = None,
    ) -> None:
        super().__init__()
        self.welcome = welcome  # said as the room opens (the demo: where its workspace lives)
        self.ws = ws
        self.person = person
        self.read_only = read_only
        self.view = view
        self.watching = watch
        self.now = now or clock.now  # injected by tests; ages, expiry and stale follow it
        self.tick_seconds = tick_seconds
        self.views = {name: ViewState() for name in VIEWS}
        # lint, identity verify and store verify can take seconds on a large workspace: the first
        # frame does not wait for them unless asked to (screenshots and snapshot tests do)
        self.background_checks = background_checks
        # the state: folds write under `lock`, the UI reads under it; only workers holding
        # `_fold_lock` change the state, so a worker holding it reads without `lock`
        self.lock = threading.RLock()
        self._fold_lock = threading.Lock()
        self._pending = {"registers": False, "git": False, "queued": False}
        self._pending_lock = threading.Lock()
        self.snap = readmodel.snapshot(ws, person, with_checks=not background_checks)
        self.snap.state.now = self.now()
        # asked once, before the first frame (as the first state is read): a store role that cannot
        # write (PostgreSQL's regulator_reader) makes the room read-only for writes and routing,
        # every write shown disabled with this reason
        self.write_refusal = None if read_only else cannot_write(ws)
        self.live = "● live" if watch else "○ paused"
        self.backend = "postgresql" if ws.url else "files"  # where the stores are: in the header
        self.waiting = False
        self.detail_shown: bool | None = None  # None: by the terminal's width
        self._arranging: Arrangement | None = None  # a filter or sort under way in a worker
        self._table_view = ""  # the view whose rows the table holds
        self._checks_seq = self._checks_applied = 0  # the newest checks asked for, and applied
        self._detail_timer: Timer | None = None
        self._bindings_marker: tuple[str, bool, tuple[bool | None, ...]] | None = None
        self.serve_text: str | None = None  # serve's state (SPEC §22), asked while the room is live
        self.refreshes = 0  # how many store changes were folded in (tests and bench read it)
        self.syncs = 0  # folds finished (tests wait on it)

    @property
    def routes(self) -> bool:
        """Whether this room routes new signals (not read-only, and its store role can write)."""
        return not self.read_only and self.write_refusal is None

    def refusal(self, action: Action, key: Key | None) -> str | None:
        """Why the operator may not take `action` on the row `key` now, or None (with `lock` held)."""
        return self.write_refusal or why_not(action, self.snap, key)

    @property
    def filter_text(self) -> str:
        return self.views[self.view].filter

    # ---- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # kept as attributes: a query from the app searches the top screen, which is a dialog's
        # while one is open, and live updates arrive then too
        self._topbar = FitLine(id="topbar")
        self._tabs = FitLine(id="tabs")
        self._filter = Input(
            placeholder="filter this view as you type (Enter: keep, Esc: clear)", id="filter"
        )
        self._table: LineTable[Key] = LineTable(BY_VIEW[self.view].columns, id="table")
        self._detail = DetailPane(id="detail")
        self._status = FitLine(id="status")
        yield self._topbar
        yield self._tabs
        yield self._filter
        with Horizontal(id="body"):
            yield self._table
            yield self._detail
        yield self._status
        yield Footer(compact=True)

    def on_unmount(self) -> None:
        """Leave a checkpoint of what was folded, so the next start reads only what is new
        (written as the room closes: never before its first frame)."""
        if not self.read_only and checkpoint.worth_saving(self.snap.state):
            with self.lock:
                checkpoint.save(self.ws, self.snap.state)

    def on_mount(self) -> None:
        self._apply_detail_width(self.size.width)
        self.show_view()
        self._table.focus()
        if not self.read_only and unrouted_count(self.snap.state):
            self.sync()  # a signal reported while no room was open: route it, then show it
        if self.watching:
            self.watch_stores()
            self.ask_serve()
        if self.background_checks:
            # after the first frame: the checks hash every store and would compete with it
            self.set_timer(0.5, self.run_checks)
        self.set_interval(self.tick_seconds, self.tick)
        if self.welcome:
            self.notify(escape(self.welcome), title="welcome", timeout=30, markup=False)

    @property
    def table(self) -> LineTable[Key]:
        return self._table

    # ---- workers: all slow work is here, off the event loop -----------------------------------
    def sync(self, registers: bool = False, git: bool = False) -> None:
        """Ask for a fold of what the stores gained (and of the register files, or git, when they
        changed); folds coalesce, one runs at a time."""
        with self._pending_lock:
            self._pending["registers"] |= registers
            self._pending["git"] |= git
            if self._pending["queued"]:
                return  # a fold that has not started yet will take these too
            self._pending["queued"] = True
        self._sync_worker()

    @work(thread=True, group="fold")
    def _sync_worker(self) -> None:
        with self._fold_lock:
            with self._pending_lock:
                registers, git = self._pending["registers"], self._pending["git"]
                self._pending.update(registers=False, git=False, queued=False)
            snap = self.snap
            try:
                changed, routed = self._fold(snap, registers)
            except StoreReplaced:
                fresh = readmodel.snapshot(self.ws, self.person, with_checks=False)
                fresh.state.now = self.now()
                self.post_message(Reloaded(fresh))
                return
            except RegulatorError as exc:
                self.post_message(Written(False, f"reading the stores failed: {exc}"))
                return
            self.post_message(Synced(snap, changed, routed))
        if registers or git:
            self.run_checks()

    def _fold(self, snap: readmodel.Snapshot, registers: bool) -> tuple[bool, int]:
        """Fold, route what is unrouted (waiting for the decide lock outside the state's lock),
        fold again; returns (whether anything changed, how many signals this room routed)."""
        ws = self.ws
        with self.lock:
            snap.state.now = self.now()
            problems = snap.state.bad_lines
            gained = advance(ws, snap.state, final=False)
            found = snap.check_appended()  # a line failing its hash shows at once (SPEC §26)
            pending = unrouted_count(snap.state)
        routed = 0
        if pending and self.routes and ws.has_stores:  # a reader role never routes
            routed = self._route(snap)
        contracts = None
        if registers:
            seen: list[str] = []
            contracts = (load_contracts(ws, seen, snap.state.contract_files), seen)
        with self.lock:
            if contracts is not None:
                attach_contracts(snap.state, contracts[0])
                snap.state.contract_problems = contracts[1]
                snap.state.registers = None  # read again on first use
            changed = (
                any(gained.values()) or registers or routed > 0 or snap.state.bad_lines != problems or found
            )
        if changed:
            # only this worker changes the state (it holds the fold lock): reading it here needs
            # no state lock, so the UI keeps drawing while the indexes and counts are rebuilt
            snap.derive()
            self._warm(snap)
        return changed, routed

    def _warm(self, snap: readmodel.Snapshot) -> None:
        """Count the header and list the current view's keys here, in the worker, so the UI thread
        finds them ready (a pass over 100,000 obligations each)."""
        readmodel.counts(snap)
        readmodel.in_memory(snap)  # the header's "would block once routed"
        readmodel.keys(self.view, snap, self.views[self.view].show_all)

    def _route(self, snap: readmodel.Snapshot) -> int:
        from engine.commands.router import route_locked

        try:
            with self.writer_turn(), self.ws.exclusive(), self.lock:
                written = route_locked(self.ws, snap.state)
                advance(self.ws, snap.state, final=False)
        except RegulatorError as exc:
            self.post_message(Written(False, f"routing failed: {exc}"))
            return 0
        except Abandoned:
            return 0
        finally:
            checkpoint.withdraw()  # the room writes its own when it closes, not in the middle
        return len(written)

    @contextlib.contextmanager
    def writer_turn(self) -> Iterator[None]:
        """Wait (in a worker) until no other process holds the decide lock, saying so in the UI;
        the room closing abandons the wait (`Abandoned`): nothing is written then, and quitting
        never waits for another writer."""
        from textual.worker import get_current_worker

        worker = get_current_worker()
        waited = False
        try:
            while self.ws.decide_lock_held():
                if not waited:
                    waited = True
                    self.post_message(WriterWait(True))
                if worker.is_cancelled:
                    raise Abandoned
                time.sleep(0.05)
            yield
        finally:
            if waited:
                self.post_message(WriterWait(False))

    def run_checks(self) -> None:
        """Lint, identity verify and store verify again (their inputs changed)."""
        self._checks_seq += 1
        self._checks_worker(self._checks_seq)

    @work(thread=True, group="checks")
    def _checks_worker(self, seq: int) -> None:
        snap = self.snap
        with self.lock:
            copy = readmodel.frozen(snap.state)
        try:
            checks = readmodel.compute_checks(self.ws, copy)
        except RegulatorError as exc:
            self.post_message(Written(False, f"checks failed: {exc}"))
            return
        self.post_message(Checked(snap, checks, seq))

    @work(thread=True, group="write")
    def _write(self, call: Callable[[], object], done: str) -> None:
        try:
            with self.writer_turn():
                call()
        except RegulatorError as exc:
            self.post_message(Written(False, str(exc)))
            return
        except Abandoned:
            return
        finally:
            checkpoint.withdraw()  # the room writes its own when it closes, not in the middle
        self.post_message(Written(True, done))
        self.sync(registers=True, git=True)

    # ---- the UI applies what workers found ---------------------------------------------------
    @on(Synced)
    def _synced(self, message: Synced) -> None:
        self.syncs += 1
        if message.snap is not self.snap:
            return
        if message.changed:
            self.refreshes += 1
            self.show_view()

    @on(Ticked)
    def _ticked(self, message: Ticked) -> None:
        if message.snap is self.snap:
            self.show_view()

    @on(Reloaded)
    def _reloaded(self, message: Reloaded) -> None:
        self.snap = message.snap
        self.show_view()
        self.syncs += 1
        self.run_checks()
        if not self.read_only and unrouted_count(self.snap.state):
            self.sync()

    @on(Checked)
    def _checked(self, message: Checked) -> None:
        if message.snap is not self.snap or message.seq < self._checks_applied:
            return  # an older run finishing after a newer one
        self._checks_applied = message.seq
        with self.lock:
            message.checks.apply(self.snap)
        self.show_view()

    @on(WriterWait)
    def _writer_wait(self, message: WriterWait) -> None:
        self.waiting = message.waiting
        self.draw_chrome()

    @on(Written)
    def _written(self, message: Written) -> None:
        if message.ok:
            self.notify(escape(message.text), markup=False)
        else:
            self.notify(escape(message.text), severity="error", timeout=8, markup=False)

    @work(thread=True, group="serve", exclusive=True)
    def ask_serve(self) -> None:
        """serve's state from serve.json and its /healthz (a live room only: a paused one, as in
        screenshots, asks nothing), shown on the status line."""
        from engine.host.instance import describe, serve_state

        try:
            text = describe(serve_state(self.ws))
        except (RegulatorError, OSError) as exc:
            text = f"serve: unknown ({exc})"
        if text != self.serve_text:
            self.serve_text = text
            self.call_from_thread(self.draw_chrome)

    @work(thread=True, group="tick", exclusive=True)
    def tick(self) -> None:
        """The clock moves between store changes: ages, expiry bars, stale, expiring ≤ 7d (counted
        here, in the worker; the UI redraws)."""
        if self.watching:
            self.ask_serve()
        snap = self.snap
        with self._fold_lock:  # no fold changes the state meanwhile: reading needs no state lock
            snap.state.now = self.now()
            self._warm(snap)
        self.post_message(Ticked(snap))

    # ---- drawing ---------------------------------------------------------------------------------
    def _row(self, view: str, key: Key) -> list[str]:
        with self.lock:
            return readmodel.row(view, self.snap, key)

    def show_view(self) -> None:
        if not self.screen_stack:  # a worker's result arriving as the room closes
            return
        view = self.view
        with self.lock:
            listed = readmodel.keys(view, self.snap, self.views[self.view].show_all)
            request = self._arrangement()
            keys: list[Key] | None = listed
            if request.plain or len(listed) <= ARRANGE_INLINE:
                keys = arrange(self.snap, request, listed)  # never cancelled: never None
                self._arranging = None
            else:  # a pass over every row: a worker does it, the rows shown stay until it is done
                self._arranging = request
                self._arrange(request, listed)
                if self._table_view == view:
                    keys = None  # until then the rows shown stay; another view's never do
        if keys is not None:
            self._set_rows(keys)
        self.draw_chrome()
        self.draw_detail()

    def _set_rows(self, keys: list[Key]) -> None:
        view = self.view
        fresh, self._table_view = self._table_view != view, view
        self.table.set_rows(
            keys,
            lambda key: self._row(view, key),
            BY_VIEW[view].columns,
            select=self.views[view].cursor,
            fresh=fresh,  # a view's first visit starts at its own first row
        )

    def _arrangement(self) -> Arrangement:
        settings = self.views[self.view]
        sorts = BY_VIEW[self.view].sorts
        return Arrangement(
            self.view,
            settings.filter.lower(),
            sorts[settings.sort] if sorts else "",
            self.views[self.view].show_all,
            id(self.snap),
            self.snap.generation,
            not settings.filter and (not sorts or settings.sort == 0),
        )

    @work(thread=True, exclusive=True, group="arrange")
    def _arrange(self, request: Arrangement, keys: list[Key]) -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()
        with self._fold_lock:  # no fold changes the state meanwhile: rows are read without `lock`
            arranged = arrange(self.snap, request, keys, lambda: worker.is_cancelled)
        if arranged is not None:
            self.post_message(Arranged(request, arranged))

    @on(Arranged)
    def _arranged(self, message: Arranged) -> None:
        if message.request != self._arranging or message.request != self._arrangement():
            return  # the operator typed on, or the state moved: a newer one is under way
        self._arranging = None
        self._set_rows(message.keys)
        self.draw_chrome()
        self.draw_detail()

    def draw_chrome(self) -> None:
        """The header, the tabs and the status line, each chosen for the width it is drawn at (so a
        resize relayouts them in the same frame: widgets.fitline)."""
        if not self.screen_stack:
            return
        live = f"⏳ {WAITING}" if self.waiting else self.live
        with self.lock:
            right = readmodel.header_text(self.snap, live, store=self.backend)
            compact = readmodel.header_text(
                self.snap, "⏳ waiting" if self.waiting else self.live[:1], True, store=self.backend
            )
        mode = ""
        if self.read_only:
            mode = " · read-only"
        elif self.write_refusal:  # a store role that cannot write: the reason is on every action
            mode = " · read-only: the store role cannot write"
        operator = f"as {self.person}" if self.person else "no operator"
        left = f"regulator · {self.ws.root.name} · {operator}"
        person, flag = self.person or "no operator", "ro" if mode else ""
        self._topbar.show(lambda cells: Text(header_line(left + mode, right, person, flag, compact, cells)))
        titles = [(v.key, v.title) for v in VIEW_DEFS]
        current = VIEWS.index(self.view)

        def tabs(cells: int) -> Text:
            line = Text()
            for i, label in enumerate(fit_tabs(titles, current, cells)):
                line.append(f" {label} ", style="reverse bold" if i == current else "")
                line.append(" ")
            return line

        self._tabs.show(tabs)
        first = [f"{len(self.table.keys)} row(s)", *self.indicators()]
        if self._arranging is not None:
            first.insert(0, "filtering and sorting…")
        warnings = []
        if self.waiting:
            warnings.append(f"⏳ {WAITING} (decide lock): keys still work")
        if self.view == "obligations" and not self.routes:
            with self.lock:
                unrouted = self._unrouted_status()
            if unrouted:
                warnings.append(unrouted)
        if self.serve_text:  # serve's state (a live room asks it)
            warnings.append(escape(self.serve_text))
        hints = ["enter lifecycle", "/ filter"]
        hints += [
            hint for hint, name in (("s sort", "sort"), ("a all", "toggle_all")) if not self.not_here(name)
        ]
        hints += ["p pane", "? keys"]
        self._status.show(lambda cells: Text(status_line(first, warnings, hints, cells)))
        self._refresh_bindings_if_changed()

    def indicators(self) -> list[str]:
        """What this view is narrowed or ordered by: shown first on the status line, never cut."""
        settings = self.views[self.view]
        sorts = BY_VIEW[self.view].sorts
        out = []
        if sorts:
            out.append(f"sort: {sorts[settings.sort]}")
        if settings.filter:
            out.append(f"filter: {settings.filter}")
        if BY_VIEW[self.view].all_rows:
            out.append("all rows" if settings.show_all else "live rows")
        return out

    def _unrouted_status(self) -> str | None:
        """What routing the signals this room does not route would open (SPEC §16), or None."""
        if not self.snap.known:
            return None
        found = readmodel.in_memory(self.snap)
        why = "read-only" if self.read_only else "this store's role cannot write"
        if found.problem is not None:
            return escape(
                f"⚠ {found.unrouted} signal(s) not routed here ({why}) and not judged: {found.problem}"
            )
        holds = found.holds
        if not holds:
            return None
        units = ", ".join(sorted({h.unit for h in holds}))
        return escape(
            f"⚠ not routed here ({why}): routing would open {len(holds)} blocking obligation(s) on {units}"
        )

    def draw_detail(self) -> None:
        if not self._detail.display:
            return
        key = self.table.current_key
        with self.lock:
            lines = lifecycle(self.view, self.snap, key)
            actions = []
            if not self.read_only:
                for action in for_view(self.view):
                    actions.append((action.key, action.label, self.refusal(action, key)))
        self._detail.show(lines, actions)

    @on(LineTable.Highlighted)
    def _highlighted(self, event: LineTable.Highlighted[Key]) -> None:
        # The cursor moves at once; the detail pane and the footer follow when the keys pause, so
        # holding an arrow key over 100,000 rows never waits for a pane's layout on every row.
        self.views[self._table_view].cursor = event.key
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(0.06, self._follow_cursor)

    def _follow_cursor(self) -> None:
        self._detail_timer = None
        if not self.is_running:
            return
        self.draw_detail()
        self._refresh_bindings_if_changed()

    def _refresh_bindings_if_changed(self) -> None:
        """The footer recomposes on every refresh: do it only when an action's state changed."""
        states = tuple(self.check_action("act", (a.name,)) for a in ACTIONS)
        marker = (self.view, self.read_only, states)
        if marker != self._bindings_marker:
            self._bindings_marker = marker
            self.refresh_bindings()

    def on_resize(self, event: events.Resize) -> None:
        self._apply_detail_width(event.size.width)
        self.draw_chrome()

    def _apply_detail_width(self, columns: int) -> None:
        if self.detail_shown is None:
            self._detail.display = columns >= DETAIL_MIN_WIDTH

    # ---- actions: navigation ----------------------------------------------------------------------
    def action_view(self, view: str) -> None:
        self.view = view
        settings = self.views[view]
        with self.prevent(Input.Changed):
            self._filter.value = settings.filter
        self._filter.set_class(bool(settings.filter), "shown")
        self.show_view()

    def action_toggle_all(self) -> None:
        """`a`, per view: the resolved or retracted rows too, or only the live ones."""
        reason = self.not_here("toggle_all")
        if reason:  # from the palette
            self.notify(reason, markup=False)
            return
        settings = self.views[self.view]
        settings.show_all = not settings.show_all
        self.show_view()

    def action_sort(self) -> None:
        sorts = BY_VIEW[self.view].sorts
        reason = self.not_here("sort")
        if reason:  # from the palette
            self.notify(reason, markup=False)
            return
        settings = self.views[self.view]
        settings.sort = (settings.sort + 1) % len(sorts)
        self.show_view()

    def action_toggle_pane(self) -> None:
        self.detail_shown = not self._detail.display
        self._detail.display = self.detail_shown
        self.draw_detail()

    def action_filter(self) -> None:
        box = self._filter
        box.add_class("shown")
        box.focus()

    def action_clear_filter(self) -> None:
        box = self._filter
        with self.prevent(Input.Changed):
            box.value = ""
        box.remove_class("shown")
        self.views[self.view].filter = ""
        self.show_view()
        self.table.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        """Filter as you type; the text is kept for this view."""
        self.views[self.view].filter = event.value.strip()
        self.show_view()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.views[self.view].filter = event.value.strip()
        if not self.filter_text:
            event.input.remove_class("shown")
        self.show_view()
        self.table.focus()

    def action_lifecycle(self) -> None:
        key = self.table.current_key
        if key is None or isinstance(self.screen, TextScreen):
            return
        with self.lock:
            lines = lifecycle(self.view, self.snap, key)
        self.push_screen(TextScreen(f"{BY_VIEW[self.view].title} · {key} — lifecycle", lines))

    def help_lines(self) -> list[str]:
        """`?`: generated from the view definitions, the action registry and the header legend."""
        definition = BY_VIEW[self.view]
        lines = [
            f"workspace: {self.ws.root}",
            f"  reopen it: regulator controlroom --root {self.ws.root}"
            + (f" --as {self.person}" if self.person else ""),
            "views: " + " · ".join(f"{v.key} {v.title}" for v in VIEW_DEFS),
            "",
        ]
        lines.append(f"keys of this view ({definition.title}; lifecycle: {definition.lifecycle}):")
        lines += [f"  {key:<12} {what}" for key, what in GENERAL_KEYS]
        if definition.sorts:
            lines.append(f"  sorts: {', '.join(definition.sorts)}")
        with self.lock:
            for action in for_view(self.view):
                state = (
                    "hidden: read-only"
                    if self.read_only
                    else (self.refusal(action, self.table.current_key) or "available")
                )
                lines.append(f"  {action.key:<12} {action.label} ({state})")
        lines += ["", "the header (narrow form = wide form, then what it counts):"]
        lines += [
            f"  {narrow if narrow == full else f'{narrow} = {full}'}  {meaning}"
            for full, narrow, meaning in readmodel.HEADER_LEGEND
        ]
        lines += ["", "marks in the tables:"]
        lines += [f"  {mark}  {meaning}" for mark, meaning in readmodel.TABLE_LEGEND]
        return lines

    def action_keys(self) -> None:
        self.push_screen(TextScreen("keys, and what the header says", self.help_lines()))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in NOT_IN_EVERY_VIEW:  # hidden where the view has none (the key says why)
            return self.not_here(action) is None
        if action == "act" and parameters:
            spec = BY_NAME[str(parameters[0])]
            if self.read_only or spec.view != self.view:
                return False
            table = getattr(self, "_table", None)
            if table is None or not table.is_mounted:
                return True  # before the first frame: shown, judged once there is a row
            with self.lock:
                return None if self.refusal(spec, table.current_key) else True
        return True

    def not_here(self, action: str) -> str | None:
        """Why `s` or `a` does nothing in this view, or None when it does something."""
        definition = BY_VIEW[self.view]
        if action == "sort" and not definition.sorts:
            return f"{definition.title} has one order"
        if action == "toggle_all" and not definition.all_rows:
            return f"{definition.title} lists every row: `a` has nothing to add"
        return None

    def on_key(self, event: events.Key) -> None:
        """A disabled action's key explains itself instead of doing nothing."""
        if len(self.screen_stack) != 1 or self.focused is self._filter:
            return
        for key, name in (("s", "sort"), ("a", "toggle_all")):
            reason = self.not_here(name) if event.key == key else None
            if reason:
                event.stop()
                self.notify(reason, markup=False)
                return
        for action in for_view(self.view):
            if event.key == action.key:
                with self.lock:
                    reason = (
                        "read-only: writes are hidden"
                        if self.read_only
                        else self.refusal(action, self.table.current_key)
                    )
                if reason:
                    event.stop()
                    self.notify(escape(f"{action.label}: {reason}"), severity="warning", markup=False)

    def get_system_commands(self, screen: Screen) -> Iterator[SystemCommand]:
        for command in super().get_system_commands(screen):
            # ours save where the operator is and say where, and list this view's keys and the
            # header legend: each is listed once
            if command.title not in ("Screenshot", "Keys"):
                yield command
        yield SystemCommand(
            "Screenshot", "save an SVG of this screen in the current folder", self.screenshot_here
        )
        for v in VIEW_DEFS:
            yield SystemCommand(
                f"View: {v.title}", f"key {v.key}", lambda name=v.name: self.action_view(name)
            )
        if not self.read_only:
            for action in ACTIONS:
                yield SystemCommand(
                    f"Action: {action.label}",
                    f"key {action.key} in {BY_VIEW[action.view].title}",
                    lambda action=action: self._palette_act(action),
                )
        yield SystemCommand("Filter this view", "key /", self.action_filter)
        yield SystemCommand("Sort: next order", "key s", self.action_sort)
        yield SystemCommand("Show all rows / live rows", "key a", self.action_toggle_all)
        yield SystemCommand("Detail pane: show / hide", "key p", self.action_toggle_pane)
        yield SystemCommand("Keys", "this view's keys and the header legend (key ?)", self.action_keys)

    def screenshot_here(self) -> None:
        """The palette's Screenshot: an SVG in the current folder, named for the view and the time.
        (Not an override of App.save_screenshot: Textual calls that one with its own arguments.)"""
        stamp = self.now().strftime("%Y%m%dT%H%M%SZ")
        path = Path.cwd() / f"regulator-{self.view}-{stamp}.svg"
        try:
            write_whole(path, self.export_screenshot(title=f"regulator · {BY_VIEW[self.view].title}"))
        except RegulatorError as exc:
            self.notify(escape(str(exc)), severity="error", markup=False)
            return
        self.notify(escape(f"screenshot saved: {path}"), markup=False)

    def _palette_act(self, action: Action) -> None:
        if self.view != action.view:
            self.action_view(action.view)
        self.action_act(action.name)

    # ---- actions: writes (each the CLI's engine call, in a worker) ------------------------------
    def action_act(self, name: str) -> None:
        spec = BY_NAME[name]
        key = self.table.current_key
        with self.lock:
            reason = "read-only" if self.read_only else self.refusal(spec, key)
        if reason or key is None:
            self.notify(escape(f"{spec.label}: {reason}"), severity="warning", markup=False)
            return
        with self.lock:
            self._open_dialog(name, key)

    def _open_dialog(self, name: str, key: Key) -> None:
        state = self.snap.state
        if name == "resolve":
            from engine.commands.obligations import dispositions_for
            from engine.read.model import ObligationKind

            ob = state.obligations[readmodel.plain(key)]
            allowed = dispositions_for(ob)
            if ob.kind == ObligationKind.QUESTION:  # a unit's question: answered, the answer signed
                summary = f"question from {ob.unit or '(no unit)'}: {ob.subject}"
                allowed = ("answered", *[d for d in allowed if d != "answered"])
            else:
                summary = f"{ob.severity} on {ob.unit or '(no unit)'}: {ob.subject}"
            dialog = ResolveDialog(
                ob.id,
                summary,
                {d: meanings.DISPOSITIONS[d] for d in allowed},
                question=ob.kind == ObligationKind.QUESTION,
            )
            self.push_screen(dialog, lambda r: self._resolve(ob.id, r))
        elif name == "retract":
            entry_id = readmodel.plain(key)
            event = state.memory[entry_id].event
            self.push_screen(
                RetractDialog(entry_id, f"{event['subject']}: {event['note']}"),
                lambda r: self._retract(entry_id, r),
            )
        elif name == "decide":
            unit_id = readmodel.plain(key)

            def preview(action: str) -> list[str]:
                with self.lock:
                    return decision_preview(self.snap, unit_id, action)

            self.push_screen(
                DecideDialog(unit_id, meanings.RECOVERY, preview), lambda r: self._decide(unit_id, r)
            )
        elif name == "outcome":
            signal_id = readmodel.plain(key)
            signal = state.signals[signal_id]
            self.push_screen(
                OutcomeDialog(
                    signal_id, f"{signal['subject']}: {signal['claim']}", signal["prediction"]["resolvesAt"]
                ),
                lambda r: self._outcome(signal_id, r),
            )
        elif name in ("ack", "resolve-finding"):
            from engine.read.ladder import registers_of

            ident = finding_of(self.snap, key) or ""
            finding = registers_of(self.ws, state).findings[ident]
            title, path, affects = (
                finding.fields["title"],
                str(finding.path),
                finding.fields.get("affects") or [],
            )
            if name == "ack":
                self.push_screen(AckDialog(ident, title, path, affects), lambda r: self._ack(ident, r))
            else:
                self.push_screen(
                    ResolveFindingDialog(ident, title, path, affects),
                    lambda r: self._resolve_finding(ident, r),
                )
        elif name == "dismiss":
            target = dismissable(self.snap, key) or ""
            message = " · ".join(readmodel.row("registers", self.snap, key)[2:])
            self.push_screen(DismissDialog(target, message), lambda r: self._dismiss(target, r))
        else:
            from engine.commands.proposals import review

            ident = readmodel.sectioned(key)[1]
            proposal = state.proposals[ident]
            verdict = "accept" if name == "accept" else "reject"
            replay: list[str] = []  # accepting a routing policy: what it would have changed (SPEC §20)
            if verdict == "accept" and proposal["file"] == "regulator/policy/routing.yaml":
                from engine.commands.whatif import proposal_replay

                replay = proposal_replay(self.ws, proposal["content"], state)
            self.push_screen(
                ProposalDialog(
                    ident,
                    verdict,
                    f"{proposal['file']}: {proposal['rationale']}",
                    review(self.ws, proposal),
                    replay,
                ),
                lambda r: self._proposal(ident, verdict, r),
            )

    def _resolve(self, ob_id: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.obligations import resolve

        self._write(
            lambda: resolve(self.ws, ob_id, self.person, answer["disposition"], answer["rationale"]),
            f"obligation {ob_id} resolved: {answer['disposition']}",
        )

    def _retract(self, entry_id: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.memory import retract

        self._write(
            lambda: retract(self.ws, entry_id, self.person, answer["reason"]),
            f"memory entry {entry_id} retracted",
        )

    def _decide(self, unit_id: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.units import decide

        self._write(
            lambda: decide(self.ws, unit_id, answer["action"], self.person, answer["rationale"]),
            f"{unit_id}: {answer['action']} recorded",
        )

    def _outcome(self, signal_id: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.predictions import resolve_prediction

        said = "came true" if answer["cameTrue"] == "yes" else "did not come true"
        self._write(
            lambda: resolve_prediction(
                self.ws, signal_id, answer["cameTrue"], self.person, answer["rationale"]
            ),
            f"signal {signal_id}: the prediction {said} (recorded, signed)",
        )

    def _ack(self, finding_id: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.registers import ack
        from engine.read.load import load

        self._write(
            lambda: ack(self.ws, load(self.ws, stores=()), finding_id, self.person, commit=True),
            f"{finding_id} acknowledged and committed",
        )

    def _resolve_finding(self, finding_id: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.registers import resolve_finding
        from engine.read.load import load

        self._write(
            lambda: resolve_finding(
                self.ws, load(self.ws, stores=()), finding_id, self.person, answer["rationale"], commit=True
            ),
            f"{finding_id} resolved and committed",
        )

    def _dismiss(self, target: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.verification import dismiss

        self._write(
            lambda: dismiss(self.ws, target, self.person, answer["rationale"]),
            f"{target} dismissed (signed); it still counts for nothing",
        )

    def _proposal(self, proposal_id: str, verdict: str, answer: Answer | None) -> None:
        if answer is None:
            return
        from engine.commands.proposals import decide

        outcome = "accepted" if verdict == "accept" else "rejected"
        self._write(
            lambda: decide(self.ws, proposal_id, self.person, answer["rationale"], outcome),
            f"proposal {proposal_id} {outcome}" + (" and committed" if outcome == "accepted" else ""),
        )

    # ---- live ------------------------------------------------------------------------------------
    def watch_paths(self) -> list[Path]:
        """The stores, the register folders and git's HEAD, refs and index (a commit changes lint
        and Next-up without touching a register file). A clone has no .regulator/ (SPEC §16.2)."""
        candidates = [self.ws.state_dir, *(self.ws.root / d for d in REGISTER_DIRS), self.ws.tree / ".git"]
        return [p for p in candidates if p.is_dir()]

    def _classify(self, changed: list[Path]) -> tuple[bool, bool, bool]:
        """(a store changed, a register file changed, git moved)."""
        git_dir = self.ws.tree / ".git"
        stores = registers = git = False
        for path in changed:
            if path == git_dir or git_dir in path.parents:
                parts = path.relative_to(git_dir).parts
                git |= bool(parts) and parts[0] in GIT_PARTS and not path.name.endswith(".lock")
            elif path == self.ws.state_dir or self.ws.state_dir in path.parents:
                stores |= path.suffix == ".ndjson"
            else:
                registers = True
        return stores, registers, git

    @work(exclusive=True, group="watch")
    async def watch_stores(self) -> None:
        # a clone has no .regulator/ (SPEC §16.2): only the folders that exist are watched
        paths = [str(p) for p in self.watch_paths()]
        if not paths:
            return
        stop = _follow_server(self.ws)  # PostgreSQL: NOTIFY brings each append into the mirror
        try:
            await self._watch_paths(paths)
        finally:
            if stop is not None:
                stop.set()

    async def _watch_paths(self, paths: list[str]) -> None:
        from watchfiles import awatch

        # no default filter: it ignores everything under .git, and git's HEAD, refs and index matter
        async for changes in awatch(
            *paths, watch_filter=None, debounce=60, step=20, rust_timeout=500, yield_on_timeout=False
        ):
            stores, registers, git = self._classify([Path(p) for _, p in changes])
            if stores or registers or git:
                self.sync(registers=registers, git=git)
            await asyncio.sleep(0)


def header_line(left: str, right: str, person: str, flag: str, compact: str, cells: int) -> str:
    """The header for `cells` columns: whole when it fits; narrower, the workspace's name gives
    way first, then every count stays, abbreviated (`flag`, "ro", stays; the operator's name goes);
    when even that is more than a line, it takes two, broken between parts: no part is cut."""
    for lead in (left, left.split(" · ", 2)[-1]):
        if width(lead) + 5 + width(right) <= cells:
            return f" {lead}    {right}"
    for lead in (f"{person} {flag}".strip(), flag):
        line = f"{lead} {compact}".strip()
        if width(line) < cells:
            return f" {line}"
        if width(line) == cells:  # the margin gives way before a count does
            return line
    # more than a line holds: two lines (or more), broken between parts, rather than a part cut
    lines: list[str] = []
    line = f" {person} {flag} ".replace("  ", " ")
    for part in compact.split("·"):
        candidate = line + part if line.endswith(" ") else f"{line}·{part}"
        if width(candidate) > cells and line.strip():
            lines.append(line.rstrip())
            candidate = f" {part}"
        line = candidate
    lines.append(line)
    return "\n".join(fit(one, cells) for one in lines)


def status_line(first: list[str], warnings: list[str], hints: list[str], cells: int) -> str:
    """The status line for `cells` columns: the row count and what the view is narrowed or sorted
    by first (never cut), then each warning (cut with `…` when it must be), then the key hints
    that fit."""
    head = " · ".join(first)
    for warning in warnings:
        room = cells - width(head) - 3
        if room < 12:
            break
        head = f"{head} · {fit(warning, room)}"
    return fit_parts([head], hints, cells)


def cannot_write(ws: Workspace) -> str | None:
    """Why no write this room offers can be taken on these stores (a PostgreSQL role without
    INSERT, or not a host), in the words the operator sees; None on files and for regulator_host."""
    try:
        why = ws.cannot_write()
    except RegulatorError as exc:  # never "may write" by default: shown disabled, and why
        return f"cannot tell whether this store's role can write ({exc})"
    return f"{why}: open the room as regulator_host" if why else None


def _follow_server(ws: Workspace) -> threading.Event | None:
    """On PostgreSQL (SPEC §18), a thread LISTENs for appends from every host and brings them into
    the local mirror, where the file watch above sees them; None for file stores."""
    url = ws.url
    if url is None:
        return None
    from engine.log.pg import server as pg_srv

    stop = threading.Event()

    def pull() -> None:
        ws.sync()

    def run() -> None:
        with contextlib.suppress(Exception):  # the watch goes on with what the mirror holds
            pg_srv.follow(url, pull, stop)

    threading.Thread(target=run, name="regulator-listen", daemon=True).start()
    return stop


def screenshot(
    ws: Workspace, path: Path, view: str, person: str | None, size: tuple[int, int] = (150, 42)
) -> None:
    """Render the real application headless to an SVG (the source of screenshots/)."""
    app = ControlRoom(ws, person, view=view, watch=False, background_checks=False)
    app.live = "● live"

    async def shoot() -> str:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return app.export_screenshot(title=f"regulator · {BY_VIEW[view].title}")

    write_whole(path, asyncio.run(shoot()))


def write_whole(path: Path, text: str) -> None:
    """The file whole or not at all: a temporary file beside it, renamed over it (SPEC §16.4)."""
    import tempfile

    from engine.base.errors import BadInput

    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(prefix=".regulator-", suffix=".svg.tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)  # as a plain write would leave it, not mkstemp's 0600
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise BadInput(f"{path}: cannot write it ({exc.strerror or exc}); nothing written") from None
