"""What a long-lived unit door (engine.doors.api.UnitDoor) keeps between calls: the units store's fold,
the worktree's HEAD and the workspace's checks, each read again only as far as it changed.

Nothing kept outlives a change it depends on (design §15.4, §17): the lease is judged on every call
against the units store as it is then. On files, units.ndjson is looked at (one stat) on every
call and only its appended bytes are folded; a file that shrank, was replaced or was rewritten in
place is folded again from its first byte, as a new door would. On PostgreSQL the one-trip append
itself checks, in the statement that inserts, that the units and identity stores still end where
the door's reads ended (engine.log.pg.store.PgStore.append_unchanged); when they do not, the door reads
what the server gained and decides again.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Container, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from engine.base import clock
from engine.base.errors import Refused
from engine.checkout.head import Head
from engine.checkout.workspace import Lease, Workspace, check_untracked, configure_clock
from engine.commands.actors import check_lease
from engine.log.events import STORES
from engine.log.files import NO_STORES, open_regular
from engine.read.contracts import ContractFiles, load_contracts
from engine.read.fold import StoreReplaced, advance
from engine.read.load import load
from engine.read.model import State

if TYPE_CHECKING:  # psycopg is imported only where a postgresql store is selected
    from engine.log.pg.store import PgStore

_TAIL = 256  # bytes kept from before the fold's offset: growth that rewrote them is a replacement
_GUARDED = ("units", "identity")  # what a unit's write is decided from, beside the files on disk


def _identity(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def index_key(root: Path) -> tuple | None:
    """What `git ls-files` answers from: the identity of the index of the repository at `root`
    (None where .git is not a folder: the index is elsewhere, and git is asked every time)."""
    dotgit = os.path.join(root, ".git")
    return ("dir", _identity(os.path.join(dotgit, "index"))) if os.path.isdir(dotgit) else None


def registers_key(tree: Path) -> tuple | None:
    """The identity of every register file under `tree` (name, inode, size, times), or None
    where a folder cannot be listed."""
    from registry.entries import REGISTERS

    found: list[tuple] = []
    for folder in REGISTERS:
        try:
            with os.scandir(os.path.join(tree, folder)) as entries:
                for entry in entries:
                    if entry.name.endswith(".md"):
                        st = entry.stat(follow_symlinks=False)
                        found.append(
                            (folder, entry.name, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                        )
        except FileNotFoundError:
            found.append((folder, None))
        except OSError:
            return None
    return tuple(sorted(found, key=repr))


def refs_key(tree: Path) -> tuple | None:
    """What trunk's history is read from, by identity: the repository's HEAD, packed-refs and
    every loose ref, and regulator/config.yaml (which names trunk). None where `.git` is not a
    folder (a linked worktree: its refs are elsewhere) or cannot be listed: nothing is kept then."""
    dotgit = os.path.join(tree, ".git")
    if not os.path.isdir(dotgit):
        return None
    found: list[tuple] = [(name, _identity(os.path.join(dotgit, name))) for name in ("HEAD", "packed-refs")]
    found.append(("config", _identity(os.path.join(tree, "regulator", "config.yaml"))))
    try:
        for folder, _dirs, files in os.walk(os.path.join(dotgit, "refs")):
            for name in files:
                path = os.path.join(folder, name)
                found.append((path, _identity(path)))
    except OSError:
        return None
    return tuple(sorted(found, key=repr))


class _Known:
    """Kept.known(): the contracts read on the first question."""

    def __init__(self, kept: Kept) -> None:
        self.kept = kept
        self.units: set[str] | None = None

    def __contains__(self, unit: object) -> bool:
        if self.units is None:
            self.units = set(load_contracts(self.kept.ws, None, self.kept._contract_files))
        return unit in self.units


class Reads:
    """The read model a door's reads answer from (status, obligations), kept between calls and
    shared by every lease of one `serve`: each call folds only what the stores gained since the
    last (engine.read.load's `start`), and reads the contract files that changed.

    Nothing kept outlives a change it depends on, by the rule Kept applies to units.ndjson: a store
    whose file was replaced, shrank or changed without growing, or whose bytes just before the
    fold's offset changed, and any change at all to identity.ndjson (the policy person events are
    judged by), make the next call fold every store from the first byte, as a fresh load does. A
    last line still being written waits for its newline. The register entries parsed for one call
    (a dozen YAML files) and trunk's findings are kept while no register file and no ref of the
    repository changed (registers_key, refs_key). The state is read
    while `reading()` holds the lock: one call at a time, as the GIL would have it anyway."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: State | None = None
        self._root: Path | None = None
        self._files: dict[str, tuple[tuple[int, ...] | None, bytes]] = {}  # store -> (identity, tail)
        self._registers: object = None
        self._registers_key: object = None

    @contextmanager
    def reading(self, ws: Workspace) -> Iterator[State]:
        """The read model now (under the lock while the caller reads it)."""
        with self.lock:
            paths: dict[str, str] = {name: str(ws.store(name).path) for name in STORES}
            seen: dict[str, tuple[int, ...] | None] = {
                name: _identity(p) for name, p in paths.items()
            }  # before the fold
            start = self.state if self._root == ws.root and self._only_grown(paths, seen) else None
            self.state = None  # until this load is whole: a load that fails keeps nothing
            state = load(ws, start=start, final=False)
            self._root = ws.root
            self._files = {
                name: (seen[name], _tail(paths[name], state.cursors[name].offset))
                for name in STORES
                if name in state.cursors
            }
            # the register files, and trunk's refs: the registers kept carry trunk's findings too
            files, refs = registers_key(ws.tree), refs_key(ws.tree)
            key = None if files is None or refs is None else (files, refs)
            state.registers = self._registers if key is not None and key == self._registers_key else None
            try:
                yield state
            finally:
                registers = state.registers  # kept unless an entry is invalid: what holds then is
                # read from trunk's history, which no file here names
                if key is not None and registers is not None and not getattr(registers, "invalid", True):
                    self._registers, self._registers_key = registers, key
                else:
                    self._registers = self._registers_key = None
                self.state = state

    def _only_grown(self, paths: dict[str, str], seen: dict[str, tuple[int, ...] | None]) -> bool:
        """Every store is the file last folded, with bytes only appended since; identity.ndjson
        not changed at all."""
        state = self.state
        if state is None or set(self._files) != set(STORES):
            return False
        for name in STORES:
            before, tail = self._files[name]
            now = seen[name]
            if now == before:
                continue
            if name == "identity" or now is None or before is None:
                return False
            offset = state.cursors[name].offset
            if not _appended(before, now, offset) or _tail(paths[name], offset) != tail:
                return False
        return True


