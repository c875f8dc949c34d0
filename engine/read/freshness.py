"""Evidence freshness (design §20): does the file a memory entry cites still say what it said?

An evidence item is a path when it matches `^[^\\s:]+(:\\d+)?$` (and holds no control character)
and names a file at the entry's `revision` (the HEAD of the recording unit's worktree, stamped by
the host). Such a file is `changed` when it is gone at HEAD of the workspace's main worktree or
its content there differs from its content at the revision; a file edited and then restored says
the same thing again: it is current. An entry is `changed` when one of its files is, `current`
when it has path evidence and none changed, and `unchecked` otherwise: no path evidence, no
revision, a revision git does not know, or no git at all. Unchecked is never shown as current.

The check costs the same few git processes whatever the number of entries or revisions:
`rev-parse HEAD`; one `cat-file --batch-check` for which revisions git knows; one `ls-tree -r` of
HEAD; and one `diff-tree --stdin` comparing every revision's tree with HEAD's in one pass (either
side of a merge, a unit's branch never merged, a rebase: only the content at both ends counts). A
path that diff does not name is the same file at both ends. Answers are kept per process, keyed by
HEAD (the control room asks again on every refresh; what a commit holds never changes).
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Iterable
from itertools import repeat
from pathlib import Path

import msgspec

from engine.base.gcpause import gc_paused

PATH_ITEM = re.compile(r"[^\s:\x00-\x1f\x7f]+(:\d+)?")  # design §20's pattern, no control characters
REVISION = re.compile(r"[0-9a-f]{7,64}")
CHANGED, CURRENT, UNCHECKED = "changed", "current", "unchecked"
_TIMEOUT = 120


class Freshness(msgspec.Struct, frozen=True):
    status: str  # changed | current | unchecked
    changed_paths: tuple[str, ...] = ()
    why: str = ""  # for unchecked: what could not be checked

    def as_json(self) -> dict:
        return {"evidenceStatus": self.status, "changedPaths": list(self.changed_paths)}


NO_PATH = Freshness(UNCHECKED, why="no evidence item names a file at its revision")
NO_REVISION = Freshness(UNCHECKED, why="no revision recorded")
UNKNOWN_REVISION = Freshness(UNCHECKED, why="its revision is unknown to git here")
NO_GIT = Freshness(UNCHECKED, why="no git history here to check against")
OFF = Freshness(UNCHECKED, why="not checked (--no-evidence-check)")
IS_CURRENT = Freshness(CURRENT)


def label(status: str, changed_paths: Iterable[str] = ()) -> str:
    """How a listing says it: `evidence changed: a.py, b.py`, `evidence current`, `evidence unchecked`."""
    if status == CHANGED:
        return f"evidence changed: {', '.join(changed_paths)}"
    return f"evidence {status}"


_PATHS: dict[str, str | None] = {}  # an item that looks like a path -> the path it names


_UNSEEN = "\0"  # no path: PATH_ITEM refuses control characters


def path_of(item: object) -> str | None:
    """The repository path an evidence item names, or None (a URL, a sentence, `../x`)."""
    if not isinstance(item, str) or not PATH_ITEM.fullmatch(item):
        return None  # (not kept: such items are mostly unique sentences)
    found = _path(item)
    if len(_PATHS) > 200_000:
        _PATHS.clear()
    _PATHS[item] = found
    return found


def _path(item: str) -> str | None:
    normal = posixpath.normpath(item.rsplit(":", 1)[0] if ":" in item else item)
    return None if normal.startswith(("/", "../")) or normal in (".", "..") or "\\" in normal else normal


class _Cache(msgspec.Struct):
    head: str = ""
    head_blobs: dict[str, str] | None = None  # path -> blob at HEAD
    known: dict[str, bool] = msgspec.field(default_factory=dict)  # revision -> git knows it (never changes)
    changed: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)  # revision -> path -> A|D|M|T


_CACHES: dict[Path, _Cache] = {}
_LOCK = threading.Lock()  # the control room may ask from two workers at once


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes | None:
    """What a revision held is what its objects hold (registry.gitcall: no `git replace` made from
    a unit's worktree, whose refs are every worktree's, and no graft may stand in for it)."""
    from registry.gitcall import git

    done = git(root, "-c", "core.quotePath=false", *args, input=stdin, timeout=_TIMEOUT, filters=False)
    return done.stdout if done.returncode == 0 else None


def _known(root: Path, revisions: list[str]) -> dict[str, bool] | None:
    """Which revisions name a commit here: one `cat-file --batch-check` (no whitespace in them)."""
    if not revisions:
        return {}
    stdin = "".join(f"{r}^{{commit}}\n" for r in revisions).encode()
    raw = _git(root, "cat-file", "--batch-check=%(objecttype)", stdin=stdin)
    lines = raw.decode().splitlines() if raw is not None else []
    if len(lines) != len(revisions):
        return None
    return {r: line.strip() == "commit" for r, line in zip(revisions, lines, strict=True)}


def _head_blobs(root: Path, head: str) -> dict[str, str] | None:
    """Every file at HEAD with its blob: one `git ls-tree -r`."""
    raw = _git(root, "ls-tree", "-r", "-z", "--full-tree", head)
    if raw is None:
        return None
    blobs = {}
    for record in raw.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == b"blob":
            blobs[name.decode("utf-8", "replace")] = parts[2].decode()
    return blobs


def _differences(root: Path, head: str, revisions: list[str]) -> dict[str, dict[str, str]] | None:
    """For each revision, the paths whose content differs between HEAD and it, with git's status
    from HEAD to the revision (A: only the revision has it, D: only HEAD has it, M or T: both,
    other content): one `git diff-tree --stdin` over every revision. (Pathspecs would narrow the
    output, but git matches each against every entry of every tree: many times slower.)"""
    stdin = "".join(f"{r} {head}\n" for r in revisions).encode()  # "<commit> <as if its parent>"
    raw = _git(root, "diff-tree", "--stdin", "--always", "-r", "-z", "--no-renames", stdin=stdin)
    if raw is None:
        return None
    found: dict[str, dict[str, str]] = {}
    tokens = raw.split(b"\0")
    current: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i].strip(b"\n")
        i += 1
        if token.startswith(b":") and i < len(tokens):  # ":<modes> <blobs> <status>" then the path
            current[tokens[i].decode("utf-8", "replace")] = token.split()[-1][:1].decode()
            i += 1
        elif token:  # a header: the revision the lines after it compare with HEAD
            current = found.setdefault(token.decode().split()[0], {})
    return found


def check(root: Path, entries: Iterable[dict]) -> dict[str, Freshness]:
    """Freshness of each memory entry (by id) against HEAD of the git repository at `root`. The
    git pass runs in a thread while this one reads the entries' evidence (git works on another
    core; the thread only waits on it). A revision that is not text (a line appended by hand) is
    no revision: the entry is unchecked."""
    entries = entries if isinstance(entries, list) else list(entries)
    # the distinct revisions first (200 in the bench's 400,000 entries), then the pattern on each
    stamped = {r for r in map(dict.get, entries, repeat("revision")) if type(r) is str}
    revisions = {r for r in stamped if REVISION.fullmatch(r)}
    if not revisions:
        return {e["id"]: _unchecked(e) for e in entries}
    outcome: list[_Cache | None] = []
    worker = threading.Thread(target=lambda: outcome.append(_pass(root, revisions)), daemon=True)
    worker.start()
    with gc_paused():  # a tuple or two per entry, and nothing to collect (the rows scanned again)
        result = _judge_all(entries, revisions, worker, outcome)
    return result


def _judge_all(
    entries: list[dict], revisions: set[str], worker: threading.Thread, outcome: list[_Cache | None]
) -> dict[str, Freshness]:
    result: dict[str, Freshness] = {}
    cited: dict[str, tuple[str, tuple[str, ...]]] = {}  # entry id -> (revision, paths)
    known_paths, unseen = _PATHS, _UNSEEN
    for event in entries:  # the hot loop (400,000 entries in the bench): kept lean
        get = event.get
        paths: tuple[str, ...] = ()
        for item in get("evidence") or ():
            if type(item) is not str or " " in item:  # most prose is not a path: the cheap test first
                continue
            path = known_paths.get(item, unseen)
            if path is unseen:
                path = path_of(item)
            if path:
                paths += (path,)
        revision = get("revision")
        if paths and type(revision) is str and revision in revisions:
            cited[event["id"]] = (revision, paths)
        else:
            result[event["id"]] = _unchecked(event, paths)
    worker.join()
    cache = outcome[0] if outcome else None
    if cache is None:
        return result | dict.fromkeys(cited, NO_GIT)
    answers: dict[tuple[str, tuple[str, ...]], Freshness] = {}
    for entry_id, key in cited.items():
        found = answers.get(key)
        if found is None:
            found = answers[key] = _judge(cache, *key)
        result[entry_id] = found
    return result


def _unchecked(event: dict, paths: tuple[str, ...] | None = None) -> Freshness:
    """Why an entry cannot be checked (it has no path evidence, or no usable revision)."""
    if paths is None:
        paths = tuple(p for p in map(path_of, event.get("evidence") or ()) if p)
    revision = event.get("revision")
    if not paths:
        return NO_PATH
    if not isinstance(revision, str) or not revision:
        return NO_REVISION
    return UNKNOWN_REVISION


def _pass(root: Path, revisions: set[str]) -> _Cache | None:
    """The git pass for these revisions against HEAD (answers kept per HEAD); None: git could not."""
    head_raw = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    head = head_raw.decode().strip() if head_raw else ""
    if not head:
        return None
    with _LOCK:
        cache = _CACHES.get(root)
        if cache is None or cache.head != head:  # what a revision holds never changes; HEAD's answers do
            cache = _CACHES[root] = _Cache(head, known=cache.known if cache is not None else {})
        known = _known(root, sorted(revisions - set(cache.known)))
        if cache.head_blobs is None:
            cache.head_blobs = _head_blobs(root, head)
        if known is None or cache.head_blobs is None:
            return None
        cache.known.update(known)
        todo = sorted(r for r in revisions if cache.known[r] and r not in cache.changed)
        if todo:
            found = _differences(root, head, todo)
            if found is None:
                return None
            full = _full_ids(root, todo) if any(len(r) < 40 for r in todo) else {r: r for r in todo}
            for revision in todo:
                cache.changed[revision] = found.get(full.get(revision, revision), {})
        return cache


def _judge(cache: _Cache, revision: str, paths: tuple[str, ...]) -> Freshness:
    if not cache.known[revision]:
        return UNKNOWN_REVISION
    differ = cache.changed[revision]
    blobs = cache.head_blobs or {}
    changed: list[str] = []
    current = False
    for path in dict.fromkeys(paths):
        status = differ.get(path)
        if status is None:  # the same at both ends: a file at the revision iff one at HEAD
            current = current or path in blobs
        elif status != "D":  # D: HEAD has it, the revision did not: not evidence it cited
            changed.append(path)  # A: gone at HEAD; M, T: other content
    if changed:
        return Freshness(CHANGED, tuple(changed))
    return IS_CURRENT if current else NO_PATH


def _full_ids(root: Path, revisions: list[str]) -> dict[str, str]:
    """Abbreviated revisions as the full ids diff-tree names them (rare: the host stamps full ids)."""
    stdin = "".join(f"{r}^{{commit}}\n" for r in revisions).encode()
    raw = _git(root, "cat-file", "--batch-check=%(objectname)", stdin=stdin)
    lines = raw.decode().splitlines() if raw is not None else []
    return dict(zip(revisions, lines, strict=False))
