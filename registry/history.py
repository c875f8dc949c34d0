"""Trunk history for lint, read in a handful of git calls (never one per file), each one git
process (registry.gitcall), as registry.trunkwalk reads it (D-195)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec

from registry.gitcall import branch_name
from registry.gitcall import read as _git

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")

FOLDERS = ("findings", "intake", "records", "retro")


class History(msgspec.Struct):
    available: bool
    why: str = ""
    trunk_ref: str = ""
    head_is_trunk: bool = False
    landed: set[str] = msgspec.field(default_factory=set)  # register files ever added on trunk
    base: dict[str, str] = msgspec.field(default_factory=dict)  # path -> text at the merge-base
    head: dict[str, str] = msgspec.field(default_factory=dict)  # path -> text at HEAD
    head_blobs: dict[str, str] = msgspec.field(default_factory=dict)  # path -> its object at HEAD
    commits: list[Commit] = msgspec.field(default_factory=list)  # merge-base..HEAD touching registers
    # path -> text on trunk's tip, for an entry HEAD adds that trunk gained since the merge-base: the
    # branch's version replaces trunk's when merged, so it is judged against trunk's (D-226)
    trunk: dict[str, str] = msgspec.field(default_factory=dict)
    # register files on trunk's tip that the merge-base lacks (the branch forked before they landed):
    # missing from the branch, they are still `tombstone-not-delete` (a rebase of the branch's own
    # commits, or a later merge, can delete them), named with the way out: merge trunk (D-234)
    gained: set[str] = msgspec.field(default_factory=set)


class Commit(msgspec.Struct):
    sha: str
    email: str
    message: str
    paths: list[str]
    blobs: dict[str, str] = msgspec.field(default_factory=dict)  # path -> the version it left (D-237)

    def authorized_by(self) -> list[str]:
        """The `Authorized-by:` trailers: lines of the message's last paragraph only (git's trailer
        block), never a line quoted in the body."""
        paragraphs = [p for p in self.message.strip().split("\n\n") if p.strip()]
        if len(paragraphs) < 2:
            return []
        return [
            line.split(":", 1)[1].strip()
            for line in paragraphs[-1].splitlines()
            if line.lower().startswith("authorized-by:")
        ]


def unavailable(why: str) -> History:
    return History(available=False, why=why)


class _GitFailed(Exception):
    """A git question with no answer: its exit status and what git said (its first line; the rest
    is advice), or what is missing."""

    def __init__(self, status: int, said: bytes | str) -> None:
        self.status = status
        text = said.decode("utf-8", errors="replace") if isinstance(said, bytes) else said
        lines = text.strip().splitlines()
        self.stderr = lines[0] if lines else ""
        super().__init__(self.stderr or f"exit {self.status}")


def _ask(root: Path, *args: str) -> str:
    """git's answer as text (its one trailing newline dropped); _GitFailed when git fails."""
    done = _git(root, *args)
    if done.returncode != 0:
        raise _GitFailed(done.returncode, done.stderr)
    text = done.stdout.decode("utf-8", errors="surrogateescape")
    return text[:-1] if text.endswith("\n") else text


def read_history(root: Path, trunk: str, share: Future[TrunkLog | None] | None = None) -> History:
    """What lint needs of trunk's history, or why it is unavailable: `root` must be the root of a
    repository's working tree (not a folder inside one, not a bare repository). `share` is given
    trunk's one history pass as soon as it is read (None when there is none), for design §26's
    walk to read instead of its own (D-221)."""
    try:
        return _history(root, trunk, share)
    finally:
        if share is not None and not share.done():
            share.set_result(None)


def _history(root: Path, trunk: str, share: Future[TrunkLog | None] | None) -> History:
    probe = _git(root, "rev-parse", "--is-bare-repository", "--show-prefix")
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", errors="replace").strip().splitlines()
        if said and "not a git repository" not in said[0] and "cannot change to" not in said[0]:
            return unavailable(f"git could not answer ({said[0]})")  # e.g. dubious ownership
        return unavailable(_not_a_repository(root))
    bare, _, prefix = probe.stdout.decode("utf-8", errors="surrogateescape").partition("\n")
    if prefix.strip():  # a folder inside a working tree, not its root
        return unavailable(_not_a_repository(root))
    try:
        if _ask(root, "rev-parse", "--is-shallow-repository").strip() == "true":
            return unavailable("the clone is shallow")
        trunk_ref = resolve_trunk(root, trunk)
        if trunk_ref is None:
            return unavailable(no_trunk_branch(trunk))
        if bare.strip() == "true":
            return unavailable("a bare repository (no working tree)")
        return _read(root, trunk_ref, share)
    except _GitFailed as exc:
        return unavailable(f"git could not answer ({exc.stderr or exc.status})")


