"""Append-only NDJSON stores: one event per line, one write under an exclusive lock, hash-chained.

This is the one small interface between the engine and the files (append a validated event; read
from a cursor; an exclusive section); the PostgreSQL store (engine.log.pg.store.PgStore) stands in
for it with the same interface, its lines mirrored into these files.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import math
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import accumulate, compress, filterfalse
from pathlib import Path
from typing import IO, Any

import msgspec

from engine.base import clock, ids
from engine.base.errors import BadInput, Refused
from engine.log.files import open_regular, open_store
from engine.log.lines import DEEP_BYTES, TOO_DEEP, too_deep

GENESIS = ""
SKEW_S = 2  # how far an event may be stamped before its store's last one (design §15.3)
_READ_CHUNK = 1 << 20
_TAIL_CHUNK = 16 << 10  # last_event's first piece, doubled until a whole line is in it
MAX_LINE_BYTES = 1 << 20  # a line's canonical JSON, its newline aside (design §22, §26): 1 MiB
# design §26: a line longer than MAX_LINE_BYTES is read as a bad line, skipped in bounded memory: a
# reader never holds more than it and a chunk at once
MAX_LINE = MAX_LINE_BYTES
# bad lines kept to be named, per read and in a read model (the first ones, in store and line
# order); beyond them they are counted, so a million garbage lines cost a count, not a million
# warnings (design §26)
KEPT_PROBLEMS = 20
TOO_LONG = f"longer than {MAX_LINE} bytes (1 MiB): not an event line"


def canonical(event: dict) -> bytes:
    # surrogatepass: a line that smuggles a lone surrogate (`"\ud800"`) still hashes, so verify names
    # it instead of failing; every text the engine writes encodes the same either way
    return json.dumps(event, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )


def event_hash(event: dict) -> str:
    """The hash of an event's content and its `prev`; the `hash` field itself is left out."""
    body = {k: v for k, v in event.items() if k != "hash"}
    return hashlib.sha256(canonical(body)).hexdigest()


class _Float(float):
    """A JSON number with a fraction or exponent, as `HASHING` decodes it: msgspec writes floats
    unlike json.dumps (`1e16` for `1e+16`), so the fast encoder refuses this type (TypeError) and
    a line holding one is hashed by `canonical` itself. A number out of a float's range (`1e400`)
    is refused, as every reader's decoder refuses it: such a line is no event line, named as one
    holding Infinity (its hash still carries the chain on)."""

    __slots__ = ()

    def __new__(cls, text: str) -> _Float:
        value = float.__new__(cls, text)
        if math.isinf(value):
            raise ValueError("Number out of range")
        return value


# decodes exactly what the strict reader decodes, each float as _Float (the chain check's reader)
HASHING = msgspec.json.Decoder(float_hook=_Float)
_SORTED = msgspec.json.Encoder(order="sorted")
_UNSET = object()


def line_hash(event: dict) -> str:
    """`event_hash(event)` for an event `HASHING` decoded, written by msgspec where its bytes are
    json.dumps's (str, int, bool, null, lists and objects, keys sorted by code point: proved in
    tests/test_perf_paths.py), else by `canonical`. The `hash` field is taken out while the body
    is encoded and put back."""
    value = event.pop("hash", _UNSET)
    try:
        body = _SORTED.encode(event)
    except (TypeError, UnicodeEncodeError, OverflowError, ValueError):
        body = canonical(event)
    finally:
        if value is not _UNSET:
            event["hash"] = value
    return hashlib.sha256(body).hexdigest()


class Problem(msgspec.Struct, frozen=True):
    """A line a reader skipped: `torn` (last line cut off) or `malformed` (a bad middle line)."""

    store: str
    line: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.store}:{self.line}: {self.kind} line skipped ({self.message})"


