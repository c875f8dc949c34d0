"""Table columns with priorities and minimum widths, fitted to a width by terminal cells (no Textual
here: the CLI's plain tables use it too)."""

from __future__ import annotations

import msgspec

from engine.base.cells import pad, width


class Column(msgspec.Struct, frozen=True):
    """A column: `width` cells (0: it takes the rest, at least `min_width`). When the table is too
    narrow, columns with the highest `priority` number drop first; priority 0 never drops."""

    title: str
    width: int
    priority: int = 0
    min_width: int = 0


def fit_columns(columns: tuple[Column, ...], available: int) -> tuple[list[int], list[int]]:
    """Which columns show in `available` cells (their indexes) and each one's width: columns drop
    by priority (highest number first, the rightmost first among equals) until the rest fit; the
    flexible column takes what remains."""
    shown = list(range(len(columns)))

    def needed(indexes: list[int]) -> int:
        fixed = sum(columns[i].width or columns[i].min_width for i in indexes)
        return 1 + fixed + 2 * max(0, len(indexes) - 1)

    droppable = sorted(
        (i for i, c in enumerate(columns) if c.priority > 0), key=lambda i: (-columns[i].priority, -i)
    )
    while needed(shown) > available and droppable:
        shown.remove(droppable.pop(0))
    spare = max(0, available - needed(shown))
    widths = []
    for i in shown:
        column = columns[i]
        widths.append(column.width if column.width else column.min_width + spare)
    return shown, widths


FORMS = "\x1f"  # between the parts of a cell of two forms (escaped store text never holds it)


def forms(whole: str, short: str, text: str) -> str:
    """A cell of two forms: `text` after the prefix `whole` (every mark) or after `short` (the most
    urgent and a count), as `form` chooses."""
    return FORMS.join((whole, short, text))


def form(cell: str, cells: int | None) -> str:
    """A cell for `cells` of room: its whole form where it fits, or where its whole prefix (every
    mark) takes at most a third of the room (a long subject on a wide screen), or where there is no
    limit (None); else its shorter one (an operator's re-check: with the pane open, every mark left
    two cells of a 24-cell subject). A cell of one form is itself."""
    if FORMS not in cell:
        return cell
    whole, short, text = cell.split(FORMS, 2)
    if cells is None or width(whole) * 3 <= cells or width(whole) + width(text) <= cells:
        return whole + text
    return short + text


def line(columns: tuple[Column, ...], cells: list[str], available: int) -> str:
    """One row: the columns that fit in `available` cells, each cell in the form that fits (`form`),
    cut with `…` by terminal cells."""
    shown, widths = fit_columns(columns, available)
    parts = [pad(form(cells[i], w) if i < len(cells) else "", w) for i, w in zip(shown, widths, strict=True)]
    return " " + "  ".join(parts)
