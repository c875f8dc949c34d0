"""Printing for the command line: store text escaped, never interpreted; JSON; plain tables."""

from __future__ import annotations

import json
import sys

from engine.base.text import escape, escape_json


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def emit_json(data: object) -> None:
    """JSON values are raw; DEL, C1 and bidi or zero-width characters are written as \\uNNNN."""
    emit_json_text(dumps_indented(data))


def emit_json_text(dumped: str) -> None:
    """JSON text from dumps_indented (or dumps_indented_with), written as emit_json writes it."""
    sys.stdout.write(escape_json(dumped) + "\n")


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


def compact_members(members: dict[str, object]) -> str | None:
    """The members of a JSON object as json.dumps writes them compactly, without the braces (to be
    placed among others by `dumps_indented_with`); None where that fails (a value json cannot
    write: the whole document is then written the slow way, and says why)."""
    try:
        return json.dumps(members, ensure_ascii=False, separators=(",", ":"))[1:-1]
    except (TypeError, ValueError):
        return None


def dumps_indented_with(data: dict[str, object], members: dict[str, object], early: str | None) -> str:
    """`dumps_indented(data)`, where `members` (a run of consecutive keys of `data`, its values the
    same objects) were written out already as `early` (`compact_members`): the other members are
    written around them, and msgspec lays the whole out (tests/test_perf_paths.py)."""
    import msgspec

    keys = list(data)
    first = keys.index(next(iter(members))) if members else len(keys)
    if (
        early is None
        or keys[first : first + len(members)] != list(members)
        or any(data[k] is not members[k] for k in members)
    ):
        return dumps_indented(data)
    try:
        parts = [json.dumps(k, ensure_ascii=False) + ":" + json.dumps(data[k], ensure_ascii=False, separators=(",", ":"))
                 for k in keys[:first]]  # fmt: skip
        parts += [early] if early else []
        parts += [json.dumps(k, ensure_ascii=False) + ":" + json.dumps(data[k], ensure_ascii=False, separators=(",", ":"))
                  for k in keys[first + len(members) :]]  # fmt: skip
        compact = ("{" + ",".join(parts) + "}").encode()
        return msgspec.json.format(compact, indent=2).decode()
    except (UnicodeError, msgspec.DecodeError, TypeError, ValueError):
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
