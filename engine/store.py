"""Append-only NDJSON stores: one event per line, one write under an exclusive lock, hash-chained.

This is the one small interface between the engine and the files (append a validated event; read
from a cursor; an exclusive section), so a server-backed store could stand in for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import json.scanner
import operator
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

from engine import ids

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; the fallback keeps readers working
    orjson = None

GENESIS = ""
_TAIL_CHUNK = 64 * 1024


def canonical(event: dict) -> bytes:
    return json.dumps(event, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


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
    events: list[dict] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # the byte offset of each event's line
    problems: list[Problem] = field(default_factory=list)
    offset: int = 0
    line: int = 0


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive section across processes, held on a lock file beside the stores."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            prev, ends_clean = self._tail()
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

    def _tail(self) -> tuple[str, bool]:
        """The hash of the last valid event, and whether the file ends with a newline."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return GENESIS, True
        if size == 0:
            return GENESIS, True
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
                        return event["hash"], ends_clean
                if start == 0:
                    return GENESIS, ends_clean
                chunk *= 4

    # ---- reading -------------------------------------------------------------------------
    def read(self, offset: int = 0, line: int = 0, *, final: bool = True) -> ReadResult:
        """Read the events after byte `offset` (line number `line` so far).

        A last line without a newline is torn: with `final` it is reported and skipped; a live
        reader passes final=False and leaves the offset before it, to read it again when whole.
        """
        result = ReadResult(offset=offset, line=line)
        try:
            with open(self.path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return result
        if not data:
            return result
        pieces = data.split(b"\n")
        last = pieces.pop()  # b"" when the data ends with a newline
        number = _parse_lines(self.name, pieces, line, offset, result)
        consumed = len(data) - len(last)
        if last and final:
            number += 1
            result.problems.append(
                Problem(self.name, number, "torn", "no newline at the end: a write cut off")
            )
            consumed = len(data)
        result.offset = offset + consumed
        result.line = number
        return result

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0


_SCAN = json.scanner.make_scanner(json.JSONDecoder())


def _std_loads(raw: bytes) -> object:
    """json.loads without its per-call overhead (no encoding sniffing, no whitespace regex)."""
    text = raw.decode("utf-8")
    try:
        event, end = _SCAN(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text) and text[end:].strip():
        raise ValueError("trailing data after the JSON")
    return event


# orjson parses a line about twice as fast as json.loads; the standard library is the fallback
_LOADS, _LOAD_ERRORS = (orjson.loads, (orjson.JSONDecodeError,)) if orjson else (_std_loads, (ValueError,))


def _parse_lines(store: str, pieces: list[bytes], line: int, offset: int, result: ReadResult) -> int:
    """Parse whole lines into events; report the bad ones by number. Returns the last line number.

    The hot loop of every reader: one call per line, nothing else per line that can be avoided.
    Each event's byte offset is kept so the read models can hold a reference instead of the
    event; the offsets are summed in C after the loop, and only a skipped line costs the loop more.
    """
    append = result.events.append
    loads = _LOADS
    errors = _LOAD_ERRORS
    number = line
    skipped: list[int] = []  # indices into pieces of lines that are not events
    for raw in pieces:
        number += 1
        if not raw:
            skipped.append(number - line - 1)  # the newline that closed off a torn write
            continue
        try:
            event = loads(raw)
        except errors as exc:  # UnicodeDecodeError is a ValueError, as is orjson's error
            message = "not valid UTF-8" if "utf-8" in str(exc).lower() else "not JSON"
            result.problems.append(Problem(store, number, "malformed", message))
            skipped.append(number - line - 1)
            continue
        if type(event) is not dict:
            result.problems.append(Problem(store, number, "malformed", "not a JSON object"))
            skipped.append(number - line - 1)
            continue
        append(event)
    # line k starts at offset + the lengths of the k lines before it + their k newlines
    starts = list(map(operator.add, accumulate(map(len, pieces), initial=offset), range(len(pieces))))
    if skipped:
        gone = set(skipped)
        starts = [at for k, at in enumerate(starts) if k not in gone]
    result.starts.extend(starts)
    return number


def canonical_line(event: dict) -> bytes:
    """How an event is written: compact JSON, UTF-8, key order kept, one line."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _parse(raw: bytes) -> dict | None:
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) < 80 else text[:77] + "..."


@dataclass(frozen=True)
class Finding:
    """One thing `verify` found wrong with a store."""

    store: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.store}:{self.line}: {self.message}"


def verify(store: Store) -> list[Finding]:
    """Check the hash chain; name every unreadable line and the first break in the chain.

    An edited line fails its own hash; an inserted, deleted or reordered line breaks `prev`.
    A cut-off tail or a rewritten and re-hashed suffix cannot be seen without an outside anchor.
    """
    found: list[Finding] = []
    try:
        data = store.path.read_bytes()
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
