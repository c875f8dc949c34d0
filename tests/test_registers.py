"""Registers in git (seed 004, design §8): the ladder, Next-up, lint against trunk history."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests import helpers
from tests.helpers import make_workspace

FINDING = "findings/F-alert-path-dead.md"
BODY = (
    'The step whose whole job is to shout "a withheld token reached main" dies before it can escalate:\n'
    "it calls a CLI its runner does not ship, so it exits 127 on the failure path.\n"
)


def finding_text(
    ack: Any = "",
    resolved: Any = False,
    affects: Any = ("release-hardening/manifest",),
    fid: Any = "F-alert-path-dead",
) -> Any:
    front = {
        "id": fid,
        "date": "2026-08-11",
        "title": "The post-merge leak alerter cannot run: a red gate on main is invisible",
        "affects": list(affects),
        "ack": ack,
        "resolved": resolved,
    }
    return "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + BODY


@pytest.fixture
def reg(tmp_path: Path) -> Any:
    ws = make_workspace(tmp_path)
    ws.contract("release-hardening/manifest", "implement", "implement", priority=10)
    ws.commit("the manifest brief")
    return ws


def lint(ws: helpers.Workspace, *extra: Any) -> Any:
    done = ws.run("registry", "lint", "--json", *extra)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    assert (done.returncode == 1) == bool(data["errors"])
    return data


def removed_on_a_branch(ws: helpers.Workspace) -> Any:
    """FINDING deleted on a branch `cleanup`, and lint's answer there."""
    ws.git("checkout", "-q", "-b", "cleanup")
    (ws.root / FINDING).unlink()
    ws.commit("remove the finding")
    return lint(ws)


def codes(result: Any, level: Any = "errors") -> Any:
    return [(i["code"], i["entry"]) for i in result[level]]


def unit(ws: helpers.Workspace, unit_id: Any) -> Any:
    return next(u for u in ws.json("status")["units"] if u["id"] == unit_id)


def test_the_ladder_for_f_alert_path_dead(reg: Any) -> None:
    ws = reg
    ws.lease("release-hardening/manifest")
    ws.write(FINDING, finding_text())
    ws.commit("file F-alert-path-dead")
    # unacknowledged: the notice, the unit flagged stale-knowledge, out of Next-up
    result = lint(ws)
    assert result["errors"] == [] and result["historyChecked"] is True
    assert [i["message"] for i in result["notices"]] == ["unresolved F-alert-path-dead awaits desk ack"]
    assert unit(ws, "release-hardening/manifest")["staleKnowledge"] == ["F-alert-path-dead"]
    ids = [u["id"] for u in ws.json("registry", "next-up")]
    assert "release-hardening/manifest" not in ids and "u1" in ids

    # acknowledged (dated, authorized) while the unit is in progress: the re-gate error
    ws.git("checkout", "-q", "-b", "desk")
    done = ws.run("registry", "ack", "F-alert-path-dead", "--by", "alice")
    assert done.returncode == 0, done.stderr
    assert 'ack: "2026-11-29 alice"' in (ws.root / FINDING).read_text()
    ws.commit("ack the alerter finding\n\nAuthorized-by: alice")
    result = lint(ws)
    assert codes(result) == [("regate", "F-alert-path-dead")]
    assert "demote to todo (re-gate) or resolve the finding" in result["errors"][0]["message"]
    assert ws.run("registry", "lint").returncode == 1

    # resolved with authorization: back in Next-up once the unit is todo
    ws.write(FINDING, finding_text(ack="2026-11-29 alice", resolved=True))
    ws.commit("resolve: alerter ships its CLI\n\nAuthorized-by: alice")
    assert lint(ws)["errors"] == []
    # holds come from trunk (design §26): resolved on the branch, the finding holds until it lands
    assert unit(ws, "release-hardening/manifest")["staleKnowledge"] == ["F-alert-path-dead"]
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--ff-only", "desk")
    assert unit(ws, "release-hardening/manifest")["staleKnowledge"] == []
    assert "release-hardening/manifest" not in [u["id"] for u in ws.json("registry", "next-up")]
    ws.run(
        "unit", "demote", "release-hardening/manifest", "--by", "alice", "--rationale", "re-gate", check=True
    )
    queue = ws.json("registry", "next-up")
    assert queue[0] == {"id": "release-hardening/manifest", "priority": 10}


