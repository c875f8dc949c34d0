"""The chrome (header, tabs, status) whose text is chosen for the width it is drawn at: a resize
relayouts it in the same frame, never at the next refresh. The text is plain (never markup)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual.widget import Widget

from engine.base.cells import fit, width


class FitLine(Widget):
    """Renders `compose(width)`: the app hands over a function of the width (holding the strings it
    computed under its lock), and the widget calls it whenever it is drawn at a new width. Its
    height is the text's lines at that width (one, unless the text breaks itself)."""

    DEFAULT_CSS = "FitLine { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text_for: Callable[[int], Text] = lambda _: Text("")

    def show(self, compose: Callable[[int], Text]) -> None:
        self._text_for = compose
        self.refresh()

    def render(self) -> Fitted:
        return Fitted(self._text_for, self.size.width)


class Fitted:
    """A renderable that asks for its text at the width it is rendered at (so a cached render of
    this widget is never a layout for another width)."""

    def __init__(self, text_for: Callable[[int], Text], cells: int) -> None:
        self.text_for = text_for
        self.cells = cells  # the widget's width when asked: what str() shows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text = self.text_for(max(0, options.max_width))
        text.no_wrap, text.overflow = True, "crop"  # it is fitted already: its lines are its lines
        yield text

    def __str__(self) -> str:
        """The text at the widget's width (what an operator reads)."""
        return self.text_for(max(0, self.cells)).plain


def fit_tabs(labels: Sequence[tuple[str, str]], current: int, cells: int) -> list[str]:
    """Tab labels (`key title`) that fit in `cells`, one space between tabs and one inside each
    edge: all whole if they fit; else the other tabs' titles are cut with `…` (never the current
    one's), shortest last; at worst the other tabs show their keys only."""
    whole = [f"{key} {title}" for key, title in labels]

    def used(parts: list[str]) -> int:
        return sum(width(p) + 2 for p in parts) + max(0, len(parts) - 1)

    if used(whole) <= cells:
        return whole
    longest = max(width(title) for _, title in labels)
    for keep in range(longest - 1, 1, -1):
        parts = [
            text if i == current else f"{key} {fit(title, keep)}"
            for i, ((key, title), text) in enumerate(zip(labels, whole, strict=True))
        ]
        if used(parts) <= cells:
            return parts
    return [
        text if i == current else key for i, ((key, _), text) in enumerate(zip(labels, whole, strict=True))
    ]


def fit_parts(first: Sequence[str], rest: Sequence[str], cells: int, joiner: str = " · ") -> str:
    """`first` then as many of `rest` as fit, joined; `first` is never dropped (cut with `…` only
    when it alone is wider than `cells`)."""
    parts = [p for p in first if p]
    for part in rest:
        if width(joiner.join([*parts, part])) > cells:
            break
        parts.append(part)
    return fit(joiner.join(parts), cells)