class ReadResult(msgspec.Struct):
    events: list = msgspec.field(default_factory=list)  # dicts, or the shape the reader asked for
    starts: list[int] = msgspec.field(default_factory=list)  # the byte offset of each event's line
    problems: list[Problem] = msgspec.field(default_factory=list)  # the first KEPT_PROBLEMS bad lines
    bad: int = 0  # every bad line of the read, kept or only counted
    offset: int = 0
    line: int = 0
    end: int = 0  # the bytes read, a last line not yet ended included (which `offset` may leave out)
    more: bool = False  # stopped at `limit`: the store holds more from `offset` (engine.read.fold reads on)
    file: tuple[int, int] = (0, 0)  # (device, inode) read: a fold reading on checks it is the same

    def problem(self, store: str, line: int, kind: str, why: Callable[[], str]) -> None:
        """Count a bad line; keep it (its reason computed only then) while fewer are kept."""
        self.bad += 1
        if len(self.problems) < KEPT_PROBLEMS:
            self.problems.append(Problem(store, line, kind, why()))


TORN_END = b"~\n"  # ends a torn last line before the next append: `{...}~` is no JSON, read by no reader


def _whole_end(handle: IO[bytes], size: int) -> int:
    """Where the whole lines of a file of `size` bytes end: `size` where its last byte is a newline,
    else just after the last newline (0: none), a torn tail left out, found from the end in pieces (a
    torn tail of any length costs a scan, never its size in memory). What `_tail` finds the chain's
    tail before, and `settled_end` records."""
    if size == 0:
        return 0
    handle.seek(size - 1)
    if handle.read(1) == b"\n":  # nearly always: one byte read
        return size
    end = size
    while end > 0:
        start = max(0, end - _READ_CHUNK)
        handle.seek(start)
        found = handle.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _cut_back(fd: int, size: int) -> str:
    """A failed append's bytes taken off again (the file as it was at `size`), and what is left."""
    try:
        os.ftruncate(fd, size)
    except OSError as again:  # the torn line stays: readers skip it, verify names it
        return f"its partial line could not be cut off: {again.strerror}"
    return "nothing of the line was kept"


