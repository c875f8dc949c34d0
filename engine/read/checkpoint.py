"""A checkpoint of the read models: `.regulator/readmodel.checkpoint`, a disposable cache.

Folding a log of a million events costs seconds; the checkpoint lets the next reader start from
where the last one stopped and fold only what was appended since. It is trusted only for the exact
bytes it was folded from: the SHA-256 of every store's bytes up to where it stopped must match
(hashed in a second thread while the checkpoint itself is read), and the fold's own source must be
the same code; anything else means reading the log from the start. Signals and histories are held
by reference (engine.log.events), so what it keeps is small: obligations, units and memory entries,
with one int per event.

Only a command that writes (inside the decide lock) leaves a new one, after it is done, and the
control room when it closes: readers never write (design §13). The stores stay the only truth:
deleting the checkpoint changes nothing but the time of the next read.
`REGULATOR_CHECKPOINT=off` turns it off.

A cache never decides (design §15.4): a checkpoint counts only when it carries the HMAC of
`.regulator/host.key` (random, mode 0600, which a confined unit cannot read); one without a
valid MAC is ignored, never decoded, and `verify` names it. What it keeps is the read model's own
types (engine.read.model) in msgspec's typed msgpack, each checked by type as it is decoded; the model
Structs are `array_like` (their fields in declaration order, which keeps the file small), so a
field added, removed or reordered changes the fold's source and so the code key, and such a
checkpoint, like one of an older FORMAT, is ignored and rebuilt from the log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from engine.base import hostkey
from engine.base.gcpause import gc_paused
from engine.checkout.authority import Uncounted
from engine.checkout.workspace import Workspace
from engine.log.events import STORES
from engine.log.store import Problem
from engine.read.contracts import ContractFiles
from engine.read.model import Closing, Cursor, HostOrder, MemoryEntry, Obligation, State, UnitState, World

NAME = "readmodel.checkpoint"
FORMAT = 6  # 6: the typed model in msgspec's msgpack (5 and before: positional tuples in marshal)
DEFAULT_BYTES = 1 << 20  # write a new one once this much more log has been folded than it covers
CONTRACT_COST = 4096  # a contract file read again counts as this many bytes of log
_SOURCES = (  # relative to engine/
    "read/model.py",
    "read/fold.py",
    "read/kinds.py",  # what the fold reads of each line
    "read/rules.py",  # which dispositions count
    "read/malformed.py",  # which units lines are malformed (D-295)
    "read/vetoes.py",  # which host events count
    "read/order.py",  # the order rule: which host events count by their `seen`
    "log/events.py",
    "read/checkpoint.py",
    "read/contracts.py",
    "log/store.py",
    "log/lines.py",  # which lines nest too deep to be events
    "checkout/authority.py",
    "read/worldfold.py",
    "read/persons.py",  # which person events count
    "read/prejudge.py",  # the child's verdicts the fold takes
)
_code_key: str | None = None

Mark = tuple[int, int, str]  # a store as the checkpoint saw it: (offset, line, SHA-256 before offset)
ContractOutcome = tuple[tuple[int, int, int, int] | None, tuple[Any, ...] | str]  # engine.read.contracts


class Body(msgspec.Struct):
    """What a checkpoint keeps, after its header: the read model's own types, by field name."""

    signals: dict[str, int]
    routings: dict[str, int]
    unrouted: list[str]
    obligations: dict[str, Obligation]
    units: list[UnitState]  # only those something happened to, without their contract
    memory: dict[str, MemoryEntry]
    proposals: dict[str, dict[str, Any]]
    decisions: list[dict[str, Any]]
    pending: dict[str, list[Closing]]
    problems: list[Problem]
    contracts: dict[str, ContractOutcome]
    uncounted: list[Uncounted]
    person_ids: dict[str, list[str]]
    host: HostOrder
    world: World
    bad_lines: int = 0


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Body)


def path_of(ws: Workspace) -> Path:
    return ws.state_dir / NAME


def enabled() -> bool:
    return os.environ.get("REGULATOR_CHECKPOINT", "").lower() != "off" and code_key() != ""


def threshold() -> int:
    try:
        return max(0, int(os.environ.get("REGULATOR_CHECKPOINT_BYTES", DEFAULT_BYTES)))
    except ValueError:
        return DEFAULT_BYTES


