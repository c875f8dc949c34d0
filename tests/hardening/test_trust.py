"""Who acted, proven (design §15): each attack of issue 12 replayed with real processes, real git and
real ssh-keygen keys. A refusal has its documented exit code and one line, and leaves every store
byte for byte as it was; a forged event or cache counts for nothing and `verify` names it. In git:
test_trust_git.py; in the stores' lines: test_trust_lines.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from engine.base import sshsig
from engine.checkout.authority import signed_bytes
from tests import helpers
from tests.hardening.trust import append_forged, first_round_workspace, forge_checkpoint, held
from tests.helpers import (
    alice_key,
    clean_env,
    git,
    make_key,
    make_workspace,
    one_line,
    remember_args,
    report_args,
)


def test_unit_cannot_resolve_its_own_hold_with_by(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    worktrees, obligations = held(ws)
    before = ws.digest()
    done = ws.run(
        "obligation", "resolve", obligations["u1"], "--by", "alice", "--disposition", "no-action",
        "--rationale", "x", cwd=worktrees["u1"],
    )  # fmt: skip
    assert done.returncode == 2
    assert "a unit cannot act as a person" in one_line(done)
    # from outside its worktree, with no key of alice's: refused too
    env = {"REGULATOR_SIGNING_KEY": ""}
    done = ws.run(
        "obligation", "resolve", obligations["u1"], "--by", "alice", "--disposition", "no-action",
        "--rationale", "x", env=env,
    )  # fmt: skip
    assert done.returncode == 3 and "no signing key for alice" in one_line(done)
    assert ws.digest() == before
    assert ws.run("unit", "close", "u1").returncode == 3  # still held


def test_unit_cannot_accept_its_own_policy_change(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    worktree = ws.lease("u1")
    policy = yaml.safe_load((ws.root / "regulator/policy/interaction.yaml").read_text())
    policy["people"]["mallory"] = dict(policy["people"]["alice"], keys=[])
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(policy))
    done = ws.run(
        "identity", "propose", "--file", "regulator/policy/interaction.yaml", "--content-from", str(new),
        "--rationale", "more hands", "--json", cwd=worktree,
    )  # fmt: skip
    proposal = json.loads(done.stdout)["id"]
    before = ws.digest()
    done = ws.run("identity", "accept", proposal, "--by", "alice", "--rationale", "ok", cwd=worktree)
    assert done.returncode == 2 and "a unit cannot act as a person" in one_line(done)
    done = ws.run(
        "identity",
        "accept",
        proposal,
        "--by",
        "alice",
        "--rationale",
        "ok",
        env={"REGULATOR_SIGNING_KEY": ""},
    )
    assert done.returncode == 3
    assert ws.digest() == before
    assert "mallory" not in (ws.root / "regulator/policy/interaction.yaml").read_text()


def test_hand_edited_policy_grants_nothing(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    _, obligations = held(ws)
    path = ws.root / "regulator/policy/interaction.yaml"
    policy = yaml.safe_load(path.read_text())
    policy["requireSignatures"] = False
    policy["people"]["mallory"] = {"grants": ["resolve"], "resolve": ["blocking"]}
    path.chmod(0o644)
    path.write_text(yaml.safe_dump(policy))
    before = ws.digest()
    done = ws.run(
        "obligation", "resolve", obligations["u1"], "--by", "mallory", "--disposition", "no-action",
        "--rationale", "x",
    )  # fmt: skip
    assert done.returncode == 3 and "mallory" in one_line(done)
    assert ws.digest() == before
    assert ws.run("identity", "verify").returncode == 1


def test_regulator_now_is_ignored_on_the_system_clock(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, now=None, clock="system")
    worktree = ws.lease("u1")
    before = ws.digest()
    future = {"REGULATOR_NOW": "2029-12-01T00:00:00Z"}
    done = ws.run(*remember_args(review_by="2030-02-28"), cwd=worktree, env=future)
    assert done.returncode == 2, done.stderr
    assert "REGULATOR_NOW ignored" in done.stderr
    assert ws.digest() == before
    status = ws.json("status")
    assert status["clock"] == "system" and "clock pinned" not in ws.run("status").stdout


def test_pinned_clock_is_visible(ws: helpers.Workspace) -> None:
    assert ws.json("status")["clock"] == "pinned"
    assert "clock pinned" in ws.run("status").stdout
    once = ws.run("controlroom", "--once", "--json")
    assert json.loads(once.stdout)["clock"] == "pinned"
    assert "clock pinned" in ws.run("controlroom", "--once").stdout


def test_a_store_never_takes_an_event_before_its_last(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, now=None, clock="system")
    # a line stamped a day ahead (a host whose clock ran fast), appended through the store itself
    append_forged(ws, "signals", {"kind": "note", "at": "2099-01-01T00:00:00Z"})
    before = ws.digest()
    done = ws.run(*report_args(affects=[]), "--by", "alice")
    assert done.returncode == 3 and "before the store's last event" in one_line(done)
    assert ws.digest() == before


def test_the_log_never_holds_a_lease_token(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    worktree = ws.lease("r1")
    lease_file = worktree / ".regulator-lease.json"
    token = json.loads(lease_file.read_text())["lease"]
    assert oct(lease_file.stat().st_mode & 0o777) == "0o600"
    for name in ("signals", "memory", "units", "identity"):
        assert token not in ws.store(name).read_text()
    dispatch = [e for e in ws.events("units") if e["kind"] == "dispatch"][-1]
    assert "lease" not in dispatch and len(dispatch["leaseHash"]) == 64
    assert (dispatch["type"], dispatch["profile"]) == ("research", "intelligence")
    # what a sibling can read in the log does not make a lease
    forged = tmp_path / "forged"
    forged.mkdir()
    data = json.loads(lease_file.read_text()) | {"lease": dispatch["leaseHash"]}
    (forged / ".regulator-lease.json").write_text(json.dumps(data))
    before = ws.digest()
    done = ws.run(*report_args(affects=["u1"]), cwd=forged)
    assert done.returncode == 3 and "not the unit's current lease" in one_line(done)
    assert ws.digest() == before


def test_host_operations_are_refused_under_a_lease(ws: helpers.Workspace) -> None:
    worktrees, _ = held(ws)
    before = ws.digest()
    for args in (["unit", "dispatch", "u4"], ["unit", "close", "u3"]):
        done = ws.run(*args, cwd=worktrees["u1"])
        assert done.returncode == 3 and "a unit cannot run a host operation" in one_line(done), args
    done = ws.run("unit", "close", "u1", cwd=worktrees["u1"])  # its own: the vetoes apply
    assert done.returncode == 3 and "vetoed" in one_line(done)
    # its own only under its current lease: a lease file naming r1 (held by nothing) with any other
    # token closes nothing
    forged = worktrees["u1"].parent / "forged-r1"
    forged.mkdir()
    data = json.loads((worktrees["r1"] / ".regulator-lease.json").read_text()) | {"lease": "guessed"}
    (forged / ".regulator-lease.json").write_text(json.dumps(data))
    done = ws.run("unit", "close", "r1", cwd=forged)
    assert done.returncode == 3 and "not the unit's current lease" in one_line(done)
    assert ws.digest() == before


def test_the_dispatch_event_fixes_a_units_grants(ws: helpers.Workspace) -> None:
    worktree = ws.lease("r1")
    ws.contract("r1", "implement", "implement")  # the contract file edited after dispatch
    before = ws.digest()
    done = ws.run(*remember_args(), cwd=worktree)
    assert done.returncode == 3 and "intelligence" in one_line(done)
    assert ws.digest() == before
    assert ws.run(*report_args(affects=["u1"]), cwd=worktree).returncode == 0


def test_a_forged_checkpoint_is_ignored_and_named(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    held(ws)
    forged = forge_checkpoint(ws, tmp_path)
    assert forged.exists()
    env = {"REGULATOR_CHECKPOINT_BYTES": "0"}  # read a checkpoint however small the stores
    before = ws.digest()
    done = ws.run("verify", env=env)
    assert done.returncode == 1 and "readmodel.checkpoint: no valid MAC" in done.stdout
    assert len(ws.json("obligations", env=env)) == 2
    assert ws.json("status", env=env)["units"][2]["held"]
    done = ws.run("unit", "close", "u1", env=env)
    assert done.returncode == 3 and "vetoed" in one_line(done)
    assert ws.digest() == before
    forge_checkpoint(ws, tmp_path)  # a writer may have replaced it with a true one: forge again
    assert ws.run("controlroom", "--once", env=env).returncode == 1


def test_a_worktree_acts_on_the_real_stores(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    held(ws)
    linked = tmp_path / "wt"
    ws.git("worktree", "add", "-q", str(linked))
    before = ws.digest()
    done = ws.run("unit", "dispatch", "u1", cwd=linked)
    assert done.returncode == 3 and "vetoed" in one_line(done)
    assert not (linked / ".regulator").exists()
    assert ws.digest() == before
    units = {u["id"]: u for u in ws.json("status", cwd=linked)["units"]}
    assert units["u1"]["status"] == "in-progress" and units["u1"]["held"]


def test_a_clone_has_no_stores_and_writes_nothing(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(ws.root), str(clone))
    done = ws.run("unit", "dispatch", "u1", cwd=clone)
    assert done.returncode == 3 and "no regulator stores here" in one_line(done)
    done = ws.run(*report_args(affects=["u1"]), "--by", "alice", cwd=clone)
    assert done.returncode == 3
    assert not (clone / ".regulator").exists()


def test_a_symlinked_store_is_refused(ws: helpers.Workspace, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.ndjson"
    signals = ws.store("signals")
    elsewhere.write_bytes(signals.read_bytes())
    signals.unlink()
    signals.symlink_to(elsewhere)
    done = ws.run(*report_args(affects=["u1"]), "--by", "alice")
    assert done.returncode == 3 and "symlink" in one_line(done)
    assert elsewhere.read_bytes() == b""


def test_a_signature_binds_the_person_and_the_key(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    worktrees, obligations = held(ws)
    ws.run(
        "obligation", "resolve", obligations["u1"], "--by", "alice", "--disposition", "no-action",
        "--rationale", "checked upstream", check=True,
    )  # fmt: skip
    signed = [e for e in ws.events("signals") if e["kind"] == "disposition"][-1]
    base = {k: v for k, v in signed.items() if k not in ("prev", "hash")}
    # 1. the same event, `by` changed to another person
    # 2. alice's event for u3's obligation, signed by a key not listed for alice
    mallory = sshsig.load_signer(make_key(tmp_path / "keys", "mallory"))
    other = dict(base, obligation=obligations["u3"], unit="u3", id="01FORGEDFORGEDFORGEDFORGE1")
    other.pop("sig")
    other["sig"] = mallory.sign(signed_bytes(other))
    relabelled = dict(
        base, obligation=obligations["u3"], unit="u3", by="bob", id="01FORGEDFORGEDFORGEDFORGE2"
    )
    # 3. alice's own signed event appended again (a replay)
    for event in (other, relabelled, base):
        append_forged(ws, "signals", event)
    listed = {o["id"]: o for o in ws.json("obligations", "--all")}
    assert listed[obligations["u1"]]["status"] == "resolved"
    assert listed[obligations["u3"]]["status"] == "open"
    assert ws.run("unit", "close", "u3").returncode == 3
    done = ws.run("verify")
    assert done.returncode == 1
    named = [line for line in done.stdout.splitlines() if "counts for nothing" in line]
    assert len(named) == 3, done.stdout
    assert sum("bad signature" in line for line in named) == 1  # alice's, by a key not hers
    assert sum("without the resolve grant" in line for line in named) == 1  # relabelled to bob
    assert sum("replayed id" in line for line in named) == 1
    # a person with the accept grant dismisses one; it still counts for nothing
    line = named[0].split(":")[1]
    ws.run("verify", "--dismiss", f"signals:{line}", "--by", "alice", "--rationale", "seen", check=True)
    done = ws.run("verify")
    assert done.returncode == 1 and "dismissed by alice" in done.stdout
    assert {o["id"]: o["status"] for o in ws.json("obligations", "--all")}[obligations["u3"]] == "open"


def test_rotating_a_key_keeps_old_resolutions_and_stops_new_ones(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    _, obligations = held(ws)
    old = alice_key()
    new = make_key(tmp_path / "keys", "alice2")
    ws.run(
        "obligation", "resolve", obligations["u1"], "--by", "alice", "--disposition", "no-action",
        "--rationale", "before rotation", check=True,
    )  # fmt: skip
    later = {"REGULATOR_NOW": "2026-11-29T13:00:00Z"}
    policy = yaml.safe_load((ws.root / "regulator/policy/interaction.yaml").read_text())
    alice = policy["people"]["alice"]
    alice["retiredKeys"] = alice["keys"]
    alice["keys"] = [Path(f"{new}.pub").read_text().strip()]
    content = tmp_path / "rotated.yaml"
    content.write_text(yaml.safe_dump(policy))
    done = ws.run(
        "identity", "propose", "--file", "regulator/policy/interaction.yaml", "--content-from", str(content),
        "--rationale", "rotate", "--by", "alice", "--json", env=later,
    )  # fmt: skip
    proposal = json.loads(done.stdout)["id"]
    ws.run("identity", "accept", proposal, "--by", "alice", "--rationale", "rotate", env=later, check=True)
    latest = {"REGULATOR_NOW": "2026-11-29T14:00:00Z"}
    before = ws.digest()
    args = [
        "obligation",
        "resolve",
        obligations["u3"],
        "--by",
        "alice",
        "--disposition",
        "rework",
        "--rationale",
        "r",
    ]
    done = ws.run(*args, env=latest | {"REGULATOR_SIGNING_KEY": str(old)})
    assert done.returncode == 3 and "not one of alice's keys as decided" in one_line(done)
    assert ws.digest() == before
    ws.run(*args, env=latest | {"REGULATOR_SIGNING_KEY": str(new)}, check=True)
    listed = {o["id"]: o["status"] for o in ws.json("obligations", "--all", env=latest)}
    assert listed == {obligations["u1"]: "resolved", obligations["u3"]: "resolved"}
    assert ws.run("verify").returncode == 0


def test_a_first_round_workspace_reads_with_names_unauthenticated(tmp_path: Path) -> None:
    ws = first_round_workspace(tmp_path)
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    ob = ws.json("obligations")[0]["id"]
    ws.run(
        "obligation",
        "resolve",
        ob,
        "--by",
        "alice",
        "--disposition",
        "no-action",
        "--rationale",
        "r",
        check=True,
    )
    assert ws.json("obligations") == []
    assert "sig" not in ws.events("signals")[-1]
    assert ws.json("status")["authentication"] == "names"
    assert "names unauthenticated" in ws.run("status").stdout
    once = ws.run("controlroom", "--once", "--json")
    assert json.loads(once.stdout)["authentication"] == "names"
    assert "names unauthenticated" in ws.run("controlroom", "--once").stdout
    assert ws.run("verify").returncode == 0


def test_init_needs_an_owner_key(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    env = clean_env()
    git(root, "init", "-q", "-b", "main", env=env)
    from tests.helpers import REGULATOR

    done = subprocess.run(
        [REGULATOR, "init", "--owner", "alice"], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2 and "ssh-keygen -t ed25519" in one_line(done)
    assert sorted(p.name for p in root.iterdir()) == [".git"]
    key = make_key(tmp_path / "keys", "owner")
    git(root, "config", "gpg.format", "ssh", env=env)
    git(root, "config", "user.signingkey", str(key), env=env)
    done = subprocess.run(
        [REGULATOR, "init", "--owner", "alice"], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    policy = yaml.safe_load((root / "regulator/policy/interaction.yaml").read_text())
    assert policy["requireSignatures"] is True
    assert policy["people"]["alice"]["keys"] == [Path(f"{key}.pub").read_text().strip()]
    assert oct((root / ".regulator/host.key").stat().st_mode & 0o777) == "0o600"


def test_the_room_refuses_a_key_it_would_have_to_prompt_for(ws: helpers.Workspace, tmp_path: Path) -> None:
    locked = make_key(tmp_path / "keys", "locked", passphrase="secret")
    done = ws.run("controlroom", "--as", "alice", "--key", str(locked))
    assert done.returncode == 2 and "passphrase" in one_line(done)