class Store:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = self.path.name

    # ---- writing -------------------------------------------------------------------------
    def append(self, event: Mapping[str, Any], *, assign_id: bool = False) -> dict[str, Any]:
        """Append one validated event; returns it as written (with id, prev and hash).

        The lock covers finding the chain's tail and the write, so concurrent writers chain in
        order. A file that does not end in a newline (a torn write) gets TORN_END first, in the same
        write: the new event lands whole on its own line, the torn one stays a line no reader takes.
        A write that fails part way (a full disk) is cut back, leaving nothing: a line the command
        said it did not write is never completed by the next append, nor counted (D-335).
        """
        check_size(self.name, event)
        fd = open_store(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size  # where this write begins: every writer appends under the lock
            prev, ends_clean, last_at = self._tail()
            _check_time(self.name, event.get("at"), last_at)
            written = dict(event)
            written["prev"] = prev
            if assign_id:
                written["id"] = ids.new_id(f"{self.name}\0{prev}\0{canonical(written).decode()}")
                # keep the id first on the line, for people reading the file
                written = {"id": written.pop("id"), **written}
            written["hash"] = event_hash(written)
            data = (b"" if ends_clean else TORN_END) + line_text(self.name, written).encode() + b"\n"
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                exc.strerror = f"{exc.strerror or exc} ({_cut_back(fd, size)})"
                exc.filename = str(self.path)
                raise
            return written
        finally:
            os.close(fd)

    def _tail(self) -> tuple[str, bool, object]:
        """The hash of the last valid event, whether the file ends with a newline, and its `at`.
        Lines are found from the end in bounded pieces; one longer than MAX_LINE is stepped over
        unread (it is no event), so a 200 MB garbage tail costs a scan, not its size in memory. A
        torn last line (no newline) is no event, whatever it holds: the chain's tail is before it."""
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return GENESIS, True, None
        with open(fd, "rb", buffering=0) as handle:
            size = os.fstat(handle.fileno()).st_size
            whole = _whole_end(handle, size)
            ends_clean = whole == size
            event = last_event(handle, whole)
        if event is None:
            return GENESIS, ends_clean, None
        return event["hash"], ends_clean, event.get("at")

    # ---- reading -------------------------------------------------------------------------
    def read(
        self,
        offset: int = 0,
        line: int = 0,
        *,
        final: bool = True,
        shape: type | tuple | None = None,
        limit: int | None = None,
    ) -> ReadResult:
        """Read the events after byte `offset` (line number `line` so far).

        A last line without a newline is torn: with `final` it is reported and skipped; a live
        reader passes final=False and leaves the offset before it, to read it again when whole.
        `shape` (a msgspec Struct, or a pair: the shapes most lines take, the shape for any line)
        reads only the fields a fold uses; by default, whole events. With `limit`, it stops at the
        first line boundary past `limit` bytes (`more`: read on from `offset`), so a fold holds
        one piece's events at a time, not a whole store's.
        """
        result = ReadResult(offset=offset, line=line, end=offset)
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return result
        except OSError:
            if os.path.islink(self.path):
                raise Refused(
                    f"{self.path} is a symlink; regulator opens its stores only where they are"
                ) from None
            raise
        handle = open(fd, "rb", buffering=0)  # noqa: SIM115 - closed by the with below
        status = os.fstat(fd)
        result.file = (status.st_dev, status.st_ino)
        number, done, last = line, offset, b""  # done: where `last` (a line not yet ended) starts
        skipping = False  # inside a line longer than MAX_LINE: its bytes are dropped, not kept
        with handle:
            handle.seek(offset)
            # in pieces: the memory one piece's lines used is reused by the next, and a large
            # log never sits in memory twice (its bytes and its lines)
            while True:
                if limit is not None and done - offset >= limit and not skipping:
                    result.more = True  # `last`, a line begun, is read again from `done`
                    break
                chunk = handle.read(_READ_CHUNK)
                if not chunk:
                    break
                if skipping:
                    ends = chunk.find(b"\n")
                    if ends < 0:
                        continue
                    number += 1
                    result.problem(self.name, number, "malformed", lambda: TOO_LONG)
                    chunk, skipping = chunk[ends + 1 :], False
                    done = handle.tell() - len(chunk)
                    if not chunk:
                        continue
                pieces = chunk.split(b"\n")  # `last` (no newline in it) begins its first line: joined
                size, pieces[0] = len(last) + len(chunk), last + pieces[0]  # to that line, not the chunk
                last = pieces.pop()  # b"" when the data ends with a newline
                if pieces:
                    number = _parse_lines(self.name, pieces, number, done, result, shape)
                    done += size - len(last)
                if len(last) > MAX_LINE:  # no newline yet, and already too long to be an event
                    last, skipping = b"", True
            end = handle.tell()
        if result.more:
            result.end = result.offset = done
            result.line = number
            return result
        result.end = end
        if (last or skipping) and final:
            number += 1
            why = TOO_LONG if skipping else "no newline at the end: a write cut off"
            result.problem(self.name, number, "torn", lambda: why)
            done = end
        result.offset = done
        result.line = number
        return result

    def settled_end(self) -> int:
        """Where the file's whole lines end, with no append in flight: taken under a shared lock on
        it, which an append holds exclusively while it writes and cuts a failed write back; a torn
        last line is not counted (what a decision's `marks` and a host event's `seen` record: never
        bytes a failed write leaves for a moment, nor a line no reader takes, D-335)."""
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return 0
        with open(fd, "rb", buffering=0) as handle:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return _whole_end(handle, os.fstat(fd).st_size)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def whole(self) -> bytes:
        """Every byte of the store, as `verify` checks it."""
        with open(open_regular(self.path), "rb") as handle:
            return handle.read()

    def lines(self) -> Iterator[tuple[int, bytes | None]]:
        """(start offset, line) for every line of the store in order, without its newline; None
        for a line longer than MAX_LINE (never held whole). Bounded memory whatever it holds."""
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return
        with open(fd, "rb", buffering=0) as handle:
            yield from read_lines(handle)

    def mended(self) -> list[int]:
        """Lines of a local copy found not to be the store's and read again (engine.log.pg's
        mirror); the files are the store itself."""
        return []


def _check_time(store: str, at: object, last_at: object) -> None:
    """With the system clock, a store never takes an event stamped before its last (beyond a
    little skew): time in the log only moves forward (design §15.3)."""
    if clock.pinned() or not isinstance(at, str) or not isinstance(last_at, str) or at >= last_at:
        return
    try:
        behind = (clock.read_time(last_at) - clock.read_time(at)).total_seconds()
    except Exception:  # noqa: BLE001 - a last line with a bad time does not stop the log
        return
    if behind > SKEW_S:
        raise Refused(
            f"{store}: this event is stamped {at}, before the store's last event ({last_at}); "
            "the host's clock went back or the time was forged: nothing written"
        )


_WHOLE = msgspec.json.Decoder()


@functools.cache
def _decoders(shape: type | tuple | None) -> tuple[Callable, Callable]:
    """(for a piece, for each line): a piece's lines are decoded in one `map` with the first; a
    line it refuses is decoded alone with the second, which tries the shape for any line too."""
    if shape is None:
        return _WHOLE.decode, _WHOLE.decode
    if not isinstance(shape, tuple):
        decode: Callable[[bytes], object] = msgspec.json.Decoder(shape).decode
        return decode, decode
    usual, anyline = (msgspec.json.Decoder(s).decode for s in shape)

    def each(raw: bytes) -> object:
        try:
            return usual(raw)
        except msgspec.ValidationError:
            return anyline(raw)

    return usual, each


def shaped_reads(shape: type | tuple) -> Callable[[bytes], bool]:
    """Whether a reader that decodes lines in this shape (the fold's, engine.read.fold.SHAPES)
    takes the line as an event: for `verify`, which names a line that strict JSON refuses but such
    a reader still reads (a number out of range in a field it does not build, D-184)."""
    _, each = _decoders(shape)

    def reads(raw: bytes) -> bool:
        if len(raw) > MAX_LINE or (raw[:1] != b"{" and raw.lstrip()[:1] != b"{") or too_deep(raw):
            return False
        try:
            raw.decode("utf-8")
            each(raw)
        except (ValueError, RecursionError):  # msgspec's errors are ValueErrors
            return False
        return True

    return reads


def _why_not(raw: bytes) -> str:
    """Why a line is not an event, decided on the whole line whatever shape was asked for (a
    shape stops at the first field it cannot use, and says less about the rest)."""
    if len(raw) > MAX_LINE:
        return TOO_LONG
    if too_deep(raw):
        return TOO_DEEP
    try:
        raw.decode("utf-8")
        value = _WHOLE.decode(raw)
    except UnicodeDecodeError:
        return "not valid UTF-8"
    except ValueError as exc:
        return "not valid UTF-8" if "utf-8" in str(exc).lower() else "not JSON"
    except RecursionError:
        return "not JSON (nested too deep)"
    return "not a JSON object" if type(value) is not dict else "not JSON"


def _parse_lines(
    store: str, pieces: list[bytes], line: int, offset: int, result: ReadResult, shape: type | tuple | None
) -> int:
    """Parse whole lines into events; report the bad ones by number. Returns the last line number.

    The hot path of every reader. With a shape, msgspec builds only the fields the fold reads and
    skips the rest, checking its JSON though not its UTF-8: so non-ASCII lines are decoded once
    to check that (whole events need no such pass: every string is decoded, its UTF-8 checked). When every line is an event (almost always), decoding is one `map` in C;
    otherwise `_parse_each` finds the bad lines. Each event's byte offset is kept so the read
    models can hold a reference instead of the event.
    """
    decode, each = _decoders(shape)
    lengths = list(map(len, pieces))  # once, for the longest line and the starts
    longest = max(lengths)
    if longest > MAX_LINE:  # a line too long to be an event: named line by line
        return _parse_each(store, pieces, line, offset, result, each, shape is None)
    # one nested too deep: named line by line (only a line over DEEP_BYTES is looked at, in C)
    if longest > DEEP_BYTES and any(map(too_deep, compress(pieces, map(DEEP_BYTES.__lt__, lengths)))):
        return _parse_each(store, pieces, line, offset, result, each, shape is None)
    try:
        if shape is not None:  # whole events: msgspec decodes, and so checks, every byte of text
            for raw in filterfalse(bytes.isascii, pieces):  # UTF-8 first: a shape skips some text
                raw.decode("utf-8")
        events = list(map(decode, pieces))
        if shape is None and not set(map(type, events)) <= {dict}:
            raise ValueError("not a JSON object")
    except (ValueError, RecursionError):  # msgspec's errors and UnicodeDecodeError are ValueErrors
        return _parse_each(store, pieces, line, offset, result, each, shape is None)
    result.events.extend(events)
    result.starts.extend(_starts(lengths, offset))
    return line + len(pieces)


def _parse_each(
    store: str,
    pieces: list[bytes],
    line: int,
    offset: int,
    result: ReadResult,
    decode: Callable[[bytes], object],
    whole: bool,
) -> int:
    """Line by line, naming each line that is not an event (torn, garbage, not an object)."""
    append = result.events.append
    number = line
    skipped: set[int] = set()  # indices into pieces of lines that are not events
    for k, raw in enumerate(pieces):
        number += 1
        if raw[:1] != b"{" and raw.lstrip()[:1] != b"{":  # no JSON object: bad, without a decode
            skipped.add(k)
            if raw:
                result.problem(store, number, "malformed", functools.partial(_why_not, raw))
            continue
        try:
            if not raw:
                raise ValueError("empty")
            if len(raw) > MAX_LINE:
                raise ValueError(TOO_LONG)
            if too_deep(raw):
                raise ValueError(TOO_DEEP)
            if not raw.isascii():
                raw.decode("utf-8")
            event = decode(raw)
            if whole and type(event) is not dict:  # a shape decodes only JSON objects
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError):
            skipped.add(k)
            if raw:  # an empty line is the newline that closed off a torn write: no problem of its own
                result.problem(store, number, "malformed", functools.partial(_why_not, raw))
            continue
        append(event)
    result.starts.extend(
        at for k, at in enumerate(_starts(list(map(len, pieces)), offset)) if k not in skipped
    )
    return number


