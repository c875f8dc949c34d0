"""Holds judged from trunk through merges and hidden histories (design §26, issue 28): a signed
decision counts where it was merged, an unauthorized side lifts nothing, a later decision decides
afresh, a reopen by a merge is a decision, a person's older signature decides nothing trunk decided
since, and a history that hides a hold from trunk's line (a side one step behind, an orphan
baseline, a graft, trunk deleted or made shallow) lifts nothing the host saw. Real git, real
signatures (alice's ssh-keygen key), the real `regulator` command."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hardening.trunkfinding import (
    FINDING,
    finding,
    graft,
    orphan_baseline,
    refused,
    seen_by_the_host,
    side_resolved_one_step_behind,
)
from tests.helpers import Workspace


def test_a_signed_ack_merged_by_an_unsigned_merge_commit_counts(filed: Workspace) -> None:
    """The commit that brought it to trunk is the merge; the merged side's own signed commit that
    made the change authorizes it."""
    ws = filed
    ws.git("checkout", "-q", "-b", "desk")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "desk")
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert data["errors"] == [] and any("merged by" in n["message"] for n in data["notices"]), data
    ws.run("unit", "dispatch", "u1", check=True)


def test_an_unauthorized_side_commit_merged_lifts_nothing(filed: Workspace) -> None:
    ws = filed
    ws.git("checkout", "-q", "-b", "sneak")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("tidy", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "sneak")
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    assert (
        json.loads(ws.run("registry", "lint", "--json").stdout)["errors"][0]["code"] == "unauthorized-change"
    )


def test_a_later_authorized_commit_decides_the_entry_afresh(filed: Workspace) -> None:
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)
    ws.write(FINDING, finding(resolved="true", body="reviewed: the alerter ships its CLI\n"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == []
    ws.run("unit", "dispatch", "u1", check=True)


def test_a_later_authorized_commit_merged_no_ff_decides_the_entry_afresh(filed: Workspace) -> None:
    """The way out of an unauthorized resolve on trunk, through a branch: a signed commit with
    Authorized-by touching the entry, merged with --no-ff by an unsigned merge commit. The merge
    brings no load-bearing change (the fields were already resolved), so the merged side's commit
    was never asked and the hold stayed for good; merged --ff-only it lifted."""
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    ws.git("checkout", "-q", "-b", "desk")
    ws.write(FINDING, finding(resolved="true", body="reviewed: the alerter ships its CLI\n"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "desk")
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert data["errors"] == [], data["errors"]
    ws.run("unit", "dispatch", "u1", check=True)


def test_an_unauthorized_change_says_what_the_commit_lacks(filed: Workspace) -> None:
    """The reason in an unauthorized change's message was empty where the commit carried no trailer
    at all, or carried one git does not read as a trailer (not in the last paragraph, as a squash's
    default message indents it): it now names the commit and what it lacks."""
    ws = filed
    ws.git("checkout", "-q", "-b", "fix")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it on a branch", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "-m", "Merge fix\n\n    Authorized-by: alice\n\nsquashed", "fix")
    side = ws.git("rev-parse", "fix").strip()
    merge = ws.git("rev-parse", "main").strip()
    message = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"][0]["message"]
    assert f"{merge[:10]} names Authorized-by:, but not as a line of its message's last paragraph" in message
    assert f"the merged commit {side[:10]} that made it: no Authorized-by: " in message
    assert "; ;" not in message and ": ;" not in message


def test_resolving_again_is_the_way_out_of_a_resolve_that_counted_for_nothing(filed: Workspace) -> None:
    """A quiet resolve on trunk holds u1 all the same, and the dispatch refusal says to resolve the
    finding; `registry resolve` used to refuse it as "already resolved" (and `ack` as history), so
    no command lifted the hold. It now resolves it again: an authorized, signed commit touching the
    entry, which decides it afresh. A finding resolved with authorization is refused as before."""
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)
    assert "registry resolve F-x" in refused(ws, "unit", "dispatch", "u1")
    ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "reviewed", "--commit", check=True)
    assert "Authorized-by: alice" in ws.git("log", "-1", "--format=%B")
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == []
    ws.run("unit", "dispatch", "u1", check=True)
    assert "F-x is already resolved" in refused(
        ws, "registry", "resolve", "F-x", "--by", "alice", "--rationale", "again", "--commit"
    )


def test_an_unauthorized_edit_of_a_resolved_finding_on_trunk_is_ended_by_resolving_it_again(
    filed: Workspace,
) -> None:
    """An operator's review (D-235): `affects` edited without authorization on a finding already
    resolved, merged to trunk, made lint fail on trunk and every branch; `registry resolve` refused
    ("already resolved": it holds nothing) and so did `ack`, so only a hand-made signed commit got
    out. Resolving it again, signed, now decides the entry afresh; the messages name the finding
    (`<F-id>` before) and the way out. Decided, it is refused as before."""
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    ws.write(FINDING, finding(resolved="true", affects="[]"))
    ws.commit("tidy\n\nAuthorized-by: alice", sign=False)
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert [e["code"] for e in errors] == ["unauthorized-change"]
    assert "`regulator registry resolve F-x --by alice --rationale … --commit`" in errors[0]["message"]
    ws.write(FINDING, finding(resolved="true", affects="[u1]"))
    ws.commit("tidy again", sign=False)
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert [e["code"] for e in errors] == ["unauthorized-change"] * 2
    assert (
        "`regulator registry resolve F-x --by <person> --rationale … --commit` on trunk"
        in (errors[1]["message"])
    )
    ws.run(
        "registry",
        "resolve",
        "F-x",
        "--by",
        "alice",
        "--rationale",
        "reviewed the edits",
        "--commit",
        check=True,
    )
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == []
    assert "F-x is already resolved" in refused(
        ws, "registry", "resolve", "F-x", "--by", "alice", "--rationale", "again", "--commit"
    )


def test_an_edit_after_a_signed_resolve_on_a_branch_says_which_commit_decides(filed: Workspace) -> None:
    """An operator's review (D-235): a reviewer fixed a typo in a finding after alice's signed
    resolve on the same branch; lint named only the typo's commit. It now says that alice's commit
    authorized the resolve, that the last commit touching the entry decides, and how to sign again;
    resolving again, signed, passes."""
    ws = filed
    ws.git("checkout", "-q", "-b", "fix")
    ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "fixed", "--commit", check=True)
    signed = ws.git("rev-parse", "HEAD").strip()
    ws.write(FINDING, (ws.root / FINDING).read_text() + "\nreviewer: a typo fixed\n")
    ws.commit("typo", sign=False)
    typo = ws.git("rev-parse", "HEAD").strip()
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert [e["code"] for e in errors] == ["unauthorized-change"]
    assert (
        f"{signed[:10]} authorized it (alice), but the last commit touching the entry, {typo[:10]}, decides"
        in errors[0]["message"]
    )
    assert "`regulator registry resolve F-x --by alice --rationale … --commit`" in errors[0]["message"]
    ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "again", "--commit", check=True)
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == []


def test_a_branch_that_merged_trunk_before_a_signed_resolve_does_not_hold_again_when_merged(
    filed: Workspace,
) -> None:
    """An operator's week (D-237): bob's branch merged trunk (as a branch behind trunk is told to),
    alice's signed resolve landed through a merged pull request, then bob's was merged, both with
    merge commits. The walk judged bob's merge against bob's side, which still held u1, and asked
    whether alice's resolve came after bob's side's "last decision": bob's merge of trunk, which
    only took trunk's version. So u1 was held again and trunk's lint failed. A merge that took
    another parent's version whole decides nothing; the decision is where that version was made."""
    ws = filed
    ws.git("checkout", "-q", "-b", "bob", "HEAD~1")
    ws.write("intake/I-y.md", "---\nid: I-y\ndate: '2026-11-20'\ntitle: y\ndisposition: new\n---\n")
    ws.commit("I-y", sign=False)
    ws.git("merge", "-q", "--no-edit", "main")
    ws.git("checkout", "-q", "-b", "fix", "main")
    ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "done", "--commit", check=True)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "fix")
    for merged in ("fix", "bob"):
        if merged == "bob":
            ws.git("merge", "-q", "--no-ff", "--no-edit", "bob")
        assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == [], merged
        unit = next(u for u in json.loads(ws.run("status", "--json").stdout)["units"] if u["id"] == "u1")
        assert unit["staleKnowledge"] == [], merged