def code_key() -> str:
    """The fold's own source: a checkpoint written by other code is never read as this code's."""
    global _code_key
    if _code_key is None:
        digest = hashlib.sha256(str(FORMAT).encode())
        here = Path(__file__).parent.parent  # engine/
        for name in _SOURCES:
            try:
                digest.update((here / name).read_bytes())
            except OSError:  # installed without sources: no key, so no checkpoint is read or written
                _code_key = ""
                return _code_key
        _code_key = digest.hexdigest()
    return _code_key


def _open_regular(path: Path) -> BinaryIO:
    """Open a file to read only if it is a regular file: a FIFO or a device put where the
    checkpoint belongs would block every reader forever (OSError instead: no checkpoint)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return os.fdopen(fd, "rb")


def host_key(ws: Workspace, create: bool = False) -> bytes | None:
    """The workspace's host key (32 random bytes, 0600): made by init, or by the first writer of
    a checkpoint in a workspace from before it. None when it cannot be read."""
    return hostkey.read(ws.state_dir, create)


def _mac(key: bytes, *parts: bytes) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(part)
    return mac.digest()


def discard(ws: Workspace) -> None:
    try:
        path_of(ws).unlink()
    except OSError:
        pass


# ---- what a store looked like when the checkpoint was taken --------------------------------------


def _mark(path: Path, cursor: Cursor) -> Mark | None:
    """(offset, line, SHA-256 of the bytes before offset), or None when the store does not end a
    whole line at the cursor (a torn tail is never checkpointed)."""
    digest = _digest(path, cursor.offset, whole_line=True)
    return None if digest is None else (cursor.offset, cursor.line, digest)


def _digest(path: Path, offset: int, whole_line: bool = False) -> str | None:
    """SHA-256 of the store's first `offset` bytes; None if it is shorter (or, with whole_line,
    if they do not end with a newline). Hashing releases the GIL, so it can run in a thread. Read
    through one buffer of _PIECE bytes: a store mapped whole would count in the process's resident
    set while it is hashed (the room's peak, design §25's rss_kb_per_obligation)."""
    digest = hashlib.sha256()
    if offset == 0:
        return digest.hexdigest()
    try:
        with open(path, "rb", buffering=0) as handle:
            if os.fstat(handle.fileno()).st_size < offset:
                return None
            if whole_line:
                handle.seek(offset - 1)
                if handle.read(1) != b"\n":
                    return None
                handle.seek(0)
            buffer = bytearray(min(_PIECE, offset))
            view, left = memoryview(buffer), offset
            while left:
                got = handle.readinto(view[: min(left, _PIECE)])
                if not got:
                    return None  # cut shorter while it was read
                digest.update(view[:got])
                left -= got
            return digest.hexdigest()
    except (OSError, ValueError):
        return None


_PIECE = 1 << 20


# ---- writing -------------------------------------------------------------------------------------


def save(ws: Workspace, state: State) -> bool:
    """Write the checkpoint of `state` (every store folded); False when it cannot be taken."""
    if not enabled() or set(state.cursors) != set(STORES):
        return False
    marks: dict[str, Mark] = {}
    for name in STORES:
        mark = _mark(ws.store(name).path, state.cursors[name])
        if mark is None:
            return False
        marks[name] = mark
    key = host_key(ws, create=True)
    if key is None:
        return False
    header = {"format": FORMAT, "code": code_key(), "stores": marks}
    body = Body(
        signals=state.signals.refs,
        routings=state.routings.refs,
        unrouted=list(state.unrouted_ids),
        obligations=state.obligations,
        # a unit nothing happened to comes back from its contract alone (or not, if deleted)
        units=[msgspec.structs.replace(u, contract=None) for u in state.units.values() if u.history],
        memory=state.memory,
        proposals=state.proposals,
        decisions=state.decisions,
        pending=state.pending,
        problems=state.problems,
        contracts=state.contract_files.seen,
        uncounted=state.uncounted,
        person_ids={name: sorted(ids) for name, ids in state.person_ids.items()},
        host=state.host,
        world=state.world,
        bad_lines=state.bad_lines,
    )
    try:
        first = json.dumps(header).encode()  # read first, so the stores are hashed while the rest loads
        rest = _encoder.encode(body)
    except (ValueError, TypeError, OverflowError, msgspec.EncodeError):  # e.g. an int past 64 bits
        return False
    prefix = len(first).to_bytes(8, "little")  # the file: MAC, prefix, header, body; never joined in memory
    if not hostkey.replace_private(path_of(ws), _mac(key, prefix, first, rest), prefix, first, rest):
        return False
    state.checkpointed = sum(m[0] for m in marks.values())
    return True


_offered: list[tuple[Workspace, State]] = []


def offer(ws: Workspace, state: State) -> None:
    """A writer's load: keep its state to checkpoint once the command is done (flush), outside the
    decide lock, so no other writer waits on it."""
    if worth_saving(state):
        _offered[:] = [(ws, state)]


def withdraw() -> None:
    """Forget what was offered (a long-lived process that checkpoints on its own schedule)."""
    _offered.clear()


def flush() -> None:
    """Checkpoint what a writer offered during this command, if anything."""
    while _offered:
        ws, state = _offered.pop()
        save(ws, state)


def worth_saving(state: State) -> bool:
    """Enough new log (or re-read contracts) folded since the checkpoint to pay for writing one."""
    folded = sum(c.offset for c in state.cursors.values()) - state.checkpointed
    return folded + CONTRACT_COST * state.contract_files.read >= max(threshold(), 1)


# ---- reading -------------------------------------------------------------------------------------


def restore(ws: Workspace, now: datetime) -> State | None:
    """The read models as the checkpoint left them, or None when it does not hold."""
    if not enabled():
        return None
    key = host_key(ws)
    if key is None:
        return None
    try:
        with _open_regular(path_of(ws)) as handle:
            mac = handle.read(32)
            prefix = handle.read(8)
            size = int.from_bytes(prefix, "little")
            if not 0 < size <= 1 << 16:  # the header names four stores and two digests
                return None
            first = handle.read(size)
            header = json.loads(first)  # JSON: safe to read before the MAC is checked
            if header.get("format") != FORMAT or header.get("code") != code_key():
                return None
            marks: dict[str, Mark] = {name: tuple(mark) for name, mark in header["stores"].items()}
            if set(marks) != set(STORES):
                return None
            holds = _check_in_background(ws, marks)
            raw = handle.read()
        if not hmac.compare_digest(mac, _mac(key, prefix, first, raw)):
            return None  # forged, or written with another host key: ignored, never parsed
        with gc_paused():  # millions of objects, all kept: nothing for the collector to find
            state = _build(_decoder.decode(raw), marks, now)
    except (
        OSError,
        ValueError,
        EOFError,
        TypeError,
        KeyError,
        AttributeError,
        IndexError,
        msgspec.DecodeError,
    ):
        return None  # missing, or written by something else: read the log instead
    return state if holds() else None


def authentic(ws: Workspace) -> bool | None:
    """None when there is no checkpoint; else whether it carries this host key's valid MAC."""
    try:
        with _open_regular(path_of(ws)) as handle:
            data = handle.read()
    except OSError:
        return None
    key = host_key(ws)
    return key is not None and len(data) > 32 and hmac.compare_digest(data[:32], _mac(key, data[32:]))


