"""Trunk history for lint, read in a handful of git calls (never one per file), via GitPython.

GitPython is imported here only: importing it runs `git version`, which the rest of the CLI
should not pay for.
"""

from __future__ import annotations

import math
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

FOLDERS = ("findings", "intake", "records")


@dataclass
class History:
    available: bool
    why: str = ""
    trunk_ref: str = ""
    head_is_trunk: bool = False
    landed: set[str] = field(default_factory=set)  # register files ever added on trunk
    base: dict[str, str] = field(default_factory=dict)  # path -> text at the merge-base
    head: dict[str, str] = field(default_factory=dict)  # path -> text at HEAD
    commits: list[Commit] = field(default_factory=list)  # merge-base..HEAD touching registers


@dataclass
class Commit:
    sha: str
    email: str
    message: str
    paths: list[str]

    def authorized_by(self) -> list[str]:
        names = []
        for line in self.message.splitlines():
            if line.lower().startswith("authorized-by:"):
                names.append(line.split(":", 1)[1].strip())
        return names


def unavailable(why: str) -> History:
    return History(available=False, why=why)


def read_history(root: Path, trunk: str) -> History:
    try:
        import git  # GitPython
    except ImportError:  # pragma: no cover
        return unavailable("GitPython is not installed")
    try:
        repo = git.Repo(root, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return unavailable("not a git repository")
    g = repo.git
    try:
        if g.rev_parse("--is-shallow-repository").strip() == "true":
            return unavailable("the clone is shallow")
        trunk_ref = None
        for candidate in (f"refs/heads/{trunk}", f"refs/remotes/origin/{trunk}"):
            try:
                g.rev_parse("--verify", "--quiet", candidate)
                trunk_ref = candidate
                break
            except git.GitCommandError:
                continue
        if trunk_ref is None:
            return unavailable(f"no trunk branch {trunk!r} (nor origin/{trunk})")
        head = g.rev_parse("HEAD").strip()
        trunk_sha = g.rev_parse(trunk_ref).strip()
        base = g.merge_base("HEAD", trunk_ref).strip() if head != trunk_sha else head
    except git.GitCommandError as exc:
        return unavailable(f"git could not answer ({exc.stderr.strip() or exc.status})")
    history = History(available=True, trunk_ref=trunk_ref, head_is_trunk=head == trunk_sha)
    # no pathspec: with one, git filters every commit's diff again and is several times slower on
    # folders of thousands of entries; the register folders are picked out here instead
    added = _added_on(Path(repo.working_tree_dir), g, trunk_ref)
    prefixes = tuple(f"{folder}/" for folder in FOLDERS)
    history.landed = {
        path
        for p in added.split("\0")
        if (path := p.strip("\n")).startswith(prefixes) and path.endswith(".md")
    }
    history.base = _tree_texts(repo, base)
    history.head = history.base if base == head else _tree_texts(repo, head)
    if base != head:
        raw = g.log(
            f"{base}..{head}",
            "--format=%x1e%H%x1f%ae%x1f%B%x1f",
            "--name-only",
            "--no-renames",
            "--",
            *FOLDERS,
        )
        for chunk in raw.split("\x1e"):
            if not chunk.strip():
                continue
            sha, email, message, names = chunk.split("\x1f", 3)
            history.commits.append(
                Commit(sha, email.strip(), message, [n for n in names.split("\n") if n.strip()])
            )
    return history


PART = 2000  # commits below which one git process reads the history alone


def _added_on(root: Path, g, trunk_ref: str) -> str:
    """Every path ever added on trunk (NUL-separated), reading the history in parallel parts.

    Diffing every commit's tree is nearly all of lint's time on a long history; the commits
    reachable from trunk split exactly into those reachable from a midpoint and those after it,
    so each part runs in its own git process, one per core.
    """
    args = ["--diff-filter=A", "--no-renames", "--name-only", "-z", "--format="]
    count = int(g.rev_list("--count", trunk_ref).strip() or 0)
    parts = max(1, min(os.cpu_count() or 1, 4, count // PART))
    if parts == 1:
        return g.log(trunk_ref, *args)
    # registers grow, so a newer commit's diff costs more (about its age in commits): the cuts
    # split that growing cost evenly, the newest part holding fewer commits
    skips = [count - round(count * math.sqrt(j / parts)) for j in range(parts - 1, 0, -1)]
    cuts = [g.rev_list(f"--skip={skip}", "-n", "1", trunk_ref).strip() for skip in skips]
    # newest first: trunk minus the first cut, then between cuts, then the oldest from the last
    ranges = [[f"^{cuts[0]}", trunk_ref]]
    ranges += [[f"^{cuts[i + 1]}", cuts[i]] for i in range(len(cuts) - 1)]
    ranges += [[cuts[-1]]]

    def log(revisions: list[str]) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), "log", *revisions, *args], capture_output=True, check=True
        )
        return done.stdout.decode("utf-8", errors="surrogateescape")

    with ThreadPoolExecutor(len(ranges)) as pool:
        return "\0".join(pool.map(log, ranges))


def _tree_texts(repo, rev: str) -> dict[str, str]:
    """Every register file's text at `rev`: one ls-tree and one cat-file batch."""
    listing = repo.git.ls_tree("-r", "-z", rev, "--", *FOLDERS)
    blobs: dict[str, str] = {}
    for item in listing.split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        if path.endswith(".md"):
            blobs[path] = meta.split()[2]
    if not blobs:
        return {}
    order = list(blobs.items())
    request = "".join(f"{sha}\n" for _, sha in order).encode()
    done = subprocess.run(
        ["git", "-C", str(repo.working_tree_dir), "cat-file", "--batch"],
        input=request,
        capture_output=True,
        check=True,
    )
    data = done.stdout
    texts: dict[str, str] = {}
    offset = 0
    for path, _ in order:
        end = data.index(b"\n", offset)
        header = data[offset:end].split()
        size = int(header[2])
        start = end + 1
        texts[path] = data[start : start + size].decode("utf-8", errors="replace")
        offset = start + size + 1
    return texts
