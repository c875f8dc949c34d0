"""The control room's keys, generated from the view definitions and the action registry: one
source for the bindings, the footer, `?` help and the palette."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from textual.app import SystemCommand
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
    the header's and the tables' legends (`legend`: controlroom.header.HEADER_LEGEND, TABLE_LEGEND)."""
    from engine.trust.signing import given_key

    definition = BY_VIEW[view]
    key = given_key() if person else None  # the key it was opened with: without it, --as is exit 2
    lines = [
        f"workspace: {root}",
        f"  reopen it: regulator controlroom --root {root}"
        + (f" --as {person}" if person else "")
        + (f" --key {key}" if key else ""),
        "views: " + " · ".join(f"{v.key} {v.title}" for v in VIEW_DEFS),
        "",
    ]
    lines.append(f"keys of this view ({definition.title}; lifecycle: {definition.lifecycle}):")
    # only the keys that act here (an operator's review: `s` and `a` were listed in every view,
    # and pressed in Sensors said "has one order" and "nothing to add"; the footer never showed them)
    idle = {"s"} if not definition.sorts else set()
    idle |= {"a"} if not definition.all_rows else set()
    lines += [f"  {key:<12} {what}" for key, what in GENERAL_KEYS if key not in idle]
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


Entry = tuple[str, str, Callable[[], object]]  # a palette entry: its title, its help, what it runs


def palette(
    act: Callable[[Action], None] | None,
    view: Callable[[str], None],
    first: Sequence[Entry] = (),
    last: Sequence[Entry] = (),
) -> Iterator[SystemCommand]:
    """The command palette's entries of the room: `first`, a view per key, every action (`act`
    None: read-only, none), then `last`."""
    for title, help_text, callback in first:
        yield SystemCommand(title, help_text, callback)
    for v in VIEW_DEFS:
        yield SystemCommand(f"View: {v.title}", f"key {v.key}", lambda name=v.name: view(name))
    if act is not None:
        for action in ACTIONS:
            yield SystemCommand(
                f"Action: {action.label}",
                f"key {action.key} in {BY_VIEW[action.view].title}",
                lambda action=action: act(action),
            )
    for title, help_text, callback in last:
        yield SystemCommand(title, help_text, callback)


def elsewhere(view: str, key: str) -> str | None:
    """Why an action's key does nothing in this view: the views where it acts (an operator's day
    pressed `d`, `y`, `c`, `x`, `o` and `n` in Obligations and met silence); None for a key this
    view acts on, or that is no action's."""
    if any(a.key == key and a.view == view for a in ACTIONS):
        return None
    found = [a for a in ACTIONS if a.key == key]
    if not found:
        return None
    where = "; ".join(f"{a.label} in {BY_VIEW[a.view].title} (press {BY_VIEW[a.view].key})" for a in found)
    return f"`{key}` here does nothing: {where}"