def _starts(lengths: list[int], offset: int) -> list[int]:
    """Line k starts at offset + the lengths of the k lines before it + their k newlines (in C)."""
    return list(map(operator.add, accumulate(lengths, initial=offset), range(len(lengths))))


def canonical_line(event: dict) -> bytes:
    """How an event is written: compact JSON, UTF-8, key order kept, one line."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def line_text(store: str, event: dict) -> str:
    """The event's canonical line as text, without its newline, refused (BadInput) when its UTF-8
    is over MAX_LINE_BYTES, when it nests deeper than MAX_DEPTH (no reader reads it), or when it
    holds a lone surrogate (no UTF-8 at all). Its characters are counted before it is encoded (a character is at
    least one byte), so an event of 100 MB costs one copy of its text, never its bytes as well."""
    try:
        text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise BadInput(f"{store}: {TOO_DEEP}; nothing written") from None
    if len(text) > MAX_LINE_BYTES:
        raise BadInput(too_long(store, len(text)))
    if len(text) > DEEP_BYTES and too_deep(text.encode("utf-8", "surrogatepass")):  # no reader would read it
        raise BadInput(f"{store}: {TOO_DEEP}; nothing written")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # every writer's check_text refuses one first: the last guard
        raise BadInput(f"{store}: a lone surrogate is no UTF-8; nothing written") from None
    if size > MAX_LINE_BYTES:
        raise BadInput(too_long(store, len(text)))
    return text


def too_long(store: str, size: int) -> str:
    return (
        f"{store}: a line of {size:,} characters or more is over the limit of {MAX_LINE_BYTES:,} "
        "bytes (1 MiB) of canonical JSON; nothing written"
    )


def check_size(store: str, event: Mapping[str, Any]) -> None:
    """Refuse (BadInput) an event whose line would be over MAX_LINE_BYTES before anything is built
    from it (its JSON, its id, its hash): its texts' characters are counted first, without a copy
    (its JSON holds at least as many bytes); the line `line_text` builds at the end is checked
    again, exactly."""
    least = _least_size(event)
    if least > MAX_LINE_BYTES:
        raise BadInput(too_long(store, least))


def _least_size(value: object) -> int:
    """How many bytes, at least, the JSON of `value` holds: the characters of every text in it
    (keys too). Iterative: a deeply nested event is counted, not recursed into."""
    size, stack = 0, [value]
    while stack and size <= MAX_LINE_BYTES:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return size


def read_lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(start offset, line) for each line of a file from where `handle` stands, without its
    newline (a last line without one included); the line is None when longer than MAX_LINE, its
    bytes dropped as they are read. At most a chunk and MAX_LINE are held at once."""
    position = handle.tell()  # where `last` starts
    last, skipping = b"", False
    while chunk := handle.read(_READ_CHUNK):
        if skipping:
            ends = chunk.find(b"\n")
            if ends < 0:
                continue
            yield position, None
            position = handle.tell() - len(chunk) + ends + 1
            chunk, skipping = chunk[ends + 1 :], False
        pieces = chunk.split(b"\n")
        pieces[0] = last + pieces[0]  # a line begun in the chunk before: joined alone (as `read`)
        last = pieces.pop()
        for piece in pieces:
            yield position, piece if len(piece) <= MAX_LINE else None
            position += len(piece) + 1
        if len(last) > MAX_LINE:
            last, skipping = b"", True
    if skipping:
        yield position, None
    elif last:
        yield position, last


