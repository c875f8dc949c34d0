"""Who acted, proven in git (design §15): a person's signed commit carries only what she signed; a
commit message, an unsigned trailer or a signature without the grant authorizes nothing; her
commands run no hook, filter or fsmonitor of the repository and write through no symlink; lint
reads trunk's history as it is. Real processes, real git, real ssh-keygen keys."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from engine.base import sshsig
from tests import helpers
from tests.hardening.trust import append_forged, finding_on_trunk, first_round_workspace, held, lint_codes
from tests.helpers import (
    NOW,
    alice_key,
    make_key,
    make_workspace,
    one_line,
)


def test_a_signed_ack_commit_is_authorized_signed(ws: helpers.Workspace) -> None:
    finding_on_trunk(ws)
    done = ws.run("registry", "ack", "F-x", "--by", "alice", "--commit")
    assert done.returncode == 0, done.stderr
    assert "gpgsig -----BEGIN SSH SIGNATURE-----" in ws.git("cat-file", "commit", "HEAD")
    assert "Authorized-by: alice" in ws.git("log", "-1", "--format=%B")
    codes = lint_codes(ws)
    assert codes["errors"] == [] and "authorized-signed" in codes["notices"]


def test_an_unsigned_trailer_authorizes_nothing_where_signatures_are_required(ws: helpers.Workspace) -> None:
    finding_on_trunk(ws)
    ws.run("registry", "ack", "F-x", "--by", "alice", check=True)
    ws.commit("ack F-x\n\nAuthorized-by: alice", sign=False)  # the trailer, but no signature
    codes = lint_codes(ws)
    assert "unauthorized-change" in codes["errors"]
    assert "not SSH-signed" in ws.run("registry", "lint").stdout


@pytest.mark.parametrize("message", ["spoof", "cut short"])
def test_a_commit_message_cannot_make_a_commit_record_of_its_own_in_the_history_lint_reads(
    ws: helpers.Workspace, tmp_path: Path, message: str
) -> None:
    """Found by the adversarial review of D-195 (older than it): branch lint read `git log` with
    \\x1e and \\x1f between records and fields, which a commit message may hold. A unit's unsigned
    commit removing alice's ack and resolving the finding carried a record of its own naming alice's
    signed ack commit, and lint called the change authorized (signed) by alice, exit 0; a message
    ending in \\x1e crashed lint and --once. Each commit is now read from its object."""
    import re

    ws.write(
        "findings/F-x.md",
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: [u9]\nack: ''\nresolved: false\n---\nbody\n",
    )
    ws.contract("u9", "implement", "implement")
    ws.commit("finding F-x")
    ws.run("registry", "ack", "F-x", "--by", "alice", "--commit", check=True)  # signed, on trunk
    signed = ws.git("rev-parse", "HEAD").strip()
    ws.git("checkout", "-q", "-b", "sneaky")
    path = ws.root / "findings/F-x.md"
    text = re.sub(r"(?m)^ack: .*$", "ack: ''", path.read_text()).replace("resolved: false", "resolved: true")
    path.write_text(text)
    forged = f"tidy\x1fX\x1e{signed}\x1falice@example.org\x1fack\n\nAuthorized-by: alice\n"
    (tmp_path / "msg").write_text(forged if message == "spoof" else "oops\x1e\n")
    ws.git("add", "-A")
    ws.git(
        "-c",
        "user.email=unit7@fleet.example",
        "-c",
        "commit.gpgsign=false",
        "commit",
        "-q",
        "-F",
        str(tmp_path / "msg"),
    )
    done = ws.run("registry", "lint", "--json", "--require-history")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    errors = {i["code"] for i in json.loads(done.stdout)["errors"]}
    assert {"unauthorized-change", "ack-removed"} <= errors, errors
    once = ws.run("controlroom", "--once", "--registers-only")
    assert once.returncode == 1 and "Traceback" not in once.stderr, once.stderr


def test_an_unsigned_trailer_is_claimed_where_names_are_trusted(tmp_path: Path) -> None:
    ws = first_round_workspace(tmp_path)
    ws.commit("first round")
    finding_on_trunk(ws)
    ws.run("registry", "ack", "F-x", "--by", "alice", check=True)
    ws.commit("ack F-x\n\nAuthorized-by: alice", sign=False)
    codes = lint_codes(ws)
    assert codes["errors"] == [] and "authorized-claimed" in codes["notices"]
    assert "authorized (claimed)" in ws.run("registry", "lint").stdout


def test_a_signature_without_the_grant_counts_for_nothing(tmp_path: Path) -> None:
    """A key proves who signed, not what they may do: bob, listed with a key but no resolve grant,
    signs a disposition and appends it himself (a shared account)."""
    from engine.checkout.workspace import Workspace as Engine
    from engine.trust.signing import person_event

    ws = make_workspace(tmp_path)
    _, obligations = held(ws)
    bob_key = make_key(tmp_path / "keys", "bob")
    policy = yaml.safe_load((ws.root / "regulator/policy/interaction.yaml").read_text())
    policy["people"]["bob"] = {"grants": ["report"], "keys": [Path(f"{bob_key}.pub").read_text().strip()]}
    ws.decide("regulator/policy/interaction.yaml", yaml.safe_dump(policy))
    event = {"kind": "disposition", "obligation": obligations["u1"], "unit": "u1", "disposition": "no-action",
             "by": "bob", "rationale": "mine now", "at": NOW}  # fmt: skip
    append_forged(ws, "signals", person_event(Engine(ws.root), sshsig.load_signer(bob_key), event))
    assert {o["id"] for o in ws.json("obligations")} == set(obligations.values())
    done = ws.run("verify")
    assert done.returncode == 1 and "without the resolve grant" in done.stdout
    shown = ws.run("obligation", "show", obligations["u1"]).stdout
    assert "counts for nothing (by a person without the resolve grant)" in shown


def test_a_back_dated_event_is_judged_by_where_it_lands(tmp_path: Path) -> None:
    """A key retired by a decision signs nothing that lands after that decision, whatever `at` it
    claims: the decision records where the other stores stood (its marks)."""
    from engine.checkout.workspace import Workspace as Engine
    from engine.trust.signing import person_event

    ws = make_workspace(tmp_path)
    _, obligations = held(ws)
    new = make_key(tmp_path / "keys", "alice2")
    policy = yaml.safe_load((ws.root / "regulator/policy/interaction.yaml").read_text())
    alice = policy["people"]["alice"]
    alice["retiredKeys"], alice["keys"] = alice["keys"], [Path(f"{new}.pub").read_text().strip()]
    ws.decide(
        "regulator/policy/interaction.yaml",
        yaml.safe_dump(policy),
        env={"REGULATOR_NOW": "2026-11-29T13:00:00Z"},
    )
    event = {"kind": "disposition", "obligation": obligations["u1"], "unit": "u1", "disposition": "no-action",
             "by": "alice", "rationale": "before the rotation, honest", "at": "2026-11-29T12:30:00Z"}  # fmt: skip
    append_forged(ws, "signals", person_event(Engine(ws.root), sshsig.load_signer(alice_key()), event))
    assert len(ws.json("obligations")) == 2
    done = ws.run("verify")
    assert done.returncode == 1 and "bad signature" in done.stdout


def test_two_workspaces_never_share_an_id(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = make_workspace(tmp_path / "a", fresh=True), make_workspace(tmp_path / "b", fresh=True)
    first = [e["hash"] for e in (one.events("identity")[0], two.events("identity")[0])]
    assert first[0] != first[1]


def test_a_clock_said_twice_is_refused(ws: helpers.Workspace, tmp_path: Path) -> None:
    text = (ws.root / "regulator/policy/routing.yaml").read_text() + "clock: system\n"
    source = tmp_path / "routing.yaml"
    source.write_text(text)
    before = ws.digest()
    done = ws.run("identity", "propose", "--file", "regulator/policy/routing.yaml", "--content-from", str(source),
                  "--rationale", "r", "--by", "alice")  # fmt: skip
    assert done.returncode == 2 and "clock" in one_line(done)
    assert ws.digest() == before


def test_accepting_runs_no_hook_of_the_repository(ws: helpers.Workspace, tmp_path: Path) -> None:
    """A unit that can write .git/ must not get code run in the person's environment."""
    marker = tmp_path / "hook-ran"
    for hook in ("pre-commit", "commit-msg", "post-commit", "prepare-commit-msg"):
        path = ws.root / ".git" / "hooks" / hook
        path.write_text(f'#!/bin/sh\necho "$REGULATOR_SIGNING_KEY" >> {marker}\n')
        path.chmod(0o755)
    ws.git("config", "filter.evil.clean", f"sh -c 'echo filter >> {marker}; cat'")
    (ws.root / ".gitattributes").write_text("*.md filter=evil\n")
    new = (ws.root / "regulator/identity/glossary.md").read_text() + "- hook: a trap\n"
    ws.decide("regulator/identity/glossary.md", new)
    assert not marker.exists()
    assert "regulator/identity/glossary.md" in ws.git("show", "--name-only", "--format=", "HEAD")
    assert "gpgsig -----BEGIN SSH SIGNATURE-----" in ws.git("cat-file", "commit", "HEAD")
    assert "Regulator-Decided-By: alice" in ws.git("log", "-1", "--format=%B")


