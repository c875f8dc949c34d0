"""What-if routing (design §20): dry run, replay under a proposed policy, routing tests as files.
Every what-if command is checked to write nothing: not a store byte, not a file, not a commit."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import helpers
from tests.helpers import NOW, make_workspace

BLOCKING_FLOOR = {
    "name": "touches-payments",
    "pattern": r"payments/",
    "fields": ["subject", "observation", "rationale"],
    "atLeast": "blocking",
}


def fingerprint(ws: helpers.Workspace) -> dict:
    """Every file of the workspace (stores, locks, checkpoints, policy, worktrees) and git's view."""
    files: dict[str, Any] = {}
    for folder, dirs, names in os.walk(ws.root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, ws.root)] = hashlib.sha256(handle.read()).hexdigest()
    return {
        "files": files,
        "head": ws.git("rev-parse", "HEAD"),
        "status": ws.git("status", "--porcelain", "--untracked-files=all"),
        "refs": ws.git("for-each-ref"),
    }


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Ten routed advisory signals from r1 on u1, three of them naming payments/."""
    from engine.commands.router import route
    from engine.doors import api

    ws = make_workspace(tmp_path_factory.mktemp("whatif"))
    worktree = ws.lease("r1")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REGULATOR_NOW", NOW)
        mp.setenv("REGULATOR_SIGNING_KEY", ws.env["REGULATOR_SIGNING_KEY"])
        ids = []
        for i in range(10):
            where = "payments/ledger.py" if i in (2, 5, 7) else f"docs/page-{i}.md"
            ids.append(
                api.report_intelligence(
                    worktree / ".regulator-lease.json",
                    subject=f"finding {i}",
                    claim="something is off",
                    observation=f"seen in {where}",
                    evidence=[where],
                    confidence="medium",
                    reportedSeverity="advisory",
                    affectedUnits=["u1"],
                )
            )
        route(api.open_workspace(ws.root))
    policy = yaml.safe_load((ws.root / "regulator/policy/routing.yaml").read_text())
    policy["floors"].append(BLOCKING_FLOOR)
    proposed = ws.root.parent / "proposed-routing.yaml"
    proposed.write_text(yaml.safe_dump(policy))
    return ws, ids, proposed


def test_replay_lists_exactly_the_signals_a_new_floor_raises_and_writes_nothing(fleet: Any) -> None:
    ws, ids, proposed = fleet
    before = fingerprint(ws)
    done = ws.run("signals", "route", "--dry-run", "--policy", str(proposed), "--json")
    assert done.returncode == 0, done.stderr
    changes = json.loads(done.stdout)
    assert [c["signal"] for c in changes] == [ids[2], ids[5], ids[7]]
    for change in changes:
        assert change["before"]["outcome"] == change["after"]["outcome"] == "obligations"
        assert change["before"]["derivedSeverity"] == "advisory" and change["before"]["floors"] == []
        assert [o["blocks"] for o in change["before"]["obligations"]] == [False]
        assert change["after"]["derivedSeverity"] == "blocking"
        assert change["after"]["floors"] == ["touches-payments"]
        assert [(o["unit"], o["blocks"]) for o in change["after"]["obligations"]] == [("u1", True)]
        assert change["before"]["at"] == change["after"]["at"]  # the recorded routing time
    text = ws.run("signals", "route", "--dry-run", "--policy", str(proposed), "--last", "6")
    assert text.returncode == 0, text.stderr
    assert ids[5] in text.stdout and ids[7] in text.stdout and ids[2] not in text.stdout
    assert "after:  obligations, blocking (touches-payments): u1 blocks" in text.stdout
    assert "2 of 6 signal(s) would route differently" in text.stdout
    assert fingerprint(ws) == before


def test_the_policy_in_force_replays_to_no_change(fleet: Any) -> None:
    ws, _, _ = fleet
    done = ws.run("signals", "route", "--dry-run", "--policy", str(ws.root / "regulator/policy/routing.yaml"))
    assert done.returncode == 0, done.stderr
    assert "0 of 10 signal(s) would route differently" in done.stdout


def test_dry_run_of_a_blocking_signal_shows_what_it_would_open_and_writes_nothing(fleet: Any) -> None:
    ws, _, _ = fleet
    before = fingerprint(ws)
    args = ["signals", "route", "--dry-run", "--subject", "INV-007 broken by the cache", "--claim", "c"]
    args += ["--observation", "o", "--evidence", "x", "--confidence", "high", "--severity", "advisory"]
    args += ["--affects", "u1", "--affects", "u3"]
    done = ws.run(*args)
    assert done.returncode == 0, done.stderr
    assert "floors matched: names-an-invariant" in done.stdout
    assert "severity: reported advisory, derived blocking" in done.stdout
    assert "would open: obligation on u1, blocking, owed to S3: blocks its dispatch and close" in done.stdout
    assert "would open: obligation on u3, blocking, owed to S3: blocks its dispatch and close" in done.stdout
    data = json.loads(ws.run(*args, "--json").stdout)
    assert data["outcome"] == "obligations" and data["floors"] == ["names-an-invariant"]
    assert [(o["unit"], o["blocks"]) for o in data["obligations"]] == [("u1", True), ("u3", True)]
    assert fingerprint(ws) == before


def test_dry_run_reads_json_input_with_unit_and_routing_time(fleet: Any, tmp_path: Path) -> None:
    ws, _, _ = fleet
    signal = {
        "subject": "upstream notice",
        "claim": "c",
        "observation": "o",
        "evidence": ["x"],
        "confidence": "low",
        "reportedSeverity": "advisory",
        "observedAt": "2026-11-01T00:00:00Z",
        "expiresAt": "2026-11-10T00:00:00Z",
        "unit": "r1",
        "routedAt": "2026-11-05T00:00:00Z",
    }
    path = tmp_path / "signal.json"
    path.write_text(json.dumps(signal))
    data = ws.json("signals", "route", "--dry-run", "--json-input", str(path))
    assert data["outcome"] == "obligations"  # not yet expired at its routing time
    assert [(o["unit"], o["blocks"]) for o in data["obligations"]] == [("r1", False)]  # the reporter


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy", "{policy}"], "need --dry-run"),
        (["--dry-run"], "needs a signal"),
        (["--dry-run", "--policy", "{missing}"], "cannot read"),
        (["--dry-run", "--policy", "{bad}"], "--policy"),
        (
            ["--dry-run", "--subject", "s"],
            "--claim: required (and --observation, --evidence, --confidence, --severity)",
        ),
    ],
)
def test_what_if_bad_input_is_one_line_exit_2(fleet: Any, args: Any, message: Any) -> None:
    ws, _, proposed = fleet
    bad = ws.root.parent / "bad-routing.yaml"
    bad.write_text("severities: [info]\nblocksAtOrAbove: nope\nrules: {}\n")
    names = {"policy": str(proposed), "missing": str(ws.root / "nope.yaml"), "bad": str(bad)}
    before = fingerprint(ws)
    done = ws.run("signals", "route", *[a.format(**names) for a in args])
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert fingerprint(ws) == before


def case(name: Any, expect: Any, **signal: Any) -> Any:
    body = {
        "subject": "a subject",
        "claim": "a claim",
        "observation": "an observation",
        "evidence": ["e"],
        "confidence": "high",
        "reportedSeverity": "advisory",
        "affectedUnits": ["u1"],
        "unit": "r1",
        "observedAt": "2026-11-28T00:00:00Z",
        "routedAt": "2026-11-29T12:00:00Z",
    }
    body.update(signal)
    return {"name": name, "signal": body, "expect": expect}


CASES = [
    case(
        "an invariant raises to blocking",
        {
            "outcome": "obligations",
            "derivedSeverity": "blocking",
            "floors": ["names-an-invariant"],
            "obligations": [{"unit": "u1", "blocks": True}],
        },
        subject="INV-001 is broken",
    ),
    case(
        "identity in the observation raises too",
        {"derivedSeverity": "blocking", "floors": ["names-identity"]},
        observation="edits regulator/identity/invariants.md",
    ),
    case("info is only noted", {"outcome": "noted", "obligations": []}, reportedSeverity="info"),
    case(
        "expired before routing",
        {"outcome": "expired"},
        expiresAt="2026-11-29T00:00:00Z",
    ),
]


def test_routing_test_file_passes_and_a_mutated_floor_fails_a_case(fleet: Any, tmp_path: Path) -> None:
    ws, _, _ = fleet
    before = fingerprint(ws)
    cases = tmp_path / "routes.yaml"
    cases.write_text(yaml.safe_dump(CASES, sort_keys=False))
    done = ws.run("signals", "route", "--test-file", str(cases))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("pass  ") == 4 and "4 passed, 0 failed" in done.stdout
    assert "floors no case exercised" not in done.stdout

    policy = yaml.safe_load((ws.root / "regulator/policy/routing.yaml").read_text())
    policy["floors"][1]["pattern"] = r"regulator/identities/"  # the mutation
    mutated = tmp_path / "mutated.yaml"
    mutated.write_text(yaml.safe_dump(policy))
    done = ws.run("signals", "route", "--test-file", str(cases), "--policy", str(mutated))
    assert done.returncode == 1
    assert "FAIL  identity in the observation raises too" in done.stdout
    assert "derivedSeverity: expected blocking, got advisory" in done.stdout
    assert "floors: expected [names-identity], got []" in done.stdout
    assert "floors no case exercised: names-identity" in done.stdout
    assert "3 passed, 1 failed" in done.stdout
    assert fingerprint(ws) == before


def test_routing_test_file_reports_what_no_case_exercised(fleet: Any, tmp_path: Path) -> None:
    ws, _, _ = fleet
    cases = tmp_path / "few.yaml"
    cases.write_text(yaml.safe_dump(CASES[2:3]))
    report = ws.json("signals", "route", "--test-file", str(cases))
    assert report["failed"] == 0 and report["passed"] == 1
    assert report["unexercisedFloors"] == ["names-an-invariant", "names-identity"]
    assert "obligations" in report["unreachedOutcomes"] and "expired" in report["unreachedOutcomes"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("- name: x\n  signal: {}\n", "expect"),
        ("not: a list\n", "expected a list of cases"),
        ("- [unclosed\n", "not valid YAML"),
        (
            yaml.safe_dump([case("bad severity", {"outcome": "noted"}, reportedSeverity="huge")]),
            "case 1 (bad severity): signal: severity",
        ),
        (  # an unquoted YAML time past the calendar's end once in UTC: bad input, no traceback (D-335)
            re.sub(
                r"routedAt: '[^']*'",
                "routedAt: 9999-12-31T23:59:59-05:00",
                yaml.safe_dump([case("end of time", {"outcome": "noted"})]),
            ),
            "case 1 (end of time): signal: routedAt: '9999-12-31T23:59:59-05:00' is not a time",
        ),
    ],
)
def test_a_bad_test_file_is_one_line_exit_2(fleet: Any, tmp_path: Path, text: Any, message: Any) -> None:
    ws, _, _ = fleet
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    done = ws.run("signals", "route", "--test-file", str(path))
    assert done.returncode == 2, done.stdout
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def test_a_case_predicting_is_judged_at_its_own_routed_at(fleet: Any, tmp_path: Path) -> None:
    """A prediction must resolve after the time it is reported (D-335): a what-if case's is its
    routedAt, not the day the test file is run (an adversarial review: a committed case began to fail
    once the calendar passed its resolvesAt)."""
    ws, _, _ = fleet
    path = tmp_path / "predicting.yaml"
    past = case(
        "a prediction, judged when it was routed",
        {"outcome": "obligations"},
        observedAt="2026-11-01T00:00:00Z",
        routedAt="2026-11-01T00:00:00Z",
        prediction={"resolvesAt": "2026-11-10T00:00:00Z"},  # before now (2026-11-29), after routedAt
    )
    path.write_text(yaml.safe_dump([past]))
    done = ws.run("signals", "route", "--test-file", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 0 failed" in done.stdout