def _not_a_repository(root: Path) -> str:
    """Why there is no history here; where the environment names another repository (a git hook's,
    a detached git folder's), that it is not followed (D-199)."""
    from registry.gitcall import ignored

    names = ignored()
    if not names:
        return "not a git repository"
    return (
        f"not a git repository ({', '.join(names)} in the environment not followed: regulator reads {root})"
    )


def _read(root: Path, trunk_ref: str, share: Future[TrunkLog | None] | None = None) -> History:
    head = _ask(root, "rev-parse", "HEAD").strip()
    trunk_sha = _ask(root, "rev-parse", trunk_ref).strip()
    base = head
    if head != trunk_sha:
        found = _git(root, "merge-base", "HEAD", trunk_ref)
        if found.returncode != 0:
            said = found.stderr
            if found.returncode == 1 and not said.strip():  # git says "none" by its status alone
                said = f"HEAD and {trunk_ref} share no commit".encode()
            raise _GitFailed(found.returncode, said)
        base = found.stdout.decode().strip()
    history = History(available=True, trunk_ref=trunk_ref, head_is_trunk=head == trunk_sha)
    # no pathspec: with one, git filters every commit's diff again and is several times slower on
    # folders of thousands of entries; the register folders are picked out here instead
    log = trunk_log(root, trunk_sha)
    if share is not None:
        share.set_result(log)
    history.landed = landed(log)
    history.base = _tree_texts(root, base)
    history.head = history.base if base == head else _tree_texts(root, head, history.head_blobs)
    if base != trunk_sha:  # a branch behind trunk: what trunk gained since it forked
        history.gained = _tree_paths(root, trunk_sha) - set(history.base)
    new = [path for path in history.head if path not in history.base]
    if new and trunk_sha != base:
        objects = cat_batch(root, [f"{trunk_sha}:{path}" for path in new])
        history.trunk = {
            path: text for path in new if (text := _utf8(objects.get(f"{trunk_sha}:{path}"))) is not None
        }
    if base != head:
        # each commit read from its own object, as --range reads them (read_range): the log lists
        # only shas and paths, NUL-separated; a separator inside a message cannot make a record.
        # -c: a merge touches an entry where its result matches none of its parents (an "evil
        # merge"), as under --range; --topo-order: newest first by ancestry, never by a date a
        # commit can claim (D-237)
        listed = _ask(
            root,
            "log",
            "--format=%x00C%H",
            "--raw",
            "-z",
            "-c",
            "--topo-order",
            "--no-abbrev",
            "--no-renames",
            f"{base}..{head}",
            "--",
            *FOLDERS,
        )
        changed = raw_log(listed)
        objects = cat_batch(root, [sha for sha, _ in changed])
        for sha, changes in changed:
            raw = objects.get(sha)
            if raw is None:
                raise _GitFailed(1, f"no commit {sha}")
            header, _, message = raw.partition(b"\n\n")
            author = AUTHOR.search(header)
            email = author.group(1).decode("utf-8", errors="replace") if author else ""
            history.commits.append(
                Commit(
                    sha,
                    email.strip(),
                    message.decode("utf-8", errors="replace"),
                    [c.path for c in changes],
                    {c.path: c.new for c in changes},
                )
            )
    return history


PART = 2000  # commits below which one git process reads the history alone


class TrunkLog(msgspec.Struct):
    """Every commit reachable from trunk's commit `tip`: sha -> (its parents, its changes against
    its first parent, a merge's too). One pass over trunk's history that lint's landed files and
    design §26's walk (registry.trunkwalk) both read, instead of one `git log` each (D-221)."""

    tip: str
    commits: dict[str, tuple[list[str], list[Change]]]