def test_a_persons_commit_takes_each_files_own_bytes_whatever_its_name(ws: helpers.Workspace) -> None:
    """The files of a person's commit are hashed by one git process (--stdin-paths) and staged by
    one (--index-info -z): a name that process would read otherwise (a leading quote, which git
    unquotes; a line break) is hashed alone, and every file is committed with its own bytes."""
    from engine.checkout.workspace import Workspace as Engine
    from engine.trust import gitsig

    names = ["plain.md", '"quoted".md', "line\nbreak.md", "tab\there.md", "sp ace.md"]
    for i, name in enumerate(names):
        (ws.root / name).write_bytes(f"file {i}\n".encode())
    # one process for all; a leading quote, then a line break, each sends the whole batch to one each
    for batch in (["plain.md", "sp ace.md", "tab\there.md"], ['"quoted".md', "sp ace.md"], names):
        assert gitsig.commit(Engine(ws.root), batch, "files", "alice", sign=False)
        for name in batch:
            shown = subprocess.run(["git", "-C", str(ws.root), "show", f"HEAD:{name}"], capture_output=True)
            assert shown.stdout == (ws.root / name).read_bytes(), name
    staged = subprocess.run(["git", "-C", str(ws.root), "status", "--porcelain", "-z"], capture_output=True)
    assert not any(name.encode() in staged.stdout for name in names), staged.stdout


