"""The chrome (header, tabs, status) whose text is chosen for the width it is drawn at: a resize
relayouts it in the same frame, never at the next refresh. The text is plain (never markup)."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual.widget import Widget


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
