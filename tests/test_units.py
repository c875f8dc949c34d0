"""Unit lifecycle and recovery decisions (design §4.2, §4.4)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from tests import helpers
from tests.helpers import report_args


def held_in_progress(ws: helpers.Workspace, unit: Any = "u1") -> Any:
    ws.lease(unit)
    ws.run(*report_args(affects=[unit]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    return ws.json("obligations")[0]["id"]


def ob_status(ws: helpers.Workspace, ob: Any) -> Any:
    return next(o for o in ws.json("obligations", "--all") if o["id"] == ob)


def unit_status(ws: helpers.Workspace, unit: Any) -> Any:
    return next(u for u in ws.json("status")["units"] if u["id"] == unit)


@pytest.mark.parametrize("action", ["retry", "repair"])
def test_retry_and_repair_resolve_as_rework(ws: helpers.Workspace, action: Any) -> None:
    ob = held_in_progress(ws)
    ws.run(
        "unit", "decide", "u1", "--action", action, "--by", "alice", "--rationale", "try again", check=True
    )
    o = ob_status(ws, ob)
    assert (o["status"], o["disposition"]) == ("resolved", "rework")
    assert unit_status(ws, "u1")["status"] == "todo"
    ws.run("unit", "dispatch", "u1", check=True)


def test_abort_resolves_as_rejected_and_aborts(ws: helpers.Workspace) -> None:
    ob = held_in_progress(ws)
    ws.run(
        "unit", "decide", "u1", "--action", "abort", "--by", "alice", "--rationale", "dead end", check=True
    )
    o = ob_status(ws, ob)
    assert (o["status"], o["disposition"]) == ("resolved", "rejected")
    assert unit_status(ws, "u1")["status"] == "aborted"
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 2 and "aborted" in done.stderr


@pytest.mark.parametrize("action", ["remediate", "replan", "clarify", "pause", "escalate"])
def test_waiting_actions_escalate_into_one_recovery_obligation(ws: helpers.Workspace, action: Any) -> None:
    ws.run(*report_args(affects=["u1"], severity="advisory", subject="second"), "--by", "alice", check=True)
    first = held_in_progress(ws)
    done = ws.run(
        "unit", "decide", "u1", "--action", action, "--by", "alice", "--rationale", "need a plan", "--json"
    )
    assert done.returncode == 0, done.stderr
    recovery = json.loads(done.stdout)["opens"]
    every = ws.json("obligations", "--all")
    escalated = [o for o in every if o["status"] == "escalated"]
    assert len(escalated) == 2 and first in {o["id"] for o in escalated}
    open_now = [o for o in every if o["status"] == "open"]
    assert [(o["id"], o["unit"], o["severity"], o["blocks"]) for o in open_now] == [
        (recovery, "u1", "blocking", True)
    ]
    assert unit_status(ws, "u1")["status"] == "waiting"
    # `obligation show` says what it is about, as the lists do (an operator's review: it showed a
    # recovery obligation's unit and history only)
    (listed,) = [o for o in ws.json("obligations") if o["id"] == recovery]
    shown = ws.run("obligation", "show", recovery, check=True).stdout.splitlines()
    assert listed["kind"] == "recovery-decision" and shown[1] == f"recovery-decision: {listed['subject']}"
    before = ws.digest()
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 3 and recovery in done.stderr
    assert ws.digest() == before
    # a person dispositions the recovery decision: the unit is todo again and may be dispatched
    ws.run(
        "obligation",
        "resolve",
        recovery,
        "--by",
        "alice",
        "--disposition",
        "replan",
        "--rationale",
        "new plan agreed",
        check=True,
    )
    assert unit_status(ws, "u1")["status"] == "todo"
    ws.run("unit", "dispatch", "u1", check=True)


def test_decide_needs_the_grant_and_a_known_action(ws: helpers.Workspace) -> None:
    held_in_progress(ws)
    before = ws.digest()
    assert (
        ws.run("unit", "decide", "u1", "--action", "retry", "--by", "bob", "--rationale", "x").returncode == 3
    )
    assert (
        ws.run("unit", "decide", "u1", "--action", "yolo", "--by", "alice", "--rationale", "x").returncode
        == 2
    )
    assert (
        ws.run("unit", "decide", "u1", "--action", "retry", "--by", "alice", "--rationale", "").returncode
        == 2
    )
    assert ws.digest() == before


def test_status_rules_for_dispatch_and_close(ws: helpers.Workspace) -> None:
    before = ws.digest()
    done = ws.run("unit", "close", "u1")
    assert done.returncode == 2 and "todo" in done.stderr
    done = ws.run("unit", "dispatch", "nobody")
    assert done.returncode == 2 and "contract" in done.stderr
    done = ws.run("unit", "dispatch", "../x")
    assert done.returncode == 2
    assert ws.digest() == before
    ws.run("unit", "dispatch", "u1", check=True)
    done = ws.run("unit", "dispatch", "u1")
    assert (done.returncode, done.stderr) == (
        2,
        "regulator: unit u1 is in-progress; dispatch needs a todo or lost unit: it runs under a lease "
        "already (`regulator unit close` it, or `regulator unit demote` it to todo)\n",
    )
    ws.run("unit", "close", "u1", check=True)
    before = ws.digest()
    done = ws.run("unit", "dispatch", "u1")  # an operator's review: how is finished work run again?
    assert (done.returncode, done.stderr) == (
        2,
        "regulator: unit u1 is closed; dispatch needs a todo or lost unit: its work is done; more work "
        "is a new unit (`regulator unit new`)\n",
    )
    assert ws.digest() == before
    # a blocking finding on it since it closed: still closed first, and held by nothing (its work
    # is over, D-272), while the obligation stays open and blocking in every listing of them
    ws.run(*helpers.report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    row = {u["id"]: u for u in ws.json("status", "--json")["units"]}["u1"]
    assert (row["status"], row["held"], row["blockedBy"]) == ("closed", False, [])
    assert [(o["unit"], o["blocks"]) for o in ws.json("obligations") if o["unit"] == "u1"] == [("u1", True)]
    once = json.loads(ws.run("controlroom", "--once", "--json").stdout)
    assert once["counts"]["held"] == 0 and once["counts"]["blocking"] >= 1  # the room's header, the same
    assert {u["id"]: u["held"] for u in once["status"]["units"]}["u1"] is False
    before = ws.digest()
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 2 and "unit u1 is closed; dispatch needs" in done.stderr
    assert "vetoed" not in done.stderr and ws.digest() == before


def test_lease_file_and_close_release(ws: helpers.Workspace) -> None:
    worktree = ws.lease("u1")
    lease = json.loads((worktree / ".regulator-lease.json").read_text())
    assert lease["unit"] == "u1" and lease["workspace"] == str(ws.root) and lease["leasedAt"]
    dispatch = ws.events("units")[-1]
    assert "lease" not in dispatch  # the token never reaches the log: only its hash (design §15.2)
    assert dispatch["leaseHash"] == hashlib.sha256(lease["lease"].encode()).hexdigest()
    ws.run("unit", "close", "u1", check=True)
    assert ws.events("units")[-1]["kind"] == "close"
    assert unit_status(ws, "u1")["status"] == "closed"


def test_demote_returns_an_in_progress_unit_to_todo(ws: helpers.Workspace) -> None:
    worktree = ws.lease("u1")
    ws.run("unit", "demote", "u1", "--by", "alice", "--rationale", "re-gate", check=True)
    assert unit_status(ws, "u1")["status"] == "todo"
    assert not (worktree / ".regulator-lease.json").exists()


def test_bad_input_writes_nothing_even_with_signals_awaiting_routing(ws: helpers.Workspace) -> None:
    """A command that routes first must still refuse bad input before routing."""
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    before = ws.digest()
    for args in (
        ["unit", "dispatch", "nobody"],
        ["unit", "close", "nobody"],
        ["unit", "dispatch", "../x"],
        ["unit", "decide", "nobody", "--action", "retry", "--by", "alice", "--rationale", "r"],
        ["unit", "demote", "nobody", "--by", "alice", "--rationale", "r"],
        ["obligation", "resolve", "../x", "--by", "alice", "--disposition", "no-action", "--rationale", "r"],
        ["obligation", "resolve", "abc", "--by", "alice", "--disposition", "nope", "--rationale", "r"],
    ):
        done = ws.run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert ws.digest() == before, args


def test_a_decision_is_refused_to_who_may_not_resolve_what_it_disposes_of(ws: helpers.Workspace) -> None:
    """An operator's review: dave may decide but resolve only advisory; `obligation resolve` refused
    him u1's blocking obligation, yet `unit decide --action retry` (or `pause`, which escalates it
    into a blocking one anyone resolving blocking could close) disposed of it and released the hold."""
    from tests.helpers import one_line

    ob = held_in_progress(ws)
    interaction = "regulator/policy/interaction.yaml"
    text = (ws.root / interaction).read_text()
    text = text.replace("people:\n", "people:\n  dave:\n    grants: [decide]\n    resolve: [advisory]\n", 1)
    ws.decide(interaction, text)
    before = ws.digest()
    for action in ("retry", "pause", "abort"):
        done = ws.run("unit", "decide", "u1", "--action", action, "--by", "dave", "--rationale", "just rerun")
        assert done.returncode == 3, done.stderr
        assert one_line(done) == (
            f"regulator: dave may not resolve what a recovery decision on u1 disposes of: {ob} (blocking) "
            "(interaction.yaml lets them resolve: advisory); a person who may resolve them decides, "
            "or resolves them first"
        )
    assert ws.digest() == before and ob_status(ws, ob)["status"] == "open"


def test_answering_a_question_of_a_unit_whose_lease_is_over_says_it_goes_unread(
    ws: helpers.Workspace,
) -> None:
    """An operator's review: a question of a closed unit was answered with no word that the unit,
    its lease over, never reads it (docs/agents.md says so); the answer is recorded all the same."""
    from engine.doors.api import UnitDoor

    lease = ws.lease("u1") / ".regulator-lease.json"
    with pytest.MonkeyPatch.context() as mp:
        for name, value in ws.env.items():
            mp.setenv(name, value)
        question = UnitDoor(lease).ask({"question": "Pin left-pad to 1.3.0?"}).obligation
    ws.run("signals", "route", check=True)
    ws.run("unit", "close", "u1", check=True)
    args = ["obligation", "resolve", question, "--by", "alice", "--disposition", "answered"]
    done = ws.run(*args, "--rationale", "yes")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "regulator: note: unit u1 is closed: its lease is over, so it will not read this answer "
        "(a unit reads answers only while its lease is current; it is recorded all the same)\n"
    )
    assert ob_status(ws, question)["answer"] == "yes"


def test_an_escalation_keeps_the_severities_it_escalated(ws: helpers.Workspace) -> None:
    """An adversarial review of D-283: alice escalated u1's critical obligation (`unit decide
    --action escalate`) into one blocking recovery obligation, which carol, allowed blocking and not
    critical, then resolved (or decided `retry` on): the critical hold lifted by who may not lift it.
    The recovery obligation keeps the severities it escalated; resolving it is theirs (D-292)."""
    from tests.helpers import one_line

    ws.lease("u1")
    ws.run(*report_args(affects=["u1"], severity="critical"), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    interaction = "regulator/policy/interaction.yaml"
    text = (ws.root / interaction).read_text()
    text = text.replace(
        "people:\n",
        "people:\n  carol:\n    grants: [resolve, decide]\n    resolve: [advisory, blocking]\n",
        1,
    )
    ws.decide(interaction, text)
    done = ws.run(
        "unit", "decide", "u1", "--action", "escalate", "--by", "alice", "--rationale", "security", "--json"
    )
    assert done.returncode == 0, done.stderr
    recovery = json.loads(done.stdout)["opens"]
    from engine.checkout.workspace import Workspace
    from engine.read.load import load

    assert load(Workspace(ws.root)).obligations[recovery].escalated == ("critical",)  # what the fold keeps
    before = ws.digest()
    resolving = ["obligation", "resolve", recovery, "--disposition", "no-action", "--rationale", "fine"]
    done = ws.run(*resolving, "--by", "carol")
    assert done.returncode == 3 and one_line(done) == (
        f"regulator: carol may not resolve {recovery}: its recovery decision escalated a critical "
        "obligation into it (interaction.yaml lets them resolve: advisory, blocking)"
    )
    done = ws.run("unit", "decide", "u1", "--action", "retry", "--by", "carol", "--rationale", "rerun")
    assert done.returncode == 3 and f"{recovery} (blocking/critical)" in one_line(done)
    assert ws.digest() == before and unit_status(ws, "u1")["status"] == "waiting"
    ws.run(*resolving, "--by", "alice", check=True)  # who may resolve critical may
    assert unit_status(ws, "u1")["status"] == "todo"


def test_answering_a_question_of_a_unit_whose_run_is_over_says_it_goes_unread(ws: helpers.Workspace) -> None:
    """An operator's re-check of D-285: a unit whose `unit run` ended with a failed result stays in
    progress, its lease current in the log but refused at every door (D-276); its question was
    answered without the note. The note asks whether the lease still acts (runs.ended)."""
    from engine.checkout import runs
    from engine.checkout.workspace import Workspace
    from engine.commands.units import LeaseTerms, dispatch
    from engine.doors.api import UnitDoor

    engine_ws = Workspace(ws.root)
    lease_dir = ws.root.parent / "leases"
    lease_dir.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in ws.env.items():
            mp.setenv(name, value)
        (ws.root / "wt-u1").mkdir()
        terms = LeaseTerms(ttl=None, lease_dir=lease_dir, run_on=runs.host_id(engine_ws))
        event = dispatch(engine_ws, "u1", ws.root / "wt-u1", terms)  # as `unit run` dispatches it
        runs.begin(engine_ws, event["leaseHash"], {event["leaseHash"]})
        question = UnitDoor(lease_dir / ".regulator-lease.json").ask({"question": "EU mirror?"}).obligation
        runs.end(engine_ws, event["leaseHash"])  # the run is over; the unit stays in progress
    ws.run("signals", "route", check=True)
    done = ws.run(
        "obligation", "resolve", question, "--by", "alice", "--disposition", "answered", "--rationale", "yes"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        "regulator: note: unit u1 is in progress but its run is over: its lease is over, so it will not read"
    ), done.stderr
