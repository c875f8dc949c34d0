"""The control room: a Textual application over the engine's read models (SPEC §10).

It reads through `controlroom.readmodel`, writes only through the engine calls the CLI uses, and
watches the stores with watchfiles, folding in only the bytes appended since the last read.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Static

from controlroom import readmodel
from controlroom.actions import ACTIONS, BY_NAME, for_view, why_not
from controlroom.lifecycle import lifecycle
from engine import checkpoint, clock
from engine.contracts import load_contracts
from engine.errors import RegulatorError
from engine.fold import StoreReplaced, advance
from engine.load import attach_contracts
from engine.queries import unrouted
from engine.text import escape
from engine.workspace import Workspace
from widgets.detail import DetailPane
from widgets.dialogs import DecideDialog, ProposalDialog, ResolveDialog, RetractDialog, TextScreen
from widgets.table import LineTable

REGISTER_DIRS = ("findings", "intake", "records", "retro", "contracts", "regulator")


class ControlRoom(App):
    CSS_PATH = "app.tcss"
    TITLE = "regulator"
    BINDINGS = [
        Binding("1", "view('obligations')", "Obligations", show=False),
        Binding("2", "view('units')", "Units", show=False),
        Binding("3", "view('memory')", "Memory", show=False),
        Binding("4", "view('signals')", "Signals", show=False),
        Binding("5", "view('registers')", "Registers", show=False),
        Binding("6", "view('identity')", "Identity", show=False),
        Binding("r", "act('resolve')", "resolve"),
        Binding("x", "act('retract')", "retract"),
        Binding("d", "act('decide')", "decide"),
        Binding("y", "act('accept')", "accept"),
        Binding("n", "act('reject')", "reject"),
        Binding("enter", "lifecycle", "lifecycle"),
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("a", "toggle_all", "all"),
        Binding("question_mark", "keys", "keys"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        ws: Workspace,
        person: str | None = None,
        read_only: bool = False,
        view: str = "obligations",
        watch: bool = True,
        background_checks: bool = True,
    ) -> None:
        super().__init__()
        self.ws = ws
        self.person = person
        self.read_only = read_only
        self.view = view
        self.watching = watch
        self.show_all = False
        self.filter_text = ""
        # lint, identity verify and store verify can take seconds on a large workspace: the first
        # frame does not wait for them unless asked to (screenshots and snapshot tests do)
        self.background_checks = background_checks
        self.snap = readmodel.snapshot(ws, person, with_checks=not background_checks)
        self.live = "● live" if watch else "○ paused"
        self._detail_timer = None
        self._bindings_marker: tuple | None = None
        self.refreshes = 0  # how many store changes were folded in (tests and bench read it)

    # ---- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # kept as attributes: a query from the app searches the top screen, which is a dialog's
        # while one is open, and live updates arrive then too
        self._topbar = Static(id="topbar")
        self._tabs = Static(id="tabs")
        self._filter = Input(placeholder="filter this view (Enter to apply, Esc to clear)", id="filter")
        self._table = LineTable(readmodel.COLUMNS[self.view], id="table")
        self._detail = DetailPane(id="detail")
        self._status = Static(id="status")
        yield self._topbar
        yield self._tabs
        yield self._filter
        with Horizontal(id="body"):
            yield self._table
            yield self._detail
        yield self._status
        yield Footer()

    def on_unmount(self) -> None:
        """Leave a checkpoint of what was folded, so the next start reads only what is new
        (written as the room closes: never before its first frame)."""
        if not self.read_only and checkpoint.worth_saving(self.snap.state):
            checkpoint.save(self.ws, self.snap.state)

    def on_mount(self) -> None:
        self._filter.cursor_blink = False
        if not self.read_only:
            self._route_if_needed()
        self.show_view()
        self._table.focus()
        if self.watching:
            self.watch_stores()
        if self.background_checks:
            # after the first frame: the checks hash every store and would compete with it
            self.set_timer(0.5, self.run_checks)

    @work(thread=True, exclusive=True, group="checks")
    def run_checks(self) -> None:
        snap = self.snap
        readmodel.refresh_checks(snap)
        self.call_from_thread(self.show_view)

    @property
    def table(self) -> LineTable:
        return self._table

    # ---- drawing ---------------------------------------------------------------------------------
    def show_view(self) -> None:
        keys = readmodel.keys(self.view, self.snap, self.show_all)
        if self.filter_text:
            needle = self.filter_text.lower()
            keys = [k for k in keys if needle in " ".join(readmodel.row(self.view, self.snap, k)).lower()]
        view = self.view
        self.table.set_rows(keys, lambda key: readmodel.row(view, self.snap, key), readmodel.COLUMNS[view])
        self.draw_chrome()
        self.draw_detail()

    def draw_chrome(self) -> None:
        who = f" · as {self.person}" if self.person else " · no operator"
        mode = " · read-only" if self.read_only else ""
        left = f"regulator · {self.ws.root.name}{who}{mode}"
        right = readmodel.header_text(self.snap, self.live)
        self._topbar.update(Text(f"{left}    {right}"))
        tabs = Text()
        for i, name in enumerate(readmodel.VIEWS, start=1):
            label = f" {i} {readmodel.TITLES[name]} "
            tabs.append(label, style="reverse bold" if name == self.view else "")
            tabs.append(" ")
        extra = []
        if self.show_all:
            extra.append("all")
        if self.filter_text:
            extra.append(f"filter: {self.filter_text}")
        tabs.append("  " + " · ".join(extra) if extra else "")
        self._tabs.update(tabs)
        count = len(self.table.keys)
        self._status.update(Text(f"{count} row(s) · enter lifecycle · / filter · ? keys"))
        self.refresh_bindings()

    def draw_detail(self) -> None:
        key = self.table.current_key
        lines = lifecycle(self.view, self.snap, key)
        actions = []
        if not self.read_only:
            for action in for_view(self.view):
                actions.append((action.key, action.label, why_not(action, self.snap, key)))
        self._detail.show(lines, actions)

    @on(LineTable.Highlighted)
    def _highlighted(self, event: LineTable.Highlighted) -> None:
        # The cursor moves at once; the detail pane and the footer follow when the keys pause, so
        # holding an arrow key over 100,000 rows never waits for a pane's layout on every row.
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

    @on(LineTable.Chosen)
    def _chosen(self, event: LineTable.Chosen) -> None:
        self.action_lifecycle()

    # ---- actions: navigation ----------------------------------------------------------------------
    def action_view(self, view: str) -> None:
        self.view = view
        self.filter_text = ""
        self._filter.value = ""
        self.table.cursor = 0
        self.show_view()

    def action_toggle_all(self) -> None:
        self.show_all = not self.show_all
        self.show_view()

    def action_filter(self) -> None:
        box = self._filter
        box.add_class("shown")
        box.focus()

    def action_clear_filter(self) -> None:
        box = self._filter
        box.value = ""
        box.remove_class("shown")
        self.filter_text = ""
        self.show_view()
        self.table.focus()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.filter_text = event.value.strip()
        if not self.filter_text:
            event.input.remove_class("shown")
        self.table.cursor = 0
        self.show_view()
        self.table.focus()

    def action_lifecycle(self) -> None:
        key = self.table.current_key
        if key is None:
            return
        self.push_screen(
            TextScreen(
                f"{readmodel.TITLES[self.view]} · {key} — lifecycle", lifecycle(self.view, self.snap, key)
            )
        )

    def action_keys(self) -> None:
        lines = [
            "views: 1 Obligations · 2 Units · 3 Memory · 4 Signals · 5 Registers · 6 Identity",
            "",
            f"keys of this view ({readmodel.TITLES[self.view]}):",
            "  up/down j/k move · pgup/pgdn page · home/end first/last",
            "  enter    the whole lifecycle of the row",
            "  /        filter this view; esc clears",
            "  a        show all (resolved, retracted) or only the live rows",
            "  ctrl+p   command palette: every action",
            "  q        quit",
        ]
        for action in for_view(self.view):
            state = (
                "hidden: read-only"
                if self.read_only
                else (why_not(action, self.snap, self.table.current_key) or "available")
            )
            lines.append(f"  {action.key}        {action.label} ({state})")
        self.push_screen(TextScreen("keys", lines))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "act" and parameters:
            spec = BY_NAME[str(parameters[0])]
            if self.read_only or spec.view != self.view:
                return False
            if not self.is_mounted:
                return True
            return None if why_not(spec, self.snap, self.table.current_key) else True
        return True

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for i, name in enumerate(readmodel.VIEWS, start=1):
            yield SystemCommand(
                f"View: {readmodel.TITLES[name]}", f"key {i}", lambda name=name: self.action_view(name)
            )
        if not self.read_only:
            for action in ACTIONS:
                yield SystemCommand(
                    f"Action: {action.label}",
                    f"key {action.key} in {action.view}",
                    lambda action=action: self._palette_act(action.name),
                )
        yield SystemCommand("Filter this view", "key /", self.action_filter)
        yield SystemCommand("Show all rows / live rows", "key a", self.action_toggle_all)

    def _palette_act(self, name: str) -> None:
        spec = BY_NAME[name]
        if self.view != spec.view:
            self.action_view(spec.view)
        self.action_act(name)

    # ---- actions: writes (each the CLI's engine call) ---------------------------------------------
    def action_act(self, name: str) -> None:
        spec = BY_NAME[name]
        key = self.table.current_key
        reason = "read-only" if self.read_only else why_not(spec, self.snap, key)
        if reason:
            self.notify(escape(f"{spec.label}: {reason}"), severity="warning", markup=False)
            return
        state = self.snap.state
        if name == "resolve":
            from engine.obligations import DISPOSITIONS

            ob = state.obligations[key]
            summary = f"{ob.severity} on {ob.unit or '(no unit)'}: {ob.subject}"
            self.push_screen(ResolveDialog(ob.id, summary, DISPOSITIONS), lambda r: self._resolve(ob.id, r))
        elif name == "retract":
            entry = state.memory[key].event
            self.push_screen(
                RetractDialog(key, f"{entry['subject']}: {entry['note']}"), lambda r: self._retract(key, r)
            )
        elif name == "decide":
            from engine.model import RECOVERY_ACTIONS as RECOVERY

            self.push_screen(DecideDialog(key, RECOVERY), lambda r: self._decide(key, r))
        else:
            ident = key.partition(":")[2]
            proposal = state.proposals[ident]
            verdict = "accept" if name == "accept" else "reject"
            replay = []  # accepting a routing policy: what it would have changed (SPEC §20)
            if verdict == "accept" and proposal["file"] == "regulator/policy/routing.yaml":
                from engine.whatif import proposal_replay

                replay = proposal_replay(self.ws, proposal["content"], state)
            self.push_screen(
                ProposalDialog(ident, verdict, f"{proposal['file']}: {proposal['rationale']}", replay),
                lambda r: self._proposal(ident, verdict, r),
            )

    def _write(self, call, done: str) -> None:
        try:
            call()
        except RegulatorError as exc:
            self.notify(escape(str(exc)), severity="error", timeout=8, markup=False)
            return
        finally:
            checkpoint.withdraw()  # the room writes its own when it closes, not in the middle
        self.notify(done)
        self.reload()

    def _resolve(self, ob_id: str, answer: dict | None) -> None:
        if answer is None:
            return
        from engine.obligations import resolve

        self._write(
            lambda: resolve(self.ws, ob_id, self.person, answer["disposition"], answer["rationale"]),
            f"obligation {ob_id} resolved: {answer['disposition']}",
        )

    def _retract(self, entry_id: str, answer: dict | None) -> None:
        if answer is None:
            return
        from engine.memory import retract

        self._write(
            lambda: retract(self.ws, entry_id, self.person, answer["reason"]),
            f"memory entry {entry_id} retracted",
        )

    def _decide(self, unit_id: str, answer: dict | None) -> None:
        if answer is None:
            return
        from engine.units import decide

        self._write(
            lambda: decide(self.ws, unit_id, answer["action"], self.person, answer["rationale"]),
            f"{unit_id}: {answer['action']} recorded",
        )

    def _proposal(self, proposal_id: str, verdict: str, answer: dict | None) -> None:
        if answer is None:
            return
        from engine.proposals import decide

        outcome = "accepted" if verdict == "accept" else "rejected"
        self._write(
            lambda: decide(self.ws, proposal_id, self.person, answer["rationale"], outcome),
            f"proposal {proposal_id} {outcome}",
        )

    # ---- live ------------------------------------------------------------------------------------
    def _route_if_needed(self) -> bool:
        if self.read_only or not unrouted(self.snap.state):
            return False
        from engine.router import route

        try:
            route(self.ws, self.snap.state)
        except RegulatorError as exc:
            self.notify(escape(f"routing failed: {exc}"), severity="error", markup=False)
            return False
        return True

    def reload(self) -> None:
        """Read everything again (after our own write, or when a store was replaced)."""
        self.snap = readmodel.snapshot(self.ws, self.person, with_checks=not self.background_checks)
        self.show_view()
        if self.background_checks:
            self.run_checks()

    def fold_appended(self, registers_changed: bool = False) -> None:
        """Fold only what was appended; route new signals unless read-only; redraw."""
        snap = self.snap
        snap.state.now = clock.now()
        problems = len(snap.state.problems)
        try:
            gained = advance(self.ws, snap.state, final=False)
            if self._route_if_needed():
                advance(self.ws, snap.state, final=False)
        except StoreReplaced:
            self.reload()
            return
        if not any(gained.values()) and not registers_changed and len(snap.state.problems) == problems:
            return  # our own routing records, already folded above
        if registers_changed:
            problems_seen: list[str] = []
            contracts = load_contracts(self.ws, problems_seen, snap.state.contract_files)
            attach_contracts(snap.state, contracts)
            snap.state.contract_problems = problems_seen
            if self.background_checks:
                self.run_checks()
            else:
                readmodel.refresh_checks(snap)
        snap.derive()
        self.refreshes += 1
        self.show_view()

    @work(exclusive=True, group="watch")
    async def watch_stores(self) -> None:
        # a clone has no .regulator/ (SPEC §16.2): only the folders that exist are watched
        paths = [
            str(p) for p in (self.ws.state_dir, *(self.ws.root / d for d in REGISTER_DIRS)) if p.is_dir()
        ]
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

        async for changes in awatch(*paths, debounce=60, step=20, rust_timeout=500, yield_on_timeout=False):
            changed = [Path(p) for _, p in changes]
            registers = any(self.ws.state_dir not in p.parents for p in changed)
            if any(p.suffix == ".ndjson" for p in changed) or registers:
                self.fold_appended(registers_changed=registers)
            await asyncio.sleep(0)


def _follow_server(ws: Workspace):
    """On PostgreSQL (SPEC §18), a thread LISTENs for appends from every host and brings them into
    the local mirror, where the file watch above sees them; None for file stores."""
    url = ws.url
    if url is None:
        return None
    import threading

    from engine import pgstore

    stop = threading.Event()

    def pull() -> None:
        ws.sync()

    def run() -> None:
        with contextlib.suppress(Exception):  # the watch goes on with what the mirror holds
            pgstore.follow(url, pull, stop)

    threading.Thread(target=run, name="regulator-listen", daemon=True).start()
    return stop


def screenshot(
    ws: Workspace, path: Path, view: str, person: str | None, size: tuple[int, int] = (150, 42)
) -> None:
    """Render the real application headless to an SVG (the source of screenshots/)."""
    app = ControlRoom(ws, person, view=view, watch=False, background_checks=False)
    app.live = "● live"

    async def shoot() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return app.export_screenshot(title=f"regulator · {readmodel.TITLES[view]}")

    write_whole(path, asyncio.run(shoot()))


def write_whole(path: Path, text: str) -> None:
    """The file whole or not at all: a temporary file beside it, renamed over it (SPEC §16.4)."""
    import os
    import tempfile

    from engine.errors import BadInput

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
