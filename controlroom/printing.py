"""Printing for the command line: store text escaped, never interpreted; JSON; plain tables."""

from __future__ import annotations

import json
import sys

from engine.base.text import escape, escape_json


class OutputError(OSError):
    """Standard output could not be written (a full disk, `> /dev/full`, a device's error): the
    command's answer is lost, which the command line says in one line (controlroom.cli.root.failed).
    A reader that went away (EPIPE) is not one: Click ends that command quietly (exit 1)."""


def write(text: str) -> None:
    """Every write of a command's own output goes through here."""
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.errno, exc.strerror) from None


def flush() -> None:
    """The output's buffer written out (the command line's last step), as `write` fails."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.errno, exc.strerror) from None


def out(line: str = "") -> None:
    write(line + "\n")


def emit_json(data: object) -> None:
    """JSON values are raw; DEL, C1 and bidi or zero-width characters are written as \\uNNNN."""
    emit_json_text(dumps_indented(data))


def emit_json_text(dumped: str) -> None:
    """JSON text from dumps_indented (or dumps_indented_with), written as emit_json writes it."""
    write(escape_json(dumped) + "\n")


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


def laid_members(members: dict[str, object]) -> str | None:
    """The members of a JSON object as `dumps_indented` lays them out inside any object written
    at the top (they sit one level deep either way), without the braces and the lines that hold
    them: placed among the others by `dumps_indented_with`. "" for no member; None where that
    fails (a value json or msgspec cannot write: the whole document is then written the slow
    way, and says why)."""
    import msgspec

    if not members:
        return ""
    try:
        compact = json.dumps(members, ensure_ascii=False, separators=(",", ":")).encode()
        return msgspec.json.format(compact, indent=2).decode()[2:-2]  # "{\n" ... "\n}"
    except (TypeError, ValueError, UnicodeError, msgspec.DecodeError):
        return None


def dumps_indented_with(data: dict[str, object], members: dict[str, object], early: str | None) -> str:
    """`dumps_indented(data)`, where `members` (a run of consecutive keys of `data`, its values the
    same objects) were laid out already as `early` (`laid_members`, while --once waited for
    verify): the other members are laid out the same way and the pieces joined
    (tests/test_perf_paths.py)."""
    keys = list(data)
    first = keys.index(next(iter(members))) if members else len(keys)
    if (
        early is None
        or keys[first : first + len(members)] != list(members)
        or any(data[k] is not members[k] for k in members)
    ):
        return dumps_indented(data)
    before = laid_members({k: data[k] for k in keys[:first]})
    after = laid_members({k: data[k] for k in keys[first + len(members) :]})
    if before is None or after is None:
        return json.dumps(data, ensure_ascii=False, indent=2)
    pieces = [piece for piece in (before, early, after) if piece]
    return "{\n" + ",\n".join(pieces) + "\n}" if pieces else "{}"


def table(headers: list[str], rows: list[list[object]], whole: tuple[int, ...] = ()) -> None:
    """A plain text table: every cell escaped, then laid out as `table_lines` lays it out."""
    for line in table_lines(headers, [[escape(c) for c in row] for row in rows], whole):
        out(line)


def table_lines(headers: list[str], cells: list[list[str]], whole: tuple[int, ...] = ()) -> list[str]:
    """A printed table's lines, its cells escaped already: columns padded by terminal cells (a wide
    character takes two), each as wide as its widest cell up to 40 cells (longer cut with `…`), the
    last column not padded. The columns `whole` (ids to copy: `status`'s `by`, a row's own id in
    `--once`) are never cut. A pipe or a log has no width to fit (an operator's review: printed
    output cut `sensor:osv-…` and ids it could not then copy)."""
    from engine.base.cells import pad, width

    size = len(headers)
    cells = [(row + [""] * size)[:size] for row in cells]
    widths = [width(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], width(cell)) if i in whole else min(max(widths[i], width(cell)), 40)

    def fmt(row: list[str]) -> str:
        parts = [pad(c, widths[i]) for i, c in enumerate(row[:-1])]
        return "  ".join([*parts, row[-1]]).rstrip()

    return [fmt(row) for row in [headers, *cells]]
