"""Finding the workspace and the lease, and reading what it holds (policy, contracts)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from engine.base.errors import BadInput, Refused
from engine.log.events import STORES
from engine.log.files import NO_STORES, lock_held, locked
from engine.log.store import Store
from identity import regular
from identity.files import POLICY_DIR, SENSORS_POLICY, STORE_POLICY, content_hash

if TYPE_CHECKING:  # the policy models (msgspec Structs) are imported only by commands that read policy
    from engine.checkout.authority import Authority, People
    from identity.policy import InteractionPolicy, Profiles, RoutingPolicy, SensorsPolicy

LEASE_FILE = ".regulator-lease.json"
# what `unit run` hands its child (design §23): the door's address, the lease's token, the unit
DOOR_ENV, TOKEN_ENV, UNIT_ENV = "REGULATOR_DOOR", "REGULATOR_DOOR_TOKEN", "REGULATOR_UNIT"
STATE_DIR = ".regulator"
_POLICY_CACHE: dict[tuple, object] = {}
_PEOPLE: dict[int, tuple[object, People]] = {}  # id(parsed policy) -> (it, its People)
# workspaces whose decide lock a thread of this process holds, with that thread: a host's door and
# its tick write from threads of their own, and only the thread inside exclusive() is deciding
_DECIDING: set[tuple[Path, int]] = set()
_DECIDED: set[Path] = set()  # workspaces whose decide lock this process has taken (a writer)
_WRITERS: dict[Path, threading.RLock] = {}
_WRITERS_GUARD = threading.Lock()


def writer_lock(root: Path) -> threading.RLock:
    """The one lock this process's writers of the workspace at `root` take before its decide lock
    (Workspace.exclusive): the decide lock is held by the process, so two of its threads would
    otherwise both be inside it. A host's loop and door share it."""
    key = Path(os.path.realpath(root))  # one lock however the workspace's path was spelled
    with _WRITERS_GUARD:
        found = _WRITERS.get(key)
        if found is None:
            found = _WRITERS[key] = threading.RLock()
        return found


UNIT_ID = re.compile(r"[a-z0-9][a-z0-9-]*(/[a-z0-9-]+)?")


@dataclass(frozen=True)
class Lease:
    """A lease file as found on disk; honoured only while it matches the unit's current lease."""

    unit: str
    lease: str = field(repr=False)  # the token: a host that logs a Lease must not log it
    workspace: Path
    leased_at: str
    path: Path
    # where the unit works, when the lease file lies outside it (`unit run` keeps it in the lease's
    # folder, design §23); else the lease file's folder
    work: Path | None = None
    # the lease is $REGULATOR_DOOR_TOKEN, not a file: the process is a unit `unit run` started, which
    # acts through its door, never on the stores (D-218)
    from_env: bool = False

    @property
    def worktree(self) -> Path:
        return self.work or self.path.parent


