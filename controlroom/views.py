"""One definition per view of the control room: its key, title, columns (with priorities and minimum
widths), sorts and actions. Tabs, bindings, `?` help, the palette and `--once` are generated from it.
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

import msgspec
import msgspec.structs

from widgets.columns import Column

__all__ = ["Column", "View", "VIEW_DEFS", "BY_VIEW", "VIEWS", "TITLES", "RowKey", "Key"]


class RowKey(NamedTuple):
    """A row of a sectioned view (Registers, Identity): its section (`bad`, `verify`, `next`,
    `lint`, `finding`, `intake`; `file`, `proposal`, `record`) and the id within it."""

    kind: str
    ident: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.ident}"


# the other views' rows are keyed by the id itself (obligation, unit, memory entry, signal)
Key: TypeAlias = str | RowKey


class View(msgspec.Struct, frozen=True):
    name: str
    key: str
    title: str
    columns: tuple[Column, ...]
    sorts: tuple[str, ...] = ()  # `s` cycles through them; the first is the log's own order
    actions: tuple[str, ...] = ()  # names in controlroom.actions.ACTIONS
    lifecycle: str = "the whole history of the row"
    all_rows: str = ""  # what `a` adds to the live rows ("": the view lists every row)


VIEW_DEFS: tuple[View, ...] = (
    View(
        "obligations",
        "1",
        "Obligations",
        (
            # narrow, the status goes first (`open` on every live row), then the age, the id (the
            # pane and the lifecycle name it whole), the unit; `blocks` last (an operator's day:
            # the id and the ■ went first, while `open` and a wide unit stayed). The unit's 14 is
            # a ceiling: the room fits it to the widest unit named (controlroom.readmodel.
            # content_widths); the subject keeps 24 cells before `open` is dropped for it (D-319)
            Column("id", 8, 3),
            Column("unit", 14, 2),
            Column("severity", 8),
            Column("blocks", 6, 1),
            Column("age", 4, 4),
            Column("status", 9, 5),
            Column("subject", 0, 0, 24),
        ),
        sorts=("age", "severity", "unit"),
        actions=("resolve",),
        lifecycle="signal → routed → opened → dispositioned",
        all_rows="resolved and escalated obligations",
    ),
    View(
        "units",
        "2",
        "Units",
        (
            Column("id", 16),
            Column("type", 10, 3),
            Column("status", 17),  # `awaiting decision` whole (D-293)
            Column("held", 4, 1),
            Column("prio", 4, 4),
            Column("held by", 18, 2),
            Column("title", 0, 0, 16),  # at 80 columns, `held by` stays (what holds it) beside it
        ),
        sorts=("id", "priority", "status"),
        actions=("decide",),
        lifecycle="dispatched → held → closed",
    ),
    View(
        "memory",
        "3",
        "Memory",
        (
            Column("id", 8),
            Column("status", 9, 2),
            Column("left", 13),
            Column("review-by", 10, 3),
            Column("unit", 6, 4),
            Column("scope", 12, 5),
            Column("subject: note", 0, 0, 20),
        ),
        sorts=("age", "expiry", "unit"),
        actions=("retract",),
        lifecycle="recorded → expired or retracted",
        all_rows="retracted entries",
    ),
    View(
        "signals",
        "4",
        "Signals",
        (
            Column("id", 8),
            Column("from", 12, 2),
            Column("reported", 8, 3),
            Column("derived", 8, 1),
            Column("outcome", 11),
            Column("subject", 0, 0, 16),
        ),
        sorts=("age", "severity", "unit"),
        actions=("outcome",),
        lifecycle="reported → routed → the obligations it opened → its prediction's outcome",
    ),
    View(
        "registers",
        "5",
        "Registers",
        (
            Column("register", 8, 2),
            Column("id", 24, 0),
            Column("state", 20, 0),
            Column("title / message", 0, 0, 12),
        ),
        actions=("ack", "resolve-finding", "dismiss"),
        lifecycle="the entry, its fields and body",
    ),
    View(
        "identity",
        "6",
        "Identity",
        (
            Column("kind", 8, 2),
            Column("id", 34, 0),
            Column("state", 26, 0),
            Column("detail", 0, 0, 12),
        ),
        actions=("accept", "reject"),
        lifecycle="proposed → decided, with the diff",
    ),
    View(
        "sensors",
        "7",
        "Sensors",
        (
            Column("sensor", 14),
            Column("kind", 7, 3),
            Column("every", 5, 4),
            Column("last run", 20),
            Column("outcome", 9),
            Column("raised", 6, 2),
            Column("next run", 20, 1),
            Column("detail", 0, 0, 12),
        ),
        lifecycle="declared → each run: its outcome, signals and errors",
    ),
)
BY_VIEW = {v.name: v for v in VIEW_DEFS}
# the column a sort orders by (not the first sort: the log's own order), kept on screen while that
# sort is chosen (an operator's review: Units sorted by priority at 80 columns had dropped `prio`,
# so the order could not be seen)
SORTED_BY = {
    ("obligations", "severity"): "severity",
    ("obligations", "unit"): "unit",
    ("units", "priority"): "prio",
    ("units", "status"): "status",
    ("memory", "expiry"): "review-by",
    ("memory", "unit"): "unit",
    ("signals", "severity"): "derived",
    ("signals", "unit"): "from",
}


def columns_for(view: str, sort: int, widest: dict[str, int] | None = None) -> tuple[Column, ...]:
    """The view's columns with the one its sort orders by never dropped (priority 0), and each
    column `widest` names no wider than its widest cell (nor than defined, nor than its title)."""
    defined = BY_VIEW[view]
    title = SORTED_BY.get((view, defined.sorts[sort])) if 0 < sort < len(defined.sorts) else None
    columns = defined.columns
    if widest:
        columns = tuple(
            msgspec.structs.replace(c, width=min(c.width, max(len(c.title), widest[c.title])))
            if c.title in widest and c.width
            else c
            for c in columns
        )
    if title is None:
        return columns
    return tuple(msgspec.structs.replace(c, priority=0) if c.title == title else c for c in columns)


VIEWS = tuple(v.name for v in VIEW_DEFS)
TITLES = {v.name: v.title for v in VIEW_DEFS}