def _check_in_background(ws: Workspace, marks: dict[str, Mark]) -> Callable[[], bool]:
    """Start hashing every store's covered bytes in a thread; the returned call says if all match."""
    results: dict[str, bool] = {}

    def check() -> None:
        for name in STORES:
            offset, _line, digest = marks[name]
            results[name] = _digest(ws.store(name).path, offset) == digest

    worker = threading.Thread(target=check, name="checkpoint-digest", daemon=True)
    worker.start()

    def holds() -> bool:
        worker.join()
        return len(results) == len(STORES) and all(results.values())

    return holds


def _build(body: Body, marks: dict[str, Mark], now: datetime) -> State:
    state = State(now=now)
    state.signals.refs = body.signals
    state.routings.refs = body.routings
    state.unrouted_ids = dict.fromkeys(body.unrouted)
    state.obligations = body.obligations
    state.units = {unit.id: unit for unit in body.units}
    state.memory = body.memory
    state.proposals = body.proposals
    state.decisions = body.decisions
    state.pending = body.pending
    state.problems = body.problems
    state.bad_lines = max(body.bad_lines, len(body.problems))
    state.contract_files = ContractFiles(seen=body.contracts)
    state.uncounted = body.uncounted
    state.person_ids = {name: set(ids) for name, ids in body.person_ids.items()}
    state.host = body.host
    state.world = body.world
    state.cursors = {name: Cursor(offset=mark[0], line=mark[1]) for name, mark in marks.items()}
    state.checkpointed = sum(mark[0] for mark in marks.values())
    return state
