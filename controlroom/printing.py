"""Printing for the command line: store text escaped, never interpreted; JSON; plain tables."""

from __future__ import annotations

import json
import sys

from engine.base.text import escape, escape_json


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def emit_json(data: object) -> None:
    """JSON values are raw; DEL, C1 and bidi or zero-width characters are written as \\uNNNN."""
    sys.stdout.write(escape_json(dumps_indented(data)) + "\n")


def dumps_indented(data: object) -> str:
    """`json.dumps(data, ensure_ascii=False, indent=2)`, the same text: with indent, json.dumps
    runs its pure-Python encoder (4.7 s for --once's 80 MB at 100,000 obligations); here its C
    encoder writes the values compactly and msgspec lays them out with json.dumps's whitespace,
    copying every token as written (tests/test_perf_paths.py). What msgspec cannot read back
    (NaN, Infinity, a lone surrogate) is dumped the slow way."""
    import msgspec

    try:
        compact = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
        return msgspec.json.format(compact, indent=2).decode()
    except (UnicodeError, msgspec.DecodeError):
        return json.dumps(data, ensure_ascii=False, indent=2)


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
