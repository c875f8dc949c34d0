"""What the trust attacks share (tests/hardening/test_trust*.py): a held fleet, a line appended as a
unit sharing the operator's account would, a forged checkpoint, a first-round workspace, a finding
on trunk, the host's lines forged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.log.store import Store, event_hash
from tests import helpers
from tests.helpers import (
    NOW,
    clean_env,
    make_workspace,
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


def begun_and_read(engine_ws: Any) -> Any:
    """verify's passes begun (engine.commands.verification.begin), waited for until its child
    has read the stores and exited (not yet reaped, so their answers are still to be had)."""
    from engine.commands.verification import begin

    time.sleep(0.06)  # begin leaves a store changed in the last 50 ms to after the fold
    begun = begin(engine_ws)
    assert begun is not None
    assert begun.child.pid is not None
    os.waitid(os.P_PID, begun.child.pid, os.WEXITED | os.WNOWAIT)
    return begun


def edited_in_place(ws: helpers.Workspace) -> bytes:
    """signals.ndjson with its routing record's severities changed in place, at the same size and
    without a new hash: what a shell on the account can write with sed."""
    data = ws.store("signals").read_bytes()
    edited = data.replace(b'"derivedSeverity":"blocking"', b'"derivedSeverity":"advisory"')
    assert edited != data and len(edited) == len(data)
    return edited


def forged_shorter(ws: helpers.Workspace) -> bytes:
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


KILLED_ALONE = """
import os, signal, sys, time
from pathlib import Path
from engine.checkout.workspace import Workspace
from engine.commands import verification

def slow(*args):  # a pass over stores far larger than these
    time.sleep(20)
    return [[], []]

verification._chains_and_lines = slow
begun = verification.begin(Workspace(Path(sys.argv[1])))
print(begun.child.pid, flush=True)
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGKILL)
"""
