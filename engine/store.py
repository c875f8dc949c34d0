"""Append-only NDJSON stores: one event per line, one write under an exclusive lock, hash-chained.

This is the one small interface between the engine and the files (append a validated event; read
from a cursor; an exclusive section), so a server-backed store could stand in for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import operator
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate, filterfalse
from pathlib import Path

import msgspec

from engine import clock, ids
from engine.errors import Refused

GENESIS = ""
NO_STORES = "no regulator stores here (a clone? run on the host, or connect a store: SPEC §18)"
SKEW_S = 2  # how far an event may be stamped before its store's last one (SPEC §15.3)
_TAIL_CHUNK = 8 * 1024  # grown fourfold until a whole line is in it
_READ_CHUNK = 1 << 20


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


@dataclass(frozen=True)
class Problem:
    """A line a reader skipped: `torn` (last line cut off) or `malformed` (a bad middle line)."""

    store: str
    line: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.store}:{self.line}: {self.kind} line skipped ({self.message})"


@dataclass
class ReadResult:
    events: list = field(default_factory=list)  # dicts, or the shape the reader asked for
    starts: list[int] = field(default_factory=list)  # the byte offset of each event's line
    problems: list[Problem] = field(default_factory=list)
    offset: int = 0
    line: int = 0


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive section across processes, held on a lock file beside the stores."""
    fd = _open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _open(path: Path, flags: int) -> int:
    """Open without following a symlink; a missing store is never created here (only `init`
    and `demo` create stores, SPEC §15.4)."""
    try:
        return open_regular(path, flags)
    except FileNotFoundError:
        raise Refused(NO_STORES) from None
    except OSError as exc:
        if os.path.islink(path):
            raise Refused(f"{path} is a symlink; regulator opens its stores only where they are") from None
        raise Refused(f"{path}: cannot open ({exc.strerror})") from None


