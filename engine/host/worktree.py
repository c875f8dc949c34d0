"""A unit's git worktree (design §23): made detached at trunk without the repository's hooks or
filters, `.worktrees/` kept out of git, and how far behind trunk a worktree kept from an earlier run
is (a fix committed on trunk after a failed run is not in it)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.base.errors import BadInput, RegulatorError
from engine.checkout.workspace import Workspace
from identity import regular
from registry.gitcall import git_text

WORKTREES = ".worktrees"  # at the workspace's root, ignored by git


def make_worktree(ws: Workspace, worktree: Path) -> bool:
    """A git worktree of the workspace, detached at trunk, where none is; True when made here."""
    from engine.checkout.gitconfig import trunk_of
    from registry.history import no_trunk, trunk_commit

    if worktree.exists():
        return False
    _exclude(ws, worktree)
    worktree.parent.mkdir(parents=True, exist_ok=True)
    trunk = trunk_of(ws)
    # trunk's branch by its full name, to its commit before anything is made (a tag named like the
    # trunk, which any worktree can make, would stand in for it)
    found = trunk_commit(ws.root, trunk)
    if found is None:
        raise BadInput(f"cannot make the unit's worktree: {no_trunk(ws.root, trunk)}")
    sha = found[1]
    # the person's process: none of the repository's code runs (no post-checkout hook, no smudge
    # filter: a unit can write .git, which its worktree shares; registry.gitcall, D-199). The files
    # are checked out in the new worktree itself, whose filters are emptied as git sees them there
    # (an `includeIf gitdir:` in .git/config applies in the worktree's git folder only), at that
    # commit and into that folder whatever its git folder says by then
    done = git_text(ws.root, "worktree", "add", "--no-checkout", "--detach", str(worktree), sha, timeout=120)
    if done.returncode == 0:
        filled = git_text(
            worktree,
            f"--work-tree={worktree}",
            "reset",
            "--hard",
            "-q",
            "--no-recurse-submodules",
            sha,
            timeout=120,
        )
        if filled.returncode != 0:
            git_text(ws.root, "worktree", "remove", "--force", "--force", str(worktree), timeout=120)
            done = filled
    if done.returncode == 0:  # the host's alone at the top, whatever the umask (check_owner)
        os.chmod(worktree, stat.S_IMODE(os.stat(worktree).st_mode) & ~0o022)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["git worktree add failed"])[-1]
        raise BadInput(
            f"cannot make the unit's worktree {worktree} at {trunk} ({last}); it is made without the "
            "repository's hooks and filters (docs/units.md)"
        )
    return True


def _exclude(ws: Workspace, path: Path) -> None:
    """`.worktrees/` ignored by git (in the repository's info/exclude: nothing to commit)."""
    if ws.root / WORKTREES not in (path, *path.parents):
        return
    done = git_text(ws.root, "rev-parse", "--git-path", "info/exclude", timeout=10, filters=False)
    if done.returncode != 0:
        return
    exclude = Path(done.stdout.strip())
    if not exclude.is_absolute():
        exclude = ws.root / exclude
    line = f"/{WORKTREES}/"
    try:  # replaced, never written through: a unit can make info/exclude a link to a file of the person's
        present = regular.read_text(exclude).splitlines() if exclude.exists() else []
        if line not in present:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            regular.replace_text(exclude, "".join(f"{p}\n" for p in [*present, line]), exclude.parent.parent)
    except (OSError, RegulatorError):
        pass


def behind_trunk(ws: Workspace, worktree: Path) -> str | None:
    """What to say of a worktree kept from an earlier run whose commit trunk has moved past, or None
    (not behind, or git cannot say). An operator's review: after a failed run and a `repair`
    decision, the fix committed on trunk never ran, since `unit run` reuses the kept worktree as it
    stands. Read from the workspace's own repository (`git worktree list`), never by running git in
    the folder a unit has held."""
    from engine.checkout.gitconfig import trunk_of
    from registry.history import trunk_commit

    trunk = trunk_of(ws)
    found = trunk_commit(ws.root, trunk)
    listed = git_text(ws.root, "worktree", "list", "--porcelain", "-z", timeout=30)
    if found is None or listed.returncode != 0:
        return None
    head = None
    for record in listed.stdout.split("\0\0"):
        fields = dict(f.split(" ", 1) for f in record.split("\0") if " " in f)
        if fields.get("worktree") and Path(fields["worktree"]).resolve() == worktree.resolve():
            head = fields.get("HEAD")
    if head is None or head == found[1]:
        return None
    counted = git_text(ws.root, "rev-list", "--count", f"{head}..{found[1]}", timeout=30)
    if counted.returncode != 0 or not counted.stdout.strip().isdigit() or int(counted.stdout) == 0:
        return None
    ahead = int(counted.stdout)
    return (
        f"{worktree} is kept from an earlier run, at {head[:12]}: trunk ({trunk}) has {ahead} commit(s) "
        f"it does not, and this run does not see them (a fix committed since is not in it); "
        f"`git -C {worktree} merge {trunk}` brings them in, or `git worktree remove {worktree}` "
        "before the run makes a fresh one at trunk"
    )
