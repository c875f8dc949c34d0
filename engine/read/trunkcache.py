"""Trunk's walk kept between commands (design §26, D-178): `.regulator/trunk.walk`, the last walk
of trunk's findings, read again only for the same trunk commit, the same code and the same policy.

A walk (registry.trunkwalk.walk_at) is a function of trunk's commit (its history is fixed by it)
and of the answers `authorize` gave, which depend only on the policy's grants, emails, keys and
requireSignatures (Policy.fingerprint). So the kept walk is taken again when trunk names the same
commit, the code that walked is this code, and either the walk asked no authorization (the policy
is never read then) or the policy in force has the same fingerprint. Anything else walks afresh.

Only a command that writes keeps a walk (readers never write, not even a cache: design §13): a
walk made inside the decide lock is kept at once, one made before it (a write's first look at its
rule) when the write takes the lock (`keep`), and one made after it by the same process (the
room, `demo`, `serve`: processes that write) at once; a reader's walk is forgotten with its process.

The kept walk can lift a hold (a finding resolved on trunk), so it is MAC'd with the host key as
the checkpoint is: a unit that cannot read the host key cannot make one that is believed, and a
file that fails its MAC, does not decode, or is no regular file is walked over, never trusted.
`REGULATOR_CHECKPOINT=off` turns it off with the checkpoint (both are the host's caches).

The kept walk is also the host's memory of what it held (D-231, D-232): a fresh walk of the same
trunk (by name) by the same code keeps every unit the kept walk held unless a commit since lifted it
with authorization (registry.trunkwalk.carry), and where trunk cannot be read (its branch gone, the
repository shallow, an object missing: D-233) what the kept walk held holds too."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from engine.base import hostkey
from engine.checkout.workspace import Workspace
from registry.trunkwalk import TrunkFindings, carry, locate, walk_at

if TYPE_CHECKING:
    from registry.history import TrunkLog
    from registry.lint import Policy

NAME = "trunk.walk"
FORMAT = b"regulator trunk walk 1\n"
LIMIT = 64 << 20  # a kept walk larger than this is not read (walked afresh)
# the code a kept walk depends on, relative to the repository's packages: another version's walk
# is never taken as this one's
_SOURCES = (
    "registry/trunkwalk.py",
    "registry/entries.py",
    "registry/history.py",
    "registry/lint.py",
    "registry/frontmatter.py",
    "engine/read/trunkcache.py",
)
_code: list[bytes] = []
_made: list[tuple[Workspace, Kept]] = []  # this process's last fresh walk, for a writer to keep


class Kept(msgspec.Struct, frozen=True):
    code: str
    ref: str
    tip: str
    fingerprint: str  # "" : the walk asked no authorization
    found: TrunkFindings


def code_key() -> bytes:
    """A digest of the walk's sources; empty when they cannot be read (nothing is kept then)."""
    if not _code:
        digest = hashlib.sha256(FORMAT)
        top = Path(__file__).resolve().parent.parent.parent
        try:
            for name in _SOURCES:
                digest.update((top / name).read_bytes())
            _code.append(digest.hexdigest().encode())
        except OSError:
            _code.append(b"")
    return _code[0]


def enabled() -> bool:
    return os.environ.get("REGULATOR_CHECKPOINT", "").lower() != "off" and code_key() != b""


def path_of(ws: Workspace) -> Path:
    return ws.state_dir / NAME


def _mac(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, FORMAT + body, hashlib.sha256).digest()


