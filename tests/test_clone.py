"""A checkout without the stores says so (design §16.2; issue 13): a CI clone shows no unit as
`todo`, lint's re-gate reports `unit state unknown`, `controlroom --once` exits 1 there unless
`--registers-only`, and `identity verify` reads the decisions from git history."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import helpers
from tests.helpers import (
    REGULATOR,
    alice_key,
    clean_env,
    git,
    make_key,
    make_workspace,
    one_line,
    report_args,
)

ABSENT = "stores: absent — unit state unknown"
FINDING = "findings/F-x.md"
ROUTING = "regulator/policy/routing.yaml"
INTERACTION = "regulator/policy/interaction.yaml"
DOCS = Path(__file__).parent.parent / "docs"


def finding(ack: str = "2026-11-20 alice", affects: Any = ("u1", "u3")) -> str:
    units = ", ".join(affects)
    return (
        f"---\nid: F-x\ndate: '2026-11-01'\ntitle: the alerter cannot run\naffects: [{units}]\n"
        f"ack: '{ack}'\nresolved: false\n---\nThe alerter exits 127.\n"
    )


def clone(ws: helpers.Workspace, tmp_path: Path, name: str = "clone", depth: int | None = None) -> Path:
    target = tmp_path / name
    shallow = ["--depth", str(depth)] if depth else []
    git(tmp_path, "clone", "-q", *shallow, f"file://{ws.root}", str(target), env=ws.env)
    assert not (target / ".regulator").exists()
    return target


def hand_edit(ws: helpers.Workspace, relative: str, text: str) -> None:
    path = ws.root / relative
    path.chmod(0o644)  # governed files are left read-only
    path.write_text(text)


@pytest.fixture
def ws(tmp_path: Path) -> Any:
    return make_workspace(tmp_path)


@pytest.fixture
def fleet(tmp_path: Path) -> Any:
    """A host workspace with u1 in progress, b1 aborted, an acknowledged finding on u1 and u3 (so
    the host's lint has a re-gate error), a decided routing change, and the views committed.
    Returns (ws, BEFORE): the trunk commit before these were pushed. Built once per test process
    (helpers.prepared), copied for each test."""
    return helpers.prepared(tmp_path, host_history)


def host_history(ws: helpers.Workspace) -> str:
    before = ws.git("rev-parse", "HEAD").strip()
    ws.lease("u1")
    ws.run("unit", "decide", "b1", "--action", "abort", "--by", "alice", "--rationale", "r", check=True)
    ws.write(FINDING, finding())
    ws.commit("finding F-x, acknowledged\n\nAuthorized-by: alice")
    routing = (ws.root / ROUTING).read_text().replace("intakeDebtDays: 14", "intakeDebtDays: 21")
    assert "intakeDebtDays: 21" in routing
    ws.decide(ROUTING, routing)
    ws.run("registry", "views", check=True)
    ws.commit("views")
    return before


# ---- stores: absent ------------------------------------------------------------------------------


def test_the_readers_say_stores_absent_first_and_show_no_unit_as_todo(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    host = ws.json("status")
    assert host["stores"] == "present"
    assert {u["id"]: u["status"] for u in host["units"]} == {
        "u1": "in-progress", "u3": "todo", "r1": "todo", "b1": "aborted"
    }  # fmt: skip
    assert isinstance(ws.json("obligations"), list)  # the §13 list where the stores are present
    assert ws.json("registry", "next-up") == [{"id": "r1", "priority": 100}]
    assert ws.json("registry", "next-up", "--explain")["stores"] == "present"
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["stores"] == "present"

    here = clone(ws, tmp_path)
    for args in (
        ["status"],
        ["obligations"],
        ["signals"],
        ["memory"],
        ["calibration"],
        ["registry", "next-up"],
        ["registry", "next-up", "--explain"],
        ["registry", "lint"],
        ["controlroom", "--once"],
    ):
        done = ws.run(*args, cwd=here)
        assert done.stdout.splitlines()[0] == ABSENT, (args, done.stdout)
        assert "Traceback" not in done.stderr
        assert not re.search(r"\btodo\b", done.stdout), (args, done.stdout)
    status = ws.json("status", cwd=here)
    assert status["stores"] == "absent"
    assert {u["status"] for u in status["units"]} == {"unknown"}
    assert {u["held"] for u in status["units"]} == {None} and status["unrouted"] is None
    dismissed = ws.run("verify", "--dismiss", "memory:1", "--by", "alice", "--rationale", "x", cwd=here)
    assert dismissed.returncode == 2 and "stores: absent" in one_line(dismissed)
    assert not (here / ".regulator").exists()
    for args in (["signals"], ["memory"], ["calibration"]):  # a listing's text: unknown, exit 1
        done = ws.run(*args, cwd=here)
        assert (
            done.returncode == 1
            and f"{args[0].replace('calibration', 'predictions')}: unknown" in done.stdout
        )
        assert "no predictions yet" not in done.stdout, done.stdout
    for args in (["obligations"], ["signals"], ["memory"], ["calibration"], ["registry", "next-up"]):
        done = ws.run(*args, "--json", cwd=here)
        assert (done.returncode, json.loads(done.stdout)) == (1, [])
        assert done.stderr.endswith(f"regulator: {ABSENT}\n")
    explained = json.loads(ws.run("registry", "next-up", "--explain", "--json", cwd=here).stdout)
    assert explained["nextUp"] == [] and {u["id"] for u in explained["excluded"]} == {"u1", "u3", "r1", "b1"}
    assert all("status unknown" in u["reasons"][0] for u in explained["excluded"])
    lint = json.loads(ws.run("registry", "lint", "--json", cwd=here).stdout)
    assert lint["stores"] == "absent"
    once = json.loads(ws.run("controlroom", "--once", "--json", cwd=here).stdout)
    assert once["stores"] == "absent" and {u["status"] for u in once["status"]["units"]} == {"unknown"}
    assert not (here / ".regulator").exists()


def test_status_in_a_clone_reads_the_committed_policy_and_calls_it_unverified(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    here = clone(ws, tmp_path)
    done = ws.run("status", cwd=here)
    assert "names unauthenticated" not in done.stdout
    assert "policy unverified: the committed interaction.yaml requires signatures" in done.stdout
    assert ws.json("status", cwd=here)["authentication"] == "signatures-unverified"
    assert ws.json("status")["authentication"] == "signatures"
    # a committed policy without requireSignatures is reported as such, still unverified
    hand_edit(ws, INTERACTION, (ws.root / INTERACTION).read_text().replace("requireSignatures: true\n", ""))
    ws.commit("policy without signatures (a hand edit)")
    other = clone(ws, tmp_path, "other")
    assert ws.json("status", cwd=other)["authentication"] == "names-unverified"
    assert "names unauthenticated" in ws.run("status", cwd=other).stdout


def test_lint_re_gate_is_unit_state_unknown_in_a_clone(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    host = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert [(i["code"], i["entry"]) for i in host["errors"]] == [("regate", "F-x")]
    here = clone(ws, tmp_path)
    done = ws.run("registry", "lint", "--json", cwd=here)
    assert done.returncode == 0, done.stdout
    data = json.loads(done.stdout)
    assert data["errors"] == []
    unknown = [i for i in data["warnings"] if i["code"] == "regate-unknown"]
    assert [i["entry"] for i in unknown] == ["F-x", "F-x"]
    assert "unit state unknown" in unknown[0]["message"] and "u1" in unknown[0]["message"]
    text = ws.run("registry", "lint", cwd=here).stdout
    assert "warning: regate-unknown: F-x (acknowledged) affects u1: unit state unknown" in text


def test_once_in_a_clone_exits_1_with_stores_absent_and_writes_nothing(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    before = sorted(p.relative_to(here) for p in here.rglob("*") if ".git" not in p.parts)
    done = ws.run("controlroom", "--once", cwd=here)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"- {ABSENT} (run --once on the host" in done.stdout
    header = done.stdout.splitlines()[1]
    assert "stores absent: unit state unknown" in header  # the header line
    for part in ("? blocking", "? held", "? stale", "? expiring", "? unrouted"):  # unknown, never 0
        assert part in header, header
    data = json.loads(ws.run("controlroom", "--once", "--json", cwd=here).stdout)
    assert data["exitCode"] == 1 and data["exitReasons"][0].startswith(ABSENT)
    # identity is judged from git history there, not from a store that is not here
    assert not [r for r in data["exitReasons"] if r.startswith("identity verify")]
    assert sorted(p.relative_to(here) for p in here.rglob("*") if ".git" not in p.parts) == before


def test_registers_only_needs_once(ws: helpers.Workspace) -> None:
    done = ws.run("controlroom", "--registers-only")
    assert done.returncode == 2 and "--registers-only goes with --once" in one_line(done)
    for args in (("--once",), ("--once", "--json"), ()):
        done = ws.run("controlroom", *args, "--trunk", "main")
        assert done.returncode == 2 and "--trunk goes with --once --registers-only" in one_line(done)
    for name in ("main~1", "HEAD"):  # HEAD is no branch: it followed what origin's HEAD named (D-230)
        done = ws.run("controlroom", "--once", "--registers-only", "--trunk", name)
        assert done.returncode == 2 and one_line(done) == f"regulator: --trunk {name!r} is no branch name"


def test_registers_only_on_the_host_checks_git_and_the_re_gate(fleet: Any) -> None:
    ws, _ = fleet
    done = ws.run("controlroom", "--once", "--registers-only", "--json")
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["stores"] == "present"
    assert data["exitReasons"] == [
        "lint error regate: F-x (acknowledged) affects in-progress u1: demote to todo (re-gate) or resolve "
        "the finding"
    ]
    assert data["identity"]["ok"] is True and data["views"] == {"differ": []}


def test_registers_only_fails_on_views_that_differ(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    findings_md = ws.root / "FINDINGS.md"
    findings_md.write_text(findings_md.read_text() + "hand edit\n")
    ws.commit("a hand edit of the generated view")
    here = clone(ws, tmp_path)
    done = ws.run("controlroom", "--once", "--registers-only", cwd=here)
    assert done.returncode == 1
    assert "- views: FINDINGS.md differs from what `regulator registry views` generates" in done.stdout


# ---- the documented CI commands ------------------------------------------------------------------


def documented_commands() -> list[str]:
    text = (DOCS / "ci.md").read_text()
    section = text.split("## The commands", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert commands == [
        'regulator registry lint --require-history --trunk main --range "$BEFORE..$AFTER"',
        "regulator controlroom --once --registers-only --trunk main",
    ]
    yml = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert all(f"          {c}\n" in yml for c in commands), "the workflow runs the same commands"
    assert "fetch-depth: 0" in yml
    return commands


def run_documented(ws: helpers.Workspace, where: Path, before: str) -> list[subprocess.CompletedProcess]:
    after = git(where, "rev-parse", "HEAD", env=ws.env).strip()
    env = dict(
        ws.env, BEFORE=before, AFTER=after, PATH=f"{Path(REGULATOR).parent}{os.pathsep}{os.environ['PATH']}"
    )
    return [
        subprocess.run(
            ["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True, timeout=120
        )
        for command in documented_commands()
    ]


def test_the_documented_ci_commands_exit_as_documented(fleet: Any, tmp_path: Path) -> None:
    ws, before = fleet
    full, shallow = clone(ws, tmp_path, "full"), clone(ws, tmp_path, "shallow", depth=1)
    lint, room = run_documented(ws, full, before)
    assert (lint.returncode, room.returncode) == (0, 0), (lint.stdout, room.stdout)
    assert lint.stdout.splitlines()[0] == ABSENT and "history checked (every commit of" in lint.stdout
    assert room.stdout.splitlines()[0] == ABSENT
    assert "identity (git history): ok, 6 file(s) as decided (signed)" in room.stdout
    assert "warning: regate-unknown" in room.stdout and "Traceback" not in lint.stderr + room.stderr

    lint, room = run_documented(ws, shallow, before)
    assert (lint.returncode, room.returncode) == (1, 1)
    assert "error: history-unavailable" in lint.stdout
    assert (
        "- identity verify: git history unavailable (the clone is shallow); check out with full depth"
        in room.stdout
    )
    assert "- lint error history-unavailable" in room.stdout

    # the third row: a governed file edited by hand and committed without a decision
    hand_edit(ws, "regulator/identity/invariants.md", "Anything goes.\n")
    ws.commit("loosen the invariants (no decision)")
    lint, room = run_documented(ws, clone(ws, tmp_path, "edited"), before)
    assert (lint.returncode, room.returncode) == (0, 1)
    assert (
        "- identity verify: regulator/identity/invariants.md: its content matches no decision" in room.stdout
    )
    doc = (DOCS / "ci.md").read_text()
    for row in ("| exit 0 | exit 0 |", "| exit 1: `history-unavailable` | exit 1:", "| exit 0 (lint reads"):
        assert row in doc


# ---- identity from git history -------------------------------------------------------------------


def test_init_commits_the_baseline_as_the_owners_signed_decision_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    env = clean_env(REGULATOR_SIGNING_KEY=str(alice_key()))
    git(root, "init", "-q", "-b", "main", env=env)
    (root / "staged.txt").write_text("mine\n")
    git(root, "add", "staged.txt", env=env)
    done = subprocess.run(
        [REGULATOR, "init", "--owner", "alice", "--owner-key", f"{alice_key()}.pub"],
        cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "baseline committed as alice's decision, signed" in done.stdout
    # the baseline decision is the first of init's two commits; the rest of the workspace follows
    committed = git(root, "show", "--name-only", "--format=", "HEAD~1", env=env).split()
    assert sorted(committed) == sorted(
        [f"regulator/identity/{n}" for n in ("invariants.md", "glossary.md", "boundaries.md")]
        + [f"regulator/policy/{n}" for n in ("routing.yaml", "interaction.yaml", "profiles.yaml")]
    )
    message = git(root, "log", "-1", "--format=%B", "HEAD~1", env=env)
    assert "Regulator-Decision: baseline\nRegulator-Decided-By: alice" in message
    assert "gpgsig -----BEGIN SSH SIGNATURE-----" in git(root, "cat-file", "commit", "HEAD~1", env=env)
    status = git(root, "status", "--porcelain", env=env)
    assert status.splitlines() == ["A  staged.txt"]  # left staged, not committed; nothing else is left
    assert "staged.txt" not in git(root, "show", "--name-only", "--format=", "HEAD", env=env).split()


def test_init_without_the_private_key_commits_a_claimed_baseline_that_verifies(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    env = clean_env()
    git(root, "init", "-q", "-b", "main", env=env)
    done = subprocess.run(
        [REGULATOR, "init", "--owner", "alice", "--owner-key", f"{alice_key()}.pub"],
        cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "unsigned ('claimed'" in done.stdout
    assert "gpgsig" not in git(root, "cat-file", "commit", "HEAD", env=env)
    here = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(here), env=env)
    verified = subprocess.run(
        [REGULATOR, "identity", "verify", "--json"], cwd=here, env=env, capture_output=True, text=True
    )
    data = json.loads(verified.stdout)
    assert verified.returncode == 0 and data["ok"] is True
    assert {f["how"] for f in data["files"]} == {"claimed"}


def test_identity_verify_in_a_clone_reads_decisions_from_history(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    done = ws.run("identity", "verify", cwd=here)
    assert done.returncode == 0, done.stdout
    assert done.stdout.splitlines()[0] == "stores: absent — identity checked against git history"
    data = ws.json("identity", "verify", cwd=here)
    assert data["source"] == "history" and data["ok"] is True
    decided = {f["file"]: f["decided"] for f in data["files"]}
    accept = ws.git("log", "-1", "--format=%H", "--grep=accept proposal", "--", ROUTING).strip()
    baseline = ws.git("log", "--format=%H", "--grep=Regulator-Decision: baseline").strip()
    assert decided[ROUTING] == accept and decided[INTERACTION] == baseline
    assert {f["how"] for f in data["files"]} == {"signed"}


def test_a_hand_edit_committed_without_a_decision_fails_in_a_clone(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    hand_edit(ws, ROUTING, (ws.root / ROUTING).read_text() + "# loosened\n")
    ws.commit("tweak routing (signed by alice, but no decision)")
    here = clone(ws, tmp_path)
    done = ws.run("identity", "verify", cwd=here)
    assert done.returncode == 1
    assert f"{ROUTING}: its content matches no decision in git history" in done.stdout
    data = json.loads(ws.run("identity", "verify", "--json", cwd=here).stdout)
    assert [f["file"] for f in data["files"] if not f["ok"]] == [ROUTING]


def forge(ws: helpers.Workspace, relative: str, text: str, sign_with: Path | None, by: str = "alice") -> None:
    """A commit that carries the decision trailers without a decision behind it."""
    hand_edit(ws, relative, text)
    ws.git("add", "-A")
    message = f"regulator: accept\n\nAuthorized-by: {by}\nRegulator-Decision: 01FORGED\nRegulator-Decided-By: {by}\n"
    signing = (
        ["-c", "gpg.format=ssh", "-c", f"user.signingkey={sign_with}", "commit", "-S"]
        if sign_with
        else ["commit"]
    )
    ws.git(*signing, "-q", "-m", message)


@pytest.mark.parametrize("how", ["unsigned", "signed by mallory", "decided by bob without accept"])
def test_forged_trailers_do_not_count(ws: helpers.Workspace, tmp_path: Path, how: Any) -> None:
    text = (ws.root / ROUTING).read_text() + "# forged\n"
    if how == "unsigned":
        forge(ws, ROUTING, text, None)
        why = "not SSH-signed by one of alice's keys, and signatures are required"
    elif how == "signed by mallory":
        forge(ws, ROUTING, text, make_key(tmp_path / "keys", "mallory"))
        why = "not SSH-signed by one of alice's keys"
    else:
        forge(ws, ROUTING, text, alice_key(), by="bob")
        why = "decided by bob, who lacks the accept grant"
    here = clone(ws, tmp_path)
    done = ws.run("identity", "verify", cwd=here)
    assert done.returncode == 1
    assert f"{ROUTING}: its content is that of commit" in done.stdout and why in done.stdout


def test_a_key_a_decision_adds_signs_only_after_it(ws: helpers.Workspace, tmp_path: Path) -> None:
    """The chain of trust: a commit is judged under the policy decided before it."""
    carol = make_key(tmp_path / "keys", "carol")
    people = (ws.root / INTERACTION).read_text()
    added = people.replace(
        "people:\n", f"people:\n  carol:\n    grants: [accept]\n    keys: ['{carol.with_suffix('.pub').read_text().strip()}']\n", 1
    )  # fmt: skip
    assert "carol" in added
    # carol adds herself, signing with her own key: no decided policy lists her yet
    forge(ws, INTERACTION, added, carol, by="carol")
    here = clone(ws, tmp_path)
    done = ws.run("identity", "verify", cwd=here)
    assert done.returncode == 1 and "decided by carol, who lacks the accept grant" in done.stdout


def test_a_decision_turning_signatures_off_is_signed_and_a_clone_verifies(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """Accepting `requireSignatures: false` committed the decision unsigned (the policy after it
    no longer asks), while a clone judges that commit under the policy before it, which does: every
    CI check then failed for good. The decision's commit is signed where the policy it replaces
    required signatures."""
    ws.decide(
        INTERACTION,
        (ws.root / INTERACTION).read_text().replace("requireSignatures: true", "requireSignatures: false"),
    )
    decided = ws.git("log", "-1", "--format=%H", "--", INTERACTION).strip()
    assert "\ngpgsig -----BEGIN SSH SIGNATURE-----" in ws.git("cat-file", "commit", decided)
    here = clone(ws, tmp_path)
    done = ws.run("identity", "verify", cwd=here)
    assert done.returncode == 0, done.stdout


def test_merge_squash_and_rebase_do_not_break_identity_verify(ws: helpers.Workspace, tmp_path: Path) -> None:
    ws.git("checkout", "-q", "-b", "side")
    ws.write("notes/side.md", "side work\n")
    ws.commit("side work")
    ws.git("checkout", "-q", "-b", "later", "main")
    ws.write("notes/later.md", "later work\n")
    ws.commit("later work")
    ws.git("checkout", "-q", "-b", "squashed", "main")
    ws.write("notes/squashed.md", "one\n")
    ws.commit("squashed 1")
    ws.git("checkout", "-q", "main")
    ws.decide(ROUTING, (ws.root / ROUTING).read_text().replace("intakeDebtDays: 14", "intakeDebtDays: 30"))
    ws.git("merge", "-q", "--no-ff", "-m", "merge side", "side")  # a merge commit on top
    ws.git("merge", "-q", "--squash", "squashed")
    ws.commit("squash-merge squashed")
    ws.git("checkout", "-q", "later")
    ws.git("rebase", "-q", "main")  # later's commit replayed on the decision
    ws.git("checkout", "-q", "main")
    assert len(ws.git("rev-list", "--merges", "main").split()) == 1
    for branch in ("main", "later"):
        here = clone(ws, tmp_path, f"clone-{branch}")
        git(here, "checkout", "-q", branch, env=ws.env)
        done = ws.run("identity", "verify", cwd=here)
        assert done.returncode == 0, (branch, done.stdout)
        assert "intakeDebtDays: 30" in (here / ROUTING).read_text()


def test_a_decision_merged_from_a_branch_counts(ws: helpers.Workspace, tmp_path: Path) -> None:
    ws.git("checkout", "-q", "-b", "policy")
    ws.decide(ROUTING, (ws.root / ROUTING).read_text().replace("intakeDebtDays: 14", "intakeDebtDays: 7"))
    ws.git("checkout", "-q", "main")
    ws.write("notes/main.md", "meanwhile\n")
    ws.commit("meanwhile on main")
    ws.git("merge", "-q", "--no-ff", "-m", "merge the policy branch", "policy")
    last = ws.git("log", "-1", "--first-parent", "--format=%s", "--", ROUTING).strip()
    assert last == "merge the policy branch"  # on trunk, the last commit touching it has no trailers
    here = clone(ws, tmp_path)
    assert ws.run("identity", "verify", cwd=here).returncode == 0


def test_a_branch_cannot_bring_its_own_baseline(ws: helpers.Workspace, tmp_path: Path) -> None:
    """An orphan root with a baseline of its own (mallory's key, mallory with accept), merged into
    a branch as its first parent so that it comes first in history's order: it is not on trunk."""
    mallory = make_key(tmp_path / "keys", "mallory")
    pub = mallory.with_suffix(".pub").read_text().strip()
    policy = f"requireSignatures: true\npeople:\n  mallory:\n    grants: [accept]\n    keys: ['{pub}']\n"
    source = tmp_path / "forged.yaml"
    source.write_text(policy)
    blob = ws.git("hash-object", "-w", str(source)).strip()

    def tree(base: str | None) -> str:  # built in a private index: the working tree is not touched
        env = dict(ws.env, GIT_INDEX_FILE=str(tmp_path / f"index-{base}"))
        if base:
            git(ws.root, "read-tree", base, env=env)
        git(ws.root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{INTERACTION}", env=env)
        return git(ws.root, "write-tree", env=env).strip()

    dated = dict(ws.env, GIT_AUTHOR_DATE="2001-01-01T00:00:00Z", GIT_COMMITTER_DATE="2001-01-01T00:00:00Z")
    message = "baseline\n\nRegulator-Decision: baseline\nRegulator-Decided-By: mallory\n"
    signing = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={mallory}"]
    forged = git(ws.root, *signing, "commit-tree", "-S", tree(None), "-m", message, env=dated).strip()
    merge = ws.git("commit-tree", tree("main"), "-p", forged, "-p", "main", "-m", "merge main").strip()
    ws.git("branch", "pr", merge)
    here = clone(ws, tmp_path)
    git(here, "checkout", "-q", "pr", env=ws.env)
    assert pub in (here / INTERACTION).read_text()
    order = git(
        here, "log", "--reverse", "--topo-order", "--format=%H", "--grep=^Regulator-Decision:", env=ws.env
    )
    assert order.split()[0] == forged  # without the trunk anchor it would be taken as the baseline
    done = ws.run("identity", "verify", "--json", cwd=here)
    data = json.loads(done.stdout)
    assert done.returncode == 1 and [f["file"] for f in data["files"] if not f["ok"]] == [INTERACTION]
    why = "a baseline commit not on trunk (refs/heads/main): a branch cannot bring its own root"
    assert {"commit": forged, "why": why} in data["uncounted"]


def test_a_shallow_clone_has_no_history_to_verify_identity(ws: helpers.Workspace, tmp_path: Path) -> None:
    ws.commit("another commit, so depth 1 cuts history")
    here = clone(ws, tmp_path, depth=1)
    done = ws.run("identity", "verify", cwd=here)
    assert done.returncode == 0
    assert "identity verify: history unavailable (the clone is shallow): not checked" in done.stdout
    done = ws.run("identity", "verify", "--require-history", cwd=here)
    assert done.returncode == 1 and "history unavailable" in done.stdout
    data = json.loads(ws.run("identity", "verify", "--json", cwd=here).stdout)
    assert data["history"] == "unavailable" and data["ok"] is None


def test_accept_commits_with_the_decision_trailers_signed(ws: helpers.Workspace) -> None:
    ws.decide(ROUTING, (ws.root / ROUTING).read_text() + "# ok\n")
    raw = ws.git("cat-file", "commit", "HEAD")
    decision = [e for e in ws.events("identity") if e.get("decision") == "accepted"][-1]
    assert f"Regulator-Decision: {decision['id']}\nRegulator-Decided-By: alice" in raw
    assert "gpgsig -----BEGIN SSH SIGNATURE-----" in raw


# ---- design §16.4 leftovers ------------------------------------------------------------------------


def test_a_screenshot_path_that_cannot_be_written_is_exit_2_and_nothing_written(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    missing = tmp_path / "missing" / "x.svg"
    done = ws.run("controlroom", "--screenshot", str(missing))
    assert done.returncode == 2 and "does not exist" in one_line(done)
    assert not missing.parent.exists()
    folder = tmp_path / "a-folder.svg"
    folder.mkdir()
    done = ws.run("controlroom", "--screenshot", str(folder))
    assert done.returncode == 2 and "not a regular file" in one_line(done)
    assert list(folder.iterdir()) == []
    good = tmp_path / "shot.svg"
    done = ws.run("controlroom", "--screenshot", str(good), "--view", "units")
    assert done.returncode == 0, done.stderr
    assert good.read_text().startswith("<svg") and oct(good.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".regulator-")] == []


def test_demo_dir_that_is_a_file_is_exit_2_and_left_alone(ws: helpers.Workspace, tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("keep me\n")
    done = ws.run("demo", "--dir", str(target), cwd=tmp_path)
    assert done.returncode == 2 and "is a file, not a folder" in one_line(done)
    assert target.read_text() == "keep me\n"


def test_the_interactive_room_without_a_terminal_is_exit_2(ws: helpers.Workspace) -> None:
    done = ws.run("controlroom", input="")  # stdin and stdout are pipes here
    assert done.returncode == 2 and "--once" in one_line(done) and "terminal" in one_line(done)
    assert done.stdout == ""
    done = ws.run("controlroom", "--read-only", "--view", "units", input="")
    assert done.returncode == 2
    assert ws.run("controlroom", "--once").returncode == 0  # --once is unaffected


@pytest.mark.skipif(sys.platform != "linux", reason="a pseudo-terminal on stdout only")
def test_the_room_needs_a_terminal_on_stdin_too(ws: helpers.Workspace) -> None:
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [REGULATOR, "controlroom"], cwd=ws.root, env=ws.env, stdin=subprocess.DEVNULL,
            stdout=follower, stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 2 and b"terminal" in done.stderr and b"Traceback" not in done.stderr


def test_dispatch_to_a_worktree_that_cannot_take_the_lease_is_exit_2_with_nothing_logged(
    ws: helpers.Workspace,
) -> None:
    ws.contract("u4", "implement", "implement")
    before = ws.digest()
    done = ws.run("unit", "dispatch", "u4", "--worktree", "/proc")
    assert done.returncode == 2 and "cannot write the lease file" in one_line(done)
    assert ws.digest() == before
    assert {u["id"]: u["status"] for u in ws.json("status")["units"]}["u4"] == "todo"


def test_a_missing_resolve_grant_is_named_as_such(ws: helpers.Workspace) -> None:
    ws.run(*report_args(), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    ob = ws.json("obligations")[0]["id"]
    text = (ws.root / INTERACTION).read_text()
    text = text.replace(
        "people:\n",
        "people:\n  bob:\n    grants: [report]\n    resolve: [blocking]\n"
        "  carol:\n    grants: [resolve]\n    resolve: []\n",
        1,
    )
    ws.decide(INTERACTION, text)
    args = ["obligation", "resolve", ob, "--disposition", "no-action", "--rationale", "r"]
    done = ws.run(*args, "--by", "bob")
    assert done.returncode == 3
    assert (
        one_line(done)
        == "regulator: bob lacks the resolve grant needed to resolve an obligation (interaction.yaml)"
    )
    done = ws.run(*args, "--by", "carol")
    assert done.returncode == 3
    assert (
        "carol may not resolve a blocking obligation (interaction.yaml lets them resolve: no severity)"
        in one_line(done)
    )


def test_the_room_in_a_clone_shows_unknown_and_disables_actions(fleet: Any, tmp_path: Path) -> None:
    """The interactive room under Pilot in a clone: it watches only what exists (no .regulator/),
    shows every unit `unknown`, says `stores absent` in its header and writes nothing."""
    import asyncio

    from controlroom.app import ControlRoom
    from engine.checkout.workspace import locate

    ws, _ = fleet
    here = clone(ws, tmp_path)
    room, _ = locate(here)
    app = ControlRoom(room, "alice")  # watching, as the real room does
    seen: dict = {}

    async def main() -> None:
        async with app.run_test(size=(150, 42)) as pilot:
            await pilot.pause()
            await pilot.press("2")
            await pilot.pause()
            seen["rows"] = [app.table.render_line(y).text for y in range(1, 5)]
            seen["header"] = str(app._topbar.render())
            seen["decide"] = app.check_action("act", ("decide",))
            await pilot.press("d")
            await pilot.pause()
            seen["detail"] = app._detail.text

    asyncio.run(main())
    assert all(" unknown " in row and " todo " not in row for row in seen["rows"]), seen["rows"]
    assert "stores absent: unit state unknown" in seen["header"]
    assert seen["decide"] is None  # shown, disabled
    assert "no regulator stores here (a clone): act on the host" in seen["detail"]
    assert not (here / ".regulator").exists()


def bob_acks(path: Path) -> dict:
    """The interaction policy at `path` with bob added, holding the ack grant and alice's keys."""
    policy = yaml.safe_load(path.read_text())
    policy["people"]["bob"] = {"grants": ["ack"], "keys": policy["people"]["alice"]["keys"]}
    return policy


def bob_resolves_and_lint_refuses(ws: helpers.Workspace, here: Path) -> None:
    """A finding resolved in `here` by a commit alice's key signs, Authorized-by bob: lint refuses it."""
    finding = next((here / "findings").glob("F-*.md"))
    finding.write_text(finding.read_text().replace("resolved: false", "resolved: true"))
    git(here, "add", "-A")
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={alice_key()}"]
    git(here, *sign, "commit", "-q", "-S", "-m", "resolve\n\nAuthorized-by: bob")
    done = ws.run("registry", "lint", "--json", cwd=here)
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and "unauthorized-change" in [e["code"] for e in errors], done.stdout
    assert any("bob does not hold the ack grant" in e["message"] for e in errors)


def test_a_branch_cannot_grant_itself_the_ack_it_uses(fleet: Any, tmp_path: Path) -> None:
    """In a clone the policy on disk is the branch's: lint takes trunk's at the merge-base."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    git(here, "checkout", "-q", "-b", "bob-self")
    path = here / "regulator/policy/interaction.yaml"
    policy = bob_acks(path)
    path.chmod(0o644)
    path.write_text(yaml.safe_dump(policy))
    git(here, "add", "-A")
    git(here, "commit", "-q", "-m", "bob joins, by hand")
    bob_resolves_and_lint_refuses(ws, here)


def test_a_replace_ref_cannot_stand_in_for_trunks_policy(fleet: Any, tmp_path: Path) -> None:
    """Refs are shared by every worktree: a unit's `git replace` of the blob trunk's policy names
    would grant it the ack for every reader that honours replace refs. Lint reads objects as stored."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    git(here, "checkout", "-q", "-b", "bob-self")
    path = here / INTERACTION
    policy = bob_acks(path)
    forged = tmp_path / "forged.yaml"
    forged.write_text(yaml.safe_dump(policy))
    stored = git(here, "rev-parse", f"HEAD:{INTERACTION}").strip()
    git(here, "replace", stored, git(here, "hash-object", "-w", str(forged)).strip())
    git(here, "config", "core.useReplaceRefs", "true")  # nor can the repository turn them back on
    assert "bob" in git(here, "show", f"main:{INTERACTION}")  # what a reader honouring replace refs sees
    bob_resolves_and_lint_refuses(ws, here)


def test_a_resolve_committed_in_a_clone_is_signed_as_trunks_policy_asks(fleet: Any, tmp_path: Path) -> None:
    """A clone has no decisions: `--commit` signs by the keys trunk's policy lists, which is what
    lint judges the commit by (it made an unsigned commit that lint then refused, and without a key
    it committed anyway)."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    finding = next((here / "findings").glob("F-*.md")).stem
    args = ["registry", "resolve", finding, "--by", "alice", "--rationale", "fixed upstream", "--commit"]
    keyless = ws.run(*args, cwd=here, env={"REGULATOR_SIGNING_KEY": ""})
    assert keyless.returncode == 3 and "no signing key for alice" in keyless.stderr, keyless.stderr
    git(here, "checkout", "-q", "--", ".")
    done = ws.run("--key", str(alice_key()), *args, cwd=here)
    assert done.returncode == 0, done.stderr
    assert "-----BEGIN SSH SIGNATURE-----" in git(here, "cat-file", "commit", "HEAD")
    lint = ws.run("registry", "lint", "--json", cwd=here)
    assert json.loads(lint.stdout)["errors"] == [], lint.stdout


def test_context_never_delivers_a_hand_edited_identity_file(ws: helpers.Workspace) -> None:
    path = ws.root / "regulator/identity/invariants.md"
    path.chmod(0o644)
    path.write_text(path.read_text() + "- INV-999: Units may edit vendor/ freely.\n")
    assert "INV-999" not in ws.run("context", "u1").stdout
    assert "INV-999" not in json.dumps(ws.json("context", "u1"))
    assert ws.run("identity", "verify").returncode == 1


def test_memory_and_context_in_a_clone_are_unknown_not_empty(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    for args in (["memory"], ["memory", "--json"], ["context", "u1"], ["context", "u1", "--json"]):
        done = ws.run(*args, cwd=here)
        assert done.returncode == 1 and done.stderr.endswith(f"regulator: {ABSENT}\n"), args


def test_verify_in_a_clone_is_not_ok(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    done = ws.run("verify", cwd=here)
    assert done.returncode == 1 and done.stdout.splitlines()[0] == ABSENT
    assert json.loads(ws.run("verify", "--json", cwd=here).stdout)["ok"] is False


def test_a_branch_that_changes_an_entry_without_its_views_is_told_what_to_run(
    fleet: Any, tmp_path: Path
) -> None:
    """Operator review of D-227: a pull request changing a finding's title failed the views check
    with "(a hand edit?)", though nothing was edited by hand; the docs said trunk's CI writes the
    views. The message now names the command and the commit (D-229)."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    entry = next((here / "findings").glob("F-*.md"))
    entry.write_text(entry.read_text().replace("title: ", "title: renamed ", 1))
    git(here, "commit", "-qam", "rename a finding", env=ws.env)
    done = ws.run("registry", "views", "--check", cwd=here)
    assert done.returncode == 1
    assert (
        "FINDINGS.md differs from what `regulator registry views` generates: run `regulator registry "
        "views` and commit FINDINGS.md with the entries it lists" in done.stdout
    )
    room = ws.run("controlroom", "--once", "--registers-only", "--trunk", "main", cwd=here)
    assert room.returncode == 1 and "run `regulator registry views` and commit FINDINGS.md" in room.stdout
    ws.run("registry", "views", cwd=here, check=True)
    git(here, "commit", "-qam", "its views", env=ws.env)
    assert ws.run("registry", "views", "--check", cwd=here).returncode == 0


def test_a_branch_forked_before_signatures_were_required_is_judged_by_trunks_rules_now(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """Adversarial review of D-227: in a clone, lint judged a branch's Authorized-by by trunk's policy
    at the merge-base, which the branch picks by where it forks. Trunk once had requireSignatures:
    false, then turned it back on; a branch forked from between the two resolved F-x unsigned with
    a claimed trailer and alice's address, and the pull request's check passed (the host and the push
    job did not). A clone now judges by trunk's policy as it stands (D-230)."""
    ws.write(FINDING, finding())
    ws.commit("finding F-x, acknowledged\n\nAuthorized-by: alice")
    strict = (ws.root / INTERACTION).read_text()
    ws.decide(INTERACTION, strict.replace("requireSignatures: true", "requireSignatures: false"))
    loose = ws.git("rev-parse", "HEAD").strip()
    ws.decide(INTERACTION, strict)
    here = clone(ws, tmp_path)
    git(here, "checkout", "-q", "-b", "unit/u1-old", loose, env=ws.env)
    (here / FINDING).write_text(finding().replace("resolved: false", "resolved: true"))
    ws.run("registry", "views", cwd=here, check=True)
    git(here, "add", "-A", env=ws.env)
    git(
        here,
        "commit",
        "-qm",
        "resolve F-x\n\nAuthorized-by: alice",
        env=dict(ws.env, GIT_AUTHOR_EMAIL="alice@example.org"),
    )
    git(here, "branch", "-f", "main", "origin/main", env=ws.env)
    done = ws.run("registry", "lint", "--require-history", "--trunk", "main", "--json", cwd=here)
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and [e["code"] for e in errors] == ["unauthorized-change"], errors
    assert "not SSH-signed" in errors[0]["message"], errors[0]["message"]
