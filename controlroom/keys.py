"""The control room's keys, generated from the view definitions and the action registry: one
source for the bindings, the footer, `?` help and the palette."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from controlroom.actions import ACTIONS, Action
from controlroom.views import BY_VIEW, VIEW_DEFS


def bindings() -> list[BindingType]:
    out: list[BindingType] = [Binding(v.key, f"view('{v.name}')", v.title, show=False) for v in VIEW_DEFS]
    out += [Binding(a.key, f"act('{a.name}')", a.label.split(" (")[0]) for a in ACTIONS]
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


GENERAL_KEYS = (
    ("up/down j/k", "move · pgup/pgdn page · home/end first/last"),
    ("enter", "the whole lifecycle of the row"),
    ("/", "filter this view as you type; enter keeps it, esc clears (kept per view)"),
    ("s", "cycle the sort of this view"),
    ("a", "show all (resolved, retracted) or only the live rows"),
    ("p", "show or hide the detail pane"),
    ("ctrl+p", "command palette: every view and action"),
    ("q", "quit"),
)


def help_lines(view: str, actions: list[tuple[Action, str]]) -> list[str]:
    """`?` for a view: every view's key, this view's keys and sorts, and each of its actions with
    whether it may be taken now (`available`, or why not)."""
    definition = BY_VIEW[view]
    lines = ["views: " + " · ".join(f"{v.key} {v.title}" for v in VIEW_DEFS), ""]
    lines.append(f"keys of this view ({definition.title}; lifecycle: {definition.lifecycle}):")
    lines += [f"  {key:<12} {what}" for key, what in GENERAL_KEYS]
    if definition.sorts:
        lines.append(f"  sorts: {', '.join(definition.sorts)}")
    lines += [f"  {action.key:<12} {action.label} ({state})" for action, state in actions]
    return lines