def open_regular(path: str | Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor on a store's regular file, never following a symlink and never waiting: a
    FIFO or a device put where a store belongs would block every reader (Refused instead)."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(f"{path} is not a regular file; regulator reads its stores only from files")
    return fd


class Store:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = self.path.name

    # ---- writing -------------------------------------------------------------------------
    def append(self, event: dict, *, assign_id: bool = False) -> dict:
        """Append one validated event; returns it as written (with id, prev and hash).

        The lock covers finding the chain's tail and the write, so concurrent writers chain in
        order. A file that does not end in a newline (a torn write) gets one first, in the same
        write, so the new event always lands whole on its own line.
        """
        fd = _open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            prev, ends_clean, last_at = self._tail()
            _check_time(self.name, event.get("at"), last_at)
            written = dict(event)
            written["prev"] = prev
            if assign_id:
                written["id"] = ids.new_id(f"{self.name}\0{prev}\0{canonical(written).decode()}")
                # keep the id first on the line, for people reading the file
                written = {"id": written.pop("id"), **written}
            written["hash"] = event_hash(written)
            data = (b"" if ends_clean else b"\n") + canonical_line(written)
            view = memoryview(data)
            while view:
                done = os.write(fd, view)
                view = view[done:]
            return written
        finally:
            os.close(fd)

    def _tail(self) -> tuple[str, bool, object]:
        """The hash of the last valid event, whether the file ends with a newline, and its `at`."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return GENESIS, True, None
        if size == 0:
            return GENESIS, True, None
        with open(self.path, "rb") as handle:
            handle.seek(size - 1)
            ends_clean = handle.read(1) == b"\n"
            chunk = _TAIL_CHUNK
            while True:
                start = max(0, size - chunk)
                handle.seek(start)
                data = handle.read(size - start)
                lines = data.split(b"\n")
                if start > 0:
                    lines = lines[1:]  # the first piece may be cut
                for raw in reversed(lines):
                    event = _parse(raw)
                    if event is not None and isinstance(event.get("hash"), str):
                        return event["hash"], ends_clean, event.get("at")
                if start == 0:
                    return GENESIS, ends_clean, None
                chunk *= 4

    # ---- reading -------------------------------------------------------------------------
    def read(
        self, offset: int = 0, line: int = 0, *, final: bool = True, shape: type | tuple | None = None
    ) -> ReadResult:
        """Read the events after byte `offset` (line number `line` so far).

        A last line without a newline is torn: with `final` it is reported and skipped; a live
        reader passes final=False and leaves the offset before it, to read it again when whole.
        `shape` (a msgspec Struct, or a pair: the shapes most lines take, the shape for any line)
        reads only the fields a fold uses; by default, whole events.
        """
        result = ReadResult(offset=offset, line=line)
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
        number, done, last = line, offset, b""  # done: where `last` (a line not yet ended) starts
        with handle:
            handle.seek(offset)
            # in pieces: the memory one piece's lines used is reused by the next, and a large
            # log never sits in memory twice (its bytes and its lines)
            while chunk := handle.read(_READ_CHUNK):
                data = last + chunk if last else chunk
                pieces = data.split(b"\n")
                last = pieces.pop()  # b"" when the data ends with a newline
                if pieces:
                    number = _parse_lines(self.name, pieces, number, done, result, shape)
                    done += len(data) - len(last)
        if last and final:
            number += 1
            result.problems.append(
                Problem(self.name, number, "torn", "no newline at the end: a write cut off")
            )
            done += len(last)
        result.offset = done
        result.line = number
        return result

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def whole(self) -> bytes:
        """Every byte of the store, as `verify` checks it."""
        with open(open_regular(self.path), "rb") as handle:
            return handle.read()

    def mended(self) -> list[int]:
        """Lines of a local copy found not to be the store's and read again (engine.pgstore's
        mirror); the files are the store itself."""
        return []


def _check_time(store: str, at: object, last_at: object) -> None:
    """With the system clock, a store never takes an event stamped before its last (beyond a
    little skew): time in the log only moves forward (SPEC §15.3)."""
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


def _why_not(raw: bytes) -> str:
    """Why a line is not an event, decided on the whole line whatever shape was asked for (a
    shape stops at the first field it cannot use, and says less about the rest)."""
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
    result.starts.extend(_starts(pieces, offset))
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
        try:
            if not raw:
                raise ValueError("empty")
            if not raw.isascii():
                raw.decode("utf-8")
            event = decode(raw)
            if whole and type(event) is not dict:  # a shape decodes only JSON objects
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError):
            skipped.add(k)
            if raw:  # an empty line is the newline that closed off a torn write: no problem of its own
                result.problems.append(Problem(store, number, "malformed", _why_not(raw)))
            continue
        append(event)
    result.starts.extend(at for k, at in enumerate(_starts(pieces, offset)) if k not in skipped)
    return number


def _starts(pieces: list[bytes], offset: int) -> list[int]:
    """Line k starts at offset + the lengths of the k lines before it + their k newlines (in C)."""
    return list(map(operator.add, accumulate(map(len, pieces), initial=offset), range(len(pieces))))


def canonical_line(event: dict) -> bytes:
    """How an event is written: compact JSON, UTF-8, key order kept, one line."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _parse(raw: bytes) -> dict | None:
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


@dataclass(frozen=True)
class Finding:
    """One thing `verify` found wrong with a store."""

    store: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.store}:{self.line}: {self.message}"


def verify(store: Store, data: bytes | None = None) -> list[Finding]:
    """Check the hash chain; name every unreadable line and the first break in the chain.

    An edited line fails its own hash; an inserted, deleted or reordered line breaks `prev`.
    A cut-off tail or a rewritten and re-hashed suffix cannot be seen without an outside anchor.
    """
    found: list[Finding] = []
    try:
        data = store.whole() if data is None else data
    except FileNotFoundError:
        return found
    pieces = data.split(b"\n")
    last = pieces.pop()
    if last:
        pieces.append(last)
    prev = GENESIS
    chain_broken = False
    for number, raw in enumerate(pieces, start=1):
        torn = bool(last) and number == len(pieces)
        event = _parse(raw)
        if event is None:
            kind = "torn last line (a write cut off)" if torn else "unreadable line (torn write or garbage)"
            found.append(Finding(store.name, number, f"{kind}; readers skip it"))
            continue
        if chain_broken:
            continue
        if event.get("hash") != event_hash(event):
            found.append(Finding(store.name, number, "content does not match its hash (edited)"))
            chain_broken = True
        elif event.get("prev") != prev:
            found.append(
                Finding(
                    store.name,
                    number,
                    "chain broken: prev does not name the line before (inserted, deleted or reordered)",
                )
            )
            chain_broken = True
        else:
            prev = event["hash"]
    return found
