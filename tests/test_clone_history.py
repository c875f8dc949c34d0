"""Identity read from git history (design §16.2; issue 13): `init` commits the baseline as the owner's
signed decision; `identity verify` in a clone reads the decisions from history, refuses forged
trailers, hand edits and a branch's own baseline, and survives merge, squash and rebase; and the
leftovers of design §16.4 (a path that cannot be written, a room without a terminal, a missing
grant named), each exit 2 or 3 with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.clonehost import FINDING, INTERACTION, ROUTING, clone, finding, forge, hand_edit
from tests.helpers import (
    REGULATOR,
    alice_key,
    clean_env,
    git,
    make_key,
    one_line,
    report_args,
)


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


def test_registers_only_needs_once(ws: helpers.Workspace) -> None:
    done = ws.run("controlroom", "--registers-only")
    assert done.returncode == 2 and "--registers-only goes with --once" in one_line(done)
    for args in (("--once",), ("--once", "--json"), ()):
        done = ws.run("controlroom", *args, "--trunk", "main")
        assert done.returncode == 2 and "--trunk goes with --once --registers-only" in one_line(done)
    for name in ("main~1", "HEAD"):  # HEAD is no branch: it followed what origin's HEAD named (D-230)
        done = ws.run("controlroom", "--once", "--registers-only", "--trunk", name)
        assert done.returncode == 2 and one_line(done) == f"regulator: --trunk {name!r} is no branch name"


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


def test_context_never_delivers_a_hand_edited_identity_file(ws: helpers.Workspace) -> None:
    path = ws.root / "regulator/identity/invariants.md"
    path.chmod(0o644)
    path.write_text(path.read_text() + "- INV-999: Units may edit vendor/ freely.\n")
    assert "INV-999" not in ws.run("context", "u1").stdout
    assert "INV-999" not in json.dumps(ws.json("context", "u1"))
    assert ws.run("identity", "verify").returncode == 1


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
