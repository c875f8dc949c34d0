"""The control room's keys, generated from the view definitions and the action registry: one
source for the bindings, the footer, `?` help and the palette."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from controlroom.actions import ACTIONS, Action
from controlroom.views import BY_VIEW, VIEW_DEFS


def bindings() -> list[BindingType]:
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


def help_lines(
    view: str,
    actions: list[tuple[Action, str]],
    root: object,
    person: str | None,
    legend: tuple[tuple[tuple[str, str, str], ...], tuple[tuple[str, str], ...]] = ((), ()),
) -> list[str]:
    """`?` for a view: the workspace and how to reopen it, every view's key, this view's keys and
    sorts, each of its actions with whether it may be taken now (`available`, or why not), then
    the header's and the tables' legends (`legend`: readmodel.HEADER_LEGEND, TABLE_LEGEND)."""
    definition = BY_VIEW[view]
    lines = [
        f"workspace: {root}",
        f"  reopen it: regulator controlroom --root {root}" + (f" --as {person}" if person else ""),
        "views: " + " · ".join(f"{v.key} {v.title}" for v in VIEW_DEFS),
        "",
    ]
    lines.append(f"keys of this view ({definition.title}; lifecycle: {definition.lifecycle}):")
    lines += [f"  {key:<12} {what}" for key, what in GENERAL_KEYS]
    if definition.sorts:
        lines.append(f"  sorts: {', '.join(definition.sorts)}")
    lines += [f"  {action.key:<12} {action.label} ({state})" for action, state in actions]
    header, marks = legend
    lines += ["", "the header (narrow form = wide form, then what it counts):"]
    lines += [
        f"  {narrow if narrow == full else f'{narrow} = {full}'}  {meaning}"
        for full, narrow, meaning in header
    ]
    lines += ["", "marks in the tables:"]
    lines += [f"  {mark}  {meaning}" for mark, meaning in marks]
    return lines
