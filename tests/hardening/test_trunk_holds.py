"""Holds judged from trunk (design §26, issue 28): an edit of a finding that is not committed to trunk,
or committed without authorization, can add a hold and never remove one; `registry lint` checks
trunk's whole history since the baseline; "held" means one thing in `status`, the room and `--once`.
Merges and hidden histories: test_trunk_merges.py. Real git, real signatures (alice's ssh-keygen
key), the real `regulator` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hardening.trunkfinding import EDITS, FINDING, finding, refused
from tests.helpers import Workspace, clone, one_line


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
