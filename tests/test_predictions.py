"""Predictions that resolve, and reports that supersede (design §24): `prediction: {resolvesAt}`,
`signals resolve-prediction` (signed), `regulator calibration`; `supersedes` checked and shown on
both lifecycles."""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.helpers import one_line, report_args, tick

LATER = {"REGULATOR_NOW": "2026-12-15T00:00:00Z"}


def report(
    ws: Any,
    *,
    by: Any = None,
    cwd: Any = None,
    confidence: Any = "high",
    resolves: Any = "2026-12-10T00:00:00Z",
    **more: Any,
) -> str:
    fields = {
        "subject": more.pop("subject", "the release slips"),
        "claim": "The release will slip past the 10th.",
        "observation": "three blockers open",
        "evidence": ["tracker"],
        "confidence": confidence,
        "reportedSeverity": "info",
        **({"prediction": {"resolvesAt": resolves}} if resolves else {}),
        **more,
    }
    path = ws.root.parent / "report.json"
    path.write_text(json.dumps(fields))
    args = ["signals", "report", "--json-input", str(path), "--json"] + (["--by", by] if by else [])
    done = ws.run(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


def outcome(ws: Any, signal_id: Any, answer: Any, env: Any = LATER) -> Any:
    return ws.run(
        "signals", "resolve-prediction", signal_id, "--came-true", answer, "--by", "alice", "--rationale", "seen",
        env=env,
    )  # fmt: skip


def test_twenty_predictions_give_the_right_calibration(ws: Any) -> None:
    r1 = ws.lease("r1")
    plan = []  # (source, confidence, answer or None, resolves)
    confidences = ["low", "medium", "high"]
    for i in range(20):
        source = "r1" if i % 2 == 0 else "alice"
        confidence = confidences[i % 3]
        answer = ["yes", "no", "yes", None][i % 4]
        resolves = "2027-02-01T00:00:00Z" if i in (3, 7) else "2026-12-10T00:00:00Z"  # two still pending
        plan.append((source, confidence, answer, resolves))
    ids = []
    for i, (source, confidence, _, resolves) in enumerate(plan):
        who = {"cwd": r1} if source == "r1" else {"by": "alice"}
        ids.append(report(ws, confidence=confidence, resolves=resolves, subject=f"prediction {i}", **who))
    for signal_id, (_, _, answer, resolves) in zip(ids, plan, strict=True):
        if answer is not None and resolves.startswith("2026"):
            done = outcome(ws, signal_id, answer)
            assert done.returncode == 0, done.stderr
    expected: dict[tuple[str, str], dict[str, int]] = {}
    for source, confidence, answer, resolves in plan:
        kind = "unit" if source == "r1" else "person"
        row = expected.setdefault((f"{kind} {source}", confidence), dict.fromkeys(
            ("cameTrue", "didNotComeTrue", "awaiting", "pending"), 0))  # fmt: skip
        if resolves.startswith("2027"):
            row["pending"] += 1
        elif answer == "yes":
            row["cameTrue"] += 1
        elif answer == "no":
            row["didNotComeTrue"] += 1
        else:
            row["awaiting"] += 1
    got = ws.json("calibration", env=LATER)
    assert {
        (f"{r['sourceKind']} {r['source']}", r["confidence"]): {
            k: r[k] for k in ("cameTrue", "didNotComeTrue", "awaiting", "pending")
        }
        for r in got
    } == expected  # noqa: E501
    assert sum(r["cameTrue"] + r["didNotComeTrue"] + r["awaiting"] + r["pending"] for r in got) == 20
    # the signal's JSON carries the outcome
    listed = {s["id"]: s for s in ws.json("signals", env=LATER)}
    assert (
        listed[ids[0]]["prediction"]["cameTrue"] is True and listed[ids[1]]["prediction"]["cameTrue"] is False
    )
    assert listed[ids[3]]["prediction"] == {
        "resolvesAt": "2027-02-01T00:00:00Z",
        "cameTrue": None,
        "status": "pending",
        "by": None,
        "at": None,
    }  # noqa: E501
    assert listed[ids[11]]["prediction"]["status"] == "awaiting"
    assert "came true" in ws.run("calibration", env=LATER, check=True).stdout
    assert ws.run("verify").returncode == 0


def test_recording_an_outcome_is_a_signed_person_action_once(ws: Any) -> None:
    predicted = report(ws, by="alice")
    plain = report(ws, by="alice", resolves=None, subject="no prediction here")
    before = ws.digest()
    done = outcome(ws, plain, "yes")
    assert done.returncode == 2 and "makes no prediction" in one_line(done)
    done = outcome(ws, predicted, "no", env={})  # before resolvesAt: it cannot have failed yet
    assert done.returncode == 3 and "resolves at 2026-12-10T00:00:00Z" in one_line(done)
    done = outcome(ws, predicted, "maybe")
    assert done.returncode == 2 and "--came-true" in one_line(done)
    done = ws.run(
        "signals",
        "resolve-prediction",
        predicted,
        "--came-true",
        "yes",
        "--by",
        "mallory",
        "--rationale",
        "x",
    )
    assert done.returncode == 3
    worktree = ws.lease("r1")
    done = ws.run("signals", "resolve-prediction", predicted, "--came-true", "yes", "--by", "alice", "--rationale", "x", cwd=worktree)  # fmt: skip
    assert done.returncode == 2 and "a unit cannot act as a person" in one_line(done)
    assert ws.digest() != before  # only the lease above was written
    before = ws.digest()
    assert outcome(ws, predicted, "yes", env={}).returncode == 0  # came true early: recorded at once
    (event,) = [e for e in ws.events("signals") if e["kind"] == "prediction-outcome"]
    assert event["sig"].startswith("-----BEGIN SSH SIGNATURE-----") and event["by"] == "alice"
    done = outcome(ws, predicted, "no")
    assert done.returncode == 3 and "already came true: recorded by alice" in one_line(done)
    # an unsigned outcome appended by hand counts for nothing, and verify names it
    forged = {k: v for k, v in event.items() if k not in ("sig", "hash", "prev")}
    forged["id"] = "FORGED" + event["id"][6:]
    forged["signal"] = report(ws, by="alice", subject="another")
    sys.path.insert(0, str(ws.root))
    from engine.log.store import Store

    Store(ws.store("signals")).append(forged)
    listed = {s["id"]: s for s in ws.json("signals", env=LATER)}
    assert listed[forged["signal"]]["prediction"]["cameTrue"] is None
    assert ws.run("verify").returncode == 1


def test_supersedes_links_both_lifecycles(ws: Any) -> None:
    ws.run(*report_args(expires_at="2026-12-01T00:00:00Z"), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    first = ws.json("signals")[0]["id"]
    done = ws.run(*report_args(supersedes="01NOSUCHSIGNAL0000"), "--by", "alice")
    assert done.returncode == 2 and "no signal with an id starting" in one_line(done)
    second = report(ws, by="alice", resolves=None, supersedes=first[:10], subject="vendor/left-pad.js again")
    event = next(e for e in ws.events("signals") if e.get("id") == second)
    assert event["supersedes"] == first  # the whole id recorded
    ws.run("signals", "route", check=True)
    old = next(o for o in ws.json("obligations") if o["signal"] == first)
    shown = ws.run("obligation", "show", old["id"], check=True).stdout
    assert f"superseded by signal {second} from person alice: vendor/left-pad.js again" in shown
    listed = {s["id"]: s for s in ws.json("signals")}
    assert listed[first]["supersededBy"] == [second] and listed[second]["supersedes"] == first
    # the recheck a stale signal opens stays a person's to disposition: a superseding report
    # answers the question, it does not close the obligation
    tick(ws, env={"REGULATOR_NOW": "2026-12-02T00:00:00Z"})
    recheck = [o for o in ws.json("obligations", env=LATER) if o["signal"] == first and o["unit"] is None]
    assert len(recheck) == 1 and recheck[0]["status"] == "open"


def test_who_reported_reads_the_same_in_signals_and_the_room(ws: Any) -> None:
    """An operator's first day: `signals` showed a person as `alice` (and a sensor by its bare
    name), a unit id's look, where the room shows `@alice` and `sensor:NAME`. One label now."""
    from controlroom import readmodel
    from engine.checkout.workspace import locate
    from engine.read.load import load

    signal_id = report(ws, by="alice", resolves=None, subject="the build is red")
    row = next(line for line in ws.run("signals").stdout.splitlines() if line.startswith(signal_id))
    assert row.split()[4] == "@alice"
    engine = locate(ws.root)[0]
    assert readmodel.row("signals", readmodel.Snapshot(engine, load(engine)), signal_id)[1] == "@alice"