def test_a_reopen_by_a_merge_taking_a_sides_version_is_a_decision(filed: Workspace) -> None:
    """Adversarial review of the test above's fix: alice resolved F-x, then reopened it by a signed
    merge that took u2's older, unresolved version whole. A merge taking another parent's version
    was skipped as no decision, so her abandoned signed commit from between the two counted again:
    the unit's branch from it, trunk merged in second and fast-forwarded, lifted u1. A merge that
    replaced its line's own version is that line's decision; only one that brought the entry to a
    line that lacked it is skipped."""
    ws = filed
    ws.write(FINDING, finding(resolved="true", body="body\nresolved: fixed in x\n"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "-b", "alice/note")
    ws.write(FINDING, finding(resolved="true", body="body\nresolved: fixed in x (commit abc)\n"))
    ws.commit("resolution note\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "-b", "u2/evidence", "main~1")
    ws.write(FINDING, finding(body="body\nu2: it fails again on restart\n"))
    ws.commit("evidence", email="u2@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    subprocess.run(
        ["git", "merge", "-q", "--no-ff", "--no-commit", "u2/evidence"], cwd=ws.root, env=ws.env,
        capture_output=True,
    )  # fmt: skip
    ws.git("checkout", "u2/evidence", "--", FINDING)
    ws.commit("Merge u2/evidence: not fixed, reopen\n\nAuthorized-by: alice")
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    seen_by_the_host(ws)
    ws.git("checkout", "-q", "-b", "unit/u1-x", "alice/note")
    subprocess.run(
        ["git", "merge", "-q", "--no-ff", "--no-commit", "main"], cwd=ws.root, env=ws.env, capture_output=True
    )
    ws.git("checkout", "alice/note", "--", FINDING)
    ws.commit("merge main", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--ff-only", "unit/u1-x")
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    assert "unauthorized-change" in [
        e["code"] for e in json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    ]


def test_a_persons_old_signed_commit_merged_after_trunk_decided_again_decides_nothing(
    filed: Workspace,
) -> None:
    """Adversarial review of D-223: alice's signed resolve on a branch that was squashed (so never
    landed), then alice resolved again and reopened on trunk. A unit merged her old commit into its
    own branch (taking her version in the conflict) and that into trunk: the merged side's newest
    commit touching the entry was alice's old one, and it lifted the hold she had put back. A side's
    authorization counts only when made after trunk's last decision on the entry (D-225)."""
    ws = filed
    ws.git("checkout", "-q", "-b", "alice/fix")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    stale = ws.git("rev-parse", "HEAD").strip()
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--squash", "alice/fix")
    ws.commit("Squashed commit", sign=False)
    ws.write(FINDING, finding(resolved="true", body="resolved again\n"))
    ws.commit("resolve F-x again\n\nAuthorized-by: alice")
    ws.write(FINDING, finding(resolved="false", body="reopened: it came back\n"))
    ws.commit("reopen F-x\n\nAuthorized-by: alice")
    ws.git("branch", "-q", "-D", "alice/fix")
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    ws.git("checkout", "-q", "-b", "unit/replay")
    subprocess.run(
        ["git", "merge", "-q", "--no-ff", "--no-commit", stale], cwd=ws.root, env=ws.env, capture_output=True
    )
    ws.git("checkout", stale, "--", FINDING)
    ws.commit("merge", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "unit/replay")
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert any("was made before trunk's last decision on the entry" in e["message"] for e in errors), errors


@pytest.mark.parametrize("where", ["in-the-merge", "before-the-merge"])
def test_a_branch_fast_forwarded_onto_trunk_with_trunk_as_its_second_parent_lifts_no_hold(
    filed: Workspace, where: str
) -> None:
    """The known gap of D-224 (docs/security.md): a unit's branch forked before F-x landed merges
    trunk in as its *second* parent and is fast-forwarded onto trunk. Trunk's first-parent line
    then runs through the unit's commits and never held F-x: the unit's version of F-x, resolved
    (in the merge itself, or added already resolved before it, which a first-parent walk sees as a
    new entry), lifted the hold, and lint named nothing. A merge is judged against its other
    parents too: what the side it merges held, the merge cannot drop unauthorized (D-228)."""
    ws = filed
    ws.git("checkout", "-q", "-b", "unit/u1-r", "HEAD~1")  # before F-x landed
    if where == "before-the-merge":
        ws.write(FINDING, finding(resolved="true"))
    ws.write("notes.md", "work\n")
    ws.commit("work", email="u1@units.invalid", sign=False)
    ws.git("merge", "-q", "--no-ff", "--no-commit", "-X", "ours", "main")  # trunk second
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("Merge main into unit/u1-r", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--ff-only", "unit/u1-r")
    assert ws.git("rev-parse", "HEAD^2").strip()  # trunk's own line is now the second parent
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    done = ws.run("registry", "lint", "--json")
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and [e["code"] for e in errors] == ["unauthorized-change"], errors
    assert "keeps the hold on u1 it would have lifted" in errors[0]["message"]


@pytest.mark.parametrize(
    "flow", ["branch-forked-before-the-resolve", "trunk-merged-into-a-branch-first", "branch-added-evidence"]
)
def test_a_merge_of_an_older_branch_keeps_trunks_authorized_resolve(filed: Workspace, flow: str) -> None:
    """D-228's other side: a unit's branch forked while F-x held u1, merged after a person's signed
    resolve landed on trunk (trunk first, as `git merge` on trunk makes it; or trunk merged into the
    branch first and the branch merged back). The merged parent's version still held u1; the
    resolve on trunk's own line since lifted it with authority, so nothing holds and lint is clean.
    The operator review of D-228: where the branch had added evidence to F-x's text, her resolve
    (which does not contain that edit) counted for nothing, and u1 stayed held; an edit of the text
    is no decision (D-231). The host saw u1 held first, so its memory (D-231) is asked too."""
    ws = filed
    seen_by_the_host(ws)
    ws.git("branch", "unit/u2-w")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "unit/u2-w")
    ws.write("notes.md", "work\n")
    if flow == "branch-added-evidence":
        ws.write(FINDING, finding(body="body\n\nu2: the alerter also fails on restart.\n"))
    ws.commit("work", email="u2@units.invalid", sign=False)
    if flow == "trunk-merged-into-a-branch-first":
        ws.git("merge", "-q", "--no-edit", "main")
        ws.write("notes.md", "more work\n")
        ws.commit("more work", email="u2@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "unit/u2-w")
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert data["errors"] == [], data["errors"]
    ws.run("unit", "dispatch", "u1", check=True)


@pytest.mark.parametrize("history", [side_resolved_one_step_behind, orphan_baseline, graft])
def test_a_history_that_hides_a_hold_from_trunks_line_lifts_nothing_the_host_saw(
    filed: Workspace, history: Callable[[Workspace], None]
) -> None:
    """Adversarial review of D-228: three histories fast-forwarded onto trunk dropped F-x's hold on
    u1 with lint naming nothing: the walk follows trunk's first-parent line from the baseline, and
    each hid the hold from that line. What the host saw held at trunk's last kept commit stays held
    unless an authorized commit since lifted it (D-231)."""
    ws = filed
    seen_by_the_host(ws)
    history(ws)
    branch = ws.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--ff-only", branch)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    moved = [e for e in errors if "which the host held at" in e["message"]]
    assert moved and moved[0]["entry"] == FINDING and "keeps the hold on u1" in moved[0]["message"], errors


def test_a_signed_resolve_after_trunk_moved_lifts_what_the_host_held(filed: Workspace) -> None:
    """The other side of D-231: the host saw u1 held; a person's signed, authorized resolve landed
    on trunk since (here with a branch of hers merged in): the hold is lifted, nothing is named."""
    ws = filed
    seen_by_the_host(ws)
    ws.git("checkout", "-q", "-b", "desk")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "desk")
    ws.run("unit", "dispatch", "u1", check=True)
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == []


@pytest.mark.parametrize("hide", ["trunk-branch-deleted", "repository-made-shallow"])
def test_hiding_trunk_from_the_host_does_not_make_it_forget(
    filed: Workspace, hide: str, tmp_path: Path
) -> None:
    """Adversarial review of D-231: a hold the host held, then a unit, from its worktree (refs and
    objects are shared):
    - deleted refs/heads/main with origin/main naming the same commit: the walk of origin/main was
      another trunk's to the memory, which it forgot, and it kept a walk without the hold; main
      restored, a hold only the memory kept (a hidden history's) was gone at the very commit the
      host had held it at;
    - fetched anything with --depth=1: the repository shallow, trunk unreadable, and every finding
      held only what the working tree names, which an unsigned narrowing had emptied.
    The memory is the trunk's by name, and where trunk cannot be read it holds too (D-231)."""
    ws = filed
    seen_by_the_host(ws)
    if hide == "trunk-branch-deleted":  # a hold only the host's memory keeps
        side_resolved_one_step_behind(ws)
        ws.git("checkout", "-q", "main")
        ws.git("merge", "-q", "--ff-only", "unit/u1-rev")
    else:  # a hold the walk keeps, and the working tree no longer names
        ws.write(FINDING, finding(affects="[]"))
        ws.commit("F-x affects nothing now", email="u1@units.invalid", sign=False)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    ws.run("unit", "dispatch", "u3", check=True)  # a writer keeps the walk with the hold
    if hide == "trunk-branch-deleted":
        tip = ws.git("rev-parse", "main").strip()
        ws.git("checkout", "-q", "--detach")
        ws.git("update-ref", "refs/remotes/origin/main", tip)
        ws.git("update-ref", "-d", "refs/heads/main")
        assert "F-x" in refused(ws, "unit", "dispatch", "u1")
        ws.run("unit", "dispatch", "r1", check=True)  # a writer keeps a walk of origin/main meanwhile
        ws.git("update-ref", "refs/heads/main", tip)
        ws.git("update-ref", "-d", "refs/remotes/origin/main")
        ws.git("checkout", "-q", "main")
    else:
        other = tmp_path / "other"
        subprocess.run(["git", "init", "-q", str(other)], check=True)
        for n in ("a", "b"):
            subprocess.run(["git", "-C", str(other), "-c", "user.name=o", "-c", "user.email=o@x.invalid",
                            "commit", "-q", "--allow-empty", "-m", n], check=True)  # fmt: skip
        ws.git("fetch", "-q", "--depth=1", f"file://{other}", "HEAD")
        assert ws.git("rev-parse", "--is-shallow-repository").strip() == "true"
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    held = next(u for u in ws.json("status")["units"] if u["id"] == "u1")["staleKnowledge"]
    assert held == ["F-x"]


def test_merges_that_drop_what_their_sides_filed_cost_no_git_each(filed: Workspace, tmp_path: Path) -> None:
    """Adversarial review of D-232: a unit fast-imported merges whose second parent files a finding
    the merge drops; every merge then asked `_lifted_since` (three git processes and a log of the
    whole history): 1,000 merges made `status` take 74 s on this machine. An entry the merge's own
    line never held cannot have been lifted on it: held without asking git. Counted here in git
    processes (speed is the bench's), with a `git` on PATH that logs each start."""
    ws = filed
    seen_by_the_host(ws)
    lines, tip = [], ws.git("rev-parse", "main").strip()
    for i in range(1, 41):
        body = finding(affects=f"[u-dos-{i}]").replace("F-x", f"F-dos-{i}").encode()
        lines += [f"commit refs/heads/unit/u1-dos\nmark :{2 * i - 1}\ncommitter u1 <u1@units.invalid> {1764900000 + i} +0000\ndata 5\nside\n",
                  f"from {tip}\nM 100644 inline findings/F-dos-{i}.md\ndata {len(body)}\n", body.decode() + "\n",
                  f"commit refs/heads/unit/u1-dos\nmark :{2 * i}\ncommitter u1 <u1@units.invalid> {1764900000 + i} +0000\ndata 6\nmerge\n",
                  f"from {tip}\nmerge :{2 * i - 1}\nD findings/F-dos-{i}.md\n\n"]  # fmt: skip
        tip = f":{2 * i}"
    subprocess.run(
        ["git", "-C", str(ws.root), "fast-import", "--quiet"], input="".join(lines).encode(), check=True
    )
    ws.git("merge", "-q", "--ff-only", "unit/u1-dos")
    real = subprocess.run(
        ["sh", "-c", "command -v git"], capture_output=True, text=True, check=True
    ).stdout.strip()
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    done = ws.run("status", "--json", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode in (0, 1), done.stderr
    held = {u["id"]: u["staleKnowledge"] for u in json.loads(done.stdout)["units"]}
    assert held["u1"] == ["F-x"]
    calls = log.read_text().splitlines()
    assert len(calls) < 30, (len(calls), calls[:40])


def test_a_version_git_cannot_give_lifts_no_hold(filed: Workspace) -> None:
    """Adversarial review of D-232: alice resolved F-x on a branch she abandoned, then resolved and
    reopened it on trunk (signed). A unit merged her old branch's version, and moved the loose
    objects of trunk's versions of F-x out of the shared repository: read as "no decision", her
    old signature counted again, and u1 was dispatched. A walk missing an object is no walk: every
    finding holds what it names, and what the host held (D-232)."""
    ws = filed
    ws.git("checkout", "-q", "-b", "alice-old")
    ws.write(FINDING, finding(resolved="true", body="body\nfixed on my branch\n"))
    ws.commit("resolve (draft)\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "main")
    ws.write(FINDING, finding(resolved="true", body="body\nfixed on trunk\n"))
    ws.commit("resolve\n\nAuthorized-by: alice")
    ws.write(FINDING, finding(body="body\nreopened: not fixed after all\n"))
    ws.commit("reopen\n\nAuthorized-by: alice")
    versions = [ws.git("rev-parse", f"main{'~' * n}:{FINDING}").strip() for n in (0, 1, 2)]
    seen_by_the_host(ws)
    ws.git("checkout", "-q", "-b", "unit/u1-old")
    ws.git("merge", "-q", "--no-ff", "--no-commit", "-X", "theirs", "alice-old")
    ws.git("checkout", "alice-old", "--", FINDING)
    ws.commit("merge alice's branch", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--ff-only", "unit/u1-old")
    objects = ws.root / ".git" / "objects"
    for blob in versions:
        (objects / blob[:2] / blob[2:]).unlink()
    line = refused(ws, "unit", "dispatch", "u1")
    assert "object(s) trunk's history names cannot be read" in line, line