def test_a_persons_commit_refuses_a_path_git_would_skip_and_a_symlink(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """Adversarial review of D-196: `update-index --index-info` skips a path git will not index
    (and says so only on stderr), so a commit claimed a file it did not hold; and git hashes what a
    symlink points to, a file of the person's a unit may have aimed it at. Each is refused, no
    commit made; a name that is no UTF-8 is committed with its bytes."""
    from engine.checkout.workspace import Workspace as Engine
    from engine.trust import gitsig

    (ws.root / "a.md").write_text("a\n")
    (ws.root / "d").mkdir()
    (ws.root / "d" / "b.md").write_text("b\n")
    secret = tmp_path / "secret"
    secret.write_text("the person's\n")
    (ws.root / "link.md").symlink_to(secret)
    head = ws.git("rev-parse", "HEAD").strip()
    for odd in ("./d/b.md", "d//b.md", "d/../a.md", str(ws.root / "a.md"), ".git/config", "link.md"):
        assert not gitsig.commit(Engine(ws.root), ["a.md", odd], "m", "alice", sign=False), odd
        assert ws.git("rev-parse", "HEAD").strip() == head, odd
    name = os.fsdecode(b"caf\xe9.md")
    (ws.root / name).write_bytes(b"latin-1 name\n")
    assert gitsig.commit(Engine(ws.root), [name], "m", "alice", sign=False)
    shown = subprocess.run(["git", "-C", str(ws.root), "show", b"HEAD:caf\xe9.md"], capture_output=True)
    assert shown.stdout == b"latin-1 name\n"


def test_no_fsmonitor_or_filter_of_the_repository_runs_in_a_persons_commands(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """Adversarial review of D-196 (older than it): every command asks `git ls-files` whether the
    stores are tracked, and `ack --commit` asks `git status`; both ran the repository's fsmonitor
    and clean filters, code a unit can plant in .git/config, in the person's process. A filter
    driver whose name holds `=` (which `-c` cannot empty) stops the commit instead."""
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\ncat\n")
    script.chmod(0o755)
    ws.write(
        "findings/F-x.md",
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: [u9]\nack: ''\nresolved: false\n---\nbody\n",
    )
    ws.contract("u9", "implement", "implement")
    ws.commit("finding F-x")
    ws.git("config", "core.fsmonitor", str(script))
    ws.git("config", "filter.evil.clean", str(script))
    (ws.root / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    os.utime(ws.root / ".git" / "index", (946684800, 946684800))  # racily clean: re-hashed
    assert ws.run("status").returncode in (0, 1)
    done = ws.run("registry", "ack", "F-x", "--by", "alice", "--commit")
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    ws.git("config", "--unset", "core.fsmonitor")
    ws.git("config", "filter.a=b.clean", str(script))
    (ws.root / ".git" / "info" / "attributes").write_text("* filter=a=b\n")
    os.utime(ws.root / ".git" / "index", (946684800, 946684800))
    head = ws.git("rev-parse", "HEAD").strip()
    done = ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "done", "--commit")
    assert not marker.exists(), marker.read_text()
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert ws.git("rev-parse", "HEAD").strip() == head


def test_the_views_replace_a_symlink_planted_in_their_place(ws: helpers.Workspace, tmp_path: Path) -> None:
    """Adversarial review of D-196 (older than it): the person's process wrote FINDINGS.md through
    a symlink a unit had put there, over any file the person may write."""
    victim = tmp_path / "victim"
    victim.write_text("the person's own\n")
    (ws.root / "FINDINGS.md").unlink()
    (ws.root / "FINDINGS.md").symlink_to(victim)
    done = ws.run("registry", "views")
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "the person's own\n"
    assert (
        not (ws.root / "FINDINGS.md").is_symlink() and "F-" in (ws.root / "FINDINGS.md").read_text() or True
    )


def test_an_ack_refuses_to_write_through_a_folder_symlink(ws: helpers.Workspace, tmp_path: Path) -> None:
    """The same review's kind of attack, one folder up: `findings/` made a symlink to a folder of
    the person's, the ack's write would land there. Refused, exit 3, nothing written there."""
    import shutil

    ws.write(
        "findings/F-x.md",
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: [u9]\nack: ''\nresolved: false\n---\nbody\n",
    )
    ws.contract("u9", "implement", "implement")
    ws.commit("finding F-x")
    outside = tmp_path / "persons-folder"
    shutil.move(str(ws.root / "findings"), str(outside))
    (ws.root / "findings").symlink_to(outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    done = ws.run("registry", "ack", "F-x", "--by", "alice")
    assert done.returncode == 3 and "is a symlink" in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
    elsewhere = tmp_path / "another-folder"  # a retro's folder, the same way (identity.regular.replace_text)
    elsewhere.mkdir()
    (ws.root / "retro").symlink_to(elsewhere)
    done = ws.run("registry", "retro", "--since", "2026-11-01")
    assert done.returncode == 3 and "is a symlink" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []


def test_odd_lease_paths_and_init_under_a_lease(ws: helpers.Workspace, tmp_path: Path) -> None:
    worktree = ws.lease("u1")
    done = ws.run("--lease", str(tmp_path), "status")
    assert done.returncode == 2 and "not a regular file" in one_line(done)
    nested = worktree / "nested"
    nested.mkdir()
    done = ws.run("init", "--owner", "alice", "--owner-key", f"{alice_key()}.pub", cwd=nested)
    assert done.returncode == 3 and "host operation" in one_line(done)
    assert not (nested / ".regulator").exists()


def test_lint_in_a_linked_worktree_lints_that_branch(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    linked = tmp_path / "wt"
    ws.git("worktree", "add", "-q", "-b", "topic", str(linked))
    (linked / "findings").mkdir(exist_ok=True)
    (linked / "findings" / "F-y.md").write_text("---\nid: F-y\ndate: '2026-11-01'\ntitle: t\naffects: [nobody]\n"
                                                "ack: ''\nresolved: false\n---\n")  # fmt: skip
    done = ws.run("registry", "lint", "--json", cwd=linked)
    assert "bad-ref" in [e["code"] for e in json.loads(done.stdout)["errors"]]
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == []


def test_a_unit_adding_a_key_is_shown_before_anyone_accepts(ws: helpers.Workspace, tmp_path: Path) -> None:
    worktree = ws.lease("u1")
    mallory = make_key(tmp_path / "keys", "mallory")
    policy = yaml.safe_load((ws.root / "regulator/policy/interaction.yaml").read_text())
    policy["people"]["alice"]["keys"].append(Path(f"{mallory}.pub").read_text().strip())
    source = tmp_path / "evil.yaml"
    source.write_text(yaml.safe_dump(policy))
    done = ws.run("identity", "propose", "--file", "regulator/policy/interaction.yaml", "--content-from",
                  str(source), "--rationale", "typo fix in grants", "--json", cwd=worktree)  # fmt: skip
    proposal = json.loads(done.stdout)["id"]
    shown = ws.run("identity", "show", proposal).stdout
    fingerprint = sshsig.fingerprint(Path(f"{mallory}.pub").read_text())
    assert f"! adds signing key {fingerprint} for alice (proposed by unit u1)" in shown
    assert "regulator/policy/interaction.yaml (proposed)" in shown and "\n+" in shown  # the unified diff


def test_a_signed_ack_does_not_carry_a_later_change(ws: helpers.Workspace) -> None:
    """The commit that makes a load-bearing change authorizes it: alice's signed ack, then someone
    else's unsigned flip of `resolved` in a later commit, is an unauthorized change."""
    finding_on_trunk(ws)
    ws.run("registry", "ack", "F-x", "--by", "alice", "--commit", check=True)
    path = ws.root / "findings" / "F-x.md"
    path.write_text(path.read_text().replace("resolved: false", "resolved: true"))
    ws.commit("resolve it", email="mallory@example.org", sign=False)
    assert "unauthorized-change" in lint_codes(ws)["errors"]
    # a trailer quoted in the body is not a trailer
    path.write_text(path.read_text() + "\n")
    ws.commit("quoting\n\nAuthorized-by: alice\n\nthat was a quote", sign=True)
    assert "unauthorized-change" in lint_codes(ws)["errors"]


def test_a_rewritten_trunk_fails_the_range_check(ws: helpers.Workspace) -> None:
    finding_on_trunk(ws)
    ws.git("checkout", "-q", "main")
    before = ws.git("rev-parse", "HEAD").strip()
    (ws.root / "findings" / "F-x.md").unlink()
    ws.git("commit", "-q", "--amend", "-a", "-m", "finding F-x, never mind")
    done = ws.run("registry", "lint", "--range", f"{before}..HEAD")
    assert done.returncode == 2 and "not an ancestor" in one_line(done)


def test_stores_committed_to_git_are_refused(ws: helpers.Workspace) -> None:
    ws.git("add", "-f", ".regulator/identity.ndjson")
    ws.git("commit", "-q", "-m", "stores, committed")
    done = ws.run("status")
    assert done.returncode == 3 and "tracked by git" in one_line(done)


def test_hostile_bytes_in_stores_and_registers_never_hang_or_crash(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    deep = b'{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    with open(ws.store("memory"), "ab") as handle:
        handle.write(deep)
    for args in (["status"], ["memory"], ["verify"], ["controlroom", "--once"]):
        done = ws.run(*args)
        assert "Traceback" not in done.stderr, (args, done.stderr[-300:])
    assert ws.run("verify").returncode == 1
    (ws.root / "findings").mkdir(exist_ok=True)
    (ws.root / "findings" / "F-zero.md").symlink_to("/dev/zero")
    done = ws.run("registry", "lint", "--json")
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and any(
        e["code"] == "unreadable" and "symlink" in e["message"] for e in errors
    )
