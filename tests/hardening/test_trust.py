"""Who acted, proven (design §15): each attack of issue 12 replayed with real processes, real git and
real ssh-keygen keys. A refusal has its documented exit code and one line, and leaves every store
byte for byte as it was; a forged event or cache counts for nothing and `verify` names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.base import sshsig
from engine.checkout.authority import signed_bytes
from engine.log.store import Store, event_hash
from tests import helpers
from tests.helpers import (
    NOW,
    alice_key,
    clean_env,
    git,
    make_key,
    make_workspace,
    one_line,
    remember_args,
    report_args,
)


def held(ws: helpers.Workspace) -> Any:
    """u1 and u3 in progress and held by r1's blocking report, as in the demo."""
    worktrees = {u: ws.lease(u) for u in ("u1", "u3", "r1")}
    ws.run(*report_args(), cwd=worktrees["r1"], check=True)
    ws.run("signals", "route", check=True)
    obligations = {o["unit"]: o["id"] for o in ws.json("obligations")}
    return worktrees, obligations


def append_forged(ws: helpers.Workspace, store: str, event: dict) -> None:
    """What a unit sharing the operator's account can do: append a well-chained line directly (with
    the engine's own code, told the clock is pinned, so any time it likes goes in)."""
    from engine.base import clock

    clock.configure(True)
    Store(ws.store(store)).append(event)


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


