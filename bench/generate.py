"""Deterministic large workspaces for the benchmarks, written with the engine's own line format.

Events are chained and hashed exactly as `engine.log.store.Store.append` writes them (same canonical
JSON, same hash), so `regulator verify` passes on a generated log; they are written in bulk rather
than one locked append each, which is what makes a million of them take seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from engine.base import ids
from engine.checkout.authority import signed_bytes
from engine.commands.init import setup
from engine.log.store import GENESIS, canonical_line, event_hash

NOW = "2026-11-29T12:00:00Z"
TODAY = date(2026, 11, 29)
GIT = ["-c", "user.name=bench", "-c", "user.email=bench@regulator.invalid"]


@dataclass(frozen=True)
class Scale:
    name: str
    events: int  # across the stores, for projection and incremental
    units: int
    obligations: int  # open, for the control room
    entries: int  # register entries, one commit each, for lint
    findings: int  # for next-up


SCALES = {
    "full": Scale("full", 1_000_000, 10_000, 100_000, 10_000, 1_000),
    "quick": Scale("quick", 50_000, 1_000, 10_000, 500, 100),
    "smoke": Scale("smoke", 4_000, 100, 1_000, 50, 10),  # for the test that the harness runs
    # design §25's 500,000 figures only (first_frame_500k_s, rss_kb_per_obligation): bench/last-huge.json
    "huge": Scale("huge", 0, 50_000, 500_000, 0, 0),
}


class Writer:
    """Appends chained events to one store file, buffered."""

    def __init__(self, path: Path) -> None:
        self.handle = open(path, "ab")  # noqa: SIM115 (closed in close())
        self.prev = GENESIS
        self.count = 0

    def add(self, event: dict) -> dict:
        event = dict(event)
        event["prev"] = self.prev
        event["hash"] = event_hash(event)
        self.prev = event["hash"]
        self.handle.write(canonical_line(event))
        self.count += 1
        return event

    def close(self) -> None:
        self.handle.close()


def make_id(n: int, salt: int = 0) -> str:
    return ids._encode(1_764_417_600_000 + n, 10) + ids._encode(n * 7919 + salt, 16)


def unit_name(i: int) -> str:
    return f"unit-{i:05d}"


class Person:
    """Alice, signing person events as the CLI does (id, workspace, sig over the canonical bytes)."""

    def __init__(self, root: Path) -> None:
        from engine.base import sshsig
        from engine.checkout.workspace import Workspace

        self.signer = sshsig.load_signer(root / ".bench-keys" / "alice")
        self.workspace = Workspace(root).authority().workspace_id
        self.count = 0

    def event(self, event: dict) -> dict:
        self.count += 1
        made = {"id": event.get("id") or make_id(self.count, 9), **event, "workspace": self.workspace}
        made["sig"] = self.signer.sign(signed_bytes(made))
        return made


def bench_key(root: Path) -> Path:
    """Alice's key for a bench workspace, made in-process (as the demo makes its own)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = root / ".bench-keys"
    folder.mkdir(exist_ok=True)
    key = Ed25519PrivateKey.generate()
    (folder / "alice").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    (folder / "alice").chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    (folder / "alice.pub").write_bytes(public + b" alice@bench\n")
    return folder / "alice.pub"


def new_workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, REGULATOR_NOW=NOW)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=env)
    old = os.environ.get("REGULATOR_NOW")
    os.environ["REGULATOR_NOW"] = NOW
    try:
        setup(root, owner="alice", key=bench_key(root), clock_mode="pinned")
        (root / ".gitignore").write_text(".regulator/\n.bench-keys/\n")
    finally:
        if old is None:
            del os.environ["REGULATOR_NOW"]
        else:
            os.environ["REGULATOR_NOW"] = old
    return root


def write_contracts(root: Path, count: int) -> None:
    folder = root / "contracts"
    for i in range(count):
        kind = ("implement", "implement", "research", "bookkeeper")[i % 4]
        profile = {"implement": "implement", "research": "intelligence", "bookkeeper": "bookkeeper"}[kind]
        data = {
            "id": unit_name(i),
            "type": kind,
            "profile": profile,
            "title": f"Work item {i}",
            "priority": (i * 37) % 200,
        }
        (folder / f"{unit_name(i)}.json").write_text(json.dumps(data))


def seen(root: Path, **sizes: int) -> dict[str, int]:
    """A host event's `seen` (design §22): the other stores' lengths when it was decided, as the
    generated log orders them (every dispatch and close before the first signal; memory after the
    last host event)."""
    identity = (root / ".regulator" / "identity.ndjson").stat().st_size
    return {"signals": 0, "units": 0, "memory": 0, "identity": identity, **sizes}