def last_event(handle: IO[bytes], end: int, first: int = _TAIL_CHUNK) -> dict | None:
    """The last line before byte `end` that is a JSON object with a text `hash` (the chain's tail),
    or None. Read backwards in pieces, each split in memory: the first of `first` bytes (the last
    line is nearly always in it: every append asks, and a 1 MiB read and split was a tenth of a
    door's report), each next one twice as large, up to _READ_CHUNK. A line longer than MAX_LINE is
    stepped over without being held, a line with no JSON object without a parse, so a tail of a
    million garbage lines or one 200 MB line costs a scan, never their size in memory. Any `first`
    finds the same line (tests/test_perf_paths.py)."""
    position, carry, skipping, piece = end, b"", False, max(1, first)
    while position > 0:
        start = max(0, position - piece)
        piece = min(piece * 2, _READ_CHUNK)
        handle.seek(start)
        data = handle.read(position - start)
        position = start
        if skipping:  # inside a line too long to be one: drop bytes until the newline before it
            cut = data.rfind(b"\n")
            if cut < 0:
                continue
            data, skipping = data[:cut], False
        else:
            data += carry
        lines = data.split(b"\n")
        head = lines[0] if start > 0 else None  # perhaps the end of a line that starts earlier
        for raw in reversed(lines[1:] if start > 0 else lines):
            if len(raw) <= MAX_LINE and (raw[:1] == b"{" or raw.lstrip()[:1] == b"{"):
                event = _parse(raw)
                if event is not None and isinstance(event.get("hash"), str):
                    return event
        carry = head or b""
        if len(carry) > MAX_LINE:
            carry, skipping = b"", True
    return None