def test_an_entry_a_merge_commit_added_itself_is_a_tombstone_when_deleted(reg: Any) -> None:
    """A finding that landed on trunk in a merge commit's own change (an "evil merge", in no commit
    of either side) and was deleted later is named by tombstone-not-delete (D-221; missed before)."""
    ws = reg
    ws.git("checkout", "-q", "-b", "side")
    ws.write("intake/I-side.md", "---\nid: I-side\n---\nan idea\n")
    ws.commit("an idea on a side branch")
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "--no-commit", "side")
    ws.write(FINDING, finding_text())
    ws.commit("merge side, with a finding of the merge's own")
    assert ("tombstone-not-delete", FINDING) in codes(removed_on_a_branch(ws))


@pytest.mark.parametrize("ack", [datetime.date(2026, 8, 11), 7])
def test_an_ack_that_is_not_text_is_an_error_never_a_traceback(reg: Any, ack: Any) -> None:
    """`ack: 2026-08-11` unquoted is a YAML date (and `ack: 7` a number): committed on a branch and
    merged, and uncommitted in the working tree, every lint names it and the ack it brings without
    authorization, in lines, exit 1 (a traceback before)."""
    ws = reg
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    before = ws.git("rev-parse", "main").strip()
    ws.git("checkout", "-q", "-b", "unit/ack")
    ws.write(FINDING, finding_text(ack=ack))
    ws.commit("ack", email="u1@units.invalid", sign=False)
    ws.git("checkout", "-q", "main")
    ws.git("merge", "-q", "--no-ff", "-m", "merge unit/ack", "unit/ack")
    result = lint(ws, "--range", f"{before}..main")
    assert ("unauthorized-change", FINDING) in codes(result)
    assert ("schema", FINDING) in codes(lint(ws))
    # a version that is no valid finding changes nothing on trunk: the hold stays
    assert unit(ws, "release-hardening/manifest")["staleKnowledge"] == ["F-alert-path-dead"]
    ws.write("findings/F-two.md", finding_text(ack=ack, fid="F-two"))
    for args in (("registry", "lint"), ("controlroom", "--once", "--json")):
        done = ws.run(*args)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr)
    assert ("unauthorized-change", "findings/F-two.md") in codes(lint(ws))


def test_stale_knowledge_vetoes_dispatch(reg: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text())
    before = ws.digest()
    done = ws.run("unit", "dispatch", "release-hardening/manifest")
    assert done.returncode == 3 and "F-alert-path-dead" in done.stderr
    assert ws.digest() == before
    explained = ws.json("registry", "next-up", "--explain")
    reasons = {u["id"]: u["reasons"] for u in explained["excluded"]}
    assert reasons["release-hardening/manifest"] == ["stale-knowledge: unresolved F-alert-path-dead"]


