"""Trunk's walk kept between commands (engine.read.trunkcache, D-178): the kept walk is the fresh
walk for every history and policy (a property test over real git), it is taken again only for the
same trunk commit and policy, and one the host did not MAC lifts no hold."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.checkout.workspace import Workspace as EngineWorkspace
from engine.read import trunkcache
from registry.lint import Policy, authorize_commit
from registry.trunkwalk import TrunkFindings, carry, walk
from tests.helpers import REGULATOR, Workspace, make_workspace

POLICIES = {  # the grants a step may put in force: each with a fingerprint of its own
    "alice": Policy(ackers={"alice": ()}, fingerprint="alice"),
    "bob": Policy(ackers={"bob": ()}, fingerprint="bob"),
    "nobody": Policy(ackers={}, fingerprint="nobody"),
}
UNITS = ("u1", "u2", "u3")
FINDING = "findings/F-x.md"


def finding(affects: tuple[str, ...] = ("u1",), resolved: bool = False) -> str:
    return (
        f"---\nid: F-x\ndate: '2026-11-01'\ntitle: the alerter is dead\naffects: [{', '.join(affects)}]\n"
        f"ack: ''\nresolved: {'true' if resolved else 'false'}\n---\nbody\n"
    )


def fresh(root: Path, policy: Policy, before: TrunkFindings | None = None) -> TrunkFindings:
    """A fresh walk of trunk, and with `before` (the host's last kept walk) what the host saw held
    there that no authorized commit since lifted (D-231)."""

    def authorize(sha: str, email: str, message: str) -> tuple[str | None, str]:
        return authorize_commit(policy, sha, email, message)

    found = walk(root, "main", authorize)
    if before is not None:
        carry(root, found, before, authorize)
    return found


def seen(found: TrunkFindings) -> tuple[Any, ...]:
    """What a walk answers, but the words of a carried hold's change (it names the commit the
    host last kept, which a kept walk names as of when it was carried)."""
    changes = [c for c in found.changes if not c.subject.startswith("trunk moved from")]
    return found.available, found.tip, found.baseline, found.holds, changes, found.missing


def kept(ws: Workspace, policy: Policy) -> TrunkFindings:
    """The walk as a writer (inside the decide lock) gets it, keeping it when made afresh."""
    engine_ws = EngineWorkspace(ws.root)
    with engine_ws.exclusive():
        return trunkcache.walked(engine_ws, "main", lambda: policy)


commits = st.tuples(
    st.just("commit"),
    st.frozensets(st.sampled_from(UNITS)),
    st.booleans(),  # resolved
    st.sampled_from(["", "alice", "bob"]),  # the Authorized-by trailer ("" : none)
)
steps = st.lists(
    st.one_of(
        commits,
        st.tuples(st.just("policy"), st.sampled_from(sorted(POLICIES))),
        st.tuples(st.just("back")),  # trunk reset one commit back: a tip the kept walk may have seen
        st.tuples(st.just("torn")),  # the kept file cut short: never believed
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_the_kept_walk_is_the_fresh_walk_for_every_history_and_policy(plan: list[tuple[Any, ...]]) -> None:
    """After each step, the walk the engine answers with (kept or not) equals a fresh walk of
    trunk under the policy in force, with what the host held at its last kept walk and no
    authorized commit since lifted (D-231); asked twice, the second answer (from the kept walk) too."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = make_workspace(Path(tmp))
        ws.write(FINDING, finding())
        ws.commit("file F-x", sign=False)
        filed = ws.git("rev-list", "--count", "HEAD").strip()
        policy = POLICIES["alice"]
        before: TrunkFindings | None = None  # the host's memory: its last kept walk
        for step in plan:
            if step[0] == "commit":
                _, affects, resolved, by = step
                ws.write(FINDING, finding(tuple(sorted(affects)), resolved))
                ws.commit("edit F-x" + (f"\n\nAuthorized-by: {by}" if by else ""), sign=False)
            elif step[0] == "policy":
                policy = POLICIES[step[1]]
            elif step[0] == "back":  # never past the commit that filed F-x (the workspace's own)
                if ws.git("rev-list", "--count", "HEAD").strip() != filed:
                    ws.git("reset", "-q", "--hard", "HEAD~1")
            else:
                path = trunkcache.path_of(EngineWorkspace(ws.root))
                if path.exists():
                    path.write_bytes(path.read_bytes()[:-7])
                before = None  # a kept walk not believed is no memory either
            expected = fresh(ws.root, policy, before)
            assert seen(kept(ws, policy)) == seen(expected), step
            assert seen(kept(ws, policy)) == seen(expected), step
            before = expected
            assert trunkcache.path_of(EngineWorkspace(ws.root)).exists()