def _parse(raw: bytes) -> dict | None:
    """A line as Python's lenient reader takes it (a NaN line carries the chain on, `verify`), in
    C where the strict reader takes it too (nearly every line: what each append and each person
    event's time before asks, D-335), the two agreeing on every such line's text fields
    (tests/test_perf_paths.py)."""
    if too_deep(raw):
        return None
    try:
        event = _WHOLE.decode(raw)
    except (ValueError, RecursionError):
        try:
            event = json.loads(raw)
        except (ValueError, RecursionError):
            return None
    return event if isinstance(event, dict) else None


# what readers do with a line a finding names (`Finding.reading`), said where the finding is made
# and asked by engine.commands.verification.dismissal_leaves (what a dismissal leaves, D-209)
SKIPPED = "skipped"  # no reader takes the line: it counts for nothing
TAKEN = "taken"  # readers take it all the same (what the finding says is wrong with it stands)
BROKEN = "broken"  # edited or moved (its hash or chain): read as it stands; an identity line's
# policy fold leaves it out once dismissed
AS_IT_STANDS = ""  # nothing said of readers: they read the line as it stands


EDITED = "content does not match its hash (edited)"
MOVED = "chain broken: prev does not name the line before (inserted, deleted or reordered)"


class Finding(msgspec.Struct, frozen=True):
    """One thing `verify` found wrong with a store."""

    store: str
    line: int
    message: str
    reading: str = AS_IT_STANDS  # SKIPPED, TAKEN, BROKEN or AS_IT_STANDS

    def __str__(self) -> str:
        return f"{self.store}:{self.line}: {self.message}"


