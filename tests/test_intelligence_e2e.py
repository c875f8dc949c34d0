"""Seed 000's intelligence example, end to end through the real `regulator` command."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import helpers
from tests.helpers import report_args


def report_from(ws: helpers.Workspace, unit: Any, **fields: Any) -> Any:
    worktree = ws.root / "wt" / unit
    return ws.run(*report_args(**fields), "--json", cwd=worktree)


def test_seed_example_vendored_helper(ws: helpers.Workspace) -> None:
    r1 = ws.lease("r1")
    ws.lease("u3")  # u1 stays todo: its dispatch is what the finding must hold
    done = ws.run(*report_args(), "--json", cwd=r1)
    assert done.returncode == 0, done.stderr
    signal_id = json.loads(done.stdout)["id"]

    # reporting alone opens nothing
    assert ws.json("obligations") == []
    status = ws.json("status")
    assert status["unrouted"] == 1
    assert status["unroutedSignals"] == [{"id": signal_id, "subject": "vendor/left-pad.js"}]
    signal = ws.events("signals")[0]
    assert signal["unit"] == "r1" and signal["source"] == "S4" and signal["destination"] == "S3"
    assert signal["revision"]  # stamped by the host from the worktree's HEAD

    # routing opens two obligations, both blocking
    ws.run("signals", "route", check=True)
    obligations = ws.json("obligations")
    assert sorted(o["unit"] for o in obligations) == ["u1", "u3"]
    assert all(o["blocks"] and o["severity"] == "blocking" and o["signal"] == signal_id for o in obligations)
    ob_u1 = next(o["id"] for o in obligations if o["unit"] == "u1")

    # dispatch and close of u1 are vetoed, naming the obligation, and write nothing
    for verb in ("dispatch", "close"):
        before = ws.digest()
        done = ws.run("unit", verb, "u1")
        assert done.returncode == 3, (verb, done.stderr)
        assert ob_u1 in done.stderr and "blocking" in done.stderr and signal_id in done.stderr
        assert ws.digest() == before

    # the owner resolves it as accepted-risk with a rationale
    done = ws.run(
        "obligation",
        "resolve",
        ob_u1[:8],
        "--by",
        "alice",
        "--disposition",
        "accepted-risk",
        "--rationale",
        "upstream fix lands next week",
    )
    assert done.returncode == 0, done.stderr
    shown = ws.run("obligation", "show", ob_u1, check=True).stdout
    assert signal_id in shown and "accepted-risk by alice" in shown and "modified copy" in shown

    # dispatch now succeeds for u1; u3 stays held
    ws.run("unit", "dispatch", "u1", check=True)
    units = {u["id"]: u for u in ws.json("status")["units"]}
    assert units["u1"]["status"] == "in-progress" and not units["u1"]["held"]
    assert units["u3"]["held"] and units["u3"]["blockedBy"] != []
    assert units["u3"]["status"] == "in-progress"


def test_dispatch_of_held_todo_unit_is_vetoed(ws: helpers.Workspace) -> None:
    done = ws.run(*report_args(affects=["u1"]), "--by", "alice")
    assert done.returncode == 0, done.stderr
    before_units = ws.store("units").read_bytes()
    done = ws.run("unit", "dispatch", "u1")  # routes first, then vetoes
    assert done.returncode == 3
    assert "held by open obligation" in done.stderr
    assert ws.store("units").read_bytes() == before_units
    assert len([e for e in ws.events("signals") if e["kind"] == "routing"]) == 1


def routed(ws: helpers.Workspace) -> Any:
    ws.run("signals", "route", check=True)
    return {s["id"]: s for s in ws.json("signals")}


def test_info_is_noted_with_reason(ws: helpers.Workspace) -> None:
    ws.lease("r1")
    sid = json.loads(report_from(ws, "r1", severity="info").stdout)["id"]
    s = routed(ws)[sid]
    assert s["outcome"] == "noted" and "below" in s["reason"] and s["obligations"] == []
    assert ws.json("obligations") == []


def test_expired_is_noted_as_expired(ws: helpers.Workspace) -> None:
    ws.lease("r1")
    done = report_from(
        ws, "r1", severity="advisory", observed_at="2026-11-01T00:00:00Z", expires_at="2026-11-20T00:00:00Z"
    )
    sid = json.loads(done.stdout)["id"]
    s = routed(ws)[sid]
    assert s["outcome"] == "expired" and s["obligations"] == []


def test_info_and_expired_is_noted_first(ws: helpers.Workspace) -> None:
    ws.lease("r1")
    done = report_from(
        ws, "r1", severity="info", observed_at="2026-11-01T00:00:00Z", expires_at="2026-11-20T00:00:00Z"
    )
    assert routed(ws)[json.loads(done.stdout)["id"]]["outcome"] == "noted"


@pytest.mark.parametrize(
    "field,value",
    [("observation", "this breaks INV-002 outright"), ("subject", "regulator/identity/invariants.md")],
)
def test_floors_raise_to_blocking(ws: helpers.Workspace, field: Any, value: Any) -> None:
    ws.lease("r1")
    sid = json.loads(report_from(ws, "r1", severity="advisory", **{field: value}).stdout)["id"]
    s = routed(ws)[sid]
    assert s["reportedSeverity"] == "advisory" and s["derivedSeverity"] == "blocking"
    assert all(o["blocks"] for o in ws.json("obligations"))


def test_claim_naming_an_invariant_is_not_raised(ws: helpers.Workspace) -> None:
    ws.lease("r1")
    sid = json.loads(report_from(ws, "r1", severity="advisory", claim="INV-002 is violated").stdout)["id"]
    s = routed(ws)[sid]
    assert s["derivedSeverity"] == "advisory"
    assert not any(o["blocks"] for o in ws.json("obligations"))


def test_no_unit_named_opens_one_on_the_reporter(ws: helpers.Workspace) -> None:
    ws.lease("r1")
    sid = json.loads(report_from(ws, "r1", severity="advisory", affects=None).stdout)["id"]
    routed(ws)
    obligations = ws.json("obligations")
    assert [(o["unit"], o["blocks"], o["severity"], o["signal"]) for o in obligations] == [
        ("r1", False, "advisory", sid)
    ]


def test_person_raised_naming_no_unit_is_owed_on_no_unit(ws: helpers.Workspace) -> None:
    done = ws.run(*report_args(affects=None, severity="advisory"), "--by", "alice")
    assert done.returncode == 0, done.stderr
    routed(ws)
    assert [(o["unit"], o["owedTo"]) for o in ws.json("obligations")] == [(None, "S3")]


def test_routing_twice_never_duplicates(ws: helpers.Workspace) -> None:
    ws.run(*report_args(), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    before = ws.digest()
    done = ws.run("signals", "route", check=True)
    assert "routed 0 signal(s)" in done.stdout
    assert ws.digest() == before
    assert len(ws.json("obligations")) == 2


def test_stale_obligation_is_marked(ws: helpers.Workspace) -> None:
    ws.run(*report_args(expires_at="2026-12-01T00:00:00Z"), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    assert ws.json("obligations", "--stale") == []
    later = {"REGULATOR_NOW": "2026-12-02T00:00:00Z"}
    stale = ws.json("obligations", "--stale", env=later)
    assert len(stale) == 2 and all(o["stale"] and o["status"] == "open" for o in stale)
    assert "(stale)" in ws.run("obligations", env=later).stdout


def test_listings_never_route_or_write(ws: helpers.Workspace) -> None:
    ws.run(*report_args(), "--by", "alice", check=True)
    before = ws.digest()
    for args in (["status"], ["signals"], ["obligations", "--all"], ["verify"], ["status", "--json"]):
        assert ws.run(*args).returncode == 0
    assert ws.digest() == before
