"""Printing for the command line: store text escaped, never interpreted; JSON; plain tables."""

from __future__ import annotations

import codecs
import errno
import json
import os
import sys

from engine.base.text import escape, escape_json


class OutputError(OSError):
    """Standard output could not be written (a full disk, `> /dev/full`, a device's error, a
    character its encoding has no bytes for): the command's answer is lost, which the command line
    says in one line (controlroom.cli.root.failed). A reader that went away (EPIPE) is not one: it
    took what it read, and the command carries on to its end and its own exit code (D-332)."""


def write(text: str) -> None:
    """Every write of a command's own output goes through here. Where the stream writes through
    (`PYTHONUNBUFFERED`, `python -u`) or its file does not block, the bytes go to the file by
    `_write_bytes`, which continues a short write (the text layer drops it) and waits for a full
    pipe (the buffer refuses it). A reader that went away: the rest goes nowhere
    (`discard_rest`) and the command carries on, to exit as it judged (D-332)."""
    stream = sys.stdout
    try:
        fd, straight, through = _own_file(stream)
        if fd is None or not straight:
            stream.write(text)
        else:
            if not through:  # a non-blocking file under a buffer: what the buffer holds goes first
                stream.flush()
            _write_bytes(fd, text.encode("utf-8", stream.errors or "strict"))
    except BrokenPipeError:
        discard_rest()
    except UnicodeEncodeError as exc:
        try:  # the lines before the one it cannot write are written, buffered or not
            stream.flush()
        except (OSError, ValueError):
            pass
        raise _lost(exc) from None
    except OSError as exc:
        raise _lost(exc) from None


def _lost(exc: OSError | UnicodeEncodeError) -> OutputError:
    """The output's failure as the command line says it (`OutputError`)."""
    if isinstance(exc, UnicodeEncodeError):
        return OutputError(errno.EILSEQ, f"its encoding, {exc.encoding}, has no bytes for a character in it")
    return OutputError(exc.errno, exc.strerror)


def flush() -> None:
    """The output's buffer written out (the command line's last step), as `write` fails."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        discard_rest()
    except OSError as exc:
        raise _lost(exc) from None


def settle() -> None:
    """The command line's last word on its streams, whatever happened: what standard output's
    buffer holds is written, or sent to /dev/null if it cannot be, and standard error's the same,
    so that the interpreter's own last flush never fails (`Exception ignored`, exit 120)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        discard_rest()
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        _to_null(sys.stderr)


def say(line: str) -> None:
    """One line of a command's own on standard error (an error, a warning, `serve`'s and `unit
    run`'s progress). Its reader gone for good (`2>&1 | …` closed): standard error goes to
    /dev/null and the command carries on to its own exit code. Any other failure (a disk full for
    a moment, a non-blocking pipe full for a moment) leaves standard error as it is: what its
    buffer kept goes out with a later line, or at the end (`settle`)."""
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except BrokenPipeError:
        _to_null(sys.stderr)
    except (OSError, ValueError):
        pass


def discard_rest() -> None:
    """Standard output pointed at /dev/null: what its buffer holds, and whatever the command still
    writes, goes nowhere, so that neither the command nor the process's end fails on a closed pipe
    or a full disk again (`Exception ignored`, exit 120)."""
    _to_null(sys.stdout)