def verify(
    store: Store,
    data: bytes | None = None,
    dismissed: Mapping[int, str] | None = None,
    each: Callable[[int, int, int, dict], None] | None = None,
    shaped: Callable[[bytes], bool] | None = None,
) -> list[Finding]:
    """Check the hash chain; name every unreadable line and the first break in the chain.

    An edited line fails its own hash; an inserted, deleted or reordered line breaks `prev`.
    A cut-off tail or a rewritten and re-hashed suffix cannot be seen without an outside anchor.
    A line is read as every reader reads it (strict JSON: `NaN` is no JSON), so a line readers
    skip is named here too, though its `hash` carries the chain on (design §26). The first
    KEPT_PROBLEMS unreadable lines are named, the rest counted in one finding. Read line by line:
    bounded memory whatever the store holds (`data`: the bytes a server sent, fleet mode).

    `dismissed`: line number -> the SHA-256 of the line a signed dismissal names (design §26). Such a
    line, while it still has that hash, is named but does not stop the check: the next line may
    chain to the hash it claims (appended after it) or to the line before it (inserted).

    `each(line number, start offset, size, event)` is given every line that strict JSON reads as an
    object, in order (what engine.commands.verification judges of each line's time, and routes
    again), so no line is decoded twice. A server's bytes (`data`) give 0 for every offset.

    `shaped(line)`: whether the fold reads a line strict JSON refuses (`shaped_reads`): such a line
    is named as one the fold reads, not as one every reader skips.
    """
    found: list[Finding] = []
    if data is None:
        source: Iterable[tuple[int, bytes | None]] = store.lines()
    else:
        pieces: list[bytes | None] = list(data.split(b"\n"))
        if pieces[-1] == b"":
            pieces.pop()
        source = [(0, p if p is None or len(p) <= MAX_LINE else None) for p in pieces]
    prev = {GENESIS}  # what the next line's prev may name
    chain_broken = False
    unreadable = first_unlisted = number = 0
    dismissed = dismissed or {}
    torn_at = _torn_line(store, data)
    for start, raw in source:
        number += 1
        event, why = _event_of(raw)
        if each is not None and why is None and event is not None and raw is not None:
            each(number, start, len(raw), event)
        if why is not None:
            unreadable += 1
            if unreadable <= KEPT_PROBLEMS:
                reading = SKIPPED
                if number == torn_at:
                    said = "torn last line (a write cut off); readers skip it"
                elif raw is not None and shaped is not None and shaped(raw):
                    said = f"{why}; a strict reader skips it, but the fold reads the fields it builds of it: no writer wrote it (forged?)"
                    reading = TAKEN
                else:
                    said = f"{why}; readers skip it"
                found.append(Finding(store.name, number, said, reading))
            elif unreadable == KEPT_PROBLEMS + 1:
                first_unlisted = number
            if event is None:
                continue
        if chain_broken or event is None:
            continue
        # a line only the lenient reader takes holds plain floats: hashed by `canonical` alone
        if event.get("hash") != (line_hash(event) if why is None else event_hash(event)):
            found.append(Finding(store.name, number, EDITED, BROKEN))
            chain_broken = not _dismissed(dismissed, number, raw)
            if not chain_broken and isinstance(event.get("hash"), str):
                prev = prev | {event["hash"]}
        elif event.get("prev") not in prev:
            found.append(Finding(store.name, number, MOVED, BROKEN))
            chain_broken = not _dismissed(dismissed, number, raw)
            if not chain_broken and isinstance(event.get("hash"), str):
                prev = prev | {event["hash"]}
        else:
            prev = {event["hash"]}
    if unreadable > KEPT_PROBLEMS:
        found.append(
            Finding(
                store.name,
                first_unlisted,
                f"and {unreadable - KEPT_PROBLEMS} more unreadable line(s) from here, not listed one by one "
                f"({unreadable} in all; the first {KEPT_PROBLEMS} are named above)",
            )
        )
        found.sort(key=lambda f: f.line)
    return found


