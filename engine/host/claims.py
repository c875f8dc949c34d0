"""A unit's commits that claim a person's authority (D-274): what `unit run` names when its child ends."""

from __future__ import annotations

from pathlib import Path

from engine.checkout.workspace import Workspace

# the trailers a person's authorization or decision carries (registry.lint, engine.trust.idhistory):
# a unit that writes one claims a person's authority, which a person's signature over the commit (a
# cherry-pick or rebase with signing on) would make real (an adversarial review)
CLAIMS = ("authorized-by:", "regulator-decision:", "regulator-decided-by:")
MAX_NAMED = 10  # commits named in the warning; the rest counted
MAX_READ = 1000  # the unit's newest commits read (a run makes a few)


def claiming(ws: Workspace, worktree: Path) -> list[str]:
    """`SHA (TRAILER)` for each commit the unit's worktree holds that trunk does not and whose
    message carries a person's trailer; [] when there is none or git cannot say. Each commit is
    read as git stores it, by its length (no separator a message could hold)."""
    from engine.checkout.gitconfig import trunk_of
    from registry.gitcall import git_text
    from registry.history import cat_batch, resolve_trunk

    ref = resolve_trunk(ws.root, trunk_of(ws))
    if ref is None:
        return []
    listed = git_text(
        worktree, "rev-list", f"--max-count={MAX_READ}", "HEAD", "--not", ref, filters=False, timeout=60
    )
    if listed.returncode != 0:
        return []
    shas = [line for line in listed.stdout.split() if line]
    found = []
    for sha, raw in cat_batch(worktree, shas).items():
        body = (raw or b"").partition(b"\n\n")[2].decode("utf-8", "replace")
        named = sorted(
            {line.split(":", 1)[0] for line in body.splitlines() if line.strip().lower().startswith(CLAIMS)}
        )
        if named:
            found.append(f"{sha[:10]} ({', '.join(named)})")
    return found


def warning(unit: str, found: list[str]) -> str:
    shown = ", ".join(found[:MAX_NAMED]) + (
        f" and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
    )
    return (
        f"warning: {unit}'s commits claim a person's authority: {shown}. A unit cannot authorize; "
        "take its work to trunk with `git merge --no-ff` and a message of your own, never by a "
        "cherry-pick, rebase or amend with your signing on (your signature would make the claim yours)"
    )
