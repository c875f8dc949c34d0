"""Bad input to report_intelligence (design §5.2): one line, exit 2, and the log byte-identical."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import one_line, report_args

BAD = [
    ("no evidence", dict(evidence=None)),
    ("unknown unit", dict(affects=["nobody"])),
    ("unknown severity", dict(severity="severe")),
    ("unknown confidence", dict(confidence="certain")),
    ("expires before observed", dict(observed_at="2026-11-20T00:00:00Z", expires_at="2026-11-19T00:00:00Z")),
    ("expires at observed", dict(observed_at="2026-11-20T00:00:00Z", expires_at="2026-11-20T00:00:00Z")),
    ("observed in the future", dict(observed_at="2026-12-30T00:00:00Z")),
    ("empty subject", dict(subject="  ")),
    ("empty claim", dict(claim="")),
    ("no observation", dict(observation=None)),
    ("bad time", dict(observed_at="yesterday")),
    ("time before year 1", dict(observed_at="0001-01-01T00:00:00+01:00")),
    ("time after year 9999", dict(expires_at="9999-12-31T23:59:59-01:00")),
    # before 1970 (D-335): year 1 was stored as `1-01-01T00:00:00Z`, which the router took for a forgery
    ("observed in year 1", dict(observed_at="0001-01-01T00:00:00Z", expires_at="0001-01-02T00:00:00Z")),
    ("observed before 1970", dict(observed_at="1969-12-31T23:59:59Z")),
    (
        "a prediction already judgeable",
        dict(observed_at="2026-11-20T00:00:00Z", resolves_at="2026-11-21T00:00:00Z"),
    ),
    ("NUL byte", dict(claim="a\x00b")),
    ("huge claim", dict(claim="x" * (64 * 1024 + 1))),
]


@pytest.mark.parametrize("name,fields", BAD, ids=[b[0] for b in BAD])
def test_bad_input_exits_2_and_writes_nothing(ws: helpers.Workspace, name: Any, fields: Any) -> None:
    if name == "NUL byte":
        # argv cannot carry NUL; it arrives through --json-input
        payload = {
            "subject": "s",
            "claim": "a\u0000b",
            "observation": "o",
            "evidence": ["e"],
            "confidence": "high",
            "reportedSeverity": "info",
        }
        args = ["signals", "report", "--json-input", "-", "--by", "alice"]
        before = ws.digest()
        done = ws.run(*args, input=json.dumps(payload))
    else:
        before = ws.digest()
        done = ws.run(*report_args(**fields), "--by", "alice")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert ws.digest() == before


def test_a_report_by_flags_is_refused_in_the_flags_names_and_by_json_in_its_keys(
    ws: helpers.Workspace,
) -> None:
    """An operator's review: `signals report --subject x` was told `claim: required (and …,
    reportedSeverity)`, a name no flag has. Given by flags, the refusal names the flags; given by
    --json-input, its keys (exit 2 either way, nothing written)."""
    before = ws.digest()
    done = ws.run("signals", "report", "--subject", "x", "--by", "alice")
    assert (done.returncode, done.stderr) == (
        2,
        "regulator: --claim: required (and --observation, --evidence, --confidence, --severity)\n",
    )
    done = ws.run(*report_args(observed_at="yesterday"), "--by", "alice")
    assert done.returncode == 2 and done.stderr.startswith("regulator: --observed-at: "), done.stderr
    done = ws.run(
        *report_args(observed_at="2026-11-20T00:00:00Z", expires_at="2026-11-19T00:00:00Z"), "--by", "alice"
    )
    assert one_line(done) == (
        "regulator: --expires-at 2026-11-19T00:00:00Z is not after --observed-at 2026-11-20T00:00:00Z"
    )
    done = ws.run(*report_args(), "--resolves-at", "soon", "--by", "alice")
    assert one_line(done).startswith("regulator: --resolves-at: 'soon' is not a time")
    # a value given is quoted as given, never renamed (the reread's try: `--confidence observedAt`)
    done = ws.run(*report_args(confidence="x observedAt"), "--by", "alice")
    assert one_line(done).startswith("regulator: --confidence: 'x observedAt' is not one of")
    done = ws.run("signals", "report", "--json-input", "-", "--by", "alice", input='{"subject": "x"}')
    assert (done.returncode, done.stderr) == (
        2,
        "regulator: claim: required (and observation, evidence, confidence, reportedSeverity)\n",
    )
    assert ws.digest() == before


def test_flags_mixed_with_json_input(ws: helpers.Workspace, tmp_path: Path) -> None:
    payload = tmp_path / "r.json"
    payload.write_text("{}")
    before = ws.digest()
    done = ws.run("signals", "report", "--json-input", str(payload), "--subject", "x", "--by", "alice")
    assert done.returncode == 2 and "mixed" in done.stderr
    assert ws.digest() == before


def test_json_input_with_seed_field_names(ws: helpers.Workspace) -> None:
    payload = {
        "subject": "upstream API",
        "claim": "The upstream statement API is deprecated from March.",
        "observation": "vendor notice dated 2026-11-01",
        "evidence": ["https://vendor.example/notice"],
        "confidence": "medium",
        "reportedSeverity": "advisory",
        "affectedUnits": ["u3"],
        "observedAt": "2026-11-29T10:00:00Z",
        "expiresAt": "2027-03-01T00:00:00Z",
    }
    done = ws.run(
        "signals", "report", "--json-input", "-", "--by", "alice", "--json", input=json.dumps(payload)
    )
    assert done.returncode == 0, done.stderr
    event = ws.events("signals")[0]
    assert event["id"] == json.loads(done.stdout)["id"]
    assert event["expiresAt"] == "2027-03-01T00:00:00Z" and event["by"] == "alice" and event["unit"] is None


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe not utf-8",
        b"[1, 2]",
        b"{not json",
        json.dumps({"subject": 5}).encode(),
        json.dumps(
            {
                "evidence": "one",
                "subject": "s",
                "claim": "c",
                "observation": "o",
                "confidence": "low",
                "reportedSeverity": "info",
            }
        ).encode(),
        json.dumps({"surprise": 1}).encode(),
    ],
)
def test_json_input_wrong_shapes(ws: helpers.Workspace, raw: Any) -> None:
    before = ws.digest()
    done = ws.run("signals", "report", "--json-input", "-", "--by", "alice", input=raw)
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert ws.digest() == before


def test_json_given_where_its_file_goes_says_how_to_pass_it(ws: helpers.Workspace) -> None:
    before = ws.digest()
    done = ws.run("signals", "report", "--json-input", '{"subject": "s"}', "--by", "alice")
    assert done.returncode == 2
    assert "--json-input takes a file, or - for stdin, not the JSON itself" in helpers.one_line(done)
    assert ws.digest() == before