@dataclass(frozen=True)
class Workspace:
    root: Path  # the workspace: its stores, its decided policy, its governed files
    checkout: Path | None = None  # a linked git worktree of it the command runs in (its registers)
    # a command that reads only git where the stores are not file stores on this disk (PostgreSQL,
    # or a mirror with no PostgreSQL store selected): it opens none of them, as in a clone (D-87)
    git_only: bool = False

    @property
    def tree(self) -> Path:
        """Where the registers are read and written: the checkout the command runs in (a branch in
        a linked worktree is linted as that branch), else the workspace itself."""
        return self.checkout or self.root

    @functools.cached_property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def url(self) -> str | None:
        """The PostgreSQL store this workspace's stores are on (design §18), or None: files (and for
        a command that reads only git, D-87)."""
        if self.git_only:
            return None
        env = os.environ.get("REGULATOR_STORE")
        known = self.__dict__.get("_url")  # kept as cached_property keeps its value, per REGULATOR_STORE
        if known is not None and known[0] == env:
            return known[1]
        url, named_by = store_choice(self.root)
        if url is None:
            _not_a_mirror(self.state_dir)
        elif not env:
            _decided_store(self, url, named_by)
        self.__dict__["_url"] = (env, url)
        return url

    def store(self, name: str) -> Store:
        url = self.url
        if url is not None:
            from engine.log.pg.store import PgStore

            return PgStore(url, self.state_dir, name)
        # a file store is its path alone: one object per name, kept (every read asks for each store
        # several times; building its path anew was a third of a door's status call, D-227)
        kept = self.__dict__.setdefault("_stores", {})
        found = kept.get(name)
        if found is None:
            found = kept[name] = Store(self.state_dir / f"{name}.ndjson")
        return found

    def marks(self, but: str, folded: Mapping[str, int] | None = None) -> dict[str, int]:
        """Where every store but `but` ends, as a write decided inside the decide lock records it:
        an identity decision's `marks`, a host event's `seen` (design §22). A store the caller folded
        counts as far as it was folded (`folded`: store -> byte offset); any other, its length now
        (on PostgreSQL, its mirror's bytes, brought up to date when the lock was taken)."""
        folded = folded or {}
        marks = {name: self.store(name).settled_end() for name in STORES if name != but}
        # a store folded counts as far as it was folded, never past its whole lines (a fold that read
        # a write in flight, or a torn tail, to its end: D-335)
        return {name: min(folded[name], end) if name in folded else end for name, end in marks.items()}

    def sync(self) -> int:
        """A postgresql workspace: bring the local mirror up to date (lines gained); files: 0."""
        url = self.url
        if url is None:
            return 0
        from engine.log.pg.mirror import mirror

        found = mirror(url, self.state_dir)
        if not found.checked:
            found.prepare()
            return 1
        return found.sync()

    def cannot_write(self) -> str | None:
        """Why this process may not write what a host writes, in words (a PostgreSQL role without
        INSERT on the stores, such as regulator_reader, or one that is not regulator_host; a
        database still on an earlier schema), or None: it may. One question to the server."""
        url = self.url
        if url is None:
            return None
        from engine.log.pg.admin import cannot_write

        return cannot_write(url)

    @property
    def has_stores(self) -> bool:
        """The host's workspace holds its stores; a clone (CI) or a copy does not (design §16.2), nor
        does a command that reads only git where they are not file stores (D-87)."""
        return not self.git_only and os.path.isfile(self._identity_file)

    @functools.cached_property
    def _identity_file(self) -> str:
        return str(self.state_dir / "identity.ndjson")

    def authority(self) -> Authority:
        """Decided content, keys and grants, folded from identity.ndjson (design §15.0)."""
        from engine.checkout import authority

        if self.git_only:  # as in a clone: no decision log is read
            return authority.Authority()
        url = self.url
        if url is not None:  # PostgreSQL: the identity store's mirror, prepared once
            from engine.log.pg.mirror import mirror

            if not mirror(url, self.state_dir).checked:
                self.sync()
        return authority.of(self.root)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """One decider at a time: routing, dispositions and unit transitions check, then write.
        Within a process, one thread at a time too (writer_lock), then across processes and hosts
        (the decide lock)."""
        url = self.url
        me = (self.root, threading.get_ident())
        if url is not None:
            from engine.log.pg.server import decide_lock

            with writer_lock(self.root), decide_lock(url):
                self.sync()  # what every other host committed before the lock was ours
                _DECIDING.add(me)
                _DECIDED.add(self.root)
                try:
                    yield
                finally:
                    _DECIDING.discard(me)
            return
        self.require_stores()
        with writer_lock(self.root), locked(self.state_dir / "decide.lock"):
            _DECIDING.add(me)
            _DECIDED.add(self.root)
            try:
                yield
            finally:
                _DECIDING.discard(me)

    def require_stores(self) -> None:
        """Refused where there are no stores to write (a clone: `.regulator/` is never committed);
        on PostgreSQL the server's stores are always there to write."""
        if self.url is None and not self.state_dir.is_dir():
            raise Refused(NO_STORES)

    def decide_lock_held(self) -> bool:
        """Does another process hold the decide lock right now (the one exclusive() takes)? A probe
        that never waits: `.regulator/decide.lock` on files, the lock row on PostgreSQL."""
        url = self.url
        if url is not None:
            from engine.log.pg.server import decide_lock_held

            return decide_lock_held(url)
        return lock_held(self.state_dir / "decide.lock")

    def deciding(self) -> bool:
        """This thread is inside exclusive(): it writes (readers never do, design §13)."""
        return (self.root, threading.get_ident()) in _DECIDING

    def decided(self) -> bool:
        """This process has taken exclusive() (now or before): it is a writer, not a reader."""
        return self.root in _DECIDED

    # ---- policy ----------------------------------------------------------------------------
    def policy_text(self, relative: str) -> str:
        """A governed file's content in force: the last decision's (design §15.0), never the file
        on disk, which grants nothing by being edited. A first-round baseline recorded only a
        hash: the file is used then only while it still has that hash. In a clone (no stores)
        the committed file is all there is (design §16.2 says how that is checked)."""
        path = self.root / relative
        auth = self.authority()
        if auth.present:
            text = auth.content.get(relative)
            if text is not None:
                return text
            decided = auth.decided_hash.get(relative)
            try:
                data = regular.read_bytes(path)
            except OSError:
                data = None
            if auth.unknown:  # identity.ndjson does not verify: nothing decided is known (fail closed)
                raise Refused(
                    f"the policy in force is unknown ({auth.unknown}): no governed file's decided content "
                    "can be read until identity.ndjson verifies again (`regulator verify` names the line)"
                )
            if decided is None or data is None or content_hash(data) != decided:
                raise Refused(
                    f"{relative} differs from its last decided content and no decision records that "
                    "content: grants come only from decisions; `regulator identity verify` names the edit"
                )
            return data.decode("utf-8", "replace")
        try:
            return regular.read_text(path)
        except FileNotFoundError:
            raise BadInput(f"policy {relative}: missing; run `regulator init` or restore it") from None
        except UnicodeDecodeError:  # a clone's committed file: what trunk holds, read as it is
            raise BadInput(f"policy {relative}: not valid UTF-8; restore it from trunk") from None

    def optional_policy_text(self, relative: str) -> str | None:
        """A governed file a workspace may lack (sensors.yaml): None on the host while no decision
        ever recorded it, whatever is on disk (a hand-added file declares nothing, as a hand edit
        does: the warning says so; it failed every command and tick that read it: an operator's
        review), and in a clone while it is not committed (a clone reads the committed file, design
        §16.2); else its content in force, as policy_text."""
        auth = self.authority()
        if not auth.ever_decided(relative) and (auth.present or not os.path.lexists(self.root / relative)):
            return None
        return self.policy_text(relative)

    @overload
    def _policy(self, name: Literal["routing.yaml"]) -> RoutingPolicy: ...
    @overload
    def _policy(self, name: Literal["interaction.yaml"]) -> InteractionPolicy: ...
    @overload
    def _policy(self, name: Literal["profiles.yaml"]) -> Profiles: ...
    @overload
    def _policy(self, name: Literal["sensors.yaml"]) -> SensorsPolicy: ...
    def _policy(self, name: str) -> object:
        """Parsed policy in force, parsed again only when its decided content changed (a long-lived
        control room asks for it on every append). sensors.yaml absent and never decided: none."""
        from identity.policy import PolicyError, parse_policy

        relative = f"{POLICY_DIR}/{name}"
        text = (
            self.optional_policy_text(relative) if relative == SENSORS_POLICY else self.policy_text(relative)
        )
        if text is None:
            text = "sensors: {}\n"
        key = (name, text)
        if key in _POLICY_CACHE:
            return _POLICY_CACHE[key]
        try:
            parsed = parse_policy(name, text)
        except PolicyError as exc:
            raise BadInput(f"policy {exc}") from None
        if len(_POLICY_CACHE) > 32:
            _POLICY_CACHE.clear()
        _POLICY_CACHE[key] = parsed
        return parsed

    def routing(self) -> RoutingPolicy:
        return self._policy("routing.yaml")

    def interaction(self) -> InteractionPolicy:
        return self._policy("interaction.yaml")

    def people(self) -> People:
        """The interaction policy in force as the rules read it (engine.read.rules): who is a
        person, with which grants, keys and severities to resolve."""
        from engine.checkout.authority import People

        policy = self.interaction()
        known = _PEOPLE.get(id(policy))
        if known is None or known[0] is not policy:
            if len(_PEOPLE) > 32:
                _PEOPLE.clear()
            known = _PEOPLE[id(policy)] = (policy, People.of(policy))
        return known[1]

    def profiles(self) -> Profiles:
        return self._policy("profiles.yaml")

    def sensors(self) -> SensorsPolicy:
        """The declared sensors in force (design §24); none where sensors.yaml was never decided."""
        return self._policy("sensors.yaml")

    def revision(self, where: Path | None = None) -> str | None:
        """HEAD of the given worktree (or the workspace); None outside git. A worktree is read as
        the door reads it (engine.checkout.head): one another account owns (a confined unit's) from
        the host's side, never by git run in it, which git refuses ("dubious ownership") and which
        would read that account's git config."""
        if where is not None:
            from engine.checkout.head import Head

            return Head(where).revision()
        from registry.gitcall import git_text

        done = git_text(self.root, "rev-parse", "HEAD", timeout=10, filters=False)
        return done.stdout.strip() or None if done.returncode == 0 else None


