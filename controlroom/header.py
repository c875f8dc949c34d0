"""The control room's header and --once's counts: what is held, late, unrouted or unchecked, in
one line (or two) that fits the terminal; formatted from what the engine derived (readmodel)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.base.text import escape
from engine.checkout.workspace import Workspace
from engine.commands.whatif import InMemory, route_in_memory
from engine.read.model import MemoryStatus, ObligationStatus, State, UnitStatus
from engine.read.queries import (
    days_left,
    memory_status,
    unit_status,
    unrouted_count,
)
from engine.read.vetoes import AWAITING_DECISION, READY_TO_CLOSE, result_waits

if TYPE_CHECKING:
    pass
from rich.text import Text

from controlroom.readmodel import EXPIRING_DAYS, Snapshot, open_account, sensor_rows
from controlroom.views import BY_VIEW, VIEW_DEFS
from engine.base.cells import fit, fit_parts, fit_tabs, width

# ---- header counts -------------------------------------------------------------------------------


def counts(snap: Snapshot) -> dict[str, int]:
    """The header's counts (the `counts` of --once --json)."""
    return snap.cached("counts", (), lambda: _counts(snap))


# bound once: an enum member read from its class costs ~0.1 µs on Python 3.11
_OPEN = ObligationStatus.OPEN


def _counts(snap: Snapshot) -> dict[str, int]:
    state = snap.state
    today = state.now.date()
    account = open_account(snap)  # the open ones, counted with the view's keys (engine.read.openpass)
    obligations = state.obligations
    expired = sum(1 for ob_id in state.world.stale_evidence if obligations[ob_id].status == _OPEN)
    held_units = [u for u in {*snap.holds, *(u for u, by in snap.stale.items() if by)} if u in state.units]
    cursor = state.cursors.get("memory")
    marker = (cursor.offset if cursor else -1, len(state.memory), today)
    if snap._memory_marker != marker:  # memory is counted again only when it changed
        snap._expiring = sum(
            1
            for e in state.memory.values()
            if memory_status(e, today) == MemoryStatus.CURRENT and days_left(e, today) <= EXPIRING_DAYS
        )
        snap._memory_marker = marker
    lost, deciding, closable = _need_a_person(snap)
    return {
        "open": len(account.keys),
        "blocking": account.blocking,
        "held": len(held_units),
        "lost": lost,
        "awaitingDecision": deciding,
        "readyToClose": closable,
        "stale": account.stale,
        "expiring": snap._expiring,
        "lintErrors": len(snap.lint.errors) if snap.lint else 0,
        "unrouted": unrouted_count(state),
        "badLines": state.bad_lines,
        "verify": len(snap.verify),
        "overdue": account.overdue,
        "evidenceExpired": expired,
        "sensorsFailing": sensors_failing(snap),
        "notPaged": not_paged(state),
    }


def _need_a_person(snap: Snapshot) -> tuple[int, int, int]:
    """(lost, awaiting decision, ready to close): units whose run is over and that wait for a
    person (a lost lease, design §23; a failed or blocked result; a done result nothing holds, which
    nothing closes by itself: `vetoes.result_waits`), counted where the header and CI look first
    (an operator's review: each showed only as a row). Unknown without the stores: 0, shown as `?`
    by the header and null by --once's JSON."""
    if not snap.known:
        return 0, 0, 0
    state = snap.state
    lost = deciding = closable = 0
    for unit in state.units.values():
        status = unit_status(state, unit)
        if status == UnitStatus.LOST:
            lost += 1
        elif status == UnitStatus.IN_PROGRESS and unit.result is not None:
            held = unit.id in snap.holds or bool(snap.stale.get(unit.id))
            waits = result_waits(state, unit, snap.holds.get(unit.id, []), held)
            deciding += waits == AWAITING_DECISION
            closable += waits == READY_TO_CLOSE
    return lost, deciding, closable


def in_memory(snap: Snapshot) -> InMemory:
    """The signals not yet routed, routed in memory as the router would (engine.commands.whatif): kept until
    the state or the clock moves (the fold's worker warms it with the counts)."""
    return snap.cached("in-memory", (), lambda: route_in_memory(snap.ws, snap.state))


