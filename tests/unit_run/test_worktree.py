"""A unit's worktree kept from an earlier run (design §23): `unit run` says when trunk has moved past
it, so a fix committed after a failed run is not taken for one that ran."""

from __future__ import annotations

from typing import Any

from tests.unit_run.common import run_unit


def test_a_kept_worktree_behind_trunk_is_said_before_the_run(served: Any) -> None:
    """An operator's review: after a failed run and a `repair` decision, the fixed script committed
    on trunk never ran (the worktree is kept across runs) and nothing said so; the second run
    failed the same way. The run still takes the kept worktree as it stands (the unit's own work
    may be in it), and says first that trunk has commits it does not, and how to bring them."""
    ws, _ = served
    worktree = ws.root / ".worktrees" / "r1"
    ws.write("agents/flaky.sh", "#!/bin/sh\necho boom >&2\nexit 4\n").chmod(0o755)
    ws.commit("the agent", sign=False)
    first = run_unit(ws, "r1", "--", "./agents/flaky.sh")
    assert first.returncode == 1 and "boom" in first.stderr, first.stderr
    assert "kept from an earlier run" not in first.stderr  # made at trunk by this run
    ws.run("unit", "decide", "r1", "--action", "repair", "--by", "alice", "--rationale", "fix it", check=True)
    ws.write("agents/flaky.sh", "#!/bin/sh\necho fixed >&2\n").chmod(0o755)
    ws.commit("the agent, fixed", sign=False)
    second = run_unit(ws, "r1", "--", "./agents/flaky.sh")
    warning = next(line for line in second.stderr.splitlines() if "kept from an earlier run" in line)
    assert warning.startswith(f"regulator: warning: {worktree} is kept from an earlier run, at "), warning
    assert "trunk (main) has 1 commit(s) it does not" in warning
    assert f"`git -C {worktree} merge main` brings them in" in warning
    assert "boom" in second.stderr and "fixed" not in second.stderr  # the kept worktree ran, as said
