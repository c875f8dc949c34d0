"""Trunk as it stood at a moment (RETRO, design §19): the last commit before a time, the register
and contract files in its tree, and what ever landed on trunk up to it. A few git calls each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from registry.gitcall import read as _git
from registry.history import FOLDERS, cat_batch, no_trunk_branch, resolve_trunk


def commit_before(root: Path, trunk: str, until: datetime) -> tuple[str | None, str]:
    """(sha, "") of the last commit on trunk's first-parent line committed before `until`, or
    (None, why) when there is none or trunk history cannot be read."""
    ref = resolve_trunk(root, trunk)
    if ref is None:
        return None, no_trunk_branch(trunk)
    shallow = _git(root, "rev-parse", "--is-shallow-repository")
    if shallow.returncode != 0 or shallow.stdout.strip() == b"true":
        return None, "the clone is shallow"
    # git's --before is inclusive and counts whole seconds: the period ends before `until`
    before = (until.astimezone(UTC) - timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S +0000")
    done = _git(root, "rev-list", "-1", "--first-parent", f"--before={before}", ref)
    if done.returncode != 0:
        return None, "git could not read trunk history"
    sha = done.stdout.decode().strip()
    return (sha, "") if sha else (None, "")


def files_at(root: Path, sha: str, folders: tuple[str, ...]) -> dict[str, bytes]:
    """path -> bytes of every file under `folders` in the commit's tree (one ls-tree, one batch)."""
    done = _git(root, "ls-tree", "-r", "-z", "--name-only", sha, "--", *folders)
    if done.returncode != 0:
        return {}
    paths = [p.decode("utf-8", "replace") for p in done.stdout.split(b"\0") if p]
    blobs = cat_batch(root, [f"{sha}:{p}" for p in paths])
    return {p: blob for p in paths if (blob := blobs.get(f"{sha}:{p}")) is not None}


def landed_by(root: Path, sha: str) -> set[str]:
    """Every register entry ever added in the history reaching `sha`."""
    done = _git(
        root, "log", "--format=", "--name-only", "--diff-filter=A", "--no-renames", sha, "--", *FOLDERS
    )
    if done.returncode != 0:
        return set()
    names = done.stdout.decode("utf-8", "replace").splitlines()
    return {n for n in names if n.endswith(".md") and "/" in n and n.split("/", 1)[0] in FOLDERS}
