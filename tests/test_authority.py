"""The identity store's fold (engine.checkout.authority): a line of any shape counts or not, and never
breaks a read. A unit sharing the host's account can append a well-chained line (see
tests/hardening/test_trust.py); until now a list or a mapping where the fold expected text or a
number raised TypeError (unhashable) inside the fold, so every command failed with a traceback,
`verify` too, which is the command that should name the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.checkout.authority import INTERACTION, fold
from identity.files import content_hash
from tests.helpers import make_workspace


def test_forged_identity_lines_of_any_shape_are_named_and_break_no_command(tmp_path: Path) -> None:
    from engine.base import clock
    from engine.log.store import Store

    ws = make_workspace(tmp_path)
    forged: list[dict[str, Any]] = [
        {"kind": "decision", "decision": "accepted", "proposal": [1]},
        {"kind": "decision", "decision": "rejected", "proposal": {"id": "x"}, "by": "alice"},
        {"kind": "dismissal", "by": ["alice"], "store": "signals", "line": 1},
        {"kind": "dismissal", "by": {"name": "alice"}},
        {"kind": "proposal", "file": INTERACTION, "content": "people: {}\n"},  # no id
        {"kind": "proposal", "id": ["p"], "file": INTERACTION, "content": "people: {}\n"},
    ]
    clock.configure(True)
    store = Store(ws.root / ".regulator" / "identity.ndjson")
    for event in forged:
        store.append({**event, "at": "2026-11-29T12:00:00Z"})
    before = ws.digest()
    status = ws.run("status")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    done = ws.run("verify")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    named = [line for line in done.stdout.splitlines() if line.startswith("identity.ndjson:")]
    assert len(named) == len(forged), done.stdout
    assert all("counts for nothing" in line for line in named)
    assert ws.digest() == before


# a policy that does not require signatures: an unsigned person event counts (design §15.1 "names")
POLICY = "people:\n  alice:\n    grants: [accept]\n"


def _fold(*events: dict) -> Any:
    baseline = {
        "kind": "decision",
        "decision": "baseline",
        "file": INTERACTION,
        "content": POLICY,
        "contentHash": content_hash(POLICY.encode()),
        "hash": "sha256:first",
    }
    return fold([baseline, *events], list(range(0, 100 * (len(events) + 1), 100)))


def test_a_dismissal_names_the_line_verify_names() -> None:
    dismissal = {"kind": "dismissal", "id": "d1", "by": "alice", "store": "signals", "line": 3}
    auth = _fold(dismissal)
    assert auth.dismissals == {("signals", 3): dismissal}
    assert auth.uncounted == []


@pytest.mark.parametrize("store, line", [("signals", [3]), ({"store": "signals"}, 3)])
def test_a_counted_dismissal_of_no_store_line_dismisses_nothing(store: Any, line: Any) -> None:
    # where names are enough, an unsigned dismissal "by alice" counts: its store and line are
    # keys of the dismissals, and a list or a mapping there made the fold raise
    forged = {"kind": "dismissal", "id": "d1", "by": "alice", "store": store, "line": line}
    auth = _fold(forged)
    assert auth.dismissals == {}


def test_an_accepted_proposal_of_no_governed_file_changes_nothing_and_breaks_no_read() -> None:
    # a unit's proposal counts without a signature, and here an unsigned decision "by alice" counts:
    # accepting a proposal with no file made the fold raise KeyError
    proposal = {"kind": "proposal", "id": "p1", "content": "x", "contentHash": content_hash(b"x")}
    decision = {"kind": "decision", "id": "d1", "decision": "accepted", "proposal": "p1", "by": "alice"}
    decision["contentHash"] = proposal["contentHash"]
    auth = _fold(proposal, decision)
    assert auth.content == {INTERACTION: POLICY}
    assert [u.reason for u in auth.uncounted] == [
        "proposes no content of a governed file",
        "decides no proposal that counts",
    ]


ENTRY = {
    "kind": "memory",
    "subject": "s",
    "reviewBy": "2026-12-20",
    "unit": "u1",
    "scope": [],
    "evidence": ["README.md"],
}


def test_forged_lines_in_the_other_stores_are_named_and_break_no_command(tmp_path: Path) -> None:
    """The same for signals, memory and units: a well-chained line whose fields have the wrong
    shapes (a list for an id, a mapping for a reference, an obligation entry that is text) is
    skipped by every read and named by `verify`; no command fails with a traceback."""
    from engine.base import clock
    from engine.log.store import Store

    ws = make_workspace(tmp_path)
    at = "2026-11-29T12:00:00Z"
    forged: dict[str, list[dict[str, Any]]] = {
        "signals": [
            {"kind": "signal", "id": [1], "subject": "x"},
            {"kind": "routing", "signal": {"id": "s"}, "obligations": []},
            {"kind": "routing", "signal": "s-forged", "obligations": ["not an entry"]},
            {"kind": "routing", "signal": "s-forged-2", "obligations": [{"id": ["o"], "severity": 1}]},
            {"kind": "disposition", "obligation": ["o"], "disposition": "no-action", "by": "alice"},
            {"kind": "signal", "id": "s-bad-units", "subject": "x", "affectedUnits": [["u1"]]},
            {"kind": "signal", "id": "s-bad-expiry", "subject": "x", "expiresAt": "not a time"},
            {
                "kind": "routing",
                "signal": "s-bad-expiry",
                "obligations": [{"id": "o-bad-expiry", "unit": "u1", "severity": "blocking", "blocks": True}],
            },
        ],
        "memory": [
            {"kind": "memory", "id": [1], "subject": "x"},
            {"kind": "retraction", "entry": {"id": "m"}, "by": "alice"},
            {"kind": "memory", "id": "m-bad-date", "subject": "x", "note": "y", "reviewBy": "2026-02-30"},
            {
                "kind": "memory",
                "id": "m-1",
                "subject": "s",
                "note": "kept",
                "reviewBy": "2026-12-20",
                "unit": "u1",
                "scope": [],
                "evidence": ["e"],
            },
            {
                "kind": "memory",
                "id": "m-1",
                "subject": "s",
                "note": "FORGED",
                "reviewBy": "2027-12-20",
                "unit": "u1",
                "scope": [],
                "evidence": ["e"],
            },
            # a revision that is text, so the evidence check asks git, beside one that is a list
            {**ENTRY, "id": "m-rev", "note": "revision as text", "revision": "a" * 40},
            {**ENTRY, "id": "m-rev-list", "note": "revision as a list", "revision": ["a" * 40]},
        ],
        "units": [
            {"kind": "dispatch", "unit": ["u1"]},
            {"kind": "decision", "unit": "u1", "action": ["retry"], "resolves": "all"},
        ],
    }
    clock.configure(True)
    for name, events in forged.items():
        store = Store(ws.root / ".regulator" / f"{name}.ndjson")
        for event in events:
            store.append({**event, "at": at})
    before = ws.digest()
    for args in (
        ("status", "--json"),
        ("obligations", "--json"),
        ("signals", "--json"),
        ("memory", "--json"),
        ("memory",),
        ("context", "u1"),
        ("controlroom", "--once", "--json", "--read-only"),
    ):
        done = ws.run(*args)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode in (0, 1), (args, done.returncode, done.stderr)
    assert ws.digest() == before  # reads wrote nothing
    routed = ws.run("signals", "route")  # the host's router: a forged signal raises nothing, once
    assert routed.returncode == 0 and "Traceback" not in routed.stderr, routed.stderr
    assert "not routable" in routed.stdout
    again = ws.run("signals", "route")
    assert again.returncode == 0 and "routed 0 signal(s)" in again.stdout, again.stdout + again.stderr
    done = ws.run("verify")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    named = {line.split(" ", 1)[0].rstrip(":") for line in done.stdout.splitlines() if ".ndjson:" in line}
    assert {"signals.ndjson:1", "signals.ndjson:2", "signals.ndjson:3", "signals.ndjson:4"} <= named, (
        done.stdout
    )
    assert {"memory.ndjson:1", "memory.ndjson:2", "memory.ndjson:3", "memory.ndjson:5"} <= named, done.stdout
    assert "memory.ndjson:4" not in named
    rows = {row["id"]: row for row in ws.json("memory", "--all")}
    assert {k: r["note"] for k, r in rows.items()} == {  # a second line with the same id replaces nothing
        "m-1": "kept",
        "m-rev": "revision as text",
        "m-rev-list": "revision as a list",
    }
    assert rows["m-rev-list"]["evidenceStatus"] == "unchecked"  # a revision that is not text is none
