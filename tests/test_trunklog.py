"""Trunk's one history pass (registry.history.trunk_log, D-221): lint's landed files and design
§26's walk read it instead of a `git log` each. A property test over real git histories (side
branches, merges that bring or resolve a finding, squashes, deletions, a baseline) proves the
pass gives exactly what each read alone gives: the files `git log --diff-filter=A` lists, and the
walk of trunk's first-parent line, split into parts or not."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry import history
from registry.gitcall import read as git_read
from registry.trunkwalk import walk_at
from tests.helpers import clean_env

UNITS = ("u1", "u2")
FILES = ("findings/F-a.md", "findings/F-b.md", "intake/I-a.md", "records/R-a.md", "notes/n.md")


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(clean_env(), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=env, check=check)


def _text(path: str, affects: frozenset[str], resolved: bool) -> str:
    name = path.rsplit("/", 1)[-1].removesuffix(".md")
    if not path.startswith("findings/"):
        return f"{name} {sorted(affects)} {resolved}\n"
    return (
        f"---\nid: {name}\ndate: '2026-11-01'\ntitle: a finding\naffects: [{', '.join(sorted(affects))}]\n"
        f"ack: ''\nresolved: {'true' if resolved else 'false'}\n---\nbody\n"
    )


def _authorize(sha: str, email: str, message: str) -> tuple[str | None, str]:
    if "\n\nAuthorized-by: alice" in message:
        return "alice", "authorized (claimed) by alice"
    return None, "no Authorized-by trailer"


def _trailer(by: bool) -> str:
    return "\n\nAuthorized-by: alice" if by else ""


edits = st.lists(
    st.one_of(
        st.tuples(
            st.just("edit"),
            st.sampled_from(FILES),
            st.frozensets(st.sampled_from(UNITS)),
            st.booleans(),  # resolved
            st.booleans(),  # authorized
        ),
        st.tuples(st.just("delete"), st.sampled_from(FILES), st.booleans()),
    ),
    max_size=3,
)
rounds = st.lists(  # each: trunk's own commits, a side branch's from the same point, how it comes back
    st.tuples(
        st.booleans(),  # a baseline commit first
        edits,  # on trunk
        edits,  # on a side branch from the round's start
        st.sampled_from(["no-ff", "squash", "evil", "dropped"]),
        st.booleans(),  # the merge or squash authorized
    ),
    min_size=1,
    max_size=4,
)


def _commit(root: Path, step: tuple[Any, ...]) -> None:
    if step[0] == "edit":
        _, path, affects, resolved, by = step
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(_text(path, affects, resolved))
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "--allow-empty", "-m", f"edit {path}{_trailer(by)}")
    elif (root / step[1]).exists():
        _git(root, "rm", "-q", step[1])
        _git(root, "commit", "-q", "-m", f"delete {step[1]}{_trailer(step[2])}")


def _build(root: Path, plan: list[tuple[Any, ...]]) -> None:
    _git(root, "init", "-q", "-b", "main")
    (root / FILES[0]).parent.mkdir(parents=True)
    (root / FILES[0]).write_text(_text(FILES[0], frozenset(UNITS), False))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "file F-a")
    for number, (baseline, on_trunk, on_side, how, by) in enumerate(plan):
        if baseline:
            _git(root, "commit", "-q", "--allow-empty", "-m", "init\n\nRegulator-Decision: baseline")
        _git(root, "checkout", "-q", "-B", "side")
        for step in on_side:
            _commit(root, step)
        _git(root, "checkout", "-q", "main")
        for step in on_trunk:
            _commit(root, step)
        merge = ["merge", "-q", "--no-ff", "-X", "theirs"]
        if how == "no-ff":
            done = _git(root, *merge, "-m", f"merge{_trailer(by)}", "side", check=False)
        elif how == "evil":  # the merge commit adds a file of its own, in no commit of either side
            done = _git(root, *merge, "--no-commit", "side", check=False)
            merging = _git(root, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).returncode == 0
            if done.returncode == 0 and merging:  # not "already up to date"
                (root / "intake").mkdir(exist_ok=True)
                (root / "intake" / f"I-evil-{number}.md").write_text("evil\n")
                _git(root, "add", "-A")
                _git(root, "commit", "-q", "-m", f"merge{_trailer(by)}")
        elif how == "squash":
            done = _git(root, "merge", "-q", "--squash", "-X", "theirs", "side", check=False)
            if done.returncode == 0:
                _git(root, "commit", "-q", "--allow-empty", "-m", f"squash{_trailer(by)}")
        if how != "dropped" and done.returncode != 0:  # a conflict -X theirs cannot settle
            _git(root, "merge", "--abort", check=False)
            _git(root, "reset", "-q", "--hard", "HEAD")
        _git(root, "branch", "-q", "-D", "side")


def _added_alone(root: Path, tip: str, *merges: str) -> set[str]:
    """The files lint took as landed before D-221: its own `git log --diff-filter=A` (with
    `merges`, the additions of merge commits against their first parent, which it missed)."""
    args = ["--diff-filter=A", "--no-renames", "--name-only", "-z", "--format="]
    done = git_read(root, "log", tip, *merges, *args)
    assert done.returncode == 0
    prefixes = tuple(f"{folder}/" for folder in history.FOLDERS)
    return {
        path
        for p in done.stdout.decode().split("\0")
        if (path := p.strip("\n")).startswith(prefixes) and path.endswith(".md")
    }


@contextmanager
def _parts_of(part: int) -> Iterator[None]:
    kept = history.PART
    history.PART = part
    try:
        yield
    finally:
        history.PART = kept


@pytest.mark.parametrize("part", [history.PART, 2])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=rounds)
def test_the_shared_pass_gives_what_each_read_alone_gives(part: int, plan: list[tuple[Any, ...]]) -> None:
    """With the pass in one git process or split into parts (`PART` small), the landed files are
    `git log --diff-filter=A`'s and the walk that follows the pass is the walk that runs its own log."""
    with tempfile.TemporaryDirectory() as tmp, _parts_of(part):
        root = Path(tmp)
        _build(root, plan)
        tip = _git(root, "rev-parse", "main").stdout.strip()
        log = history.trunk_log(root, tip)
        merges = _added_alone(root, tip, "--merges", "--diff-merges=first-parent")
        assert history.landed(log) == _added_alone(root, tip) | merges
        alone = walk_at(root, tip, _authorize)
        assert alone.available
        assert walk_at(root, tip, _authorize, lambda: log) == alone
        # a pass of another commit is never followed: the walk reads its own
        other = history.TrunkLog(tip="0" * 40, commits={})
        assert walk_at(root, tip, _authorize, lambda: other) == alone


def test_a_pass_that_does_not_reach_the_baseline_is_not_followed(tmp_path: Path) -> None:
    """A pass missing a commit of the first-parent line (as a damaged or partial read would be)
    leaves the walk to its own log: never a walk that skipped the changes it could not see."""
    _build(
        tmp_path,
        [(True, [("edit", "findings/F-a.md", frozenset({"u1"}), True, False)], [], "dropped", False)],
    )
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "after")
    tip = _git(tmp_path, "rev-parse", "main").stdout.strip()
    log = history.trunk_log(tmp_path, tip)
    alone = walk_at(tmp_path, tip, _authorize)
    assert alone.holds == {"findings/F-a.md": frozenset(UNITS)}  # the unauthorized resolve lifts nothing
    partial = history.TrunkLog(tip=tip, commits={tip: log.commits[tip]})
    assert walk_at(tmp_path, tip, _authorize, lambda: partial) == alone