def write_signals(root: Path, signals: int, units: int, resolved: int = 0) -> int:
    """`signals` signals, each routed into one open obligation (blocking one time in ten): reported
    by research units under their leases, one in a hundred raised by a person (signed). The first
    `resolved` obligations are then dispositioned by alice, each a signed person event. Each
    routing record saw units.ndjson whole."""
    w = Writer(root / ".regulator" / "signals.ndjson")
    alice = Person(root)
    units_path = root / ".regulator" / "units.ndjson"
    routed = seen(root, units=units_path.stat().st_size if units_path.exists() else 0)
    routed.pop("signals")
    for i in range(signals):
        sid = make_id(i, 1)
        unit = unit_name(i % units)
        severity = "blocking" if i % 10 == 0 else "advisory"
        by_person = i % 100 == 0
        signal = {
            "kind": "signal",
            "id": sid,
            "subject": f"dependency {i % 997} changed",
            "claim": "The dependency changed behaviour in a way this unit relies on.",
            "observation": f"diff of release notes, item {i}",
            "evidence": [f"notes/{i}.md"],
            "confidence": "medium",
            "reportedSeverity": severity,
            "affectedUnits": [unit],
            "observedAt": NOW,
            "expiresAt": "2027-02-01T00:00:00Z" if i % 3 else None,
            "rationale": None,
            "unit": None if by_person else unit_name((i % units) // 4 * 4 + 2),  # a research unit
            "by": "alice" if by_person else None,
            "revision": None,
            "source": "S4",
            "destination": "S3",
            "at": NOW,
        }
        w.add(alice.event(signal) if by_person else signal)
        w.add(
            {
                "kind": "routing",
                "signal": sid,
                "reportedSeverity": severity,
                "derivedSeverity": severity,
                "floors": [],
                "obligations": [
                    {
                        "id": ids.obligation_id(sid, unit),
                        "unit": unit,
                        "severity": severity,
                        "blocks": severity == "blocking",
                        "owedTo": "S3",
                    }
                ],
                "at": NOW,
                "outcome": "obligations",
                "reason": f"1 obligation(s) owed to S3 on {unit}",
                "seen": routed,
            }
        )
    for i in range(resolved):
        sid = make_id(i, 1)
        unit = unit_name(i % units)
        event = {
            "kind": "disposition",
            "obligation": ids.obligation_id(sid, unit),
            "unit": unit,
            "disposition": "no-action",
            "by": "alice",
            "rationale": "checked",
            "at": NOW,
        }
        w.add(alice.event(event))
    w.close()
    return w.count


def person_workspace(root: Path, scale: Scale) -> dict:
    """`verify_person_events_s`: 10,000 signed dispositions (fewer at smaller scales), each closing
    one of as many obligations."""
    count = {"full": 10_000, "quick": 10_000}.get(scale.name, 200)
    new_workspace(root)
    write_contracts(root, min(scale.units, 1000))
    events = write_signals(root, count, min(scale.units, 1000), resolved=count)
    return {"events": events, "personEvents": count}


def write_units(root: Path, events: int, units: int) -> int:
    """Dispatch/close cycles; every unit ends todo or closed, never in progress. Each saw no signal
    (the generated log routes every signal after them)."""
    w = Writer(root / ".regulator" / "units.ndjson")
    decided = seen(root)
    decided.pop("units")
    i = 0
    while w.count + 2 <= events:
        unit = unit_name(i % units)
        lease = make_id(i, 2)
        lease_hash = hashlib.sha256(lease.encode()).hexdigest()
        w.add(
            {
                "kind": "dispatch",
                "unit": unit,
                "leaseHash": lease_hash,
                "type": "implement",
                "profile": "implement",
                "contractHash": None,
                "worktree": None,
                "revision": None,
                "seen": decided,
                "at": NOW,
            }
        )
        w.add({"kind": "close", "unit": unit, "leaseHash": lease_hash, "seen": decided, "at": NOW})
        i += 1
    w.close()
    return w.count


def write_memory(root: Path, events: int, units: int) -> int:
    w = Writer(root / ".regulator" / "memory.ndjson")
    alice = Person(root)
    i = 0
    while w.count < events:
        mid = make_id(i, 3)
        review = (TODAY + timedelta(days=1 + i % 89)).isoformat()
        w.add(
            {
                "kind": "memory",
                "id": mid,
                "subject": f"fact {i}",
                "note": f"Fact number {i} about the build.",
                "evidence": [f"log/{i}"],
                "scope": [["implement"], [], ["research"]][i % 3],
                "reviewBy": review,
                "unit": unit_name(i % units),
                "revision": None,
                "recordedBy": "S1",
                "at": NOW,
            }
        )
        if i % 100 == 0 and w.count < events:  # person events: about 1 % of the log (design §21)
            w.add(
                alice.event(
                    {"kind": "retraction", "entry": mid, "by": "alice", "reason": "superseded", "at": NOW}
                )
            )
        i += 1
    w.close()
    return w.count


def log_workspace(root: Path, scale: Scale) -> dict:
    """`scale.events` events across the stores, `scale.obligations` of them open obligations."""
    new_workspace(root)
    write_contracts(root, scale.units)
    routed = 2 * scale.obligations  # write_signals writes a signal and its routing record each
    # units first: every routing record saw them (and they saw no signal)
    units = write_units(root, (scale.events - routed) // 2, scale.units)
    signals = write_signals(root, scale.obligations, scale.units)
    memory = write_memory(root, scale.events - signals - units, scale.units)
    return {"events": signals + units + memory, "signals": signals, "units": units, "memory": memory}


def room_workspace(root: Path, scale: Scale) -> dict:
    """The control room's workspace: `scale.obligations` open obligations, `scale.units` units."""
    new_workspace(root)
    write_contracts(root, scale.units)
    return {"events": write_signals(root, scale.obligations, scale.units), "obligations": scale.obligations}


def finding_text(i: int, units: int) -> str:
    affects = [unit_name((i * 13) % units)]
    return (
        f"---\nid: F-finding-{i:05d}\ndate: '2026-11-01'\ntitle: Finding {i}\naffects: {json.dumps(affects)}\n"
        f"ack: ''\nresolved: {'true' if i % 2 else 'false'}\n---\nBody of finding {i}.\n"
    )


def intake_text(i: int) -> str:
    disposition = ("parked", "rejected", "scoped:stream-a", "new")[i % 4]
    reason = "reason: not now\n" if disposition == "rejected" else ""
    return (
        f"---\nid: I-idea-{i:05d}\ndate: '2026-11-25'\ntitle: Idea {i}\ndisposition: {disposition}\n"
        f"{reason}---\nIdea {i}.\n"
    )


def registry_workspace(root: Path, scale: Scale) -> dict:
    """`scale.entries` register entries, each landed on trunk by its own commit (git fast-import)."""
    new_workspace(root)
    write_contracts(root, min(scale.units, 1000))
    units = min(scale.units, 1000)
    subprocess.run(["git", "-C", str(root), *GIT, "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), *GIT, "commit", "-q", "-m", "workspace"], check=True)
    files: list[tuple[str, str]] = []
    for i in range(scale.entries):
        if i % 5 == 0:
            files.append((f"findings/F-finding-{i:05d}.md", finding_text(i, units)))
        else:
            files.append((f"intake/I-idea-{i:05d}.md", intake_text(i)))
    stream = bytearray()
    stamp = 1_764_000_000
    for n, (path, text) in enumerate(files):
        data = text.encode()
        message = f"add {path}\n".encode()
        stream += b"commit refs/heads/main\n"
        stream += f"committer bench <bench@regulator.invalid> {stamp + n} +0000\n".encode()
        stream += f"data {len(message)}\n".encode() + message
        if n == 0:
            stream += b"from refs/heads/main^0\n"
        stream += f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"
    subprocess.run(["git", "-C", str(root), "fast-import", "--quiet"], input=bytes(stream), check=True)
    subprocess.run(["git", "-C", str(root), "reset", "-q", "--hard", "main"], check=True)
    return {"entries": len(files), "commits": len(files) + 1}


def nextup_workspace(root: Path, scale: Scale) -> dict:
    new_workspace(root)
    write_contracts(root, scale.units)
    for i in range(scale.findings):
        (root / "findings" / f"F-finding-{i:05d}.md").write_text(finding_text(i, scale.units))
    return {"units": scale.units, "findings": scale.findings}


MEMORY_EVENTS = {"full": 400_000, "quick": 40_000, "smoke": 2_000}  # memory_freshness_ratio (design §21)


def memory_workspace(root: Path, events: int, commits: int = 200, files: int = 500) -> dict:
    """`memory_freshness_ratio`: `events` memory events recorded over a history of `commits` commits
    touching `files` source files, each entry at one of those revisions citing a file (`path:line`)
    and something that is no path; about 1 % signed retractions."""
    new_workspace(root)
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    src = root / "src"
    src.mkdir()
    revisions = []
    for c in range(commits):  # each commit edits a few files: most cited files change over time
        touched = range(files) if c == 0 else [(c * 7 + k * 131) % files for k in range(3)]
        for f in touched:
            (src / f"mod{f:04d}.py").write_text(f"# module {f}, revision {c}\n" + "x = 1\n" * 20)
        subprocess.run(["git", *GIT, "add", "-A"], cwd=root, check=True, env=env)
        subprocess.run(["git", *GIT, "commit", "-q", "-m", f"c{c}"], cwd=root, check=True, env=env)
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, check=True, env=env, capture_output=True
        )
        revisions.append(done.stdout.decode().strip())
    w = Writer(root / ".regulator" / "memory.ndjson")
    alice = Person(root)
    i = 0
    while w.count < events:
        mid = make_id(i, 5)
        w.add(
            {
                "kind": "memory",
                "id": mid,
                "subject": f"fact {i}",
                "note": f"Fact number {i} about the build.",
                "evidence": [f"src/mod{(i * 31) % files:04d}.py:{1 + i % 20}", f"ci run {i}"],
                "scope": [["implement"], [], ["research"]][i % 3],
                "reviewBy": (TODAY + timedelta(days=1 + i % 89)).isoformat(),
                "unit": unit_name(i % 1000),
                "revision": revisions[(i * 13) % commits],
                "recordedBy": "S1",
                "at": NOW,
            }
        )
        if i % 100 == 0 and w.count < events:
            w.add(
                alice.event(
                    {"kind": "retraction", "entry": mid, "by": "alice", "reason": "superseded", "at": NOW}
                )
            )
        i += 1
    w.close()
    return {"memoryEvents": w.count, "commits": commits, "files": files}


def osv_workspace(root: Path, advisories: int = 10_000, lockfiles: int = 50, pins: int = 100) -> dict:
    """design §25's `osv_sensor_s`: `lockfiles` requirements files of `pins` pins each, committed on
    trunk, each declared for its own unit, and a feed folder of `advisories` OSV records (GitHub's
    shape) over 5,000 package names, about one in twenty of those that name a pinned package
    affecting its version; the osv sensor declared by a decision, signed as the CLI signs it."""
    import random

    from engine.checkout.workspace import Workspace
    from engine.commands.actors import Actor
    from engine.commands.proposals import decide, propose
    from engine.trust.signing import use_key

    rng = random.Random(24)
    new_workspace(root)
    write_contracts(root, lockfiles)
    pool = [f"pkg-{i:04d}" for i in range(2_000)]
    declared = {}
    for n in range(lockfiles):
        path = f"services/svc-{n:02d}/requirements.txt"
        chosen = rng.sample(pool, pins)
        lines = [f"# svc-{n:02d}, pinned"] + [
            f"{name}==2.{rng.randrange(10)}.{rng.randrange(10)}" for name in chosen
        ]
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("\n".join(lines) + "\n")
        declared[path] = [unit_name(n)]
    feed = root / "feed"
    feed.mkdir()
    (root / ".gitignore").write_text(".regulator/\n.bench-keys/\nfeed/\n")
    for i in range(advisories):
        name = f"pkg-{rng.randrange(5_000):04d}"
        fixed = f"2.{rng.randrange(10)}.0" if rng.random() < 0.05 else f"1.{rng.randrange(10)}.0"
        record = {
            "schema_version": "1.6.0",
            "id": f"GHSA-{i:04x}-bnch-{i % 997:04x}",
            "modified": "2026-11-28T10:00:00Z",
            "published": "2026-11-01T00:00:00Z",
            "aliases": [f"CVE-2026-{10_000 + i}"],
            "summary": f"{name}: a vulnerability before {fixed}",
            "details": "Generated for the benchmark.",
            "affected": [
                {
                    "package": {"ecosystem": "PyPI", "name": name, "purl": f"pkg:pypi/{name}"},
                    "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": fixed}]}],
                    "database_specific": {"source": "generated"},
                }
            ],
            "database_specific": {
                "github_reviewed": True,
                "severity": rng.choice(["LOW", "MODERATE", "HIGH"]),
            },
        }
        (feed / f"{record['id']}.json").write_text(json.dumps(record))
    subprocess.run(["git", *GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", *GIT, "-C", str(root), "commit", "-q", "-m", "lockfiles"], check=True)
    text = "sensors:\n  osv:\n    kind: osv\n    feed: feed\n    staleAfter: 30d\n    lockfiles:\n"
    text += "".join(f"      {path}: [{units[0]}]\n" for path, units in declared.items())
    old = os.environ.get("REGULATOR_NOW")
    os.environ["REGULATOR_NOW"] = NOW
    use_key(root / ".bench-keys" / "alice")
    try:
        ws = Workspace(root)
        proposal = propose(ws, "regulator/policy/sensors.yaml", text.encode(), "bench", Actor(person="alice"))
        decide(ws, proposal["id"], "alice", "bench", "accepted")
    finally:
        use_key(None)
        if old is None:
            del os.environ["REGULATOR_NOW"]
        else:
            os.environ["REGULATOR_NOW"] = old
    return {"advisories": advisories, "lockfiles": lockfiles, "pins": lockfiles * pins}
