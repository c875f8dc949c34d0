"""Text measured and cut by terminal cells (a wide character takes two), with `…` where cut."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size

ELLIPSIS = "…"


def width(text: str) -> int:
    """How many terminal cells `text` takes."""
    return cell_len(text)


def fit(text: str, cells: int) -> str:
    """`text` cut to at most `cells` terminal cells, ending in `…` when something was cut."""
    if cells <= 0:
        return ""
    if cell_len(text) <= cells:
        return text
    cut = set_cell_size(text, cells - 1)
    if cell_len(cut) > cells - 1:  # never split a wide character: drop it whole
        cut = cut[:-1]
    return cut.rstrip(" ") + ELLIPSIS if cut.strip() else ELLIPSIS


def pad(text: str, cells: int) -> str:
    """`text` fitted into exactly `cells` terminal cells (cut with `…`, or padded with spaces)."""
    text = fit(text, cells)
    return text + " " * (cells - cell_len(text))
