"""A line-based virtual table: it formats only the rows on screen, so 100,000 rows cost what 40 do.

Columns have fixed widths and priorities (widgets.columns): when the table is narrow the least
important drop, and the flexible column takes the rest. Cells are cut with `…` by terminal cells
(a wide character takes two); they are plain text turned into segments, never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from widgets.columns import Column, line

K = TypeVar("K", bound=Hashable)  # the app's typed row keys: the table only compares them
HK = TypeVar("HK", bound=Hashable)


def _index(keys: list[K], key: K | None) -> int | None:
    """Where `key` is among `keys` (one pass), or None."""
    if key is None:
        return None
    try:
        return keys.index(key)
    except ValueError:
        return None


class LineTable(ScrollView, Generic[K], can_focus=True):
    """Rows are keys; `render_row(key)` gives a key's cells when (and only when) it is drawn."""

    COMPONENT_CLASSES = {"linetable--header", "linetable--cursor", "linetable--row"}
    DEFAULT_CSS = """
    LineTable { height: 1fr; overflow-x: hidden; }
    LineTable > .linetable--header { text-style: bold; background: $panel; }
    LineTable > .linetable--cursor { background: $accent 40%; text-style: bold; }
    LineTable:focus > .linetable--cursor { background: $accent; color: $text; }
    """
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "up", show=False),
        Binding("down,j", "cursor(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home,g", "jump(0)", "first", show=False),
        Binding("end,G", "jump(-1)", "last", show=False),
    ]

    cursor = reactive(0, always_update=True, init=False)

    class Highlighted(Message, Generic[HK]):
        def __init__(self, table: LineTable[HK], key: HK | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

    def __init__(
        self, columns: tuple[Column, ...], *, name: str | None = None, id: str | None = None
    ) -> None:
        super().__init__(name=name, id=id)
        self.columns = columns
        self.keys: list[K] = []
        self.render_row: Callable[[K], list[str]] = lambda key: [str(key)]

    # ---- data ------------------------------------------------------------------------------------
    def set_rows(
        self,
        keys: list[K],
        render_row: Callable[[K], list[str]],
        columns: tuple[Column, ...] | None = None,
        select: K | None = None,
        fresh: bool = False,
    ) -> None:
        """Replace the keys (cheap: nothing is formatted here); the cursor stays on its key (or
        goes to `select` when that key is among them). `fresh`: another list than the one shown
        (another view), so the cursor goes to `select` or the first row, never to the old row."""
        if select is not None and select in keys:
            current: K | None = select
        else:
            current = None if fresh else self.current_key
        if columns is not None:
            self.columns = columns
        self.keys = keys
        self.render_row = render_row
        self.virtual_size = Size(self._width(), len(keys) + 1)
        index = _index(keys, current)
        if index is not None:
            # at any size: a row inserted above the cursor (a live update) must not move it onto
            # another row than the one the operator is about to act on (an adversarial review:
            # from 200,000 rows the cursor kept its index, not its key)
            self.cursor = index
        else:
            self.cursor = 0 if fresh else min(self.cursor, max(0, len(keys) - 1))
        self.refresh()

    @property
    def current_key(self) -> K | None:
        if 0 <= self.cursor < len(self.keys):
            return self.keys[self.cursor]
        return None

    def _width(self) -> int:
        return 0  # no horizontal scrolling: the last column is cut at the edge

    # ---- cursor ----------------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        height = max(1, self.size.height - 1)
        top = round(self.scroll_y)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + height:
            self.scroll_to(y=new - height + 1, animate=False)
        self.refresh()
        self.post_message(self.Highlighted(self, self.current_key))

    def action_cursor(self, delta: int) -> None:
        if self.keys:
            self.cursor = max(0, min(len(self.keys) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        if self.keys:
            self.cursor = 0 if where == 0 else len(self.keys) - 1

    def on_click(self, event: events.Click) -> None:
        index = round(self.scroll_y) + event.y - 1
        if 0 <= index < len(self.keys) and event.y >= 1:
            self.cursor = index

    # ---- drawing ---------------------------------------------------------------------------------
    def _line(self, cells: list[str], width: int) -> str:
        return line(self.columns, cells, width)

    def render_line(self, y: int) -> Strip:
        # the text fits the width left beside a vertical scrollbar, so a cut cell keeps its `…`
        # (the scrollbar is drawn over the last cells of a line as wide as the widget)
        width = self.scrollable_content_region.width
        scroll_x = round(self.scroll_x)
        if y == 0:
            text = self._line([c.title for c in self.columns], width)
            style = self.get_component_rich_style("linetable--header")
        else:
            index = round(self.scroll_y) + y - 1
            if index >= len(self.keys):
                return Strip.blank(width, self.rich_style)
            try:
                cells = self.render_row(self.keys[index])
            except KeyError:
                cells = ["(gone)"]
            text = self._line(cells, width)
            style = (
                self.get_component_rich_style("linetable--cursor")
                if index == self.cursor
                else self.rich_style
            )
        rich_style = style if isinstance(style, Style) else None
        strip = Strip([Segment(text, rich_style)]).crop(scroll_x, scroll_x + width)
        return strip.adjust_cell_length(width, rich_style)