def test_deleting_a_landed_entry_is_a_tombstone_error(reg: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    result = removed_on_a_branch(ws)
    assert codes(result) == [("tombstone-not-delete", FINDING)]
    assert "register entry removed (tombstone-not-delete)" in result["errors"][0]["message"]
    assert "while it is missing it holds what it held on trunk" in result["errors"][0]["message"]
    assert "withdraw it in place" in result["errors"][0]["message"]
    # withdraw in place instead, with authorization
    ws.git("checkout", "-q", "main", "--", FINDING)
    ws.write(FINDING, finding_text(resolved=True))
    ws.commit("withdraw: filed in error\n\nAuthorized-by: alice")
    assert lint(ws)["errors"] == []


def intake_entry(ident: str) -> str:
    return f"---\nid: {ident}\ndate: '2026-11-20'\ntitle: an idea\ndisposition: new\n---\n"


def test_a_branch_older_than_a_finding_is_told_to_merge_trunk(reg: Any) -> None:
    """A branch forked before a finding landed, checked out at its own head (not a merge with trunk),
    lacks it. It still fails `tombstone-not-delete`, since a branch without an entry trunk holds can
    delete it (a rebase replaying its own commits, a merge once trunk moves: D-234's adversarial
    review); but the message says to merge trunk, not to "restore it and withdraw it in place".
    Merged with trunk, the branch passes, and the unit stays held throughout."""
    ws = reg
    ws.git("checkout", "-q", "-b", "old")
    ws.write("intake/I-side.md", intake_entry("I-side"))
    ws.run("registry", "views", check=True)
    ws.commit("an idea")
    ws.git("checkout", "-q", "main")
    ws.write(FINDING, finding_text())
    ws.run("registry", "views", check=True)
    ws.commit("file it")
    ws.git("checkout", "-q", "old")
    result = lint(ws, "--trunk", "main")
    assert codes(result) == [("tombstone-not-delete", FINDING)]
    message = result["errors"][0]["message"]
    assert "landed on trunk after this branch forked" in message and "merge trunk into the branch" in message
    assert "restore it" not in message
    assert unit(ws, "release-hardening/manifest")["staleKnowledge"] == ["F-alert-path-dead"]
    ws.git("merge", "-q", "--no-edit", "main")
    ws.run("registry", "views", check=True)
    ws.commit("views after merging trunk")
    assert codes(lint(ws, "--trunk", "main")) == []


def test_a_branch_that_adds_trunks_finding_and_deletes_it_fails_its_check(reg: Any) -> None:
    """D-234's adversarial review: a branch forked before the finding adds it byte for byte, then
    deletes it. Its merge-base never had it, yet a rebase onto trunk drops the add as already there
    and replays the delete. The branch's check fails, and rebasing it deletes nothing unseen."""
    ws = reg
    ws.git("checkout", "-q", "-b", "old")
    ws.write("intake/I-side.md", intake_entry("I-side"))
    ws.commit("an idea")
    ws.git("checkout", "-q", "main")
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    ws.git("checkout", "-q", "old")
    ws.git("checkout", "main", "--", FINDING)
    ws.commit("sync the finding")
    (ws.root / FINDING).unlink()
    ws.commit("drop it")
    assert codes(lint(ws, "--trunk", "main")) == [("tombstone-not-delete", FINDING)]
    ws.git("rebase", "-q", "main")
    assert not (ws.root / FINDING).exists()  # what the rebase would land on trunk
    assert codes(lint(ws, "--trunk", "main")) == [("tombstone-not-delete", FINDING)]


def test_a_branch_behind_trunk_that_deletes_what_it_had_is_told_to_restore_it(reg: Any) -> None:
    """Behind trunk by one finding, a branch deleting another that it forked with: that one is
    to be restored and withdrawn in place, trunk's newer one to be merged."""
    ws = reg
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    ws.git("checkout", "-q", "-b", "old")
    (ws.root / FINDING).unlink()
    ws.commit("remove the finding")
    ws.git("checkout", "-q", "main")
    ws.write("findings/F-two.md", finding_text(fid="F-two"))
    ws.commit("file another")
    ws.git("checkout", "-q", "old")
    result = lint(ws, "--trunk", "main")
    messages = {e["entry"]: e["message"] for e in result["errors"]}
    assert sorted(messages) == [FINDING, "findings/F-two.md"]
    assert "restore it and withdraw it in place" in messages[FINDING]
    assert (
        "`regulator registry resolve F-alert-path-dead --by <person with the ack grant>" in messages[FINDING]
    )
    assert "merge trunk into the branch" in messages["findings/F-two.md"]


def test_two_branches_adding_entries_merge_into_the_views_views_would_write(reg: Any) -> None:
    """An operator's review (D-236): two branches each add an intake entry (one sorting first, one
    last) and commit their views. Merged one after the other, git merges INTAKE.md cleanly; its
    count line, changed the same way on both sides, was kept once ("3 entries" above 4 rows), and
    every pull request then failed `views --check` at its merge with trunk. The views count nothing
    now, so the merge is what `registry views` writes."""
    ws = reg
    ws.write("intake/I-mmm.md", intake_entry("I-mmm"))
    ws.run("registry", "views", check=True)
    ws.commit("an idea on trunk")
    for branch, ident in (("first", "I-aaa"), ("last", "I-zzz")):
        ws.git("checkout", "-q", "-b", branch, "main")
        ws.write(f"intake/{ident}.md", intake_entry(ident))
        ws.run("registry", "views", check=True)
        ws.commit(f"add {ident}")
    ws.git("checkout", "-q", "main")
    for branch in ("first", "last"):
        ws.git("merge", "-q", "--no-ff", "-m", f"merge {branch}", branch)
    assert ws.run("registry", "views", "--check").returncode == 0
    assert ws.run("registry", "views").stdout.strip().endswith("(up to date)")


def test_a_view_written_before_d236_differs_and_views_rewrites_it(reg: Any) -> None:
    """A view with the count line under its title (before D-236) differs from what views writes,
    true or not ("0 entries" above a row, D-237), and `registry views` writes it without one."""
    ws = reg
    ws.write("intake/I-mmm.md", intake_entry("I-mmm"))
    ws.run("registry", "views", check=True)
    ws.commit("an idea")
    current = (ws.root / "INTAKE.md").read_text()
    assert current.count("\n# Intake\n\n| id |") == 1
    rows = [row for row in current.splitlines() if row.startswith("| [")]
    true = f"{len(rows)} entries, {sum(row.endswith('| new |') for row in rows)} new."
    for line in (true, "0 entries, 0 new."):
        (ws.root / "INTAKE.md").write_text(current.replace("\n# Intake\n\n", f"\n# Intake\n\n{line}\n\n"))
        assert ws.run("registry", "views", "--check").returncode == 1, line
    ws.run("registry", "views", check=True)
    assert (ws.root / "INTAKE.md").read_text() == current


def test_intake_rejected_in_place_passes(reg: Any) -> None:
    ws = reg
    ws.write(
        "intake/I-cache-views.md",
        "---\nid: I-cache-views\ndate: '2026-11-20'\ntitle: Cache the views\ndisposition: new\n---\nIdea.\n",
    )
    ws.commit("intake")
    ws.git("checkout", "-q", "-b", "triage")
    ws.write(
        "intake/I-cache-views.md",
        "---\nid: I-cache-views\ndate: '2026-11-20'\ntitle: Cache the views\n"
        "disposition: rejected\nreason: views are cheap\n---\nIdea.\n",
    )
    ws.commit("reject the idea")
    assert lint(ws)["errors"] == []


@pytest.mark.parametrize(
    "change",
    [dict(resolved=True), dict(affects=())],
    ids=["flip-resolved", "empty-affects"],
)
def test_load_bearing_guard(reg: Any, change: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    ws.git("checkout", "-q", "-b", "sneaky")
    ws.write(FINDING, finding_text(**change))
    # uncommitted: an error whatever the trailer
    assert codes(lint(ws)) == [("unauthorized-change", FINDING)]
    ws.commit("tidy up")
    result = lint(ws)
    assert codes(result) == [("unauthorized-change", FINDING)]
    assert "Authorized-by" in result["errors"][0]["message"]
    # a trailer naming a person without the ack grant
    ws.commit("still tidy\n\nAuthorized-by: bob")
    assert codes(lint(ws)) == [("unauthorized-change", FINDING)]
    # the owner's trailer, but from another author address than the owner's
    ws.write(FINDING, finding_text(**change) + "\n")
    ws.commit("tidy\n\nAuthorized-by: alice", email="mallory@example.org")
    assert codes(lint(ws)) == [("unauthorized-change", FINDING)]
    # the owner, from the owner's address: passes
    ws.write(FINDING, finding_text(**change) + "\n\n")
    ws.commit("authorized\n\nAuthorized-by: alice")
    assert lint(ws)["errors"] == []


def test_removing_an_ack_says_what_it_does(reg: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text(ack="2026-11-20 alice"))
    ws.commit("file it, acknowledged\n\nAuthorized-by: alice")
    ws.git("checkout", "-q", "-b", "quiet")
    ws.write(FINDING, finding_text(ack=""))
    ws.commit("drop the ack")
    result = lint(ws)
    assert codes(result) == [("ack-removed", FINDING)]
    assert "downgrades the hard re-gate problem to a notice" in result["errors"][0]["message"]


@pytest.mark.parametrize(
    "ack", ["2026-13-45 alice", "yesterday alice", "2026-12-25 alice", "2026-11-20 bob", "2026-11-20"]
)
def test_malformed_ack(reg: Any, ack: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text(ack=ack))
    assert codes(lint(ws, "--trunk", "nope")) == [("malformed-ack", "F-alert-path-dead")]
    ws.write(FINDING, finding_text(ack=ack, resolved=True))
    assert lint(ws, "--trunk", "nope")["errors"] == []


def test_new_entry_arriving_with_an_ack_needs_authorization(reg: Any) -> None:
    ws = reg
    ws.git("checkout", "-q", "-b", "new")
    ws.write(FINDING, finding_text(ack="2026-11-20 alice"))
    ws.commit("file, pre-acked")
    assert codes(lint(ws)) == [("unauthorized-change", FINDING)]
    ws.write(FINDING, finding_text(ack="2026-11-20 alice") + "\n")
    ws.commit("authorize\n\nAuthorized-by: alice")
    assert lint(ws)["errors"] == []


def test_yaml_tags_execute_nothing_and_bad_ids_are_rejected(reg: Any, tmp_path: Path) -> None:
    ws = reg
    marker = tmp_path / "pwned"
    ws.write(
        "findings/F-evil.md",
        f"---\nid: !!python/object/apply:os.system ['touch {marker}']\n"
        "date: '2026-11-01'\ntitle: x\naffects: []\nack: ''\nresolved: false\n---\n",
    )
    ws.write(
        "findings/F-dots.md",
        "---\nid: F-..-x\ndate: '2026-11-01'\ntitle: x\naffects: []\nack: ''\nresolved: false\n---\n",
    )
    ws.write(
        "findings/F-slash.md",
        "---\nid: F-a/b\ndate: '2026-11-01'\ntitle: x\naffects: []\nack: ''\nresolved: false\n---\n",
    )
    result = lint(ws, "--trunk", "nope")
    assert sorted(codes(result)) == [
        ("schema", "findings/F-dots.md"),
        ("schema", "findings/F-slash.md"),
        ("unreadable", "findings/F-evil.md"),
    ]
    assert not marker.exists()
    messages = " ".join(i["message"] for i in result["errors"])
    assert "safe YAML" in messages and "path separator" in messages


def test_references_must_resolve(reg: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text(affects=("nobody",)))
    ws.write(
        "records/REG-CLM-x.md",
        "---\nid: REG-CLM-x\nlabel: x\nkind: CLM\nstatus: {claim: claimed, "
        "implementation: wired, operation: observed}\nsources: []\nrelates: [REG-OBJ-missing]\n"
        "limitations: []\n---\n",
    )
    assert sorted(codes(lint(ws, "--trunk", "nope"))) == [
        ("bad-ref", "F-alert-path-dead"),
        ("bad-ref", "REG-CLM-x"),
    ]


def test_lint_outside_a_repository_never_passes_history(tmp_path: Path) -> None:
    import subprocess

    from tests.helpers import REGULATOR, clean_env

    root = tmp_path / "plain"
    root.mkdir()
    env = clean_env(REGULATOR_NOW="2026-11-29T12:00:00Z")
    from tests.helpers import alice_key

    subprocess.run(
        [REGULATOR, "init", "--owner", "alice", "--owner-key", f"{alice_key()}.pub"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [REGULATOR, "registry", "lint", "--json"], cwd=root, env=env, capture_output=True, text=True
    )
    data = json.loads(done.stdout)
    assert data["historyChecked"] is False
    assert [w["code"] for w in data["warnings"]] == ["history-unavailable"]
    assert "no deletion observed (trunk history unavailable" in data["warnings"][0]["message"]
    text = subprocess.run(
        [REGULATOR, "registry", "lint"], cwd=root, env=env, capture_output=True, text=True
    ).stdout
    assert "history NOT checked" in text and "passed" not in text


def test_views_check(reg: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text())
    assert ws.run("registry", "views", "--check").returncode == 1
    ws.run("registry", "views", check=True)
    assert ws.run("registry", "views", "--check").returncode == 0
    first = (ws.root / "FINDINGS.md").read_text()
    ws.run("registry", "views", check=True)
    assert (ws.root / "FINDINGS.md").read_text() == first  # deterministic
    assert "F-alert-path-dead" in first
    (ws.root / "FINDINGS.md").write_text(first.replace("| no |", "| yes |"))
    done = ws.run("registry", "views", "--check")
    assert done.returncode == 1 and "FINDINGS.md" in done.stdout


@pytest.mark.parametrize(
    "disposition,warns",
    [("new", True), ("parked", False), ("scoped:release-hardening", False), ("rejected", False)],
)
def test_intake_debt(reg: Any, disposition: Any, warns: Any) -> None:
    ws = reg
    extra = "reason: out of scope\n" if disposition == "rejected" else ""
    ws.write(
        "intake/I-old-idea.md",
        f"---\nid: I-old-idea\ndate: '2026-11-01'\ntitle: Old idea\ndisposition: {disposition}\n{extra}---\n",
    )
    ws.write(
        "intake/I-fresh-idea.md",
        "---\nid: I-fresh-idea\ndate: '2026-11-20'\ntitle: Fresh\ndisposition: new\n---\n",
    )
    result = lint(ws, "--trunk", "nope")
    debt = [i["entry"] for i in result["warnings"] if i["code"] == "intake-debt"]
    assert debt == (["I-old-idea"] if warns else [])


def test_rejected_intake_needs_a_reason(reg: Any) -> None:
    ws = reg
    ws.write("intake/I-x.md", "---\nid: I-x\ndate: '2026-11-20'\ntitle: x\ndisposition: rejected\n---\n")
    assert codes(lint(ws, "--trunk", "nope")) == [("schema", "intake/I-x.md")]


def test_shipped_records_state_limitations(reg: Any) -> None:
    records = reg.json("registry", "records")
    ids = {r["id"] for r in records}
    assert {"REG-CMP-register-lint", "REG-BAP-person-by-name", "REG-OBJ-memory-store"} <= ids
    text = " ".join(
        " ".join(x if isinstance(x, str) else x["text"] for x in r["limitations"]) for r in records
    )
    assert "names unauthenticated" in text and "advisory where history is missing" in text
    assert "not signed" in text  # host events: the honest limit of the shared account
    assert "never checks" in text or "nothing checks that a fact is true" in text.lower()
    # design §19: the axes a kind carries; a route states no claim; nothing regulator ships claims to
    # have been observed in operation
    for r in records:
        kind = r["id"].split("-")[1]
        if kind in ("CLM", "BAP"):
            assert set(r["status"]) == {"claim", "implementation", "operation"}, r["id"]
        elif kind == "RTE":
            assert set(r["status"]) == {"implementation", "operation"}, r["id"]
        assert r["status"].get("operation") in (None, "uninspected"), r["id"]
        assert r["limitations"], r["id"]
    # the router and vetoes, identity decisions, the signed-actions path and the control room
    assert {
        "REG-RTE-routing-to-obligations",
        "REG-BAP-vetoes",
        "REG-BAP-identity-decisions",
        "REG-RTE-signed-actions",
        "REG-CMP-control-room",
    } <= ids


def test_ack_needs_the_grant(reg: Any) -> None:
    ws = reg
    ws.write(FINDING, finding_text())
    before = Path(ws.root / FINDING).read_text()
    done = ws.run("registry", "ack", "F-alert-path-dead", "--by", "bob")
    assert done.returncode == 3
    assert (ws.root / FINDING).read_text() == before
    assert ws.run("registry", "ack", "../x", "--by", "alice").returncode == 2


def test_lint_in_a_fresh_clone_without_stores(reg: Any, tmp_path: Path) -> None:
    """CI lints a clone: `.regulator/` is never committed, the tracked skeleton is enough."""
    ws = reg
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    clone = tmp_path / "clone"
    ws.git("clone", "-q", str(ws.root), str(clone))
    assert not (clone / ".regulator").exists()
    done = ws.run("registry", "lint", "--json", cwd=clone)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["historyChecked"] is True
    assert [n["code"] for n in data["notices"]] == ["awaits-ack"]
    (clone / FINDING).unlink()
    done = ws.run("registry", "lint", "--json", cwd=clone)
    assert done.returncode == 1 and "tombstone-not-delete" in done.stdout


def test_trunk_history_read_in_parallel_parts_finds_every_landed_entry(
    reg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long histories are read by several git processes over exact parts of trunk (merges
    included); the entries found must be those one git process finds over the whole."""
    from registry import history

    ws = reg
    for i in range(6):
        ws.write(f"findings/F-early-{i}.md", finding_text(fid=f"F-early-{i}"))
        ws.commit(f"early {i}")
    ws.git("checkout", "-q", "-b", "side")
    ws.write("intake/I-side.md", "---\nid: I-side\n---\nfrom a branch\n")
    ws.commit("side entry")
    ws.git("checkout", "-q", "main")
    ws.write("records/R-main.md", "---\nid: R-main\n---\nrecord\n")
    ws.commit("main entry")
    ws.git("merge", "-q", "--no-ff", "side", "-m", "merge side")
    (ws.root / "findings/F-early-2.md").unlink()
    ws.commit("delete one (landed all the same)")
    for i in range(5):
        ws.write(f"findings/F-late-{i}.md", finding_text(fid=f"F-late-{i}"))
        ws.commit(f"late {i}")

    whole = history.read_history(ws.root, "main")
    monkeypatch.setattr(history, "PART", 3)
    monkeypatch.setattr(history.os, "cpu_count", lambda: 4)
    logs = []
    real_run = subprocess.run

    def counting(cmd: Any, *args: Any, **kwargs: Any) -> Any:  # the real git runs; the parts are only counted
        if "log" in cmd:
            logs.append(cmd)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    parts = history.read_history(ws.root, "main")
    assert len(logs) == 4
    assert whole.available and parts.available
    assert parts.landed == whole.landed
    mine = {p for p in parts.landed if "early" in p or "late" in p or "side" in p or "R-main" in p}
    assert len(mine) == 13 and "findings/F-early-2.md" in mine and "intake/I-side.md" in mine


def test_trunk_history_is_read_at_a_working_trees_root_only(
    reg: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder inside the working tree, a bare repository, a plain folder and a missing path each
    say why there is no history, as lint reports it (D-195: git itself, no GitPython)."""
    from registry import history

    assert history.read_history(reg.root, "main").available
    assert history.read_history(reg.root / "findings", "main").why == "not a git repository"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert history.read_history(plain, "main").why == "not a git repository"
    assert history.read_history(tmp_path / "missing", "main").why == "not a git repository"
    monkeypatch.setenv("GIT_DIR", str(reg.root / ".git"))  # a detached git folder is not followed (D-199)
    assert history.read_history(plain, "main").why == (
        f"not a git repository (GIT_DIR in the environment not followed: regulator reads {plain})"
    )
    monkeypatch.delenv("GIT_DIR")
    bare = tmp_path / "bare.git"
    helpers.git(tmp_path, "clone", "-q", "--bare", str(reg.root), str(bare), env=reg.env)
    assert history.read_history(bare, "main").why == "a bare repository (no working tree)"
    assert (
        history.read_history(reg.root, "no-such-trunk").why
        == "no trunk branch 'no-such-trunk' (nor origin/no-such-trunk)"
    )
    lonely = tmp_path / "lonely"  # a branch sharing no commit with trunk; then one with none at all
    helpers.git(tmp_path, "clone", "-q", str(reg.root), str(lonely), env=reg.env)
    helpers.git(lonely, "checkout", "-q", "--orphan", "lonely", env=reg.env)
    helpers.git(lonely, "commit", "-q", "--allow-empty", "--no-gpg-sign", "-m", "alone", env=reg.env)
    why = history.read_history(lonely, "main").why
    assert why == "git could not answer (HEAD and refs/heads/main share no commit)", why
    helpers.git(lonely, "checkout", "-q", "--orphan", "unborn", env=reg.env)
    why = history.read_history(lonely, "main").why
    assert why.startswith("git could not answer (fatal: ") and "\n" not in why, why
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")  # git's own refusal, as git says it
    assert history.read_history(reg.root, "main").why.startswith(
        "git could not answer (fatal: detected dubious"
    )


def test_lint_and_once_read_trunk_history_without_gitpython(reg: Any) -> None:
    """Importing GitPython runs `git version` and cost a lint or --once about 60 ms of CPU."""
    for args in (["registry", "lint", "--json"], ["controlroom", "--once", "--json"]):
        done, heavy = helpers.imported(reg, args, {"git", "gitdb"})
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
        assert heavy == [], args


@given(st.lists(st.tuples(st.integers(-5, 5), st.text(min_size=1, max_size=6)), max_size=60))
def test_next_up_order_is_priority_then_id_in_code_point_order(ready: Any) -> None:
    from engine.read.nextup import _in_order

    assert _in_order(ready) == sorted(ready)


def test_a_git_hooks_environment_does_not_point_regulator_at_another_repository(
    reg: Any, tmp_path: Path
) -> None:
    """Run from a git hook, regulator inherits GIT_DIR and GIT_INDEX_FILE (D-199): its git still
    reads the workspace's repository, as `-C` names it, and answers as it does without them."""
    other = tmp_path / "other"
    helpers.git(tmp_path, "init", "-q", "-b", "elsewhere", str(other), env=reg.env)
    elsewhere = {"GIT_DIR": str(other / ".git"), "GIT_INDEX_FILE": str(other / ".git" / "index")}
    for args in (["registry", "lint", "--json"], ["status", "--json"]):
        plain = reg.run(*args)
        hooked = reg.run(*args, env=elsewhere)
        assert (hooked.returncode, hooked.stdout) == (plain.returncode, plain.stdout), args
    assert json.loads(reg.run("registry", "lint", "--json", env=elsewhere).stdout)["historyChecked"] is True


def test_reading_trunks_history_runs_no_signature_program_the_repository_names(
    reg: Any, tmp_path: Path
) -> None:
    """`log.showSignature` makes every `git log` run `gpg.program` on a signed commit: set by a unit
    in the shared .git, with a commit carrying a PGP signature on trunk, lint would run the unit's
    program in the person's process (D-199)."""
    ran = tmp_path / "ran"
    program = tmp_path / "gpg.sh"
    program.write_text(f"#!/bin/sh\ntouch {ran}\nexit 1\n")
    program.chmod(0o755)
    reg.git("config", "log.showSignature", "true")
    reg.git("config", "gpg.program", str(program))
    reg.write("findings/F-unit.md", finding_text(fid="F-unit"))
    reg.git("add", "findings/F-unit.md")
    tree = reg.git("write-tree").strip()
    head = reg.git("rev-parse", "HEAD").strip()
    body = (
        f"tree {tree}\nparent {head}\nauthor u <u@x> 1764000000 +0000\ncommitter u <u@x> 1764000000 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\na finding\n"
    )
    forged = tmp_path / "commit"
    forged.write_text(body)
    sha = reg.git("hash-object", "-t", "commit", "-w", str(forged)).strip()
    reg.git("update-ref", "refs/heads/main", sha)
    reg.git("reset", "-q", "--hard", sha)
    assert (
        subprocess.run(["git", "-C", str(reg.root), "log", "-1"], capture_output=True, env=reg.env).returncode
        == 0
    )
    assert ran.exists()  # plain git runs it
    ran.unlink()
    done = reg.run("registry", "lint", "--json")
    assert done.returncode in (0, 1) and json.loads(done.stdout)["historyChecked"] is True, done.stderr
    assert not ran.exists()


def test_a_missing_object_fetches_nothing_from_a_remote_the_repository_names(
    reg: Any, tmp_path: Path
) -> None:
    """A unit that deletes one of trunk's objects and declares a "promisor" remote would have git
    fetch it lazily, running the remote's `uploadpack` command in the person's process (D-199):
    nothing is fetched; lint says git could not answer."""
    ran = tmp_path / "ran"
    remote = tmp_path / "remote"
    helpers.git(tmp_path, "init", "-q", "--bare", str(remote), env=reg.env)
    reg.write("findings/F-gone.md", finding_text(fid="F-gone"))
    reg.commit("a finding")
    blob = reg.git("rev-parse", "HEAD:findings/F-gone.md").strip()
    (reg.root / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for key, value in (
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.promisor", "true"),
        ("remote.origin.url", str(remote)),
        ("protocol.file.allow", "always"),
        ("remote.origin.uploadpack", f"touch {ran}; git-upload-pack"),
    ):
        reg.git("config", key, value)
    plain = subprocess.run(
        ["git", "-C", str(reg.root), "cat-file", "-p", blob], capture_output=True, env=reg.env
    )
    assert plain.returncode != 0 and ran.exists()  # plain git runs it
    ran.unlink()
    done = reg.run("registry", "lint", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    assert not ran.exists()
    said = json.loads(done.stdout)
    assert said["historyChecked"] is False and said["historyUnavailable"] == (
        f"git could not answer (no object {blob} (findings/F-gone.md at {reg.git('rev-parse', 'HEAD').strip()}))"
    )
