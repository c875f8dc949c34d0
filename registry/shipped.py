"""Records that `regulator init` ships about regulator's own mechanisms, limitations stated honestly."""

from __future__ import annotations

from pathlib import Path

import yaml

RECORDS = [
    {
        "id": "REG-RTE-intelligence-intake",
        "label": "Intelligence intake: report_intelligence and person-raised reports",
        "kind": "RTE",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/signals.py", "engine/router.py"],
        "relates": ["REG-OBJ-regulatory-log"],
        "limitations": [
            "A report is unverified input: nothing here proves a finding true; the router only meters "
            "what it can force by severity.",
            "Nothing re-raises intelligence when it goes stale: an open obligation whose signal expired is "
            "marked stale and stays open until a person dispositions it.",
            "The unit type check trusts the contract file: whoever can edit contracts/ can make a unit "
            "research.",
        ],
    },
    {
        "id": "REG-OBJ-regulatory-log",
        "label": "The append-only, hash-chained stores under .regulator/",
        "kind": "OBJ",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/store.py"],
        "relates": [],
        "limitations": [
            "Tamper evidence has no outside anchor: a cut-off tail, or a suffix rewritten and re-hashed, "
            "cannot be seen by verify.",
            "The stores are runtime state, not tracked by git: they must be backed up like a database.",
        ],
    },
    {
        "id": "REG-OBJ-memory-store",
        "label": "Operational memory: dated facts rendered into later units' context",
        "kind": "OBJ",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/memory.py", "engine/delivery.py"],
        "relates": ["REG-RTE-memory-delivery"],
        "limitations": [
            "A memory entry is text: nothing checks that a fact is true or current, or that it is about "
            "the environment rather than a preference.",
            "The scope is whatever the writer claims; an unscoped fact reaches every unit.",
        ],
    },
    {
        "id": "REG-RTE-memory-delivery",
        "label": "Delivery of identity and current memory into a unit's starting context",
        "kind": "RTE",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/delivery.py"],
        "relates": ["REG-OBJ-memory-store"],
        "limitations": [
            "Rendering into the prompt is advice, the lowest mechanism level: a unit may ignore it.",
            "The budget leaves entries out (counted in a closing line); a large store crowds the context "
            "before the 90-day limit retires anything.",
        ],
    },
    {
        "id": "REG-BAP-person-by-name",
        "label": "Dispositions, retractions, decisions and acks by a named person (--by)",
        "kind": "BAP",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/actors.py", "engine/signing.py", "engine/authority.py", "engine/sshsig.py"],
        "relates": [],
        "limitations": [
            "A person event counts only when SSH-signed by a key the interaction policy in force lists "
            "for that person (where requireSignatures is set); a signature proves who held the key, not "
            "who typed the command, and nothing protects a key its OS account does not.",
            "A workspace without requireSignatures counts unsigned person events by name: every view "
            "says `names unauthenticated` there.",
            "A lease file proves only that the host dispatched the unit into that folder; anyone who can "
            "read the file (mode 0600) can act as that unit until it is released. The log keeps only "
            "its hash.",
            "Host events (dispatch, close, routing) are not signed: a unit that can write .regulator/ "
            "can append one; verify re-derives routing records and times, not unit transitions.",
        ],
    },
    {
        "id": "REG-CMP-register-lint",
        "label": "Register lint against trunk history",
        "kind": "CMP",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": ["registry/lint.py", "registry/history.py"],
        "relates": [],
        "limitations": [
            "The tombstone check is advisory where history is missing: without trunk history, or in a "
            "shallow clone, a clean result means no deletion observed, never no deletion occurred.",
            "Nothing here proves a finding true: a well-formed entry full of falsehoods flags its units "
            "until someone reads it.",
            "Where signatures are not required, Authorized-by trailers are as honest as the commit author address: the identity map checks "
            "the email, and git does not authenticate it.",
        ],
    },
]


def record_text(record: dict) -> str:
    front = yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{front}---\n{record['label']}. Shipped by `regulator init`; edit in place, never delete.\n"


def write_shipped_records(root: Path) -> list[Path]:
    written = []
    for record in RECORDS:
        path = root / "records" / f"{record['id']}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(record_text(record), encoding="utf-8")
            written.append(path)
    return written
