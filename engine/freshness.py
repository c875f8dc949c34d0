"""Evidence freshness (SPEC §20): does the file a memory entry cites still say what it said?

An evidence item is a path when it matches `^[^\\s:]+(:\\d+)?$` and names a file (a blob) at the
entry's `revision` (the HEAD of the recording unit's worktree, stamped by the host). Such a file is
`changed` when it is gone at HEAD of the workspace's main worktree or its content there differs
from its content at the revision (a file edited and then restored says the same thing again: it is
current). An entry is `changed` when one of its files is, `current` when it has path evidence and
none changed, and `unchecked` otherwise: no path evidence, no revision, a revision git does not
know, or no git at all. Unchecked is never shown as current.

The check costs a fixed number of git processes whatever the number of entries or revisions:
`rev-parse HEAD`; one `cat-file --batch-check` for which revisions exist and what each cited path
is at HEAD; `merge-base --octopus --all` and one `git log --name-only` over the history between
the revisions and HEAD (both sides: a unit's branch may never have been merged); and one more
`cat-file --batch-check` for only the (revision, path) pairs that history says may differ. A
pair no commit in between touched is the same blob at both ends. Results are kept per process
keyed by HEAD (the control room asks again on every refresh; a commit's tree never changes).
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PATH_ITEM = re.compile(r"[^\s:]+(:\d+)?")
REVISION = re.compile(r"[0-9a-f]{7,64}")
CHANGED, CURRENT, UNCHECKED = "changed", "current", "unchecked"
MISSING = ""  # a path that is no file at a commit
_TIMEOUT = 120


@dataclass(frozen=True)
class Freshness:
    status: str  # changed | current | unchecked
    changed_paths: tuple[str, ...] = ()
    why: str = ""  # for unchecked: what could not be checked

    def as_json(self) -> dict:
        return {"evidenceStatus": self.status, "changedPaths": list(self.changed_paths)}


NO_PATH = Freshness(UNCHECKED, why="no evidence item names a file at its revision")
NO_REVISION = Freshness(UNCHECKED, why="no revision recorded")
UNKNOWN_REVISION = Freshness(UNCHECKED, why="its revision is unknown to git here")
NO_GIT = Freshness(UNCHECKED, why="the workspace has no git history to check against")
OFF = Freshness(UNCHECKED, why="not checked (--no-evidence-check)")


def label(status: str, changed_paths: Iterable[str] = ()) -> str:
    """How a listing says it: `evidence changed: a.py, b.py`, `evidence current`, `unchecked`."""
    if status == CHANGED:
        return f"evidence changed: {', '.join(changed_paths)}"
    return f"evidence {status}"


def path_of(item: object) -> str | None:
    """The repository path an evidence item names, or None (a URL, a sentence, `../x`)."""
    if not isinstance(item, str) or not PATH_ITEM.fullmatch(item):
        return None
    path = item.rsplit(":", 1)[0] if ":" in item else item
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):  # git reads its names one per line
        return None
    normal = posixpath.normpath(path)
    if normal.startswith(("/", "../")) or normal in (".", "..") or "\\" in normal:
        return None
    return normal


@dataclass
class _Cache:
    head: str = ""
    head_blobs: dict[str, str] = field(default_factory=dict)  # path -> blob at HEAD (MISSING)
    known: dict[str, bool] = field(default_factory=dict)  # revision -> git knows it
    pairs: dict[tuple[str, str], str] = field(default_factory=dict)  # (rev, path) -> changed|current|MISSING


_CACHES: dict[Path, _Cache] = {}


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "-c", "core.quotePath=false", *args],
            input=stdin,
            capture_output=True,
            timeout=_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _batch_check(root: Path, names: list[str]) -> list[str] | None:
    """One `cat-file --batch-check`: for each name, its object id if it is a blob or a commit,
    else MISSING (names hold no whitespace: PATH_ITEM and REVISION exclude it)."""
    if not names:
        return []
    stdin = "".join(f"{n}\n" for n in names).encode()
    raw = _git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=stdin)
    if raw is None:
        return None
    answers = []
    for line in raw.decode("utf-8", "replace").splitlines():
        parts = line.split()
        ok = len(parts) == 2 and parts[1] in ("blob", "commit")
        answers.append(parts[0] if ok else MISSING)
    return answers if len(answers) == len(names) else None


def _history(root: Path, head: str, revisions: list[str]) -> dict[str, tuple[list[str], set[str]]] | None:
    """commit -> (parents, paths it touched) for every commit between the revisions and HEAD,
    on both sides: one `merge-base --octopus` and one `git log` whatever their number."""
    bases = _git(root, "merge-base", "--octopus", "--all", head, *revisions)
    if bases is None:
        return None
    stop = [f"^{b}" for b in bases.decode().split()]
    raw = _git(
        root,
        "log",
        "--stdin",
        "--format=%x01%H %P",
        "--name-only",
        "-z",
        "-m",
        "--no-renames",
        stdin="".join(f"{r}\n" for r in (head, *revisions, *stop)).encode(),
    )
    if raw is None:
        return None
    commits: dict[str, tuple[list[str], set[str]]] = {}
    for chunk in raw.split(b"\x01")[1:]:
        header, _, rest = chunk.partition(b"\0")
        ids = header.decode().split()
        if not ids:
            continue
        parents, paths = commits.setdefault(ids[0], (ids[1:], set()))
        paths.update(p.decode("utf-8", "replace") for p in rest.lstrip(b"\n").split(b"\0") if p)
    return commits


def _ancestors(commits: dict[str, tuple[list[str], set[str]]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        commit = todo.pop()
        if commit in seen or commit not in commits:
            continue
        seen.add(commit)
        todo.extend(commits[commit][0])
    return seen


def _settle(root: Path, cache: _Cache, wanted: set[tuple[str, str]]) -> bool:
    """Fill cache.pairs for every wanted (revision, path); False when git could not answer."""
    revisions = sorted({r for r, _ in wanted})
    commits = _history(root, cache.head, revisions)
    if commits is None:
        return False
    head_side = _ancestors(commits, cache.head)
    touched_by: dict[str, set[str]] = {}
    wanted_paths = {p for _, p in wanted}
    for commit, (_, paths) in commits.items():
        for path in paths & wanted_paths:
            touched_by.setdefault(path, set()).add(commit)
    between: dict[str, set[str]] = {}  # revision -> commits on one side only (revision...HEAD)
    verify: list[tuple[str, str]] = []
    for revision, path in sorted(wanted):
        if revision not in between:
            between[revision] = head_side ^ _ancestors(commits, revision)
        if touched_by.get(path, set()) & between[revision]:
            verify.append((revision, path))
        else:  # untouched in between: the same blob at both ends
            cache.pairs[(revision, path)] = CURRENT if cache.head_blobs[path] else MISSING
    answers = _batch_check(root, [f"{r}:{p}" for r, p in verify])
    if answers is None:
        return False
    for (revision, path), blob in zip(verify, answers, strict=True):
        if not blob:
            cache.pairs[(revision, path)] = MISSING  # not a file at its revision: not path evidence
        else:
            cache.pairs[(revision, path)] = CURRENT if blob == cache.head_blobs[path] else CHANGED
    return True


def check(root: Path, entries: Iterable[dict]) -> dict[str, Freshness]:
    """Freshness of each memory entry (by id) against HEAD of the git repository at `root`."""
    entries = list(entries)
    result: dict[str, Freshness] = {}
    cited: dict[str, tuple[str, list[str]]] = {}  # entry id -> (revision, paths)
    for event in entries:
        revision = event.get("revision")
        paths = list(dict.fromkeys(p for p in map(path_of, event.get("evidence") or []) if p))
        if not paths:
            result[event["id"]] = NO_PATH
        elif not isinstance(revision, str) or not revision:
            result[event["id"]] = NO_REVISION
        elif not REVISION.fullmatch(revision):
            result[event["id"]] = UNKNOWN_REVISION
        else:
            cited[event["id"]] = (revision, paths)
    if not cited:
        return result
    head_raw = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    head = head_raw.decode().strip() if head_raw else ""
    if not head:
        return result | dict.fromkeys(cited, NO_GIT)
    cache = _CACHES.get(root)
    if cache is None or cache.head != head:  # what a revision holds never changes; HEAD's answers do
        cache = _CACHES[root] = _Cache(head, known=cache.known if cache is not None else {})
    new_revisions = sorted({r for r, _ in cited.values()} - set(cache.known))
    new_paths = sorted({p for _, ps in cited.values() for p in ps} - set(cache.head_blobs))
    answers = _batch_check(
        root, [f"{r}^{{commit}}" for r in new_revisions] + [f"{head}:{p}" for p in new_paths]
    )
    if answers is None:
        return result | dict.fromkeys(cited, NO_GIT)
    for revision, oid in zip(new_revisions, answers, strict=False):
        cache.known[revision] = bool(oid)
    for path, blob in zip(new_paths, answers[len(new_revisions) :], strict=True):
        cache.head_blobs[path] = blob
    wanted = {(r, p) for r, ps in cited.values() if cache.known[r] for p in ps if (r, p) not in cache.pairs}
    if wanted and not _settle(root, cache, wanted):
        return result | dict.fromkeys(cited, NO_GIT)
    for entry_id, (revision, paths) in cited.items():
        if not cache.known[revision]:
            result[entry_id] = UNKNOWN_REVISION
            continue
        states = [(p, cache.pairs[(revision, p)]) for p in paths]
        changed = tuple(p for p, s in states if s == CHANGED)
        if changed:
            result[entry_id] = Freshness(CHANGED, changed)
        elif any(s == CURRENT for _, s in states):
            result[entry_id] = Freshness(CURRENT)
        else:
            result[entry_id] = NO_PATH
    return result