def _appended(before: tuple[int, ...], now: tuple[int, ...], offset: int) -> bool:
    """A store file whose identity changed from `before` to `now` may only have had bytes
    appended since it was folded to `offset`: the same file, larger than both what was looked at
    before the fold and what the fold read (an append during the fold read further than `before`
    saw: a later rewrite in place to that size is no growth). Else replaced, shrunk or rewritten in
    place, and folded again. (The bytes just before `offset` are compared too: _tail.)"""
    return now[:2] == before[:2] and now[2] > max(before[2], offset)


def _tail(path: str, offset: int) -> bytes:
    """The _TAIL bytes of a store just before `offset` (b"" where it cannot be read)."""
    start = max(0, offset - _TAIL)
    try:
        fd = open_regular(path)
    except (OSError, Refused):
        return b""
    try:
        return os.pread(fd, offset - start, start)
    finally:
        os.close(fd)


class Kept:
    """One lease's reads, kept between calls of one door (one process, one thread at a time)."""

    def __init__(self, ws: Workspace, lease: Lease) -> None:
        self.ws = ws
        self.lease = lease
        self.head = Head(lease.worktree)
        self.state: State | None = None
        # on PostgreSQL: the hashes the units and identity stores ended with when `state` and the
        # policy in force were read (None: not known, read again before the next write)
        self.tails: dict[str, str] | None = None
        self._contract_files = ContractFiles()
        # the paths looked at on every call, made once
        self._state_dir = str(ws.state_dir)
        self._units_path = str(ws.store("units").path)
        self._identity_path = str(ws.store("identity").path)
        self._units: tuple[int, ...] | None = None
        self._identity: tuple[int, ...] | None = None
        self._tail = b""
        self._index: object = ()  # never equal to a key: the first call asks git
        self._signals: PgStore | None = None

    # ---- the workspace -------------------------------------------------------------------------
    def workspace(self) -> Workspace:
        """What locating the workspace checked, checked again: its stores are there and not a
        symlink, and not tracked by git (asked of git only when git's index changed); the clock
        mode in force."""
        ws = self.ws
        try:
            st: os.stat_result | None = os.lstat(self._state_dir)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise Refused(f"{ws.state_dir} is a symlink; regulator opens its stores only where they are")
        if st is None or not os.path.isfile(self._identity_path):
            if ws.url is None:
                raise Refused(NO_STORES)
            ws.sync()  # PostgreSQL: the mirror was deleted (always safe): made again (D-87)
        index = index_key(ws.root)
        if index is None or index != self._index:  # a .git file: the index is elsewhere, ask git
            check_untracked(ws.root)
            self._index = index
        return configure_clock(ws)

    def untracked_checked(self, root: Path, index: tuple | None) -> None:
        """locate() has just asked git whether the stores at `root` are tracked, git's index then
        being `index` (index_key, taken before it asked): the first call need not ask again."""
        if index is not None and root == self.ws.root:
            self._index = index

    def known(self) -> Container[str]:
        """The units with contracts under contracts/ now, read when first asked (a report that
        names no affected unit reads none; a file is read again only when it changed)."""
        return _Known(self)

    def signals(self, url: str) -> PgStore:
        """The signals store on the server, for one-trip appends: unmirrored (readers sync first)."""
        if self._signals is None or self._signals.url != url:
            from engine.log.pg.store import PgStore

            self._signals = PgStore(url, self.ws.state_dir, "signals", mirrored=False)
        return self._signals

    # ---- the units store -----------------------------------------------------------------------
    def refresh(self, sync: bool) -> State:
        """The units store folded as it is now (only what it gained, where it only grew), the lease
        checked against it (exit 3). `sync`: on PostgreSQL, bring the mirror of the units and
        identity stores up to date first (one round trip)."""
        ws = self.workspace()
        url = ws.url
        if sync and url is not None:
            from engine.log.pg.mirror import mirror

            found = mirror(url, ws.state_dir)
            if found.checked:
                found.sync(_GUARDED)
            else:
                found.prepare()
        identity = _identity(self._identity_path)
        units = _identity(self._units_path)  # taken before the fold: a later append is seen next call
        state = self.state
        if state is None or identity != self._identity or not self._grown(units):
            # from the first byte: the policy in force changed (person events are judged by it),
            # or the file is not the one folded
            state = State(now=clock.now())
        if state is not self.state or units != self._units:
            try:
                advance(ws, state, stores=("units",), final=False)  # a line still being written waits
            except StoreReplaced:  # cut shorter since it was looked at: from the first byte
                state = State(now=clock.now())
                advance(ws, state, stores=("units",), final=False)
            self._tail = _tail(self._units_path, state.cursors["units"].offset)
        self.state, self._units, self._identity = state, units, identity
        self.tails = self._server_tails(state) if url is not None else None
        check_lease(self.ws, state, self.lease)
        return state

    def _grown(self, units: tuple[int, ...] | None) -> bool:
        """units.ndjson is the file folded, with bytes only appended since."""
        before, state = self._units, self.state
        if units == before:
            return True
        if units is None or before is None or state is None:
            return False
        offset = state.cursors["units"].offset
        return _appended(before, units, offset) and _tail(self._units_path, offset) == self._tail

    def _server_tails(self, state: State) -> dict[str, str] | None:
        """The hashes of the server's lines the mirror files ended with as read: known only when
        the mirror's record says those files held exactly what was read."""
        from engine.log.pg.mirror import mirror

        url = self.ws.url
        assert url is not None
        recorded = mirror(url, self.ws.state_dir).recorded()
        units, identity = recorded["units"], recorded["identity"]
        if self._identity is None:
            return None
        if units[1] != state.cursors["units"].offset or identity[1] != self._identity[2]:
            return None  # the mirror moved on meanwhile: read again before the next write
        if _identity(self._identity_path) != self._identity:
            return None
        return {"units": units[2], "identity": identity[2]}
