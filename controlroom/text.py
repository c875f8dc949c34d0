"""Printing store text safely: no markup is interpreted and control characters are escaped."""

from __future__ import annotations

import json
import re
import sys

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: object) -> str:
    """Store fields shown to a person: control characters (ESC among them) become \\xNN."""
    value = "" if text is None else str(text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value).replace("\n", "\\n")


def escape_block(text: object) -> str:
    """Like escape, but keeps newlines (for multi-line prose)."""
    return "\n".join(escape(line) for line in str(text or "").split("\n"))


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def emit_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


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