MIRROR_MARKER = "postgresql.json"  # engine.log.pg.sql.MARKER: what makes `.regulator/` a mirror
# (root, REGULATOR_STORE, store.yaml's inode, size, modification and change times) -> the store it
# selects and the hash of the store.yaml bytes that named it: a store.yaml written since, or a
# workspace made again at the same path, is read again (D-338)
_URLS: dict[tuple[Path, str | None, tuple[int, int, int, int] | None], tuple[str | None, str | None]] = {}


def store_url(root: Path) -> str | None:
    """Where the stores are (design §18): REGULATOR_STORE for this process, else the `url:` of
    regulator/policy/store.yaml, else None (the files under .regulator/)."""
    return store_choice(root)[0]


def store_choice(root: Path) -> tuple[str | None, str | None]:
    """`store_url`, and the content hash of the store.yaml bytes its URL was read from (None where
    REGULATOR_STORE chose, or the stores are files): `_decided_store` judges those very bytes, never
    the file read a second time (which may have changed between the two reads)."""
    env = os.environ.get("REGULATOR_STORE") or None
    signature = None
    if env is None:
        with contextlib.suppress(OSError):
            seen = os.stat(root / STORE_POLICY)
            signature = (seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)
    key = (root, env, signature)
    known = _URLS.get(key)
    if known is not None:
        return known
    choice: tuple[str | None, str | None] = (None, None)
    if env is not None:
        if env.startswith(("postgresql://", "postgres://")):
            choice = (env, None)
        elif env not in ("files", "file"):
            raise BadInput(f"REGULATOR_STORE={env!r} is not a postgresql:// URL (or `files`)")
    else:
        choice = _committed(root)
    if len(_URLS) > 32:  # a file touched again and again is a new key each time
        _URLS.clear()
    _URLS[key] = choice
    return choice


