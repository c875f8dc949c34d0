"""A line a writer without the lock puts between a person event and the event it chains to (an
adversarial review, D-335): the person event is dated against the event its `prev` names, never the
line slipped in, by the fold and by `verify` alike; the line slipped in is what `verify` names."""

from __future__ import annotations

import json
from pathlib import Path

from tests import helpers

UNITS = Path(".regulator") / "units.ndjson"


def _status(ws: helpers.Workspace, unit: str) -> str:
    (found,) = [u["status"] for u in ws.json("status")["units"] if u["id"] == unit]
    return str(found)


def test_a_line_slipped_in_under_a_demote_neither_dates_it_nor_voids_it(tmp_path: Path) -> None:
    """The layout a race makes (the line lands after the append read the chain's tail, before its
    write): built here by putting the line before the demote that was written without it."""
    ws = helpers.make_workspace(tmp_path, now=None, clock="system")
    ws.run("unit", "dispatch", "u1", check=True)
    ws.run("unit", "demote", "u1", "--by", "alice", "--rationale", "stop", check=True)
    path = ws.root / UNITS
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + b'{"at":"9998-01-01T00:00:00Z","hash":"x"}\n' + lines[-1])
    assert _status(ws, "u1") == "todo"  # the demote counts
    verified = ws.run("verify")
    named = [line for line in verified.stdout.splitlines() if line.startswith("units.ndjson")]
    assert named and all(line.startswith(f"units.ndjson:{len(lines)}: ") for line in named), verified.stdout
    assert not any("back-dated" in line or "before the line before it" in line for line in named)


def test_a_line_that_is_no_event_is_not_the_time_a_person_event_is_judged_by(tmp_path: Path) -> None:
    ws = helpers.make_workspace(tmp_path, now=None, clock="system")
    ws.run("unit", "dispatch", "u1", check=True)
    with open(ws.root / UNITS, "ab") as handle:
        handle.write(b'{"at":"9998-01-01T00:00:00Z","hash":null}\n')  # a JSON object, no event
    ws.run("unit", "demote", "u1", "--by", "alice", "--rationale", "stop", check=True)
    assert _status(ws, "u1") == "todo"
    verified = ws.run("verify")
    named = [line for line in verified.stdout.splitlines() if line.startswith("units.ndjson")]
    assert named and all(line.startswith("units.ndjson:2: ") for line in named), verified.stdout


def test_a_line_claiming_the_tails_hash_does_not_date_the_event_after_it(tmp_path: Path) -> None:
    """A fifth review: a line slipped in that copies the real tail's hash (so the demote's `prev`
    names it) but whose content is its own dated nothing: only a line whose content gives its hash
    is the event a person event is judged against."""
    ws = helpers.make_workspace(tmp_path, now=None, clock="system")
    ws.run("unit", "dispatch", "u1", check=True)
    ws.run("unit", "demote", "u1", "--by", "alice", "--rationale", "stop", check=True)
    path = ws.root / UNITS
    lines = path.read_bytes().splitlines(keepends=True)
    tail = json.loads(lines[-2])["hash"]  # the dispatch: what the demote chains to
    forged = json.dumps(
        {"kind": "dispatch", "unit": "zz", "at": "9998-01-01T00:00:00Z", "prev": "x", "hash": tail}
    )
    path.write_bytes(b"".join(lines[:-1]) + forged.encode() + b"\n" + lines[-1])
    assert _status(ws, "u1") == "todo"  # the demote counts
    verified = ws.run("verify")
    named = [line for line in verified.stdout.splitlines() if line.startswith("units.ndjson")]
    assert named and not any("back-dated" in line or "before the line before it" in line for line in named)
