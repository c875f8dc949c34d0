"""`regulator demo`: the seeds' worked examples, built through the engine's own API (design §14).

Works on a fresh machine with no git identity: the demo's commits carry their own.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import timedelta
from pathlib import Path

from engine.base import clock
from engine.checkout.workspace import LEASE_FILE, Workspace, configure_clock, read_lease
from engine.commands.actors import Actor
from engine.commands.init import setup
from engine.commands.memory import remember
from engine.commands.router import route
from engine.commands.signals import report_intelligence
from engine.commands.units import dispatch
from engine.read.contracts import write_contract
from engine.trust.signing import use_key

OWNER = "alice"
DEMO_GIT = ["-c", "user.name=regulator demo", "-c", "user.email=demo@regulator.invalid"]

CONTRACTS = [
    {
        "id": "u1",
        "type": "implement",
        "workload": "software-development",
        "profile": "implement",
        "title": "Fix the padStart regression for the release",
        "priority": 10,
        "contract": "Fix padStart in src/format.js; the fix depends on vendor/left-pad.js.",
    },
    {
        "id": "u3",
        "type": "implement",
        "workload": "software-development",
        "profile": "implement",
        "title": "Port the report formatter to the new padding helper",
        "priority": 20,
    },
    {
        "id": "r1",
        "type": "research",
        "workload": "software-development",
        "profile": "intelligence",
        "title": "Is vendor/left-pad.js a modified copy?",
        "priority": 5,
        "contract": "Find out whether vendor/left-pad.js is a modified copy of upstream; if it is, name u1 "
        "as affected.",
    },
    {
        "id": "u4",
        "type": "implement",
        "workload": "software-development",
        "profile": "implement",
        "title": "Add TZ to the CI image",
        "priority": 30,
    },
    {
        "id": "release-hardening/manifest",
        "type": "implement",
        "workload": "software-development",
        "profile": "implement",
        "title": "Release manifest and the post-merge leak alerter",
        "priority": 15,
    },
    {
        "id": "b1",
        "type": "bookkeeper",
        "workload": "household-ledger",
        "profile": "bookkeeper",
        "title": "Keep the household ledger's notes",
        "priority": 50,
    },
    {
        "id": "cat-1",
        "type": "categorize",
        "workload": "household-ledger",
        "profile": "bookkeeper",
        "title": "Categorize November's statement lines",
        "priority": 40,
    },
    {
        "id": "rec-1",
        "type": "reconcile",
        "workload": "household-ledger",
        "profile": "bookkeeper",
        "title": "Reconcile November against the bank",
        "priority": 45,
    },
]

FINDING = """---
id: F-alert-path-dead
date: "2026-08-11"
title: "The post-merge leak alerter cannot run: a red gate on main is invisible"
affects: ["release-hardening/manifest"]
ack: ""
resolved: false
---
The step whose whole job is to shout "a withheld token reached main" dies before it can escalate:
it calls a CLI its runner does not ship, so it exits 127 on the failure path, the only path it
exists for. A red gate with a dead alerter is indistinguishable from a green one to anyone not
watching raw logs.
"""

TZ_LOG = """run 4711: 3 failed, 212 passed
FAILED test_dates.py::test_month_end - expected 2026-11-30, got 2026-12-01 (TZ=Pacific/Auckland)
rerun with TZ=UTC: 215 passed
"""
MIRROR = """# the package mirror CI installs from
mirror: https://mirror-eu.example/simple
timeout_s: 30
"""

INTAKE = [
    ("I-person-raised-intake", 19, "A person can report intelligence, not only a research unit", "new", None),
    (
        "I-declared-sensors",
        30,
        "Declared sensors: watchers on advisory feeds report as units",
        "parked",
        None,
    ),
    (
        "I-retro-register",
        40,
        "A RETRO register whose inputs are generated numbers only",
        "scoped:registers",
        None,
    ),
    (
        "I-renew-memory",
        25,
        "A command that renews a memory entry",
        "rejected",
        "A fact still true after review is recorded again by the unit that finds it; renewal would hide review.",
    ),
]


def _git(root: Path, *args: str) -> None:
    """Git with the demo's own identity (registry.gitcall: a git hook's GIT_INDEX_FILE, say, is not
    followed); under a fixed clock, fixed commit dates too."""
    from registry.gitcall import git

    env: dict[str, str] = {}
    if clock.fixed():
        stamp = clock.iso(clock.now())
        env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
    done = git(root, *DEMO_GIT, *args, env=env)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(
            done.returncode, f"git {' '.join(args)}", done.stdout, done.stderr
        )


def worktree_of(root: Path, unit_id: str) -> Path:
    """Where the demo keeps a unit's worktree (and its lease file)."""
    return root / ".worktrees" / unit_id.replace("/", "-")


