"""The local mirror of a database's stores: `.regulator/<store>.ndjson`, the server's lines byte for
byte, brought up to date from the last sequence number mirrored and proven against the server."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import mmap
import os
import stat
import sys
from pathlib import Path
from typing import Any

from engine.base import hostkey
from engine.base.errors import Refused
from engine.log.events import STORES
from engine.log.files import locked, open_regular
from engine.log.pg.admin import instance
from engine.log.pg.connection import _run, redact
from engine.log.pg.server import _blocks, _newlines
from engine.log.pg.sql import HEAD_SQL, MARKER
from engine.log.store import GENESIS

# ---- the mirror ---------------------------------------------------------------------------------


class Mirror:
    """The local copy of a database's stores in one folder (a workspace's `.regulator/`)."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.folder = Path(folder)
        self.checked = False
        self._before: dict[str, int] = {}
        # (store, first line): mirror lines that were not the server's, fetched again
        self.mended: list[tuple[str, int]] = []

    @property
    def marker(self) -> Path:
        return self.folder / MARKER

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.ndjson"

    def _state(self) -> dict:
        try:  # a FIFO or device here is no state (never waited on): the mirror is fetched again
            fd = open_regular(self.marker)
        except (OSError, Refused):
            return {}
        try:
            with os.fdopen(fd, "rb") as file:
                return json.loads(file.read().decode("utf-8"))
        except (OSError, ValueError):
            return {}

    def _save(self, state: dict) -> None:
        temporary = self.folder / (MARKER + ".tmp")
        temporary.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.marker)

    def prepare(self) -> None:
        """Make the folder a mirror of this database, or check it is one. A folder holding file
        stores is never taken for a mirror: those are the stores themselves."""
        if self.checked:
            return
        ident, _ = instance(self.url)
        if self.folder.is_symlink():
            raise Refused(f"{self.folder} is a symlink; regulator opens its stores only where they are")
        self.folder.mkdir(mode=0o700, exist_ok=True)
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            if not state:
                held = [n for n in STORES if self.path(n).exists() and self.path(n).stat().st_size > 0]
                if held:
                    raise Refused(
                        f"{self.folder} holds file stores ({', '.join(held)}) but the workspace's store is "
                        f"{redact(self.url)}: to use the files, select them (REGULATOR_STORE=files for "
                        "the process, or decide `url: files` in regulator/policy/store.yaml); to move "
                        f"them to the server, `regulator store copy --to URL`, then move {self.folder.name}/ "
                        "aside"
                    )
            if state.get("instance") != ident:  # another database (or none yet): start over
                for name in STORES:
                    self.path(name).write_bytes(b"")
                    self.path(name).chmod(0o600)
                (self.folder / "readmodel.checkpoint").unlink(missing_ok=True)
                state = {"instance": ident, "url": redact(self.url), "stores": {}}
                self._save(state)
        self.checked = True
        self._before = self._counts()  # what was here before this process fetched (see `check`)
        self.sync()

    def sync(self, names: tuple[str, ...] = STORES) -> int:
        """Bring the mirror up to date from the last sequence number of each store; the number of
        lines gained. A mirror file that is not what was mirrored (edited, cut), or a server whose
        line at that number is not the one mirrored, is read again from the first line. One query
        asks for each store's tail; one binary COPY then streams the new lines of every store that
        has some, a block of lines at a time, straight into the mirror files. A mirror deleted
        since it was prepared (always safe) is made again and fetched from the first line."""
        if self.checked and not os.path.lexists(self.folder):
            self.checked = False
            self.prepare()
            return sum(self._counts()[name] for name in names)
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            stores = state.setdefault("stores", {})
            reset = False
            for name in names:
                n, size, _ = stores.get(name, [0, 0, GENESIS])
                try:
                    found = self.path(name).lstat()
                    actual = found.st_size
                except FileNotFoundError:
                    actual = -1
                else:
                    if not stat.S_ISREG(found.st_mode):  # a FIFO would block the fetch's write
                        raise Refused(f"{self.path(name)} is not a regular file; move it aside")
                if actual != size:
                    self._reset(name, stores)
                    reset = True
            params = (list(names), [stores.get(x, [0, 0, GENESIS])[0] for x in names])
            heads = _run(self.url, lambda conn: conn.execute(HEAD_SQL, params).fetchall(), tx=False)
            wanted: dict[str, tuple[int, str]] = {}  # store -> (the server's last n, its hash)
            for name, tail, last_n, last_hash in heads:
                n, _, last = stores.get(name, [0, 0, GENESIS])
                if n > 0 and tail != last:  # the server's line n is not the one mirrored
                    self._reset(name, stores)
                    reset, n = True, 0
                if last_n is not None and last_n > n:
                    wanted[name] = (last_n, last_hash)
            gained = _run(self.url, lambda conn: self._fetch(conn, stores, wanted)) if wanted else 0
            if gained or reset:
                self._save(state)
            return gained

    def _fetch(self, conn: Any, stores: dict, wanted: dict[str, tuple[int, str]]) -> int:
        """Stream lines (since, upto] of each wanted store into its mirror file. On any failure
        the files are cut back to what was mirrored."""
        names = list(wanted)
        since = [stores.get(x, [0, 0, GENESIS])[0] for x in names]
        upto = [wanted[x][0] for x in names]
        handles = [open(self.path(x), "ab") for x in names]  # noqa: SIM115 - closed below
        try:
            _blocks(conn, self.url, names, since, upto, lambda k, data: handles[k].write(data))
            for handle in handles:
                handle.flush()
        except BaseException:
            for name, handle in zip(names, handles, strict=True):
                with contextlib.suppress(OSError):
                    handle.truncate(stores.get(name, [0, 0, GENESIS])[1])
            raise
        finally:
            for handle in handles:
                handle.close()
        for k, name in enumerate(names):
            stores[name] = [upto[k], self.path(name).stat().st_size, wanted[name][1]]
        return sum(upto[k] - since[k] for k in range(len(names)))

    def recorded(self) -> dict[str, list]:
        """What the mirror records of each store: [last sequence number, file size, last hash]."""
        stores = self._state().get("stores", {})
        return {name: stores.get(name, [0, 0, GENESIS]) for name in STORES}

    def _reset(self, name: str, stores: dict) -> None:
        self.path(name).write_bytes(b"")
        stores[name] = [0, 0, GENESIS]

    # ---- the mirror's bytes are the server's (design §15.4: a cache never decides) ---------------

    def _counts(self) -> dict[str, int]:
        stores = self._state().get("stores", {})
        return {name: int(stores.get(name, [0])[0]) for name in STORES}

    def before(self, name: str) -> int:
        """How many lines of the store were mirrored before this read fetches: the first read of a
        process takes the count from before `prepare` fetched."""
        if name in self._before:
            return self._before.pop(name)
        return self._counts()[name]

    def check(self, name: str, offset: int, line: int, before: int, *, again: bool = True) -> None:
        """Prove that the mirror bytes a reader is about to read (from `offset`, line `line`) are
        the server's, or fetch the store again from the first line. Lines this read's own fetch
        wrote (after `before`) came from the server just now. A read from the start hashes the
        file once and compares it with the seal the last such read left (SHA-256 of the first
        `size` bytes, MAC'd with the host key and bound to the database and line count), and
        compares each line mirrored since the seal with the SHA-256 the server keeps of it; a read
        from further on (the checkpoint vouches for the bytes before it, or this process read them)
        compares only the lines after it. A mismatch (a same-size edit of the mirror) is named by
        `verify` and warned of once; the reader reads the server's lines."""
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            stores = state.setdefault("stores", {})
            n, size, _ = stores.get(name, [0, 0, GENESIS])
            if offset > size:
                return  # the caller's cursor is past the mirror: it reads nothing, or reloads
            bad = self._first_bad(state, name, offset, line, min(before, n), n, size)
            if bad is None:
                return
            self._reset(name, stores)
            state.get("seals", {}).pop(name, None)
            self._save(state)
        self.sync((name,))
        self.mended.append((name, bad))
        print(
            f"regulator: warning: the local mirror {self.path(name)} differed from the server at line {bad} "
            "(edited in place); read again from the server",
            file=sys.stderr,
        )
        if again:  # every line is the server's now: seal them
            self.check(name, 0, 0, 0, again=False)

    def _first_bad(
        self, state: dict, name: str, offset: int, line: int, upto: int, n: int, size: int
    ) -> int | None:
        """The first line that is not the server's (0 when the seal does not hold yet no line
        differs), or None; a read from the start that finds none leaves a new seal."""
        seals = state.setdefault("seals", {})
        key = hostkey.read(self.folder, create=True)
        try:
            fd = open_regular(self.path(name))
        except OSError:
            return None  # no mirror file: the read finds nothing, as Store.read does
        with open(fd, "rb") as handle:
            if os.fstat(handle.fileno()).st_size < size:
                return 0  # cut since the lock was taken: it cannot be, unless edited
            data: Any = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) if size else b""
            try:
                hasher = hashlib.sha256() if offset == 0 else None
                start, first, broken = offset, line, False
                if hasher is not None:
                    vouched = _sealed(key, state.get("instance"), name, seals.get(name), data, hasher)
                    broken = vouched is None
                    if vouched is None:
                        hasher = None  # no new seal from this read: the store is fetched again
                    start, first = vouched or (0, 0)
                if upto > first:
                    wanted = self._digests(name, first, upto)
                    pieces = data[start:size].split(b"\n", upto - first)[: upto - first]
                    for k, (raw, want) in enumerate(zip(pieces, wanted, strict=False)):
                        if hashlib.sha256(raw).hexdigest() != want:
                            return first + 1 + k
                    if len(pieces) != len(wanted) or len(wanted) != upto - first:
                        return first + 1 + min(len(pieces), len(wanted))
                if not broken and _newlines(data, start, size) != n - first:
                    # bytes the record's size claims but its lines do not (postgresql.json edited
                    # to cover lines added to the file): the first line that is not the server's
                    wanted = self._digests(name, first, n)
                    pieces = data[start:size].split(b"\n")
                    for k, (raw, want) in enumerate(zip(pieces, wanted, strict=False)):
                        if hashlib.sha256(raw).hexdigest() != want:
                            return first + 1 + k
                    return first + 1 + min(len(pieces), len(wanted))
                if broken:
                    return 0
                if hasher is not None and key is not None:
                    with memoryview(data) as view:
                        hasher.update(view[start:size])
                    body = [n, size, hasher.hexdigest()]
                    if seals.get(name, [])[:3] != body:
                        seals[name] = [*body, _seal_mac(key, state.get("instance"), name, body)]
                        self._save(state)
            finally:
                if isinstance(data, mmap.mmap):
                    data.close()
        return None

    def prove(self, name: str, server: bytes) -> None:
        """`verify`'s own check, beside the seal: the mirror's bytes must be the first bytes of the
        server's. A seal is MAC'd with host.key, which a unit sharing the account can read and
        reseal an edited mirror with; the server's bytes it cannot forge. A mirror that is not the
        server's is fetched again and named (`mended`)."""
        try:
            fd = open_regular(self.path(name))
        except (OSError, Refused):
            return
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        if server.startswith(data):
            return
        mine, theirs = data.split(b"\n"), server.split(b"\n")
        bad = next((k for k, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), len(theirs) - 1)
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            self._reset(name, state.setdefault("stores", {}))
            state.get("seals", {}).pop(name, None)
            self._save(state)
        self.sync((name,))
        self.mended.append((name, bad + 1))

    def _digests(self, name: str, first: int, upto: int) -> list[str]:
        """The SHA-256 the server keeps of each of the store's lines first+1 … upto."""
        rows = _run(
            self.url,
            lambda conn: conn.execute(
                "SELECT sha256 FROM regulator.events WHERE store = %s AND n > %s AND n <= %s ORDER BY n",
                (name, first, upto),
            ).fetchall(),
            tx=False,
        )
        return [row[0] for row in rows]

    def appended(self, name: str, n: int, digest: str, line: str) -> None:
        """Our own append, committed as line `n`: mirrored at once when the mirror is at n - 1."""
        if not os.path.lexists(self.folder):  # deleted meanwhile: made again, the line with it
            self.sync((name,))
            return
        with locked(self.folder / "mirror.lock"):
            state = self._state()
            stores = state.setdefault("stores", {})
            have, size, _ = stores.get(name, [0, 0, GENESIS])
            try:
                actual = self.path(name).stat().st_size
            except FileNotFoundError:
                actual = -1
            if have == n - 1 and actual == size:
                data = line.encode() + b"\n"
                with open(self.path(name), "ab") as handle:
                    handle.write(data)
                stores[name] = [n, size + len(data), digest]
                self._save(state)
                return
        self.sync((name,))


