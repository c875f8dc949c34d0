"""Holds judged from trunk (design §26, issue 28): an edit of a finding that is not committed to trunk,
or committed without authorization, can add a hold and never remove one; `registry lint` checks
trunk's whole history since the baseline; "held" means one thing in `status`, the room and `--once`.
Real git, real signatures (alice's ssh-keygen key), the real `regulator` command."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import Workspace, clone, one_line

FINDING = "findings/F-x.md"
HEAD = "---\nid: F-x\ndate: '2026-11-01'\ntitle: the alerter is dead\n"


def finding(affects: str = "[u1]", resolved: str = "false", ack: str = "''", body: str = "body\n") -> str:
    return f"{HEAD}affects: {affects}\nack: {ack}\nresolved: {resolved}\n---\n{body}"


@pytest.fixture
def filed(ws: Workspace) -> Workspace:
    """F-x, unresolved, affecting u1, committed on trunk (filing needs no authorization)."""
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    return ws


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


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_uncommitted_edit_of_a_finding_lifts_no_hold(filed: Workspace, edit: str) -> None:
    ws = filed
    ws.write(FINDING, EDITS[edit])
    line = refused(ws, "unit", "dispatch", "u1")
    assert "dispatch of u1 vetoed: stale-knowledge from unresolved finding(s) F-x" in line
    assert next(u for u in ws.json("status")["units"] if u["id"] == "u1")["staleKnowledge"] == ["F-x"]


def test_an_uncommitted_edit_lifts_no_hold_on_close_either(ws: Workspace) -> None:
    ws.lease("u1")
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    ws.write(FINDING, finding(resolved="true"))
    assert "close of u1 vetoed: stale-knowledge from unresolved finding(s) F-x" in refused(
        ws, "unit", "close", "u1"
    )


def test_an_uncommitted_edit_can_add_a_hold(filed: Workspace) -> None:
    ws = filed
    ws.write(FINDING, finding(affects="[u1, u3]"))
    assert "F-x" in refused(ws, "unit", "dispatch", "u3")


def test_an_unsigned_commit_on_trunk_lifts_no_hold_and_lint_names_it(filed: Workspace) -> None:
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)  # straight on trunk, no trailer, no signature
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    done = ws.run("registry", "lint", "--json")
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and [e["code"] for e in errors] == ["unauthorized-change"], done.stdout
    assert "resolved changed on trunk by" in errors[0]["message"]
    assert "keeps the hold on u1 it would have lifted" in errors[0]["message"]
    once = ws.run("controlroom", "--once")
    assert once.returncode == 1 and "lint ✓" not in once.stdout and "lint ✗1" in once.stdout


def test_the_repositorys_log_encoding_hides_no_trunk_commit(filed: Workspace) -> None:
    """A log written in another encoding hid every trunk commit from lint and the trunk walk (its
    records start `%x00C`); the output regulator parses is git's by default whatever .git/config
    says (D-199)."""
    ws = filed
    ws.git("config", "i18n.logOutputEncoding", "UTF-7")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    done = ws.run("registry", "lint", "--json")
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and [e["code"] for e in errors] == ["unauthorized-change"], done.stdout


def test_without_trunks_history_no_resolve_lifts_a_hold(filed: Workspace) -> None:
    """Marking trunk shallow (any worktree can write .git/shallow) made the walk unavailable, and
    the quiet resolve then lifted the hold. Without history no resolve can be told authorized: on
    the host every finding holds what it names, an authorized one too, until history is back (D-201)."""
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)
    ws.write(".git/shallow", ws.git("rev-parse", "HEAD~1"))
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    assert next(u for u in ws.json("status")["units"] if u["id"] == "u1")["staleKnowledge"] == ["F-x"]


@pytest.mark.parametrize("named", ['"main^{/the workspace}"', '"main~2"', '"@{1}"', '"x\\0y"'])
def test_a_trunk_that_is_no_branch_name_lifts_no_hold_and_breaks_no_command(
    filed: Workspace, named: str, tmp_path: Path
) -> None:
    """A committed `trunk:` in revision syntax made "trunk" an old commit no branch names (before the
    finding: the quiet resolve then lifted its hold, and every check passed); a NUL in it stopped
    status, lint and --once with a traceback. The host follows its own record (.regulator/trunk,
    D-224) and names the move; in a clone, where the file is all there is, a trunk is a branch's
    name or none: no commit is trunk then, and every command answers in lines (D-222)."""
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.write("regulator/config.yaml", f"trunk: {named}\n")
    ws.commit("move trunk and close it", sign=False)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    codes = [e["code"] for e in json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]]
    assert codes == ["trunk-moved", "unauthorized-change"], codes
    here = clone(ws, tmp_path / "ci")
    for args in (("status",), ("registry", "lint"), ("controlroom", "--once", "--json")):
        done = ws.run(*args, cwd=here)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (args, done.stderr)
    data = json.loads(ws.run("registry", "lint", "--json", cwd=here).stdout)
    assert "is no branch name" in data["historyUnavailable"]


def test_a_merged_branch_naming_another_trunk_moves_nothing_on_the_host(
    filed: Workspace, tmp_path: Path
) -> None:
    """Adversarial review of D-222: a unit's branch forked before F-x was filed brings F-x over
    resolved and names itself as trunk in regulator/config.yaml; merged --no-ff. The host then
    walked that branch, whose history never held F-x: the hold was lifted and every check passed.
    The host follows .regulator/trunk (D-224) and lint names the move; a clone's lint given
    `--trunk main` (docs/ci.md) names it too."""
    ws = filed
    ws.git("checkout", "-q", "-b", "unit/u1-z", "HEAD~1")
    ws.write(FINDING, finding(resolved="true"))
    ws.write("regulator/config.yaml", "trunk: unit/u1-z\n")
    ws.commit("sync", sign=False)
    ws.git("checkout", "-q", "main")
    # the pull request's check, in a clone of the branch, trunk named by the job (docs/ci.md)
    here = clone(ws, tmp_path / "ci")
    ws.git("-C", str(here), "checkout", "-q", "unit/u1-z")
    data = json.loads(ws.run("registry", "lint", "--json", "--trunk", "main", cwd=here).stdout)
    moved = next(e["message"] for e in data["errors"] if e["code"] == "trunk-moved")
    assert "names trunk 'unit/u1-z', but this lint follows 'main' (as refs/heads/main names it)" in moved
    # the job's other command, given the same --trunk (it had none: it followed the branch, D-227)
    done = ws.run("controlroom", "--once", "--registers-only", "--json", "--trunk", "main", cwd=here)
    reasons = json.loads(done.stdout)["exitReasons"]
    assert done.returncode == 1 and any(r.startswith("lint error trunk-moved: ") for r in reasons), reasons
    ws.git("merge", "-q", "--no-ff", "-X", "theirs", "-m", "Merge unit/u1-z", "unit/u1-z")
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert {e["code"] for e in errors} == {"trunk-moved", "unauthorized-change"}, errors
    moved = next(e["message"] for e in errors if e["code"] == "trunk-moved")
    assert "names trunk 'unit/u1-z', but this lint follows 'main' (.regulator/trunk, the host's)" in moved


def test_a_branch_bringing_a_finding_trunk_holds_already_resolved_fails_its_check(
    filed: Workspace, tmp_path: Path
) -> None:
    """Operator review of D-224: a branch forked before F-x landed adds F-x resolved. Against its
    merge-base it was a new entry, which needs no authorization, so the pull request's check passed;
    merged, its version replaces trunk's. It is now judged against trunk's version (D-226)."""
    ws = filed
    ws.git("checkout", "-q", "-b", "unit/u1-x", "HEAD~1")
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("bring F-x over, resolved", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    here = clone(ws, tmp_path / "ci")
    ws.git("-C", str(here), "checkout", "-q", "unit/u1-x")
    done = ws.run("registry", "lint", "--json", "--require-history", "--trunk", "main", cwd=here)
    assert done.returncode == 1, done.stdout
    assert ("unauthorized-change", FINDING) in {
        (e["code"], e["entry"]) for e in json.loads(done.stdout)["errors"]
    }


def test_a_host_without_a_trunk_record_follows_its_config(filed: Workspace) -> None:
    """A workspace made before .regulator/trunk: the configured trunk, as before D-224, and lint
    warns that a merged branch can move it. A record that is a dangling link names no trunk."""
    ws = filed
    (ws.root / ".regulator" / "trunk").unlink()
    ws.git("branch", "-q", "develop", "HEAD~1")  # before F-x was filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)  # on main, which is not the configured trunk
    ws.write("regulator/config.yaml", "trunk: develop\n")
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert data["errors"] == [], data["errors"]  # develop's history holds no change to F-x
    assert "trunk-unrecorded" in {w["code"] for w in data["warnings"]}
    ws.write("regulator/config.yaml", "trunk: main\n")
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert [e["code"] for e in data["errors"]] == ["unauthorized-change"]
    (ws.root / ".regulator" / "trunk").symlink_to("/nonexistent")
    # every finding holds, and every command says why (not "resolve it": D-226)
    line = refused(ws, "unit", "dispatch", "u1")
    assert "stale-knowledge from finding(s) F-x: trunk's history cannot be read here (trunk '' is no" in line
    explained = ws.json("registry", "next-up", "--explain")["excluded"]
    reasons = next(u["reasons"] for u in explained if u["id"] == "u1")
    assert any(
        r.startswith("stale-knowledge: finding F-x (trunk history unavailable: trunk ''") for r in reasons
    )
    assert (
        "is no branch name" in json.loads(ws.run("registry", "lint", "--json").stdout)["historyUnavailable"]
    )


@pytest.mark.parametrize("config", ["loop", "latin-1"])
def test_a_config_that_cannot_be_read_names_no_trunk_and_breaks_no_command(
    filed: Workspace, config: str, tmp_path: Path
) -> None:
    """Adversarial review of D-224: regulator/config.yaml committed as a link to itself, or not
    UTF-8, stopped lint and --once on the host, and every command in a clone, with a traceback."""
    ws = filed
    path = ws.root / "regulator/config.yaml"
    path.unlink()
    if config == "loop":
        path.symlink_to("config.yaml")
    else:
        path.write_bytes(b"trunk: ma\xffin\n")
    ws.commit("break the config", sign=False)
    here = clone(ws, tmp_path / "ci")
    for where in (ws.root, here):
        for args in (("status",), ("registry", "lint"), ("controlroom", "--once", "--json")):
            done = ws.run(*args, cwd=where)
            assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (where, args, done.stderr)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")


@pytest.mark.parametrize("trunk", ["", "main~1", "main^{/x}"])
def test_lint_trunk_that_is_no_branch_name_is_bad_input(filed: Workspace, trunk: str) -> None:
    done = filed.run("registry", "lint", "--trunk", trunk)
    assert done.returncode == 2 and "is no branch name" in one_line(done)


def test_lint_trunk_names_the_trunk_the_walk_follows_too(filed: Workspace) -> None:
    """`registry lint --trunk B`: one trunk for the run. The history lint reads and design §26's
    walk were of B and of the configured trunk (main) before: a branch without trunk's history was
    reported "history NOT checked" and, in the same run, an unauthorized change on main."""
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("close it quietly", sign=False)
    assert (
        json.loads(ws.run("registry", "lint", "--json").stdout)["errors"][0]["code"] == "unauthorized-change"
    )
    data = json.loads(ws.run("registry", "lint", "--json", "--trunk", "nosuch").stdout)
    assert data["historyChecked"] is False and "nosuch" in data["historyUnavailable"]
    assert "unauthorized-change" not in [e["code"] for e in data["errors"]]


def test_a_trailer_without_the_signature_lifts_nothing_where_signatures_are_required(
    filed: Workspace,
) -> None:
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice", sign=False)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert "not SSH-signed by one of alice's keys" in errors[0]["message"]


def test_a_signed_authorized_commit_on_trunk_lifts_the_hold(filed: Workspace) -> None:
    ws = filed
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert data["errors"] == [] and "authorized-signed" in [n["code"] for n in data["notices"]]
    assert any("authorized (signed) by alice" in n["message"] for n in data["notices"])
    ws.run("unit", "dispatch", "u1", check=True)


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


def test_a_signed_ack_does_not_ratify_an_unauthorized_narrowing_unseen(filed: Workspace) -> None:
    """Adversarial review of D-223: a unit's merged narrowing of `affects` (u3 dropped) kept u3 held
    and was named; alice's `registry ack --commit` then signed the entry as it stood, narrowing
    included, and u3 was released with no word of it. The ack is refused, naming the change; once
    the fields are restored the ack decides them as they stand (D-225)."""
    ws = filed
    ws.write(FINDING, finding(affects="[u1, u3]"))
    ws.commit("widen F-x\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "-b", "unit/narrow")
    ws.write(FINDING, finding(affects="[u1]"))
    ws.commit("narrow", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "unit/narrow")
    assert "F-x" in refused(ws, "unit", "dispatch", "u3")
    line = refused(ws, "registry", "ack", "F-x", "--by", "alice", "--commit")
    assert "unauthorized change a signed ack would authorize (affects changed by" in line and "u3" in line
    ws.write(FINDING, finding(affects="[u1, u3]"))
    ws.commit("restore u3", sign=False)
    ws.run("registry", "ack", "F-x", "--by", "alice", "--commit", check=True)
    assert "F-x" in refused(ws, "unit", "dispatch", "u3")


def test_a_claimed_authorization_counts_where_signatures_are_not_required(filed: Workspace) -> None:
    ws = filed
    path = ws.root / "regulator/policy/interaction.yaml"
    ws.decide(
        "regulator/policy/interaction.yaml",
        path.read_text().replace("requireSignatures: true", "requireSignatures: false"),
    )
    ws.write(FINDING, finding(resolved="true"))
    ws.commit("resolve F-x\n\nAuthorized-by: alice", sign=False)
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert data["errors"] == [] and "authorized-claimed" in [n["code"] for n in data["notices"]], data
    ws.run("unit", "dispatch", "u1", check=True)


def test_held_means_one_thing_in_status_the_room_and_once(filed: Workspace) -> None:
    """u1 held by a finding alone, u3 by a blocking obligation alone: status, the room's Units view
    and the header's count, and --once's JSON all say the same two units, for the same reasons."""
    ws = filed
    r1 = ws.lease("r1")
    ws.run("signals", "report", "--subject", "s", "--claim", "c", "--observation", "o", "--evidence", "e",
           "--confidence", "high", "--severity", "blocking", "--affects", "u3", cwd=r1, check=True)  # fmt: skip
    ws.run("signals", "route", check=True)
    status = {u["id"]: u for u in ws.json("status")["units"]}
    assert {u for u, row in status.items() if row["held"]} == {"u1", "u3"}
    assert status["u1"]["staleKnowledge"] == ["F-x"] and status["u1"]["blockedBy"] == []
    assert status["u3"]["staleKnowledge"] == [] and len(status["u3"]["blockedBy"]) == 1
    once = json.loads(ws.run("controlroom", "--once", "--json").stdout)
    assert once["counts"]["held"] == 2
    assert {u["id"] for u in once["status"]["units"] if u["held"]} == {"u1", "u3"}
    text = ws.run("controlroom", "--once").stdout
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith(("u1 ", "u3 ", "b1 "))}
    assert "■" in rows["u1"] and "F-x" in rows["u1"] and "■" in rows["u3"] and "■" not in rows["b1"]
    assert "2 held" in text


def test_without_trunk_history_once_shows_lint_unchecked_and_why(ws: Workspace) -> None:
    """Issue 28: with trunk missing, --once showed `lint ✓` and exited 0 though lint read no history."""
    ws.git("branch", "-m", "main", "elsewhere")
    done = ws.run("controlroom", "--once")
    assert done.returncode == 0, done.stdout
    assert "lint ✓" not in done.stdout and "lint unchecked" in done.stdout.splitlines()[0]
    assert "lint unchecked: trunk history unavailable (no trunk branch 'main'" in done.stdout
    data = json.loads(ws.run("controlroom", "--once", "--json").stdout)
    assert data["lint"]["historyChecked"] is False and "no trunk branch" in data["lint"]["historyUnavailable"]
    strict = ws.run("controlroom", "--once", "--require-history")
    assert strict.returncode == 1
    assert "- lint unchecked: trunk history unavailable (no trunk branch 'main'" in strict.stdout
    # with the history there, --require-history passes
    ws.git("branch", "-m", "elsewhere", "main")
    assert ws.run("controlroom", "--once", "--require-history").returncode == 0


def test_the_documented_fleet_job_requires_history() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "ci.md").read_text()
    assert "run: regulator controlroom --once --require-history" in text


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


def test_a_register_folder_committed_as_a_symlink_is_not_read_through(
    filed: Workspace, tmp_path: Path
) -> None:
    """Adversarial review of D-227: a branch moved findings/F-x.md to arch/ and committed `findings`
    as a link to arch. Git no longer had findings/F-x.md, but the working tree still showed it, so
    the pull request's check saw no deletion and passed; then an unsigned resolve through the link
    passed every check and showed in FINDINGS.md. A register folder is read only where it is
    (D-230): the link is an error, and the entry trunk holds is then missing: tombstone-not-delete."""
    ws = filed
    ws.git("checkout", "-q", "-b", "unit/u1-l")
    (ws.root / "arch").mkdir()
    ws.git("mv", FINDING, "arch/F-x.md")
    if (ws.root / "findings").is_dir():
        (ws.root / "findings").rmdir()
    (ws.root / "findings").symlink_to("arch")
    ws.commit("keep the findings in arch", email="u1@units.invalid", sign=False)
    assert (ws.root / FINDING).is_file()  # still shown through the link
    here = clone(ws, tmp_path / "ci")
    ws.git("-C", str(here), "checkout", "-q", "unit/u1-l")
    done = ws.run("registry", "lint", "--require-history", "--trunk", "main", "--json", cwd=here)
    errors = {e["code"]: e for e in json.loads(done.stdout)["errors"]}
    assert done.returncode == 1 and sorted(errors) == ["tombstone-not-delete", "unreadable"], errors
    assert errors["tombstone-not-delete"]["entry"] == FINDING and errors["unreadable"]["entry"] == "findings/"
    assert (
        "findings/ is a symlink: register folders are read only where they are"
        in errors["unreadable"]["message"]
    )
    room = ws.run("controlroom", "--once", "--registers-only", "--trunk", "main", cwd=here)
    assert room.returncode == 1 and "lint error unreadable: findings/ is a symlink" in room.stdout
    # merged anyway, and resolved through the link: the host still holds u1
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-edit", "unit/u1-l")
    (ws.root / "arch" / "F-x.md").write_text(finding(resolved="true"))
    ws.commit("tidy", email="u1@units.invalid", sign=False)
    assert "F-x" in refused(ws, "unit", "dispatch", "u1")


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