def _lease(ws: Workspace, unit_id: str) -> Actor:
    """Dispatch a unit into a `git worktree` of its own (branch `unit/<id>`), as a host does: what
    it records is stamped with its worktree's HEAD, so its memory's evidence can be checked."""
    worktree = worktree_of(ws.root, unit_id)
    worktree.parent.mkdir(parents=True, exist_ok=True)
    _git(ws.root, "worktree", "add", "-q", "-b", f"unit/{worktree.name}", str(worktree))
    dispatch(ws, unit_id, worktree)
    lease = read_lease(worktree / LEASE_FILE)
    return Actor(unit=unit_id, lease=lease)


KEY_DIR = ".demo-keys"


def demo_key(root: Path, reproducible: bool = False) -> Path:
    """Alice's key for the demo, made in-process inside the demo folder (mode 0600). Random, except
    for a demo kept on a pinned clock (`--clock pinned`: tests and screenshots), whose key derives
    from REGULATOR_NOW so that the demo is the same byte for byte: never use one for real work."""
    import hashlib

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = root / KEY_DIR
    folder.mkdir(mode=0o700)
    if reproducible:
        seed = hashlib.sha256(f"regulator demo key\0{os.environ.get('REGULATOR_NOW')}".encode()).digest()
        key = Ed25519PrivateKey.from_private_bytes(seed)
    else:
        key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    path = folder / OWNER
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private)
    (folder / f"{OWNER}.pub").write_bytes(public + f" {OWNER}@regulator-demo\n".encode())
    return path