def committed_url(root: Path) -> str | None:
    """The `url:` of regulator/policy/store.yaml at `root` (None: files), whatever REGULATOR_STORE says."""
    return _committed(root)[0]


def _committed(root: Path) -> tuple[str | None, str | None]:
    """The `url:` of store.yaml at `root` and the content hash of the bytes it was read from (both
    None: files)."""
    try:
        data = regular.read_bytes(root / STORE_POLICY)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None, None
    try:
        url = store_policy_url(text)
    except ValueError as exc:
        raise BadInput(f"{STORE_POLICY}: {exc}") from None
    return url, (content_hash(data) if url is not None else None)


def store_policy_url(text: str) -> str | None:
    """The `url:` of a store.yaml's text: a postgresql:// URL, or None (absent, empty or `files`).
    ValueError when it names anything else."""
    url = None
    for raw in text.splitlines():
        key_part, _, value = raw.partition(":")
        if key_part.strip() == "url":
            value = value.strip().strip("'\"")
            if value and value != "files":
                if not value.startswith(("postgresql://", "postgres://")):
                    raise ValueError(f"url {value!r} is not a postgresql:// URL")
                url = value
    return url


def _decided_store(ws: Workspace, url: str, named_by: str | None) -> None:
    """store.yaml names a postgresql store where `.regulator/` holds file stores: those stores
    say whether a decision chose it (store.yaml is governed). One that no decision records is
    refused before anything connects to the server it names (exit 3); a decided one is the move
    the mirror then asks to finish (`store copy`). A mirror, or no stores here, judges nothing.
    `named_by` is the content hash of the bytes `url` was read from: those are judged."""
    if os.path.lexists(ws.state_dir / MIRROR_MARKER):
        return
    try:
        if os.stat(ws._identity_file, follow_symlinks=False).st_size == 0:
            return
    except OSError:
        return
    from engine.checkout import authority

    decided = authority.of(ws.root).decided_hash.get(STORE_POLICY)
    if named_by is None or decided != named_by:
        from engine.log.pg.connection import redact

        raise Refused(
            f"{STORE_POLICY} names {redact(url)}, but no decision in the stores here ({STATE_DIR}/) "
            "records that content (a hand edit?): restore its decided content or remove it, then "
            f"propose the change (`regulator identity propose --file {STORE_POLICY} …`)"
        )