def forge_checkpoint(ws: helpers.Workspace, tmp_path: Path) -> Path:
    """A checkpoint in which every obligation is resolved, written by the engine's own code but
    with a key that is not the workspace's host key (a unit cannot read .regulator/host.key)."""
    script = (
        "import sys, os\n"
        "from pathlib import Path\n"
        "from engine.read import checkpoint\n"
        "from engine.read.load import load\n"
        "from engine.checkout.workspace import Workspace\n"
        "ws = Workspace(Path(sys.argv[1]))\n"
        "state = load(ws, cached=False)\n"
        "for ob in state.obligations.values():\n"
        "    ob.status, ob.disposition, ob.by = 'resolved', 'no-action', 'alice'\n"
        "key = ws.state_dir / 'host.key'\n"
        "real = key.read_bytes()\n"
        "key.write_bytes(os.urandom(32))\n"
        "try:\n"
        "    assert checkpoint.save(ws, state)\n"
        "finally:\n"
        "    key.write_bytes(real)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(ws.root)], check=True, env=ws.env, capture_output=True)
    return ws.root / ".regulator" / "readmodel.checkpoint"


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


def first_round_workspace(tmp_path: Path) -> Any:
    """A workspace as the first round made it: no keys, no requireSignatures, baselines without
    content, unsigned person events."""
    from identity.files import content_hash
    from identity.shipped import IDENTITY_FILES, PROFILES, ROUTING, dump

    ws = make_workspace(tmp_path)
    state = ws.root / ".regulator"
    for name in ("signals", "memory", "units", "identity"):
        (state / f"{name}.ndjson").write_bytes(b"")
    (state / "host.key").unlink()
    files = {f"regulator/identity/{n}": t for n, t in IDENTITY_FILES.items()}
    interaction = {"people": {"alice": {"grants": ["resolve", "retract", "accept", "ack", "decide", "report"],
                                        "resolve": ["info", "advisory", "blocking", "critical"]}}}  # fmt: skip
    files["regulator/policy/routing.yaml"] = dump({k: v for k, v in ROUTING.items()}, "")
    files["regulator/policy/interaction.yaml"] = dump(interaction, "")
    files["regulator/policy/profiles.yaml"] = dump(PROFILES, "")
    identity = Store(state / "identity.ndjson")
    for relative, text in files.items():
        path = ws.root / relative
        path.chmod(0o644)
        path.write_text(text)
        identity.append({"kind": "decision", "decision": "baseline", "proposal": None, "file": relative,
                         "contentHash": content_hash(text.encode()), "by": "alice", "rationale": "baseline",
                         "at": NOW})  # fmt: skip
    ws.env = clean_env()  # the first round had no REGULATOR_NOW policy and no keys
    return ws


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


def finding_on_trunk(ws: helpers.Workspace) -> None:
    ws.write(
        "findings/F-x.md",
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: [u9]\nack: ''\nresolved: false\n---\nbody\n",
    )
    ws.contract("u9", "implement", "implement")
    ws.commit("finding F-x")
    ws.git("checkout", "-q", "-b", "work")


def lint_codes(ws: helpers.Workspace) -> dict[str, list[str]]:
    data = json.loads(ws.run("registry", "lint", "--json").stdout)
    return {level: [i["code"] for i in data[level]] for level in ("errors", "warnings", "notices")}


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


# a memory entry stamped years ahead, to be current for years
FUTURE_MEMORY = {"id": "01FUTUREFUTUREFUTUREFUTURE", "kind": "memory", "subject": "s", "note": "n",
                 "evidence": ["e"], "scope": [], "reviewBy": "2030-02-28", "unit": "u1", "revision": None,
                 "recordedBy": "S1", "at": "2029-12-01T00:00:00Z"}  # fmt: skip


def forged_host_lines(tmp_path: Path) -> tuple[helpers.Workspace, Path]:
    """A system-clock workspace where r1 reported a blocking signal for u1, and a writer with the
    account's shell appended a routing record that lets it open nothing (before the host routes)
    and FUTURE_MEMORY. Returns the workspace and r1's worktree."""
    ws = make_workspace(tmp_path, now=None, clock="system")
    worktree = ws.lease("r1")
    ws.run(*report_args(affects=["u1"]), cwd=worktree, check=True)
    signal = ws.events("signals")[-1]["id"]
    append_forged(ws, "signals", {"kind": "routing", "signal": signal, "reportedSeverity": "blocking",
                                  "derivedSeverity": "blocking", "floors": [], "obligations": [], "at": NOW,
                                  "outcome": "noted", "reason": "nothing to see"})  # fmt: skip
    append_forged(ws, "memory", FUTURE_MEMORY)
    return ws, worktree


def test_verify_re_derives_what_the_host_writes_unsigned(tmp_path: Path) -> None:
    ws, _ = forged_host_lines(tmp_path)
    done = ws.run("verify")
    assert done.returncode == 1
    assert "the router writes obligations/blocking (forged?)" in done.stdout
    assert "in the future" in done.stdout


def test_once_names_what_verify_names_whether_or_not_it_routes_first(tmp_path: Path) -> None:
    """--once begins verify's passes over every line before its fold (engine.commands.verification
    .begin) and uses them where they read what it folded: with nothing to route it reports exactly
    what `verify` names; when it routes a signal first (a line they did not read), it ends them,
    begins again, and still reports exactly that."""
    ws, worktree = forged_host_lines(tmp_path)
    for routes_first in (False, True):
        if routes_first:
            ws.run(*report_args(subject="another", affects=["u1"]), cwd=worktree, check=True)
        once = ws.run("controlroom", "--once", "--json")
        assert once.returncode == 1, once.stderr
        data = json.loads(once.stdout)
        assert data["routed"] == (1 if routes_first else 0)
        done = ws.run("verify", "--json")
        named = [f"{f['store']}:{f['line']}: {f['message']}" for f in json.loads(done.stdout)["findings"]]
        assert done.returncode == 1
        assert any("the router writes obligations/blocking (forged?)" in n for n in named)
        assert any("in the future" in n for n in named)
        assert [f"{v['store']}:{v['line']}: {v['message']}" for v in data["verify"]] == named


def begun_and_read(engine_ws: Any) -> Any:
    """verify's passes begun (engine.commands.verification.begin), waited for until both children
    have read the stores and exited (not yet reaped, so their answers are still to be had)."""
    from engine.commands.verification import begin

    time.sleep(0.06)  # begin leaves a store changed in the last 50 ms to after the fold
    begun = begin(engine_ws)
    assert begun is not None
    for child in (begun.checked, begun.early):
        assert child.pid is not None
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    return begun


def test_passes_begun_before_a_line_was_appended_are_not_used_for_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """What verify's passes begun before the fold did not read (a line appended in between) is
    judged all the same: they are ended and begun again (`Begun.covers`)."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.commands.verification import begin, findings, findings_later
    from engine.read.load import load

    ws = make_workspace(tmp_path, now=None, clock="system")
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    engine_ws = EngineWorkspace(ws.root)
    begun = begun_and_read(engine_ws)
    append_forged(ws, "memory", FUTURE_MEMORY)
    state = load(engine_ws, cached=False)
    assert not begun.covers(engine_ws, state)
    found = findings_later(engine_ws, state, host_events=True, begun=begun)()
    assert [str(f) for f in found] == [str(f) for f in findings(engine_ws, state, host_events=True)]
    assert any("memory.ndjson:1: stamped 2029-12-01T00:00:00Z, in the future" in str(f) for f in found)
    time.sleep(0.06)
    again = begin(engine_ws)  # begun after the append: used, and it names the same
    assert again is not None and again.covers(engine_ws, state)
    assert [str(f) for f in findings_later(engine_ws, state, host_events=True, begun=again)()] == [
        str(f) for f in found
    ]


def _edited_in_place(ws: helpers.Workspace) -> bytes:
    """signals.ndjson with its routing record's severities changed in place, at the same size and
    without a new hash: what a shell on the account can write with sed."""
    data = ws.store("signals").read_bytes()
    edited = data.replace(b'"derivedSeverity":"blocking"', b'"derivedSeverity":"advisory"')
    assert edited != data and len(edited) == len(data)
    return edited


def test_once_holding_the_decide_lock_cannot_show_its_passes_other_bytes_than_its_fold(
    tmp_path: Path,
) -> None:
    """A unit holds the decide lock (a plain flock anyone on the account may take) while --once
    waits for it, and edits signals.ndjson in place before letting go: --once begins verify's
    passes only once the lock is its own, so they read what its fold reads and name the edit."""
    import fcntl

    ws = make_workspace(tmp_path)
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    edited = _edited_in_place(ws)
    lock = os.open(ws.root / ".regulator" / "decide.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        once = subprocess.Popen([helpers.REGULATOR, "controlroom", "--once", "--json"], cwd=ws.root, env=ws.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(1.5)  # it is waiting for the lock
        assert once.poll() is None
        ws.store("signals").write_bytes(edited)
    finally:
        os.close(lock)
    out, err = once.communicate(timeout=60)
    assert once.returncode == 1, err
    named = [f"{v['store']}:{v['line']}: {v['message']}" for v in json.loads(out)["verify"]]
    assert any("content does not match its hash (edited)" in n for n in named), named
    done = ws.run("verify", "--json")
    assert named == [f"{f['store']}:{f['line']}: {f['message']}" for f in json.loads(done.stdout)["findings"]]


def _forged_shorter(ws: helpers.Workspace) -> bytes:
    """signals.ndjson with its routing record replaced by one that opens nothing, chained and
    hashed as the engine writes (a writer with the account's shell and the engine's code): a
    file shorter than the real one."""
    signal, routing = ws.events("signals")
    forged = {k: v for k, v in routing.items() if k != "hash"}
    forged |= {"outcome": "noted", "derivedSeverity": "advisory", "obligations": []}
    forged["hash"] = event_hash(forged)
    data = ws.store("signals").read_bytes()
    first = data.split(b"\n", 1)[0] + b"\n"
    assert json.loads(first) == signal
    return first + json.dumps(forged, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("how", ["in place, the same size", "shorter, then appended to after the fold"])
def test_passes_that_read_a_store_later_written_are_judged_again(tmp_path: Path, how: str) -> None:
    """A store written after verify's passes read it and before the fold read it: what they read
    is not taken for what was folded (`Begun.covers`), and the lines are judged again as they are.
    Written in place at the same size; or rewritten shorter, then appended to once the fold is
    done (as the second adversarial review did), which by its size alone looks like a file
    appended to."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.commands.verification import findings, findings_later
    from engine.read.load import load

    ws = make_workspace(tmp_path)
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    written = _edited_in_place(ws) if how.startswith("in place") else _forged_shorter(ws)
    engine_ws = EngineWorkspace(ws.root)
    begun = begun_and_read(engine_ws)
    size = begun.stamps["signals"][2]
    ws.store("signals").write_bytes(written)
    state = load(engine_ws, cached=False)
    if how.startswith("shorter"):
        assert state.obligations == {}  # the fold obeyed the forged record
        ws.run(*report_args(subject="later", affects=["u1"]), "--by", "alice", check=True)
        assert ws.store("signals").stat().st_size > size
    assert not begun.covers(engine_ws, state)
    found = [str(f) for f in findings_later(engine_ws, state, host_events=True, begun=begun)()]
    assert any("content does not match its hash (edited)" in f or "(forged?)" in f for f in found), found
    assert found == [str(f) for f in findings(engine_ws, state, host_events=True)]


_KILLED_ALONE = """
import os, signal, sys, time
from pathlib import Path
from engine.checkout.workspace import Workspace
from engine.commands import verification

def slow(*args):  # a pass over stores far larger than these
    time.sleep(20)
    return [[], []]

verification._chains_and_lines = slow
begun = verification.begin(Workspace(Path(sys.argv[1])))
print(begun.checked.pid, flush=True)
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_once_killed_alone_leaves_no_child_reading_the_stores(tmp_path: Path) -> None:
    """verify's passes run in forked children; killed alone (SIGKILL to its pid, not its group),
    --once leaves none of them running on (they die with their parent)."""
    ws = make_workspace(tmp_path)
    time.sleep(0.06)  # begin leaves a store changed in the last 50 ms to after the fold
    done = subprocess.run([sys.executable, "-c", _KILLED_ALONE, str(ws.root)], capture_output=True, text=True,
                          env=ws.env, timeout=60)  # fmt: skip
    assert done.returncode == -9, done.stderr
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = (Path("/proc") / str(child) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return  # gone
        if state == "Z":
            return  # dead, waiting to be reaped
        time.sleep(0.05)
    raise AssertionError(f"child {child} still runs after its parent was killed")


def test_passes_begun_under_the_decide_lock_do_not_hold_it_after_once_lets_go(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """--once begins verify's passes inside its decide lock; the children keep no descriptor of
    the parent's but their pipe, so the lock is free for the next writer as soon as --once lets
    go, however long they still read."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.commands import verification
    from engine.log.store import lock_held

    def slow(*args: Any) -> list[list[Any]]:  # a pass over stores far larger than these
        time.sleep(10)
        return [[], []]

    monkeypatch.setattr(verification, "_chains_and_lines", slow)
    ws = make_workspace(tmp_path)
    engine_ws = EngineWorkspace(ws.root)
    time.sleep(0.06)  # begin leaves a store changed in the last 50 ms to after the fold
    with engine_ws.exclusive():
        begun = verification.begin(engine_ws)
    assert begun is not None and begun.checked.pid is not None
    try:
        deadline = time.monotonic() + 5  # a child lets go of what it inherited as soon as it runs
        while lock_held(ws.root / ".regulator" / "decide.lock"):
            assert time.monotonic() < deadline, "the decide lock is still held by a child"
            time.sleep(0.02)
        assert os.waitpid(begun.checked.pid, os.WNOHANG) == (0, 0)  # still reading
    finally:
        begun.cancel()


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


def test_a_close_past_its_vetoes_counts_for_nothing_and_once_names_it(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    _, obligations = held(ws)
    # what a unit sharing the account can append: its own close while held, an hour on, saying it
    # saw the stores as they are (design §22: re-derived there, it is vetoed); b1's close
    seen = {name: ws.store(name).stat().st_size for name in ("signals", "memory", "identity")}
    append_forged(
        ws,
        "units",
        {"kind": "close", "unit": "u1", "leaseHash": None, "seen": seen, "at": "2026-11-29T13:00:00Z"},
    )
    append_forged(
        ws,
        "units",
        {"kind": "close", "unit": "b1", "leaseHash": None, "seen": seen, "at": "2026-11-29T13:00:00Z"},
    )
    status = {u["id"]: u for u in ws.json("status")["units"]}
    assert status["u1"]["status"] == "in-progress" and status["u1"]["blockedBy"] == [obligations["u1"]]
    assert status["b1"]["status"] == "todo"
    done = ws.run("verify")
    assert done.returncode == 1
    assert f"close of u1 while held by blocking obligation {obligations['u1']}" in done.stdout
    assert "close of b1 while it was todo" in done.stdout
    once = ws.run("controlroom", "--once", "--json")
    assert once.returncode == 1
    reasons = json.loads(once.stdout)["exitReasons"]
    assert any("close of u1 while held" in r for r in reasons) and any(
        r.startswith("u1 is in progress") for r in reasons
    )


def test_an_identity_store_edited_in_place_lifts_no_hold(tmp_path: Path) -> None:
    """A unit sharing the account edits identity.ndjson in place (six bytes: `requireSignatures:
    true` -> `ture`, so the baseline's text no longer matches its hash) and appends an unsigned
    disposition of its own hold. Before, every read then folded an empty policy that required
    nothing, and the disposition counted. Now the policy in force is unknown: no person event
    counts, the hold stays, reads say why and `verify` names the edited line."""
    ws = make_workspace(tmp_path)
    worktrees, obligations = held(ws)
    identity = ws.store("identity")
    data = identity.read_bytes()
    assert data.count(b"requireSignatures: true") == 1
    identity.write_bytes(data.replace(b"requireSignatures: true", b"requireSignatures: ture"))
    append_forged(
        ws,
        "signals",
        {"kind": "disposition", "obligation": obligations["u1"], "disposition": "no-action", "by": "alice",
         "rationale": "fine", "at": NOW},
    )  # fmt: skip
    rows = {o["id"]: o["status"] for o in ws.json("obligations", "--all")}
    assert rows[obligations["u1"]] == "open"
    done = ws.run("status")
    assert "the policy in force is unknown (identity.ndjson:" in done.stderr
    assert "names unauthenticated" not in done.stderr + done.stdout
    before = ws.digest()
    done = ws.run("unit", "close", "u1", cwd=worktrees["u1"])
    assert done.returncode == 3 and "the policy in force is unknown" in one_line(done)
    assert ws.digest() == before  # nothing written
    done = ws.run("verify")
    assert done.returncode == 1
    named = [line for line in done.stdout.splitlines() if ".ndjson:" in line]
    assert named[0].startswith("identity.ndjson:") and "edited" in named[0], done.stdout
    assert not any(line.startswith("signals.ndjson:") for line in named)  # not judged one by one
    identity.write_bytes(data)  # restored: the policy is known again, the forged line counts for nothing
    rows = {o["id"]: o["status"] for o in ws.json("obligations", "--all")}
    assert rows[obligations["u1"]] == "open"
    assert "person event unsigned" in ws.run("verify").stdout


def test_a_signal_restated_under_its_id_before_routing_changes_nothing(tmp_path: Path) -> None:
    """A unit sharing the account sees a blocking signal that names it (u1, u3) arrive, and before
    the host routes it appends a well-chained copy with the same id naming only u3. Before, the
    copy replaced the signal: the router held u3 alone and `verify` was clean. Now the first line
    is routed, the copy counts for nothing and `verify` names it."""
    ws = make_workspace(tmp_path)
    worktrees = {u: ws.lease(u) for u in ("u1", "u3", "r1")}
    done = ws.run(*report_args(), "--json", cwd=worktrees["r1"], check=True)
    signal_id = json.loads(done.stdout)["id"]
    original = next(e for e in ws.events("signals") if e.get("id") == signal_id)
    copy = {k: v for k, v in original.items() if k not in ("prev", "hash")}
    copy["affectedUnits"] = ["u3"]
    append_forged(ws, "signals", copy)
    ws.run("signals", "route", check=True)
    held_units = sorted(o["unit"] for o in ws.json("obligations") if o["blocks"])
    assert held_units == ["u1", "u3"]
    assert ws.run("unit", "close", "u1", cwd=worktrees["u1"]).returncode == 3  # still held
    done = ws.run("verify")
    assert done.returncode == 1
    assert "a signal id already recorded" in done.stdout, done.stdout


def test_dismissing_an_edited_line_says_it_is_still_read_as_it_stands(tmp_path: Path) -> None:
    """Readers do not hash every line again: a memory line edited in place is read as it stands,
    and `verify --dismiss` says so (a malformed line's dismissal says it counts for nothing)."""
    ws = make_workspace(tmp_path)
    worktree = ws.lease("u1")
    ws.run(*remember_args("TZ", "tests run in UTC"), cwd=worktree, check=True)
    path = ws.store("memory")
    path.write_text(path.read_text().replace("tests run in UTC", "tests run in EST"))
    with open(path, "ab") as handle:
        handle.write(b"not json at all\n")
    done = ws.run("verify")
    assert done.returncode == 1 and "memory.ndjson:1: content does not match its hash" in done.stdout, (
        done.stdout
    )
    edited = ws.run("verify", "--dismiss", "memory:1", "--by", "alice", "--rationale", "seen", check=True)
    assert edited.stdout.strip() == (
        "dismissed memory:1 by alice; readers still take it as it stands: dismissing undoes nothing "
        "(retract, resolve or decide what the line says)"
    )
    malformed = ws.run("verify", "--dismiss", "memory:2", "--by", "alice", "--rationale", "seen", check=True)
    assert malformed.stdout.strip() == "dismissed memory:2 by alice; it still counts for nothing"
    checked = ws.run("verify")
    assert (
        checked.returncode == 0
        and "verify: ok: nothing undismissed; 2 bad line(s) dismissed" in checked.stdout
    )
    assert [e["note"] for e in ws.json("memory")] == ["tests run in EST"]  # what the message says


def test_a_dismissal_reads_every_finding_on_its_line(tmp_path: Path) -> None:
    """A line stamped in the future and hashed again is still read (its dismissal says so); a signed
    retraction edited in place fails its hash and its signature: it counts for nothing, and its
    dismissal says that, not that it is read as it stands."""
    ws = make_workspace(tmp_path, now=None, clock="system")  # times are judged on the system clock
    worktree = ws.lease("u1")
    review_by = str(datetime.now(UTC).date() + timedelta(days=30))
    first = ws.json(*remember_args("TZ", "tests run in UTC", review_by), cwd=worktree)["id"]
    ws.run("memory", "retract", first, "--by", "alice", "--reason", "wrong", check=True)
    path = ws.store("memory")
    lines = path.read_text().splitlines()
    remembered = json.loads(lines[0])
    remembered["at"], remembered["note"] = "2027-06-01T00:00:00Z", "EDITED: tests run in EST"
    remembered["hash"] = event_hash(remembered)
    retraction = json.loads(lines[1])
    retraction["prev"] = remembered["hash"]  # chained to the edited line, its own hash left as it was
    retraction["reason"] = "edited"
    path.write_text(json.dumps(remembered) + "\n" + json.dumps(retraction) + "\n")
    said = ws.run("verify").stdout
    assert "memory.ndjson:1: stamped 2027-06-01T00:00:00Z, in the future" in said, said
    assert "memory.ndjson:2: content does not match its hash" in said and "counts for nothing" in said, said
    future = ws.run("verify", "--dismiss", "memory:1", "--by", "alice", "--rationale", "seen", check=True)
    assert "readers still take it as it stands" in future.stdout
    signed = ws.run("verify", "--dismiss", "memory:2", "--by", "alice", "--rationale", "seen", check=True)
    assert signed.stdout.strip() == "dismissed memory:2 by alice; it still counts for nothing"
    listed = ws.json("memory")
    assert [(e["note"], e["status"]) for e in listed] == [("EDITED: tests run in EST", "current")]