def would_block_text(snap: Snapshot, compact: bool = False) -> str | None:
    """What routing the unrouted signals would hold (design §16: a count of 0 blocking with signals
    not yet routed is not all clear), or None when nothing unrouted would block."""
    if not snap.known:
        return None
    found = in_memory(snap)
    if found.problem is not None:
        return "⚠ unrouted not judged" if compact else "⚠ unrouted signals not judged"
    holds = len(found.holds)
    if not holds:
        return None
    return f"⚠{holds} would blk" if compact else f"⚠ {holds} would block"


def unrouted_status(snap: Snapshot, why: str) -> str | None:
    """What routing the signals a room does not route (`why`: read-only, a reader role) would
    open (design §16), escaped, or None."""
    if not snap.known:
        return None
    found = in_memory(snap)
    if found.problem is not None:
        return escape(f"⚠ {found.unrouted} signal(s) not routed here ({why}) and not judged: {found.problem}")
    holds = found.holds
    if not holds:
        return None
    units = ", ".join(sorted({h.unit for h in holds}))
    return escape(
        f"⚠ not routed here ({why}): routing would open {len(holds)} blocking obligation(s) on {units}"
    )


def not_paged(state: State) -> int:
    """The open obligations whose escalation paged no one (its notify failed, or routing.yaml sets
    none): said in the header and counted in --once's JSON (an operator's re-check: the header said
    `2 overdue` alike for the paged and the unpaged, D-323)."""
    obligations, found = state.obligations, 0
    for ob_id in state.world.unpaged:
        ob = obligations.get(ob_id)
        found += ob is not None and ob.status == _OPEN
    return found


def sensors_failing(snap: Snapshot) -> int:
    """The declared sensors whose last run ended in error or found its feed stalled: said in the
    header and counted in --once's JSON (an operator's day: a broken feed showed only in the Sensors
    view, which nothing sends one to; a review: CI reading `counts` could not see it, and a stalled
    feed's run said `ok`)."""
    if not snap.known:
        return 0
    return sum(1 for row in sensor_rows(snap).values() if row.get("outcome") in ("error", "stalled"))


# the counts that a checkout without the stores cannot know (all but lint's, which git says): `?`
# in the header, null in --once's JSON (design §16.2; an operator's review read `0 lost` in a clone)
UNKNOWN_WITHOUT_STORES = (
    "open",
    "blocking",
    "held",
    "stale",
    "expiring",
    "unrouted",
    "lost",
    "awaitingDecision",
    "readyToClose",
    "overdue",
    "evidenceExpired",
    "badLines",
    "verify",
    "sensorsFailing",
    "notPaged",
)
# the counts shown only when there are any, by the legend's full words (HEADER_LEGEND, which a test
# holds to the README, gives the words and the order: WHEN_ANY, below it)
_WHEN_ANY_COUNT = {
    "N overdue": "overdue",
    "⚠ N not paged": "notPaged",
    "⚠ N lost": "lost",
    "N awaiting decision": "awaitingDecision",
    "N ready to close": "readyToClose",
    "N evidence expired": "evidenceExpired",
    "N bad line(s)": "badLines",
    "⚠ N verify finding(s)": "verify",
    "⚠ N sensor(s) failing": "sensorsFailing",
}


def known_counts(snap: Snapshot) -> dict[str, int | None]:
    """The header's counts, None for each the stores alone can say where they are absent."""
    found: dict[str, int | None] = dict(counts(snap))
    if not snap.known:
        found.update(dict.fromkeys(UNKNOWN_WITHOUT_STORES))
    return found


def header_text(snap: Snapshot, live: str = "● live", compact: bool = False, store: str | None = None) -> str:
    """The header's counts; `compact` abbreviates every part (a narrow terminal) and drops none;
    `store` names where the stores are (files, postgresql), before the live indicator."""
    c = known_counts(snap)

    def n(key: str) -> str:
        value = c[key]
        return "?" if value is None else str(value)

    lint_part = lint_mark(snap)
    if compact:
        parts = [
            f"{n('blocking')} blk",
            f"{n('held')} held",
            f"{n('stale')} stale",
            f"{n('expiring')} exp≤7d",
            lint_part.replace("lint unchecked", "lint:unchecked").replace(" ", ""),
            f"{n('unrouted')} unrtd",
        ]
    else:
        parts = [
            f"{n('blocking')} blocking",
            f"{n('held')} held",
            f"{n('stale')} stale",
            f"{n('expiring')} expiring ≤7d",
            lint_part,
            f"{n('unrouted')} unrouted",
        ]
    would = would_block_text(snap, compact=compact)
    if would:
        parts.append(would)
    parts += [(short if compact else full).replace("N", n(key), 1) for key, full, short in WHEN_ANY if c[key]]
    if compact:
        parts += [SHORT_MARKS.get(m, m) for m in trust_marks(snap.ws)]
        if store and snap.known:
            parts.append(SHORT_STORES.get(store, store))
        return "·".join(parts) + f"·{live}"
    parts += trust_marks(snap.ws)
    if store and snap.known:
        parts.append(store)
    return " · ".join(parts) + f" · {live}"