def _not_a_mirror(state_dir: Path) -> None:
    """Files selected where `.regulator/` is a PostgreSQL store's local mirror (design §18): refused.
    The mirror is a cache fetched again from the server, so a line appended to it as if it were a
    file store would be dropped without a word, and a read would show a copy's stale state."""
    marker = state_dir / MIRROR_MARKER
    if not marker.is_file():
        return
    try:
        mirrored = json.loads(regular.read_text(marker)).get("url")
    except (OSError, ValueError, AttributeError):
        mirrored = None
    named = f" of {mirrored}" if isinstance(mirrored, str) and mirrored else ""
    raise Refused(
        f"{state_dir} is the local mirror{named}, not file stores, but no postgresql store is "
        f"selected here; set REGULATOR_STORE=postgresql://… or commit {STORE_POLICY} "
        f"(url: postgresql://…), or move {state_dir.name}/ aside to use files"
    )


def check_unit_id(value: str, field: str = "unit") -> str:
    if not isinstance(value, str) or not UNIT_ID.fullmatch(value) or len(value) > 200:
        raise BadInput(
            f"{field}: {value!r} is not a unit id (lowercase letters, digits and '-', "
            "optionally one '/stream-part')"
        )
    return value


def read_lease(path: Path) -> Lease:
    if path.exists() and not path.is_file():  # a folder or a FIFO: never opened (it would hang)
        raise BadInput(f"lease file {path} is not a regular file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        lease = Lease(
            unit=check_unit_id(data["unit"]),
            lease=str(data["lease"]),
            workspace=Path(data["workspace"]),
            leased_at=str(data["leasedAt"]),
            path=path.resolve(),
            work=Path(data["worktree"]) if isinstance(data.get("worktree"), str) else None,
        )
    except FileNotFoundError:
        raise BadInput(f"lease file {path} does not exist") from None
    except (ValueError, KeyError, TypeError, RecursionError, BadInput):
        raise Refused(f"lease file {path} is not a valid lease; ask the host to dispatch again") from None
    return lease


def _walk_up(start: Path) -> Iterator[Path]:
    here = start.resolve()
    yield here
    yield from here.parents


def find_lease(cwd: Path) -> Path | None:
    for folder in _walk_up(cwd):
        candidate = folder / LEASE_FILE
        if candidate.is_file():
            return candidate
    return None


def is_workspace(folder: Path) -> bool:
    """A folder with stores, or a clone of one (CI): the tracked policy is there, the stores are
    not (`.regulator/` is never committed), and readers then see empty stores."""
    return (folder / STATE_DIR).is_dir() or (folder / POLICY_DIR).is_dir()


def holds_stores(folder: Path) -> bool:
    """A workspace a lease may name: its stores are here (`.regulator/`), or on the PostgreSQL
    store selected for this checkout of it, whose local mirror is made on first use (D-87): a host
    whose mirror was deleted or moved aside is still the host. `REGULATOR_STORE` alone does not
    make any folder a workspace: the workspace's committed policy must be there."""
    if (folder / STATE_DIR).is_dir():
        return True
    return (folder / POLICY_DIR).is_dir() and store_url(folder) is not None