def _held(ws: Workspace, unit: str = "u1") -> list[str]:
    return next(u for u in ws.json("status")["units"] if u["id"] == unit)["staleKnowledge"]


def _forge(ws: Workspace, key: bytes, edit: Any) -> None:
    """Rewrite the kept walk: its body edited by `edit`, MAC'd with `key`."""
    path = trunkcache.path_of(EngineWorkspace(ws.root))
    body = json.loads(path.read_bytes()[32:])
    edit(body)
    raw = json.dumps(body).encode()
    path.write_bytes(hmac.new(key, trunkcache.FORMAT + raw, hashlib.sha256).digest() + raw)


def _lift(body: dict) -> None:
    body["found"]["holds"] = {}


@pytest.mark.e2e
def test_a_kept_walk_the_host_did_not_mac_lifts_no_hold(ws: Workspace) -> None:
    """A unit that can write `.regulator/` but not read the host key cannot lift a trunk hold by
    rewriting the kept walk: edited under the old MAC, or MAC'd with a key of its own, it is walked
    over; MAC'd with the host's key (what only the host can do) it is believed."""
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    ws.write(FINDING, finding(resolved=True))  # not committed: trunk alone holds u1
    assert _held(ws) == ["F-x"]
    path = trunkcache.path_of(EngineWorkspace(ws.root))
    assert not path.exists()  # readers keep nothing
    ws.run("unit", "dispatch", "u3", check=True)  # a writer that asked "is u3 held" keeps the walk
    assert path.is_file() and path.stat().st_mode & 0o777 == 0o600
    raw = path.read_bytes()
    body = json.loads(raw[32:])
    body["found"]["holds"] = {}
    path.write_bytes(raw[:32] + json.dumps(body).encode())  # the old MAC over an edited body
    assert _held(ws) == ["F-x"]
    _forge(ws, os.urandom(32), _lift)  # a key of its own
    assert _held(ws) == ["F-x"]
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 3 and "stale-knowledge from unresolved finding(s) F-x" in done.stderr
    key = (ws.root / ".regulator" / "host.key").read_bytes()
    _forge(ws, key, _lift)  # the host's own key: believed (so the check above is the MAC's)
    assert _held(ws) == []