def lint_mark(snap: Snapshot) -> str:
    """The header's lint part: `lint …` until it ran, `lint ✗N` with errors, and `lint unchecked`
    when trunk history could not be read (design §26: never ✓ for what was not checked)."""
    if snap.lint is None:
        return "lint …"
    if snap.lint.errors:
        return f"lint ✗{len(snap.lint.errors)}"
    return "lint ✓" if snap.lint.history_checked else "lint unchecked"


def lint_unchecked(snap: Snapshot) -> str | None:
    """Why lint's history checks did not run (trunk history unavailable), or None."""
    if snap.lint is None or snap.lint.history_checked:
        return None
    return snap.lint.history_why or "trunk history unavailable"


SHORT_STORES = {"postgresql": "pg", "files": "files"}

# what every part of the header means: `?` shows it and the README lists it (tests/test_room_first_contact.py
# checks both, and that every part the header can show is here). (full form, narrow form, meaning)
HEADER_LEGEND: tuple[tuple[str, str, str], ...] = (
    ("N blocking", "N blk", "open obligations that block: each holds its unit's dispatch and close"),
    ("N held", "N held", "units held, by a blocking obligation or an unresolved finding"),
    ("N stale", "N stale", "open obligations whose signal has expired; they stay open until dispositioned"),
    ("N expiring ≤7d", "N exp≤7d", "current memory entries within 7 days of their review-by date"),
    (
        "lint ✓ / ✗N / … / unchecked",
        "lint✓ / lint✗N / lint… / lint:unchecked",
        "registry lint: no error / N errors / still running / trunk history could not be read",
    ),
    ("N unrouted", "N unrtd", "signals not yet routed (this room routes them, unless read-only)"),
    ("⚠ N would block", "⚠N would blk", "blocking obligations that routing the unrouted signals would open"),
    (
        "N overdue",
        "N overdue",
        "open obligations past their deadline (routing.yaml deadlines): still open; serve escalates each once",
    ),
    (
        "⚠ N not paged",
        "⚠N not paged",
        "open obligations whose escalation paged no one (its notify failed, or routing.yaml sets none): "
        "page by hand; `obligation show` says why",
    ),
    (
        "⚠ N lost",
        "⚠N lost",
        "units whose lease expired in progress (their run died): a person dispatches or demotes them",
    ),
    (
        "N awaiting decision",
        "N await.dec",
        "units whose result failed or was blocked: a person records a recovery decision",
    ),
    (
        "N ready to close",
        "N to close",
        "units whose result is done and that nothing holds: `regulator unit close UNIT` closes each",
    ),
    (
        "N evidence expired",
        "N evid.exp",
        "open obligations whose signal's evidence expired under them: a recheck is open",
    ),
    ("N bad line(s)", "N bad", "store lines every read skips (torn or malformed): first in Registers"),
    (
        "⚠ N verify finding(s)",
        "⚠N vfy",
        "lines `regulator verify` names (a failed hash, a broken chain): Registers",
    ),
    (
        "⚠ N sensor(s) failing",
        "⚠N sens✗",
        "declared sensors whose last run ended in error (a feed unread, a command failing) or found "
        "its feed stalled (nothing modified for longer than staleAfter): Sensors",
    ),
    ("stores absent: unit state unknown", "NO STORES", "a checkout without the stores (a clone)"),
    ("names unauthenticated", "names unauth", "person events count by name: no signatures required"),
    ("clock pinned", "pinned", "REGULATOR_NOW is honoured here (tests and demos only)"),
    ("files / postgresql", "files / pg", "where the stores are: files under .regulator/, or PostgreSQL"),
    ("● live / ○ paused", "● / ○", "watching the stores (an append shows within half a second) / not"),
    ("⏳ waiting for another writer", "⏳ waiting", "another process holds the decide lock; keys still work"),
    ("read-only", "ro", "writes hidden and nothing routed (--read-only, or a store role that cannot write)"),
)
# (count, full part, compact part), N the count: the legend's words, in its order
WHEN_ANY = tuple(
    (_WHEN_ANY_COUNT[full], full, short) for full, short, _ in HEADER_LEGEND if full in _WHEN_ANY_COUNT
)
# the marks in the tables
TABLE_LEGEND: tuple[tuple[str, str], ...] = (
    ("■", "blocks (obligations) / held (units); · holds nothing"),
    ("███░░ 30d", "memory: days left before review-by, full at 90; ! within 7 days; ×××× expired"),
    ("⚠ evidence changed", "memory: a file its evidence cites changed since it was recorded"),
    (
        "(not paged, overdue) / (not paged +1)",
        "obligations and signals: every mark where there is room, else the most urgent and how many "
        "more (the pane names each); obligations': not paged "
        "(its escalation paged no one: page by hand), overdue (open past its deadline), evidence expired "
        "(the host recorded it), stale (its signal expired), advisory withdrawn, pin no longer affected, "
        "feed moving again (a stall over)",
    ),
    ("sensor:NAME", "signals: reported by a declared sensor (7 Sensors lists them with their last runs)"),
    (
        "(prediction …) (came true)",
        "signals: a prediction pending or awaiting its outcome (o records it) / its outcome",
    ),
    ("⚑ F-x", "records: an open finding affects it (awaits ack until acknowledged)"),
    (
        "pending, 2 !",
        "identity: a proposal that would grant, run, move, loosen or hasten 2 things if accepted (y shows each)",
    ),
    (
        "ids",
        "obligations, memory, signals and proposals show their id's last 8 characters "
        "(the CLI takes any unique ending of 6 or more)",
    ),
)