def build(root: Path, clock_mode: str = "system", store: str | None = None) -> Workspace:
    """The demo's history is built with the clock pinned (at REGULATOR_NOW, or now); unless the
    caller keeps it pinned, the workspace ends on the system clock by a decision alice signs."""
    from engine.base.errors import BadInput

    if root.exists() and not root.is_dir():
        raise BadInput(f"--dir {root} is a file, not a folder; give a new or empty folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
        if any(root.iterdir()):
            raise BadInput(f"{root} is not empty; give --dir a new or empty folder")
    except OSError as exc:
        raise BadInput(f"--dir {root}: cannot use it ({exc.strerror or exc})") from None
    pinned_at = os.environ.get("REGULATOR_NOW")
    os.environ["REGULATOR_NOW"] = pinned_at or clock.iso(clock.now())
    try:
        ws = _build(root, reproducible=clock_mode == "pinned", store=store)
    finally:
        if pinned_at is None:
            os.environ.pop("REGULATOR_NOW", None)
    if clock_mode == "system":
        _system_clock(ws)
    return ws


def _system_clock(ws: Workspace) -> None:
    """Alice proposes and accepts `clock: system`, signed: the workspace a user is handed cannot be
    moved in time by REGULATOR_NOW."""
    from engine.commands.proposals import decide, propose

    path = ws.root / "regulator" / "policy" / "routing.yaml"
    text = path.read_text(encoding="utf-8").replace("clock: pinned", "clock: system")
    proposal = propose(
        ws,
        "regulator/policy/routing.yaml",
        text.encode(),
        "the demo ends on the host's clock",
        Actor(person=OWNER),
    )
    decide(ws, proposal["id"], OWNER, "the demo ends on the host's clock", "accepted")
    configure_clock(ws)


def _build(root: Path, reproducible: bool, store: str | None = None) -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.name", "regulator demo")
    _git(root, "config", "user.email", "demo@regulator.invalid")
    key = demo_key(root, reproducible)
    use_key(key)
    ws = setup(root, owner=OWNER, key=key.with_name(f"{OWNER}.pub"), clock_mode="pinned", store=store).ws
    for contract in CONTRACTS:
        write_contract(ws, contract)
    (root / "vendor").mkdir()
    (root / "vendor" / "left-pad.js").write_text(
        "module.exports = function leftPad(str, len, ch) {\n"
        "  // patched locally: pads with ch || '0' (upstream pads with ' ')\n"
        "  str = String(str); ch = ch || '0';\n"
        "  while (str.length < len) str = ch + str;\n  return str;\n};\n"
    )
    (root / "findings" / "F-alert-path-dead.md").write_text(FINDING)
    today = clock.today()
    for ident, days_ago, title, disposition, reason in INTAKE:
        lines = [
            "---",
            f"id: {ident}",
            f'date: "{today - timedelta(days=days_ago)}"',
            f"title: {json.dumps(title)}",
            f"disposition: {disposition}",
        ]
        if reason:
            lines.append(f"reason: {json.dumps(reason)}")
        (root / "intake" / f"{ident}.md").write_text("\n".join([*lines, "---", title + ".", ""]))
    # what the memory entries cite: the TZ entry's log stays as it was (evidence current); the
    # mirror's configuration moves after the entry is recorded (evidence changed)
    (root / "ci" / "logs").mkdir(parents=True)
    (root / "ci" / "logs" / "run-4711.txt").write_text(TZ_LOG)
    (root / "ci" / "mirror.yaml").write_text(MIRROR)
    gitignore = root / ".gitignore"
    gitignore.write_text(gitignore.read_text() + f".worktrees/\n{KEY_DIR}/\n")
    from engine.commands.registers import views
    from engine.read.load import load

    views(ws, load(ws, stores=()), check=False)  # committed with the registers: CI's views --check holds
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "fleet-repo: contracts, registers and regulator policy")

    # units u1, u3 and r1 dispatched first
    u1 = _lease(ws, "u1")
    _lease(ws, "u3")
    r1 = _lease(ws, "r1")
    b1 = _lease(ws, "b1")
    now = clock.now()
    # r1's report on the vendored helper, routed: u1 and u3 held
    report_intelligence(
        ws,
        {
            "subject": "vendor/left-pad.js",
            "claim": "The vendored helper is a modified copy, and u1's fix depends on the modification.",
            "observation": "diff against upstream left-pad 1.3.0: the pad character defaults to '0', not ' '",
            "evidence": ["vendor/left-pad.js", "upstream left-pad 1.3.0 index.js"],
            "confidence": "high",
            "reportedSeverity": "blocking",
            "affectedUnits": ["u1", "u3"],
        },
        r1,
    )
    # the upstream deprecation notice, with an expiresAt
    report_intelligence(
        ws,
        {
            "subject": "upstream statement API deprecation",
            "claim": "The upstream statement API this workload calls is deprecated from March.",
            "observation": "vendor notice of 2026-11-20 names 2027-03-01 as the cut-off",
            "evidence": ["https://vendor.example/notices/2026-11-20"],
            "confidence": "medium",
            "reportedSeverity": "advisory",
            "affectedUnits": ["u3"],
            "observedAt": clock.iso(now - timedelta(hours=2)),
            "expiresAt": clock.iso(now + timedelta(days=92)),
        },
        r1,
    )
    route(ws)
    # the TZ memory entry, scoped to test-running units for 30 days
    remember(
        ws,
        {
            "subject": "TZ for tests",
            "note": "The tests are flaky unless TZ is set; run them with TZ=UTC.",
            "evidence": ["ci/logs/run-4711.txt"],
            "scope": ["implement"],
            "reviewBy": (today + timedelta(days=30)).isoformat(),
        },
        u1.lease,
    )
    # the household ledger's GREENGROCER 114 entry, scoped to categorize and reconcile for 60 days
    remember(
        ws,
        {
            "subject": "GREENGROCER 114",
            "note": "GREENGROCER 114 is the weekly groceries shop.",
            "evidence": ["statement 2026-11 line 14"],
            "scope": ["categorize", "reconcile"],
            "reviewBy": (today + timedelta(days=60)).isoformat(),
        },
        b1.lease,
    )
    remember(
        ws,
        {
            "subject": "package mirror",
            "note": "The package mirror is slow before 09:00 UTC; retry once.",
            "evidence": ["ci/mirror.yaml"],
            "reviewBy": (today + timedelta(days=5)).isoformat(),
        },
        u1.lease,
    )
    # main moves on after the entry: the file it cites changed, so it reads `evidence changed`
    (root / "ci" / "mirror.yaml").write_text(MIRROR.replace("mirror-eu.example", "mirror-us.example"))
    _git(root, "commit", "-q", "-am", "ci: move the package mirror")
    return ws