def _to_null(stream: object) -> None:
    """The file under `stream` pointed at /dev/null (where it has one)."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        null = os.open(os.devnull, os.O_WRONLY)
    except (AttributeError, OSError, ValueError):  # a capture, a closed stream: nothing under it
        return
    try:
        os.dup2(null, fd)
    except OSError:
        pass
    finally:
        os.close(null)


_OWN: list[tuple[object, int | None, bool, bool]] = [((), None, False, False)]  # as last asked


def _own_file(stream: object) -> tuple[int | None, bool, bool]:
    """The file descriptor bytes may go straight to (the interpreter's own standard output, in
    UTF-8; None for a stream a caller put in its place, a capture or a tee, or another encoding:
    UTF-16's byte-order mark, a strict ASCII's refusal, as the stream writes them), whether every
    write should go so (the stream writes through, or its file does not block), and whether the
    stream writes through. Asked again when the stream is reconfigured; no caller's stream is kept."""
    if stream is not sys.__stdout__:
        return None, False, False
    through = bool(getattr(stream, "write_through", False))
    marker = (stream.encoding, through)  # type: ignore[union-attr]
    if _OWN[0][0] != marker:
        fd, straight = None, False
        try:
            if codecs.lookup(marker[0]).name == "utf-8":
                fd = stream.fileno()  # type: ignore[union-attr]
                straight = through or not os.get_blocking(fd)
        except (AttributeError, LookupError, OSError, TypeError, ValueError):
            fd, straight = None, False
        _OWN[0] = (marker, fd, straight, through)
    return _OWN[0][1], _OWN[0][2], _OWN[0][3]


def _write_bytes(fd: int, data: bytes) -> None:
    """Every byte of `data` to `fd`: a short write continued, a non-blocking file waited on."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            import select

            poll = select.poll()
            poll.register(fd, select.POLLOUT)
            poll.poll()


def out(line: str = "") -> None:
    write(line + "\n")


def emit_json(data: object) -> None:
    """JSON values are raw; DEL, C1 and bidi or zero-width characters are written as \\uNNNN."""
    emit_json_text(dumps_indented(data))


def emit_json_text(dumped: str | list[str]) -> None:
    """JSON text from dumps_indented, or the pieces of one (`indented_pieces`: joined, they are
    that text), written as emit_json writes it. Into the interpreter's own standard output in
    UTF-8, each piece is escaped and its bytes written in turn, straight to the file (what the
    stream buffered first): escape_json looks at one character at a time, so the pieces write what
    the whole would, without the copies a whole text of 80 MB (--once at 100,000 obligations) costs
    to join (tests/test_perf_paths.py). Anywhere else, the whole text through the stream. A reader
    that goes away before the end takes what it read; the command exits as it judged (D-332)."""
    pieces = [dumped] if isinstance(dumped, str) else dumped or [""]
    stream = sys.stdout
    fd = _own_file(stream)[0]
    if fd is None:
        write(escape_json("".join(pieces)) + "\n")
        return
    flush()
    try:
        *head, last = pieces
        for piece in head:
            _write_bytes(fd, escape_json(piece).encode("utf-8", stream.errors or "strict"))
        _write_bytes(fd, (escape_json(last) + "\n").encode("utf-8", stream.errors or "strict"))
    except BrokenPipeError:
        discard_rest()
    except (OSError, UnicodeEncodeError) as exc:
        raise _lost(exc) from None


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
    them: placed among the others by `indented_pieces`. "" for no member; None where that
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


def indented_pieces(data: dict[str, object], members: dict[str, object], early: str | None) -> list[str]:
    """`dumps_indented(data)` in pieces (joined, that text: tests/test_perf_paths.py), where
    `members` (a run of consecutive keys of `data`, its values the same objects) were laid out
    already as `early` (`laid_members`, while --once waited for verify): the other members are laid
    out the same way, for `emit_json_text` to write one piece after another."""
    keys = list(data)
    first = keys.index(next(iter(members))) if members else len(keys)
    if (
        early is None
        or keys[first : first + len(members)] != list(members)
        or any(data[k] is not members[k] for k in members)
    ):
        return [dumps_indented(data)]
    before = laid_members({k: data[k] for k in keys[:first]})
    after = laid_members({k: data[k] for k in keys[first + len(members) :]})
    if before is None or after is None:
        return [json.dumps(data, ensure_ascii=False, indent=2)]
    pieces = [piece for piece in (before, early, after) if piece]
    if not pieces:
        return ["{}"]
    joined = ["{\n"]
    for k, piece in enumerate(pieces):
        joined += [",\n", piece] if k else [piece]
    return [*joined, "\n}"]


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