def trunk_log(root: Path, tip: str) -> TrunkLog:
    """Trunk's history up to the commit `tip`, read in parallel parts.

    Diffing every commit's tree is nearly all of lint's time on a long history; the commits
    reachable from trunk split exactly into those reachable from a midpoint and those after it,
    so each part runs in its own git process, one per core.
    """
    args = ["--no-renames", "--raw", "-z", "--no-abbrev", "--diff-merges=first-parent", "--format=%x00C%H %P"]
    count = int(_ask(root, "rev-list", "--count", tip).strip() or 0)
    parts = max(1, min(os.cpu_count() or 1, 4, count // PART))
    if parts == 1:
        ranges = [[tip]]
    else:
        # registers grow, so a newer commit's diff costs more (about its age in commits): the cuts
        # split that growing cost evenly, the newest part holding fewer commits
        skips = [count - round(count * math.sqrt(j / parts)) for j in range(parts - 1, 0, -1)]
        cuts = [_ask(root, "rev-list", f"--skip={skip}", "-n", "1", tip).strip() for skip in skips]
        # newest first: trunk minus the first cut, then between cuts, then the oldest from the last
        ranges = [[f"^{cuts[0]}", tip]]
        ranges += [[f"^{cuts[i + 1]}", cuts[i]] for i in range(len(cuts) - 1)]
        ranges += [[cuts[-1]]]

    def log(revisions: list[str]) -> str:
        done = _git(root, "log", *revisions, *args)
        if done.returncode != 0:
            raise _GitFailed(done.returncode, done.stderr)
        return done.stdout.decode("utf-8", errors="surrogateescape")

    if len(ranges) == 1:
        texts = [log(ranges[0])]
    else:
        from concurrent.futures import ThreadPoolExecutor  # not on every command's start (logging too)

        with ThreadPoolExecutor(len(ranges)) as pool:
            texts = list(pool.map(log, ranges))
    commits: dict[str, tuple[list[str], list[Change]]] = {}
    for text in texts:
        for header, changes in raw_log(text):
            sha, *parents = header.split()
            commits[sha] = (parents, changes)
    return TrunkLog(tip, commits)


def landed(log: TrunkLog) -> set[str]:
    """Every register file ever added on trunk: added by any commit trunk reaches, a merge's own
    additions (against its first parent) included. `git log --diff-filter=A`, read before D-221,
    shows no merge's diff, so a file a merge commit added itself (an "evil merge") was missed."""
    prefixes = tuple(f"{folder}/" for folder in FOLDERS)
    return {
        change.path
        for _, changes in log.commits.values()
        for change in changes
        if change.status.startswith("A") and change.path.startswith(prefixes) and change.path.endswith(".md")
    }


def cat_batch(root: Path, names: list[str]) -> dict[str, bytes | None]:
    """Each object (a sha, or `<rev>:<path>`) as bytes, None when missing: one git process."""
    if not names:
        return {}
    done = _git(root, "cat-file", "--batch", input="".join(f"{n}\n" for n in names).encode())
    if done.returncode != 0:
        return dict.fromkeys(names)
    data = done.stdout
    found: dict[str, bytes | None] = {}
    offset = 0
    for name in names:
        end = data.find(b"\n", offset)
        if end < 0:  # git stopped short: what it did not answer is missing
            found[name] = None
            continue
        header = data[offset:end].split()
        if len(header) != 3 or header[-1] == b"missing" or not header[2].isdigit():
            found[name] = None
            offset = end + 1
            continue
        size = int(header[2])
        start = end + 1
        found[name] = data[start : start + size]
        offset = start + size + 1
    return found


def resolve_trunk(root: Path, trunk: str) -> str | None:
    """refs/heads/<trunk>, else refs/remotes/origin/<trunk>, as it exists; None when neither, or
    when `trunk` is no branch name (registry.gitcall.branch_name)."""
    if not branch_name(trunk):
        return None
    for candidate in (f"refs/heads/{trunk}", f"refs/remotes/origin/{trunk}"):
        if _git(root, "rev-parse", "--verify", "--quiet", candidate).returncode == 0:
            return candidate
    return None


def trunk_commit(root: Path, trunk: str) -> tuple[str, str] | None:
    """(refs/heads/<trunk>, else refs/remotes/origin/<trunk>; the commit it names): the branch by
    its full name, never a tag named like it, which any worktree can make; None when neither
    names a commit, or `trunk` is no branch name."""
    if not branch_name(trunk):
        return None
    for candidate in (f"refs/heads/{trunk}", f"refs/remotes/origin/{trunk}"):
        done = _git(root, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
        sha = done.stdout.decode("utf-8", errors="replace").strip()
        if done.returncode == 0 and sha:
            return candidate, sha
    return None


def no_trunk_branch(trunk: str) -> str:
    """The words for a repository with neither trunk's branch nor origin's (every reader says it so),
    or for a trunk that is no branch name at all."""
    if not branch_name(trunk):
        return f"trunk {trunk!r} is no branch name (.regulator/trunk, regulator/config.yaml's trunk:, or --trunk)"
    return f"no trunk branch {trunk!r} (nor origin/{trunk})"


def how_to_read(why: str) -> str:
    """The next step where trunk's history cannot be read, by why (every command that says history
    is unavailable asks this: a missing trunk is not cured by a deeper checkout, D-229)."""
    if "shallow" in why:
        return "check out with full depth"
    if why.startswith("no trunk branch"):
        return (
            "name trunk's branch as this clone has it (--trunk main, never origin/main: origin's is "
            "read where there is no local branch), with full depth"
        )
    if "is no branch name" in why:
        return "name trunk by its branch's name (--trunk main)"
    return "check out with full depth, in a git repository"


def no_trunk(root: Path, trunk: str) -> str:
    """Why `trunk_commit` found no trunk, in words: git could not be run at all (no git on PATH),
    or neither branch names a commit."""
    done = _git(root, "--version")
    if done.returncode == 127:  # registry.gitcall's answer when git cannot be started
        said = done.stderr.decode("utf-8", errors="replace").strip()
        return f"git could not be run ({said})"
    return no_trunk_branch(trunk)


ZERO = "0" * 40


def trunk_holds(
    root: Path, trunk: str, paths: list[str], parse: Callable[[str, str], T | None]
) -> dict[str, tuple[str, T]]:
    """For each path, (commit, parse(path, text)) of its newest version on trunk that parses.

    Versions are walked along trunk's first-parent line, newest first, in one `git log` over just
    these paths and one `cat-file --batch`: never one call per file. `parse(path, text)` answers
    None for a version that is no valid entry. A path with no such version is left out. In a
    shallow clone only the versions it holds are seen.
    """
    if not paths:
        return {}
    ref = resolve_trunk(root, trunk)
    if ref is None:
        return {}
    done = _git(
        root,
        "log",
        ref,
        "--first-parent",
        "--diff-merges=first-parent",
        "--format=%x00C%H",
        "--raw",
        "-z",
        "--no-abbrev",
        "--no-renames",
        "--",
        *(f":(literal){path}" for path in paths),  # a file name is never a glob
    )
    if done.returncode != 0:
        return {}
    wanted = set(paths)
    versions: dict[str, list[tuple[str, str]]] = {}  # path -> [(commit, blob)], newest first
    for commit, changes in raw_log(done.stdout.decode("utf-8", errors="surrogateescape")):
        for change in changes:
            if change.path in wanted and change.new != ZERO:
                versions.setdefault(change.path, []).append((commit, change.new))
    blobs = cat_batch(root, sorted({blob for listed in versions.values() for _, blob in listed}))
    holds: dict[str, tuple[str, T]] = {}
    for path, listed in versions.items():
        for commit, blob in listed:
            data = blobs.get(blob)
            if data is None:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            parsed = parse(path, text)
            if parsed is not None:
                holds[path] = (commit, parsed)
                break
    return holds


class Change(msgspec.Struct):
    path: str
    status: str
    parents: list[str]  # the path's blob in each parent (ZERO: absent)
    new: str  # its blob in the commit (ZERO: absent)


def raw_log(out: str) -> list[tuple[str, list[Change]]]:
    """`git log --format=%x00C%H... --raw -z [-c]` as (commit header, changes), in log order."""
    commits: list[tuple[str, list[Change]]] = []
    tokens = out.split("\0")
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip("\n")
        i += 1
        if not token:
            continue
        if token.startswith("C"):
            commits.append((token[1:], []))
        elif token.startswith(":") and commits and i < len(tokens):
            path = tokens[i]
            i += 1
            colons = len(token) - len(token.lstrip(":"))
            fields = token[colons:].split()
            shas = fields[colons + 1 : 2 * colons + 2]
            commits[-1][1].append(Change(path, fields[-1], shas[:-1], shas[-1]))
    return commits


class RangeCommit(msgspec.Struct):
    sha: str
    parents: list[str]
    email: str
    message: str
    changes: list[Change]  # register entries only

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes]

    def authorized_by(self) -> list[str]:
        return Commit(self.sha, self.email, self.message, []).authorized_by()


class RangeHistory(msgspec.Struct):
    available: bool
    why: str = ""
    spec: str = ""
    commits: list[RangeCommit] = msgspec.field(default_factory=list)  # oldest first
    blobs: dict[str, str | None] = msgspec.field(default_factory=dict)  # blob sha -> text (None: not UTF-8)
    policy: bytes | None = None  # regulator/policy/interaction.yaml at A (None: absent)


class RangeError(ValueError):
    """--range names no range of this repository: bad input."""


AUTHOR = re.compile(rb"^author .*<([^<>]*)> \d+ [+-]\d{4}$", re.MULTILINE)
INTERACTION = "regulator/policy/interaction.yaml"


def _entry_path(path: str) -> bool:
    folder, _, name = path.partition("/")
    return folder in FOLDERS and name.endswith(".md") and "/" not in name


def read_range(root: Path, spec: str) -> RangeHistory:
    """Every commit of `A..B` (a push: A before, B after) with its register changes, the blobs
    on either side of each, the commits' messages and author addresses, and the interaction
    policy at A. Five git calls whatever the range's length."""
    before, sep, after = spec.partition("..")
    if not sep or not before or not after or after.startswith(".") or "-" in (before[:1], after[:1]):
        raise RangeError(f"--range {spec!r}: expected A..B, two commits (a push's before and after)")
    check = _git(root, "rev-parse", "--is-shallow-repository")
    if check.returncode != 0:
        return RangeHistory(available=False, why="not a git repository", spec=spec)
    if check.stdout.decode().strip() == "true":
        return RangeHistory(available=False, why="the clone is shallow", spec=spec)
    shas = []
    for rev in (before, after):
        done = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if done.returncode != 0:
            hint = (
                " (a push that creates the branch has no commit before it: run lint without --range)"
                if rev == before and rev.strip("0") == ""
                else ""
            )
            raise RangeError(f"--range {spec!r}: {rev!r} is not a commit in this repository{hint}")
        shas.append(done.stdout.decode().strip())
    a, b = shas
    if _git(root, "merge-base", "--is-ancestor", a, b).returncode != 0:
        raise RangeError(
            f"--range {spec!r}: {before} is not an ancestor of {after}: trunk's history was rewritten "
            "(a force push); what it removed is not checked, so this fails"
        )
    done = _git(
        root,
        "log",
        "--reverse",
        "--format=%x00C%H %P",
        "--raw",
        "-z",
        "-c",
        "--no-abbrev",
        "--no-renames",
        f"{a}..{b}",
    )
    if done.returncode != 0:
        return RangeHistory(available=False, why="git could not list the range", spec=spec)
    commits = []
    blobs: set[str] = set()
    for header, changes in raw_log(done.stdout.decode("utf-8", errors="surrogateescape")):
        sha, *parents = header.split()
        mine = [c for c in changes if _entry_path(c.path)]
        for change in mine:
            blobs.update(x for x in (*change.parents, change.new) if x != ZERO)
        commits.append(RangeCommit(sha, parents, "", "", mine))
    policy_name = f"{a}:{INTERACTION}"
    objects = cat_batch(root, [c.sha for c in commits] + sorted(blobs) + [policy_name])
    for commit in commits:
        raw = objects.get(commit.sha) or b""
        head, _, message = raw.partition(b"\n\n")
        author = AUTHOR.search(head)
        commit.email = author.group(1).decode("utf-8", errors="replace") if author else ""
        commit.message = message.decode("utf-8", errors="replace")
    history = RangeHistory(available=True, spec=spec, commits=commits)
    history.blobs = {sha: _utf8(objects.get(sha)) for sha in blobs}
    history.policy = objects.get(policy_name)
    return history


def _utf8(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _tree_paths(root: Path, rev: str) -> set[str]:
    """Every register file at `rev` (one ls-tree, no contents)."""
    listing = _ask(root, "ls-tree", "-r", "-z", "--name-only", rev, "--", *FOLDERS)
    return {path for path in listing.split("\0") if path.endswith(".md")}


def _tree_texts(root: Path, rev: str, blobs: dict[str, str] | None = None) -> dict[str, str]:
    """Every register file's text at `rev`: one ls-tree and one cat-file batch (`blobs`, where
    given, gets each one's object name)."""
    listing = _ask(root, "ls-tree", "-r", "-z", rev, "--", *FOLDERS)
    blobs = {} if blobs is None else blobs
    for item in listing.split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        if path.endswith(".md"):
            blobs[path] = meta.split()[2]
    if not blobs:
        return {}
    objects = cat_batch(root, sorted(set(blobs.values())))
    texts: dict[str, str] = {}
    for path, sha in blobs.items():
        data = objects.get(sha)
        if data is None:  # an object the repository does not hold (nothing is fetched: D-199)
            raise _GitFailed(1, f"no object {sha} ({path} at {rev})")
        texts[path] = data.decode("utf-8", errors="replace")
    return texts
