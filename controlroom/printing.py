"""Printing for the command line: store text escaped, never interpreted; JSON; plain tables."""

from __future__ import annotations

import json
import sys

from engine.text import escape, escape_block, escape_json

__all__ = ["escape", "escape_block", "out", "emit_json", "table"]


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def emit_json(data: object) -> None:
    """JSON values are raw; DEL, C1 and bidi or zero-width characters are written as \\uNNNN."""
    sys.stdout.write(escape_json(json.dumps(data, ensure_ascii=False, indent=2)) + "\n")


def table(headers: list[str], rows: list[list[object]]) -> None:
    """A plain text table: every cell escaped, columns padded, the last column not padded."""
    cells = [[escape(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row[:-1]):
            widths[i] = min(max(widths[i], len(cell)), 40)

    def fmt(row: list[str]) -> str:
        parts = [c[:40].ljust(widths[i]) for i, c in enumerate(row[:-1])]
        return "  ".join([*parts, row[-1]]).rstrip()

    out(fmt(headers))
    for row in cells:
        out(fmt(row))
