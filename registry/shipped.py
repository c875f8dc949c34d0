"""Records that `regulator init` ships about regulator's own mechanisms, limitations stated honestly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def _facet(facet: str, text: str) -> dict[str, str]:
    return {"facet": facet, "text": text}


RECORDS: list[dict[str, Any]] = [
    {
        "id": "REG-RTE-intelligence-intake",
        "label": "Intelligence intake: report_intelligence and person-raised reports",
        "kind": "RTE",
        "status": {"implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/commands/signals.py", "engine/commands/router.py"],
        "relates": ["REG-OBJ-regulatory-log", "REG-RTE-routing-to-obligations"],
        "evidence": [{"direct": "tests/test_intelligence_e2e.py: reports from a research unit and a person"}],
        "limitations": [
            _facet(
                "Evidence limits",
                "A report is unverified input: nothing here proves a finding true; the router only meters "
                "what it can force by severity.",
            ),
            _facet(
                "Invalidation or expiry",
                "Nothing re-raises intelligence when it goes stale: an open obligation whose signal expired "
                "is marked stale and stays open until a person dispositions it.",
            ),
            _facet(
                "Selection predicate",
                "The unit type check trusts the contract as the dispatch recorded it: whoever could edit "
                "contracts/ before the dispatch can make a unit research.",
            ),
        ],
    },
    {
        "id": "REG-RTE-routing-to-obligations",
        "label": "The router: severity floors, the intelligence rule and blocking obligations",
        "kind": "RTE",
        "status": {"implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/commands/router.py", "identity/policy.py", "regulator/policy/routing.yaml"],
        "relates": ["REG-RTE-intelligence-intake", "REG-BAP-vetoes", "REG-OBJ-regulatory-log"],
        "evidence": [
            {
                "direct": "tests/test_intelligence_e2e.py: floors raise, rules note, expired signals raise nothing"
            },
            {"direct": "regulator verify re-derives every routing record from its signal and the policy"},
        ],
        "limitations": [
            _facet(
                "Immediate return",
                "A routing record: noted, expired or obligations, with the reason; nothing reaches the "
                "reporting unit.",
            ),
            _facet(
                "Selection predicate",
                "Floors are regular expressions over subject, observation and rationale, never the claim: "
                "a report worded around them keeps its reported severity.",
            ),
            _facet(
                "Evidence limits",
                "Routing records are host events and are not signed: a unit that can write .regulator/ "
                "can append one; verify names one the router would not have written.",
            ),
        ],
        "absences": ["No second router check: a signal's affected units are taken as the report names them."],
    },
    {
        "id": "REG-BAP-vetoes",
        "label": "Vetoes: open blocking obligations and unresolved findings hold dispatch and close",
        "kind": "BAP",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/read/vetoes.py", "engine/read/ladder.py", "engine/commands/units.py"],
        "relates": ["REG-RTE-routing-to-obligations", "REG-CMP-register-lint"],
        "evidence": [{"direct": "tests/test_units.py and tests/hardening/: a held unit's dispatch exits 3"}],
        "limitations": [
            _facet(
                "Activation or effect",
                "A veto refuses the regulator command only: a unit that works without being dispatched, or "
                "outside its worktree, is not stopped by it.",
            ),
            _facet(
                "Evidence limits",
                "Dispatch and close are host events, unsigned: a unit that can write .regulator/ can forge "
                "one past a veto (the shared-account deployment; docs/security.md).",
            ),
        ],
    },
    {
        "id": "REG-OBJ-regulatory-log",
        "label": "The append-only, hash-chained stores under .regulator/",
        "kind": "OBJ",
        "sources": ["engine/log/store.py"],
        "relates": [],
        "limitations": [
            _facet(
                "Evidence limits",
                "Tamper evidence has no outside anchor: a cut-off tail, or a suffix rewritten and re-hashed, "
                "cannot be seen by verify.",
            ),
            "The stores are runtime state, not tracked by git: they must be backed up like a database.",
        ],
        "absences": ["No outside anchor for the hash chain (no timestamping service, no remote witness)."],
    },
    {
        "id": "REG-OBJ-memory-store",
        "label": "Operational memory: dated facts rendered into later units' context",
        "kind": "OBJ",
        "sources": ["engine/commands/memory.py", "engine/read/delivery.py"],
        "relates": ["REG-RTE-memory-delivery"],
        "limitations": [
            _facet(
                "Evidence limits",
                "A memory entry is text: nothing checks that a fact is true or current, or that it is about "
                "the environment rather than a preference.",
            ),
            _facet(
                "Selection predicate",
                "The scope is whatever the writer claims; an unscoped fact reaches every unit.",
            ),
        ],
    },
    {
        "id": "REG-RTE-memory-delivery",
        "label": "Delivery of identity and current memory into a unit's starting context",
        "kind": "RTE",
        "status": {"implementation": "wired", "operation": "uninspected"},
        "sources": ["engine/read/delivery.py"],
        "relates": ["REG-OBJ-memory-store"],
        "limitations": [
            _facet(
                "Activation or effect",
                "Rendering into the prompt is advice, the lowest mechanism level: a unit may ignore it.",
            ),
            _facet(
                "Selection predicate",
                "The budget leaves entries out (counted in a closing line); a large store crowds the context "
                "before the 90-day limit retires anything.",
            ),
        ],
    },
    {
        "id": "REG-BAP-person-by-name",
        "label": "Dispositions, retractions, decisions and acks by a named person (--by)",
        "kind": "BAP",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": [
            "engine/commands/actors.py",
            "engine/trust/signing.py",
            "engine/checkout/authority.py",
            "engine/base/sshsig.py",
        ],
        "relates": ["REG-RTE-signed-actions"],
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
        "id": "REG-RTE-signed-actions",
        "label": "Signed person actions: the CLI signs, the fold counts only what verifies",
        "kind": "RTE",
        "status": {"implementation": "wired", "operation": "uninspected"},
        "sources": [
            "engine/trust/signing.py",
            "engine/base/sshsig.py",
            "engine/checkout/authority.py",
            "engine/read/fold.py",
        ],
        "relates": ["REG-BAP-person-by-name", "REG-BAP-identity-decisions"],
        "evidence": [
            {"direct": "tests/test_sshsig.py: signatures made by ssh-keygen verify, tampered ones do not"},
            {"direct": "tests/hardening/: a person event appended by hand counts for nothing"},
        ],
        "limitations": [
            _facet(
                "Immediate return",
                "The command exits 3 when the person's key is not at hand or not listed; nothing is written.",
            ),
            _facet(
                "Later read-back",
                "Every reader folds the event and counts it only under the policy in force at its place in "
                "the log; one that does not count is shown as counting for nothing.",
            ),
            _facet(
                "Evidence limits",
                "A signature proves who held the key, not who typed the command; a key without a passphrase "
                "on a shared account is as good as the account.",
            ),
        ],
    },
    {
        "id": "REG-BAP-identity-decisions",
        "label": "Identity decisions: governed files change by a proposal a person with `accept` decides",
        "kind": "BAP",
        "status": {"claim": "claimed", "implementation": "wired", "operation": "uninspected"},
        "sources": [
            "engine/commands/proposals.py",
            "engine/checkout/authority.py",
            "engine/trust/idhistory.py",
        ],
        "relates": ["REG-RTE-signed-actions", "REG-RTE-memory-delivery"],
        "evidence": [
            {"direct": "tests/test_identity.py: a hand edit grants nothing and identity verify names it"}
        ],
        "limitations": [
            _facet(
                "Activation or effect",
                "Policy and identity take effect from the decision's place in the log; the file on disk is "
                "only shown, and a hand edit is reported, not reverted.",
            ),
            _facet(
                "Evidence limits",
                "init's baseline is trusted on first use: whoever ran init chose the first owner and keys.",
            ),
            _facet(
                "Delegated visibility",
                "In a clone the decisions are absent; identity verify judges the committed files by git "
                "history instead, which a force-push can rewrite.",
            ),
        ],
    },
    {
        "id": "REG-CMP-register-lint",
        "label": "Register lint against trunk history",
        "kind": "CMP",
        "status": {"implementation": "wired", "operation": "uninspected"},
        "sources": ["registry/lint.py", "registry/history.py"],
        "relates": ["REG-OBJ-retro-register"],
        "limitations": [
            _facet(
                "Evidence limits",
                "The tombstone check is advisory where history is missing: without trunk history, or in a "
                "shallow clone, a clean result means no deletion observed, never no deletion occurred.",
            ),
            "Nothing here proves a finding true: a well-formed entry full of falsehoods flags its units "
            "until someone reads it.",
            "Where signatures are not required, Authorized-by trailers are as honest as the commit author "
            "address: the identity map checks the email, and git does not authenticate it.",
        ],
    },
    {
        "id": "REG-OBJ-retro-register",
        "label": "The RETRO register: retro/R-<date>-<slug>.md with generated numbers only",
        "kind": "OBJ",
        "sources": ["engine/commands/retro.py", "registry/trunkat.py"],
        "relates": ["REG-OBJ-regulatory-log", "REG-CMP-register-lint"],
        "limitations": [
            _facet(
                "Evidence limits",
                "The numbers are as honest as the stores: host events a unit forged are counted as if real "
                "until verify names them.",
            ),
            _facet(
                "Invalidation or expiry",
                "Lint recomputes the numbers only where the stores are (a clone warns retro-unchecked), and "
                "the git numbers only where trunk history is readable.",
            ),
            "The prose below the numbers is the people's and is never checked.",
        ],
    },
    {
        "id": "REG-CMP-control-room",
        "label": "The control room: the Textual app and controlroom --once",
        "kind": "CMP",
        "status": {"implementation": "wired", "operation": "uninspected"},
        "sources": ["controlroom/app.py", "controlroom/readmodel.py", "controlroom/once.py"],
        "relates": ["REG-BAP-vetoes", "REG-CMP-register-lint"],
        "limitations": [
            _facet(
                "Later read-back",
                "It shows what the engine derives at its last refresh; lint and verify run again only when "
                "their inputs change, so a row can lag a store by one refresh.",
            ),
            _facet(
                "Activation or effect",
                "Its actions are the CLI's, with the same vetoes, grants and signatures: the room adds no "
                "authority, and a display is never proof.",
            ),
            _facet(
                "Delegated visibility",
                "Without the stores (a clone) unit state is unknown and shown so; nothing there is fine by "
                "default.",
            ),
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
