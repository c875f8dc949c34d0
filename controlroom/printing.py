"""Printing for the command line: store text escaped, never interpreted; JSON; plain tables."""

from __future__ import annotations

import json
import sys

from engine.base.text import escape, escape_block, escape_json

__all__ = ["escape", "escape_block", "out", "emit_json", "table"]


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def emit_json(data: object) -> None:
    """JSON values are raw; DEL, C1 and bidi or zero-width characters are written as \\uNNNN."""
    sys.stdout.write(escape_json(json.dumps(data, ensure_ascii=False, indent=2)) + "\n")


def table(headers: list[str], rows: list[list[object]]) -> None:
    """A plain text table: every cell escaped, columns padded by terminal cells (a wide character
    takes two), a cell longer than 40 cells cut with `…`, the last column not padded."""
    from engine.base.cells import pad, width

    cells = [[escape(c) for c in row] for row in rows]
    widths = [width(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row[:-1]):
            widths[i] = min(max(widths[i], width(cell)), 40)

    def fmt(row: list[str]) -> str:
        parts = [pad(c, widths[i]) for i, c in enumerate(row[:-1])]
        return "  ".join([*parts, row[-1]]).rstrip()

    out(fmt(headers))
    for row in cells:
        out(fmt(row))