def main_worktree(folder: Path) -> Path | None:
    """The main worktree of a linked git worktree (`git worktree add`), as git's common directory
    names it (what `git rev-parse --git-common-dir` answers, read from the files without a
    process): its `.git` is a file naming a gitdir that holds a `commondir`. None otherwise."""
    dotgit = folder / ".git"
    try:
        if not dotgit.is_file():
            return None
        text = regular.read_text(dotgit).strip()
        if not text.startswith("gitdir:"):
            return None
        gitdir = folder / text[len("gitdir:") :].strip()
        common = (gitdir / regular.read_text(gitdir / "commondir").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return None
    return common.parent if common.name == ".git" else None


def _real(folder: Path) -> Path:
    """A worktree of the workspace is the workspace (design §15.4); a symlinked .regulator/ is refused."""
    main = main_worktree(folder)
    if main is not None and is_workspace(main):
        folder = main
    if (folder / STATE_DIR).is_symlink():
        raise Refused(f"{folder / STATE_DIR} is a symlink; regulator opens its stores only where they are")
    return folder


GIT_FILES = ("HEAD", "config", "index", "packed-refs")


def check_git(folder: Path) -> None:
    """The files git reads before it answers anything are regular files (design §26): a FIFO at
    `.git/HEAD` would hang every git call regulator makes (lint, revisions, the trunk walk), so it
    is refused in one line first. A linked worktree's own git directory is checked too."""
    dotgit = folder / ".git"
    gitdirs = []
    if dotgit.is_dir():
        gitdirs.append(dotgit)
    elif dotgit.is_file():
        text = regular.read_text(dotgit).strip()
        if text.startswith("gitdir:"):
            gitdirs.append(folder / text[len("gitdir:") :].strip())
    for gitdir in gitdirs:
        for name in GIT_FILES:
            regular.check_regular(gitdir / name)


def _opened(folder: Path) -> Workspace:
    """The workspace for a folder: itself, or the workspace a linked worktree of it belongs to."""
    check_git(folder)
    home = _real(folder)
    if home != folder:
        check_git(home)
    check_untracked(home)
    return Workspace(home, None if home == folder else folder)


def check_untracked(home: Path) -> None:
    """Stores committed to git are not the host's stores (a clone carrying forged ones would look
    like the host): refused (design §16.2)."""
    if not (home / STATE_DIR).is_dir() or not (home / ".git").exists():
        return
    from registry.gitcall import git

    # every command runs this, a person's too: no fsmonitor or hook of the repository's runs (a
    # plain ls-files reads the index, hashing no file: no filter to empty)
    done = git(home, "ls-files", "--", STATE_DIR, timeout=10, filters=False)
    if done.returncode == 0 and done.stdout.strip():
        raise Refused(
            f"{home / STATE_DIR} is tracked by git: committed stores are never trusted (a clone that "
            f"carries them?); remove them from git (`git rm -r --cached {STATE_DIR}`)"
        )


def configure_clock(ws: Workspace) -> Workspace:
    """REGULATOR_NOW is honoured only where the routing policy in force says `clock: pinned`."""
    from engine.base import clock

    clock.configure(ws.authority().clock == "pinned" if ws.has_stores else False)
    return ws


def locate(
    root: Path | None = None,
    lease_file: Path | None = None,
    cwd: Path | None = None,
    *,
    git_only: bool = False,
) -> tuple[Workspace, Lease | None]:
    """Find the workspace (design §3 order: --root, --lease, a lease walking up, .regulator/ walking up).

    `git_only`: the command answers from git (registry lint, views, records, routing tests,
    `--once --registers-only`). It reads file stores on this disk as ever, but where the stores
    are on PostgreSQL, or `.regulator/` is a mirror, it opens none of them and never connects: the
    workspace is then read as a clone is (stores absent, D-87), so CI needs no database."""
    try:
        ws, lease = _locate(root, lease_file, cwd)
        if git_only and (store_url(ws.root) is not None or (ws.state_dir / MIRROR_MARKER).is_file()):
            return configure_clock(dataclasses.replace(ws, git_only=True)), lease
        ws.sync()  # on PostgreSQL: the mirror the reads go through, up to date (design §18)
        return configure_clock(ws), lease
    except PermissionError as exc:  # one line, never a traceback: a confined unit meets this first
        raise Refused(denied(exc)) from None


def denied(exc: PermissionError) -> str:
    """A refusal's words for a file or folder this process may not use: where it is (both paths of
    a rename), and, for a unit `unit run` confined whose path is in the stores (the host's alone),
    the door it reads and writes through."""
    where = exc.filename if exc.filename is not None else "a file of the workspace"
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    in_stores = STATE_DIR in Path(str(exc.filename or "")).parts
    if os.environ.get(TOKEN_ENV) and in_stores:
        return (
            f"{where}: permission denied; a confined unit cannot read the stores: it reads and writes "
            "through its door (`regulator door call status`, `context`, `obligations`, "
            "`report_intelligence`, …)"
        )
    return f"{where}: permission denied; run regulator as an account that may use the workspace's files"


def _locate(
    root: Path | None = None, lease_file: Path | None = None, cwd: Path | None = None
) -> tuple[Workspace, Lease | None]:
    cwd = cwd or Path.cwd()
    lease = acting_lease(lease_file, cwd)
    if lease is not None and lease.from_env:  # its unit whatever workspace it names (D-218)
        ws = _workspace_at(root) if root is not None else _walk_to_workspace(cwd)
        return ws, dataclasses.replace(lease, workspace=ws.root)
    if root is not None:
        ws = _workspace_at(root)
        if lease is not None and lease.workspace.resolve() != ws.root:
            lease = None if lease_file is None else lease
        return ws, lease
    if lease is not None:
        home = _real(lease.workspace.resolve())
        check_git(home)
        check_untracked(home)
        if not holds_stores(home):
            raise Refused(f"lease {lease.path} names {lease.workspace}, which is not a workspace")
        return Workspace(home), lease
    return _walk_to_workspace(cwd), None


def _workspace_at(root: Path) -> Workspace:
    ws = _opened(root.resolve())
    if not is_workspace(ws.root):
        if not os.path.lexists(ws.root):
            raise BadInput(f"{ws.root} does not exist (--root names a workspace's folder)")
        if not ws.root.is_dir():
            raise BadInput(f"{ws.root} is no folder (--root names a workspace's folder)")
        raise BadInput(f"{ws.root} is not a regulator workspace (no {STATE_DIR}/); run `regulator init`")
    return ws


def _walk_to_workspace(cwd: Path) -> Workspace:
    for folder in _walk_up(cwd):
        if main_worktree(folder) is not None or is_workspace(folder):
            ws = _opened(folder)
            if is_workspace(ws.root):
                return ws
    raise BadInput("no regulator workspace here or above; run `regulator init` or pass --root DIR")


def acting_lease(lease_file: Path | None, cwd: Path) -> Lease | None:
    """The lease the command acts under: that of the process's environment where
    $REGULATOR_DOOR_TOKEN is set (a process `unit run` started is its unit, whatever lease file it
    names, finds or plants, and whatever workspace it names: D-218; `--lease` is then refused),
    else the lease file named (`--lease`) or found walking up from `cwd`, else None. Its
    `workspace` is the lease file's, or, from the environment, filled in by the caller."""
    token = os.environ.get(TOKEN_ENV, "")
    if token:
        unit = os.environ.get(UNIT_ENV, "")
        if not UNIT_ID.fullmatch(unit):
            raise BadInput(f"${UNIT_ENV} is {'empty' if not unit else 'not a unit id'}{acting_as_unit('')}")
        if lease_file is not None:
            raise Refused(
                f"--lease is refused{acting_as_unit(unit)}: its door is serve's "
                "(`regulator door call TOOL`, `regulator door stdio`)"
            )
        return Lease(unit, token, cwd, leased_at="", path=Path(f"${TOKEN_ENV}"), work=cwd, from_env=True)
    if lease_file is not None:
        return read_lease(lease_file)
    found = find_lease(cwd)
    return read_lease(found) if found is not None else None


def acting_as_unit(unit: str) -> str:
    """Why a process whose environment holds a lease is taken for its unit, for a refusal (D-218)."""
    whose = f"unit {unit}'s" if unit else "a unit's"
    return (
        f" (${TOKEN_ENV} is set: this process is {whose}, started by `unit run`; "
        "a person or the host acts from a shell without it)"
    )
