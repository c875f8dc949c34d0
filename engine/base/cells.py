"""Text measured and cut by terminal cells (a wide character takes two), with `…` where cut."""

from __future__ import annotations

from collections.abc import Sequence

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