@pytest.mark.e2e
def test_a_fifo_or_a_symlink_in_place_of_the_kept_walk_is_walked_over(ws: Workspace, tmp_path: Path) -> None:
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    ws.run("unit", "dispatch", "u3", check=True)
    ws.write(FINDING, finding(resolved=True))
    assert _held(ws) == ["F-x"]
    path = trunkcache.path_of(EngineWorkspace(ws.root))
    elsewhere = tmp_path / "walk"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    assert _held(ws) == ["F-x"]
    path.unlink()
    os.mkfifo(path)
    done = subprocess.run(
        [REGULATOR, "status", "--json"], cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and _held(ws) == ["F-x"], done.stderr


@pytest.mark.e2e
def test_a_kept_walk_is_asked_again_when_the_policy_changes(ws: Workspace) -> None:
    """alice's signed resolution on trunk lifts u1's hold, and the walk that says so is kept. With
    her ack grant withdrawn by a decision (trunk unchanged), the same commit authorizes nothing and
    u1 is held again: the kept walk is not taken for another policy."""
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    ws.write(FINDING, finding(resolved=True))
    ws.commit("resolve F-x\n\nAuthorized-by: alice")
    ws.run("unit", "dispatch", "u1", check=True)  # released by alice's signed resolution: kept
    tip = ws.git("rev-parse", "refs/heads/main").strip()
    kept_walk = json.loads(trunkcache.path_of(EngineWorkspace(ws.root)).read_bytes()[32:])
    assert kept_walk["tip"] == tip and kept_walk["fingerprint"]  # it asked alice's grant
    path = ws.root / "regulator/policy/interaction.yaml"
    text = path.read_text()
    assert "    - ack\n" in text
    ws.decide("regulator/policy/interaction.yaml", text.replace("    - ack\n", "", 1))
    ws.git("reset", "-q", "--soft", tip)  # trunk at the commit the kept walk was made of, the
    # policy decided since (accept committed it; the working tree and the identity store hold it)
    assert _held(ws) == ["F-x"]
    ws.run("unit", "dispatch", "u3", check=True)  # a writer: the walk under the new policy is kept
    assert json.loads(trunkcache.path_of(EngineWorkspace(ws.root)).read_bytes()[32:])["found"]["holds"]
    assert _held(ws) == ["F-x"]


@pytest.mark.e2e
def test_readers_keep_no_walk_and_a_writer_keeps_the_one_it_made(ws: Workspace) -> None:
    """Readers never write, not even a cache (design §13): `status`, `registry next-up` and
    `--once --read-only` after a new trunk commit leave the kept walk as it was; a process that
    writes (`--once` routes; a dispatch, even refused inside the lock) keeps the walk it makes."""
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    ws.run("unit", "dispatch", "u3", check=True)
    path = trunkcache.path_of(EngineWorkspace(ws.root))
    before = path.read_bytes()
    ws.write(FINDING, finding(affects=("u1", "b1")))
    ws.commit("F-x holds b1 too")
    for args in (
        ["status", "--json"],
        ["registry", "next-up", "--json"],
        ["controlroom", "--once", "--read-only"],
    ):
        ws.run(*args)
        assert path.read_bytes() == before, args
    ws.run("controlroom", "--once", "--json")  # routes (a writer): keeps the walk it made after
    assert json.loads(path.read_bytes()[32:])["tip"] == ws.git("rev-parse", "HEAD").strip()
    ws.write(FINDING, finding(affects=("u1", "b1", "u3")))
    ws.commit("F-x holds u3 too")
    done = ws.run("unit", "dispatch", "b1")  # a write (its veto judged inside the lock), refused
    assert done.returncode == 3 and "F-x" in done.stderr
    assert json.loads(path.read_bytes()[32:])["tip"] == ws.git("rev-parse", "HEAD").strip()


def _filed_and_resolved_here(ws: Workspace) -> str:
    """F-x filed on trunk holding u1, then resolved in the working tree only (not committed): trunk
    alone holds u1. Returns the blob of trunk's version."""
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    ws.write(FINDING, finding(resolved=True))
    assert _held(ws) == ["F-x"]
    return ws.git("rev-parse", f"main:{FINDING}").strip()


@pytest.mark.e2e
def test_a_directory_in_place_of_the_kept_walk_breaks_no_command(ws: Workspace) -> None:
    _filed_and_resolved_here(ws)
    trunkcache.path_of(EngineWorkspace(ws.root)).mkdir()
    for args in (["status", "--json"], ["controlroom", "--once", "--json"], ["registry", "lint", "--json"]):
        done = ws.run(*args)
        assert "Traceback" not in done.stderr and done.returncode in (0, 1), (args, done.stderr)
    assert _held(ws) == ["F-x"]
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 3 and "F-x" in done.stderr and "Traceback" not in done.stderr
    ws.run("unit", "dispatch", "u3", check=True)  # a writer: it cannot replace a directory, and says nothing


@pytest.mark.e2e
def test_a_walk_missing_an_object_is_not_kept(ws: Workspace) -> None:
    """From an adversarial review: with trunk's version of F-x moved out of the object store, a
    writer's walk saw no finding and kept that, so u1 stayed released after the object was back."""
    blob = _filed_and_resolved_here(ws)
    loose = ws.root / ".git" / "objects" / blob[:2] / blob[2:]
    assert loose.is_file()
    aside = ws.root.parent / "aside"
    loose.rename(aside)
    ws.run("unit", "dispatch", "u3", check=True)  # a writer walks while the object is missing
    aside.rename(loose)
    assert _held(ws) == ["F-x"]
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 3 and "F-x" in done.stderr


@pytest.mark.e2e
def test_a_replace_ref_changes_no_finding_trunk_holds(ws: Workspace) -> None:
    """From an adversarial review: `git replace` of trunk's version of F-x by a resolved one lifted
    the hold (git shows replaced objects by default) and a writer kept the lift."""
    blob = _filed_and_resolved_here(ws)
    fake = ws.git("hash-object", "-w", FINDING).strip()  # the resolved working-tree version
    ws.git("replace", blob, fake)
    assert ws.git("cat-file", "-p", f"main:{FINDING}").count("resolved: true") == 1  # git obeys it
    assert _held(ws) == ["F-x"]
    ws.run("unit", "dispatch", "u3", check=True)
    assert _held(ws) == ["F-x"]
    ws.git("replace", "-d", blob)
    assert _held(ws) == ["F-x"]