def _read(ws: Workspace) -> Kept | None:
    key = hostkey.read(ws.state_dir)
    if key is None:
        return None
    try:
        fd = os.open(path_of(ws), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO, a device or a directory is no kept walk
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > LIMIT or len(data) < 32 or not hmac.compare_digest(data[:32], _mac(key, data[32:])):
        return None
    try:
        return msgspec.json.decode(data[32:], type=Kept)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _write(ws: Workspace, kept: Kept) -> None:
    key = hostkey.read(ws.state_dir, create=True)
    if key is None:
        return
    body = msgspec.json.encode(kept)
    if len(body) + 32 <= LIMIT:
        hostkey.replace_private(path_of(ws), _mac(key, body) + body)


def walked(
    ws: Workspace,
    trunk: str,
    policy: Callable[[], Policy],
    shared: Callable[[], TrunkLog | None] | None = None,
) -> TrunkFindings:
    """Trunk's findings since the baseline, as registry.trunkwalk.walk finds them: the kept walk
    when it was made of the same commit, code and policy, else a fresh walk (kept for the next).
    `policy()` gives the policy whose grants authorize changes; it is asked only when needed.
    `shared()` gives trunk's history pass a caller reads anyway (lint), asked only for a fresh walk."""
    where = locate(ws.tree, trunk)
    if isinstance(where, TrunkFindings):
        return _remembered(ws, trunk, where)
    ref, tip = where
    asked: list[Policy] = []

    def in_force() -> Policy:
        if not asked:
            asked.append(policy())
        return asked[0]

    use = enabled()
    kept = _memory(ws, _named(ref))  # the same trunk by name: its local branch or origin's (D-232)
    if (
        kept is not None
        and kept.ref == ref
        and kept.tip == tip
        and (not kept.fingerprint or kept.fingerprint == in_force().fingerprint)
    ):
        return kept.found
    used: list[bool] = []

    def authorize(sha: str, email: str, message: str) -> tuple[str | None, str]:
        from registry.lint import authorize_commit  # a walk that authorizes nothing never loads lint

        used.append(True)
        return authorize_commit(in_force(), sha, email, message)

    found = walk_at(ws.tree, tip, authorize, shared)
    if found.available and found.missing:  # a version git cannot give is no evidence of no decision:
        # trunk cannot be read, so every finding holds what it names, and what the host held holds
        # (objects moved out of a shared repository let a person's old signature count: D-233)
        found = msgspec.structs.replace(
            found, available=False, why=f"{found.missing} object(s) trunk's history names cannot be read"
        )
    if not found.available:
        return _remembered(ws, trunk, found)
    if kept is not None and kept.found.available:
        # what the host saw held at trunk's last kept commit stays held unless an authorized commit
        # since lifted it: a history that moved trunk off its line cannot drop it, nor a policy
        # that now authorizes what it did not (a person signs again: D-231)
        carry(ws.tree, found, kept.found, authorize)
    fingerprint = in_force().fingerprint if used else ""
    # a walk that could not read every object it needed is used once, never kept (the objects may
    # be back for the next command, which must see them)
    if use and found.available and not found.missing and (fingerprint or not used):
        _made[:] = [(ws, Kept(code_key().decode(), ref, tip, fingerprint, found))]
        if ws.decided():  # a writer, in the lock or after it
            keep(ws)
    return found


def _named(ref: str) -> str:
    """The trunk's name a ref locate gave is of (refs/heads/<name> or refs/remotes/origin/<name>)."""
    return ref.removeprefix("refs/heads/").removeprefix("refs/remotes/origin/")


def _memory(ws: Workspace, trunk: str) -> Kept | None:
    """The kept walk of this trunk (by name) made by this code, or None."""
    kept = _read(ws) if enabled() else None
    if kept is None or kept.code != code_key().decode() or _named(kept.ref) != trunk:
        return None  # another code's or another trunk's walk: neither taken nor remembered
    return kept


def _remembered(ws: Workspace, trunk: str, found: TrunkFindings) -> TrunkFindings:
    """Trunk's history cannot be read now (its branch gone, the repository made shallow): every
    finding holds what it names (D-201), and what the host held at its last kept walk holds too,
    so a narrowing or deletion the walk had refused is not lifted by hiding trunk (D-232)."""
    kept = _memory(ws, trunk)
    if kept is None or not kept.found.available:
        return found
    holds = dict(found.holds)  # what a walk that could not read every object still found, and more
    for path, units in kept.found.holds.items():
        holds[path] = holds.get(path, frozenset()) | units
    return msgspec.structs.replace(found, holds=holds)


def keep(ws: Workspace) -> None:
    """A writer, inside the decide lock: keep the walk this process made of this workspace, if any
    (it is a function of the commit and policy it names, so one made before the lock is as good)."""
    while _made:
        where, kept = _made.pop()
        if where.root == ws.root:
            _write(ws, kept)
