"""The finding the trunk-holds attacks file (tests/hardening/test_trunk_*.py and the register edits'):
its path and text, a refusal's one line with the stores unchanged, and the histories that try to
hide a hold from trunk's line. The fixture that files it on trunk (`filed`) is in conftest.py."""

from __future__ import annotations

from tests.helpers import Workspace, one_line

FINDING = "findings/F-x.md"
HEAD = "---\nid: F-x\ndate: '2026-11-01'\ntitle: the alerter is dead\n"


def finding(affects: str = "[u1]", resolved: str = "false", ack: str = "''", body: str = "body\n") -> str:
    return f"{HEAD}affects: {affects}\nack: {ack}\nresolved: {resolved}\n---\n{body}"


def refused(ws: Workspace, *args: str) -> str:
    """The command exits 3 with one line and no traceback, and writes nothing to any store."""
    before = ws.digest()
    done = ws.run(*args)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert ws.digest() == before
    return one_line(done)


EDITS = {
    "resolved": finding(resolved="true"),
    "resolved-with-a-no-break-space": finding(resolved="true\u00a0"),
    "affects-nothing": finding(affects="[]"),
    "a-lookalike-unit-id": finding(affects="[u\u04301]"),  # Cyrillic a: not u1
}


def seen_by_the_host(ws: Workspace) -> None:
    """A write under the decide lock (b1's dispatch, which no finding holds) walks trunk and keeps
    the walk (engine.read.trunkcache): the host has seen what trunk holds now."""
    ws.run("unit", "dispatch", "b1", check=True)
    assert (ws.root / ".regulator" / "trunk.walk").is_file()


def side_resolved_one_step_behind(ws: Workspace) -> None:
    """Adversarial review of D-228: `side` is trunk plus an unsigned resolve; a branch forked before
    F-x landed merges `side` (second); its content, not trunk's old tip, is the merged parent."""
    ws.git("checkout", "-q", "-b", "side")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve (no trailer)", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "-b", "unit/u1-rev", "main~1")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "side")


def orphan_baseline(ws: Workspace) -> None:
    """An orphan root, then trunk merged in second with F-x resolved, the merge carrying init's
    baseline trailer: the walk's baseline (the oldest such commit on the first-parent line) moved."""
    ws.git("checkout", "-q", "--orphan", "unit/u1-evil")
    ws.git("rm", "-rq", "--cached", ".")
    ws.commit("start", email="u1@units.invalid", sign=False)
    ws.git("merge", "-q", "--no-commit", "--allow-unrelated-histories", "-s", "ours", "main")
    ws.git("read-tree", "-u", "--reset", "main")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("merge main\n\nRegulator-Decision: baseline", email="u1@units.invalid", sign=False)


def graft(ws: Workspace) -> None:
    """An orphan commit of trunk's tree with F-x resolved, grafted onto trunk by a replace ref:
    git's merge honours it (a fast-forward), regulator reads the objects as stored (a lone root)."""
    ws.git("checkout", "-q", "--orphan", "unit/u1-graft")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("fresh start", email="u1@units.invalid", sign=False)
    ws.git("replace", "--graft", "unit/u1-graft", "main")
