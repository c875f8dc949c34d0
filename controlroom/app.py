"""The control room: a Textual application over the engine's read models (design §10).

Nothing slow runs on Textual's event loop. Folding, routing, writes, lint and verify run in thread
workers (`@work(thread=True)`) that post typed messages; the UI owns what it shows and applies
their results. The fold writes into the room's state only while holding `lock`, and the UI reads
it only while holding it too, so a fold never changes a dict the screen is iterating; waiting for
another writer's decide lock happens outside it, so the room keeps drawing and taking keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input

from controlroom import header, prepare, readmodel
from controlroom.actions import ACTIONS, BY_NAME, Action, for_view, why_not
from controlroom.host import cannot_write, classify, follow_server, watch_paths, write_whole
from controlroom.keys import NOT_IN_EVERY_VIEW, bindings, elsewhere, help_lines, palette
from controlroom.lifecycle import lifecycle
from controlroom.messages import (
    Abandoned,
    Arranged,
    Arrangement,
    Checked,
    Prepared,
    Reloaded,
    Synced,
    Ticked,
    ViewState,
    WriterWait,
    Written,
    arrange,
)
from controlroom.views import BY_VIEW, VIEWS, Key, columns_for
from engine.base import clock
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
    Answer,
    TextScreen,
)
from widgets.fitline import FitLine
from widgets.table import LineTable

WAITING = "waiting for another writer"
DETAIL_MIN_WIDTH = 110  # narrower than this, the detail pane starts hidden (`p` shows it)


ARRANGE_INLINE = 2_000  # rows filtered or sorted on the UI thread; more go to a worker


class ControlRoom(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "regulator"
    BINDINGS: ClassVar[list[BindingType]] = bindings()

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
        self.serve_text: str | None = None  # serve's state (design §22), asked while the room is live
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
        # kept as attributes: a query from the app searches the top screen (a dialog's while one is open)
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
        """Leave a checkpoint of what was folded (as the room closes: never before its first frame)."""
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
        if self.background_checks:  # after the first frame: the checks hash every store
            self.set_timer(0.5, self.run_checks)
        self.set_timer(0.3, self._keep_overdue)  # the header's overdue account, after the first frame too
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
            found = snap.check_appended()  # a line failing its hash shows at once (design §26)
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

    @work(thread=True, group="fold")
    def _keep_overdue(self) -> None:
        with self._fold_lock:
            self.snap.keep_overdue()

    def _warm(self, snap: readmodel.Snapshot) -> None:
        """Count the header, list the view's keys here, in the worker: the UI finds them ready."""
        snap.keep_overdue()
        header.counts(snap)
        header.in_memory(snap)  # the header's "would block once routed"
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
            columns_for(view, self.views[view].sort, readmodel.content_widths(self.snap, view)),  # D-319
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
            right = header.header_text(self.snap, live, store=self.backend)
            compact = header.header_text(
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
        self._topbar.show(
            lambda cells: Text(header.header_line(left + mode, right, person, flag, compact, cells))
        )
        current = VIEWS.index(self.view)
        self._tabs.show(lambda cells: header.tabs_line(current, cells))
        unrouted = None
        if self.view == "obligations" and not self.routes:
            with self.lock:
                why = "read-only" if self.read_only else "this store's role cannot write"
                unrouted = header.unrouted_status(self.snap, why)
        settings = self.views[self.view]
        first, warnings, hints = header.status_parts(
            len(self.table.keys),
            header.indicators(self.view, settings.sort, settings.filter, settings.show_all),
            arranging=self._arranging is not None,
            waiting=f"⏳ {WAITING} (decide lock): keys still work" if self.waiting else None,
            unrouted=unrouted,
            serve=self.serve_text,
            here=[name for name in ("sort", "toggle_all") if not self.not_here(name)],
        )
        self._status.show(lambda cells: Text(header.status_line(first, warnings, hints, cells)))
        self._refresh_bindings_if_changed()

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
        with self.lock:
            states = [
                (
                    a,
                    "hidden: read-only"
                    if self.read_only
                    else self.refusal(a, self.table.current_key) or "available",
                )
                for a in for_view(self.view)
            ]
        legend = (header.HEADER_LEGEND, header.TABLE_LEGEND)
        return help_lines(self.view, states, self.ws.root, self.person, legend)

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
        if (why := elsewhere(self.view, event.key)) is not None:
            self.notify(why, markup=False)

    def get_system_commands(self, screen: Screen) -> Iterator[SystemCommand]:
        for command in super().get_system_commands(screen):
            # ours save where the operator is and say where, and list this view's keys and the
            # header legend: each is listed once
            if command.title not in ("Screenshot", "Keys"):
                yield command
        screenshot = ("Screenshot", "save an SVG of this screen in the current folder", self.screenshot_here)
        yield from palette(
            None if self.read_only else self._palette_act,
            self.action_view,
            first=(screenshot,),
            last=(
                ("Filter this view", "key /", self.action_filter),
                ("Sort: next order", "key s", self.action_sort),
                ("Show all rows / live rows", "key a", self.action_toggle_all),
                ("Detail pane: show / hide", "key p", self.action_toggle_pane),
                ("Keys", "this view's keys and the header legend (key ?)", self.action_keys),
            ),
        )

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
        if name in ("resolve", "retract"):  # a row's own fields: opened at once
            with self.lock:
                found = prepare.content(self.snap, name, key)
            self._open_dialog(Prepared(found))
            return
        self._prepare(name, key)

    @work(thread=True, exclusive=True, group="dialog")
    def _prepare(self, name: str, key: Key) -> None:
        """Read what the dialog shows here, in a worker, on a copy of the state (a routing
        proposal replays every signal): the UI opens it when it is ready."""
        with self.lock:
            snap = dataclasses.replace(self.snap, state=readmodel.frozen(self.snap.state), _cache={})
        try:
            found = prepare.content(snap, name, key)
        except KeyError:
            self.post_message(Written(False, f"{BY_NAME[name].label}: the row changed under the cursor"))
            return
        except RegulatorError as exc:
            self.post_message(Written(False, f"{BY_NAME[name].label}: {exc}"))
            return
        self.post_message(Prepared(found))

    @on(Prepared)
    def _open_dialog(self, message: Prepared) -> None:
        found = message.content
        self.push_screen(prepare.dialog(found), lambda r: self._answered(found, r))

    def _answered(self, found: prepare.Content, answer: Answer | None) -> None:
        """A confirmed dialog: the same engine call as the CLI's, in a worker (controlroom.prepare)."""
        if answer is not None:
            self._write(*prepare.write(self.ws, self.person, found, answer))

    # ---- live ------------------------------------------------------------------------------------
    @work(exclusive=True, group="watch")
    async def watch_stores(self) -> None:
        # a clone has no .regulator/ (design §16.2): only the folders that exist are watched
        paths = [str(p) for p in watch_paths(self.ws)]
        if not paths:
            return
        stop = follow_server(self.ws)  # PostgreSQL: NOTIFY brings each append into the mirror
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
            stores, registers, git = classify(self.ws, [Path(p) for _, p in changes])
            if stores or registers or git:
                self.sync(registers=registers, git=git)
            await asyncio.sleep(0)