SHORT_MARKS = {
    "stores absent: unit state unknown": "NO STORES",
    "names unauthenticated": "names unauth",
    "clock pinned": "pinned",
}


def trust_marks(ws: Workspace) -> list[str]:
    """What the header must never hide (design §15.1, §15.3): names not proven, a clock not the host's."""
    auth = ws.authority()
    marks = [] if auth.present else ["stores absent: unit state unknown"]
    if auth.present and auth.authentication == "names":
        marks.append("names unauthenticated")
    if auth.present and auth.clock == "pinned":
        marks.append("clock pinned")
    return marks


# ---- the chrome's lines, at the width they are drawn at (D-107) ----------------------------------


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


def tabs_line(current: int, cells: int) -> Text:
    """The tabs for `cells` columns, the current view's reversed (engine.base.cells.fit_tabs)."""
    line = Text()
    titles = [(v.key, v.title) for v in VIEW_DEFS]
    for i, label in enumerate(fit_tabs(titles, current, cells)):
        line.append(f" {label} ", style="reverse bold" if i == current else "")
        line.append(" ")
    return line


def indicators(view: str, sort: int, filter_text: str, show_all: bool) -> list[str]:
    """What this view is narrowed or ordered by: shown first on the status line, never cut."""
    sorts = BY_VIEW[view].sorts
    out = []
    if sorts:
        out.append(f"sort: {sorts[sort]}")
    if filter_text:
        out.append(f"filter: {filter_text}")
    if BY_VIEW[view].all_rows:
        out.append("all rows" if show_all else "live rows")
    return out


def status_parts(
    rows: int,
    narrowed: list[str],
    *,
    arranging: bool,
    waiting: str | None,
    unrouted: str | None,
    serve: str | None,
    here: list[str],
) -> tuple[list[str], list[str], list[str]]:
    """(first, warnings, hints) of the status line: the row count and what narrows the view
    (never cut), then what the operator must know (waiting for the decide lock, signals not
    routed here, serve's state), then the keys (`here`: sort and toggle_all where the view has them)."""
    first = [f"{rows} row(s)", *narrowed]
    if arranging:
        first.insert(0, "filtering and sorting…")
    warnings = [w for w in (waiting, unrouted) if w]
    if serve:  # serve's state (a live room asks it)
        warnings.append(escape(serve))
    hints = ["enter lifecycle", "/ filter"]
    hints += [hint for hint, name in (("s sort", "sort"), ("a all", "toggle_all")) if name in here]
    return first, warnings, [*hints, "p pane", "? keys"]