def _seal_mac(key: bytes, instance: object, name: str, body: list) -> str:
    text = json.dumps([instance, name, *body], separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _sealed(
    key: bytes | None, instance: object, name: str, seal: object, data: Any, hasher: Any
) -> tuple[int, int] | None:
    """(bytes, lines) of the mirror a valid seal vouches for, fed to `hasher`: (0, 0) without a
    seal this host made (none, another key's, or one the mirror has since outgrown by a fetch
    from the first line); None when the host's seal names bytes the mirror no longer holds."""
    if key is None or not isinstance(seal, list) or len(seal) != 4:
        return 0, 0
    lines, size, digest, mac = seal
    if not (isinstance(lines, int) and isinstance(size, int) and isinstance(mac, str)):
        return 0, 0
    if not hmac.compare_digest(mac, _seal_mac(key, instance, name, [lines, size, digest])):
        return 0, 0
    if size > len(data):
        return 0, 0
    with memoryview(data) as view:
        hasher.update(view[:size])
    if hasher.hexdigest() != digest:
        return None
    return size, lines


_MIRRORS: dict[tuple[str, Path], Mirror] = {}


def mirror(url: str, folder: Path) -> Mirror:
    key = (url, folder if isinstance(folder, Path) else Path(folder))
    found = _MIRRORS.get(key)
    if found is None:
        found = _MIRRORS[key] = Mirror(url, Path(folder))
    return found