def _dismissed(dismissed: Mapping[int, str], number: int, raw: bytes | None) -> bool:
    """A signed dismissal names this line, and the line still has the bytes it named."""
    digest = dismissed.get(number)
    return digest is not None and raw is not None and hashlib.sha256(raw).hexdigest() == digest


def _torn_line(store: Store, data: bytes | None) -> int | None:
    """The number of the last line when it has no newline (a write cut off), else None; known
    only when the bytes are in hand (a file's last line is found by lines() itself)."""
    if data is not None:
        return data.count(b"\n") + 1 if data and not data.endswith(b"\n") else None
    try:
        fd = open_regular(store.path)
    except (OSError, Refused):
        return None
    with open(fd, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        handle.seek(0)
        count = 1
        while chunk := handle.read(_READ_CHUNK):
            count += chunk.count(b"\n")
        return count


def _event_of(raw: bytes | None) -> tuple[dict | None, str | None]:
    """(the line as a JSON object for the chain, or None; why readers skip it, or None). A line
    strict JSON refuses but Python's lenient reader takes (`NaN`, `Infinity`) is skipped by every
    reader, yet carries the chain on: the appender chained the next line to its hash."""
    if raw is None:
        return None, "a line " + TOO_LONG
    if raw[:1] != b"{" and raw.lstrip()[:1] != b"{":  # no JSON object: garbage, without a decode
        return None, "unreadable line (torn write or garbage)"
    if len(raw) > DEEP_BYTES and too_deep(raw):
        return None, f"unreadable line ({TOO_DEEP})"
    try:
        value = HASHING.decode(raw)
    except (ValueError, RecursionError):
        lenient = _parse(raw)
        if lenient is not None:
            return lenient, "not an event line (JSON holds no NaN, Infinity or number out of range)"
        return None, "unreadable line (torn write or garbage)"
    if type(value) is not dict:
        return None, "unreadable line (not a JSON object)"
    return value, None
