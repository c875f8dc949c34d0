"""Leases that expire and results (design §23), through the engine's own functions on a real
workspace: a lease past its time becomes `lease-expired` (the unit `lost`, held as before, its
lease refused, dispatchable again); heartbeats and a restart's grace extend it; a recorded result
keeps it; old leases never expire; a forged expiry or result counts for nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.checkout import heartbeat
from engine.checkout.workspace import locate, read_lease
from engine.commands.actors import check_lease, lease_hash
from engine.commands.results import record_host_result, report_result
from engine.commands.units import LeaseTerms, close, dispatch
from engine.host.leases import ProcessHeartbeats, expire_leases
from engine.read.load import load
from engine.read.queries import unit_status
from engine.read.vetoes import awaiting_close
from tests.helpers import NOW, make_workspace, report_args


@pytest.fixture
def fleet(tmp_path: Any, monkeypatch: Any) -> Any:
    """A workspace on a pinned clock, opened in this process as the engine opens it; `ws.at(s)`
    moves the clock (this process's and the commands') to NOW plus s seconds."""
    ws = make_workspace(tmp_path)
    engine_ws, _ = locate(ws.root)
    ws.engine = engine_ws  # type: ignore[attr-defined]
    ws.leases = tmp_path / "leases"  # type: ignore[attr-defined]
    ws.leases.mkdir()  # type: ignore[attr-defined]
    start = clock.parse_time(NOW)

    def at(seconds: int) -> Any:
        moment = start + timedelta(seconds=seconds)
        monkeypatch.setenv("REGULATOR_NOW", clock.iso(moment))
        ws.env["REGULATOR_NOW"] = clock.iso(moment)
        return moment

    ws.at = at  # type: ignore[attr-defined]
    at(0)
    return ws


def run_lease(ws: Any, unit_id: str, ttl: int | None = 60) -> dict:
    """A lease as `unit run` makes it: with a time, its file in a folder outside the worktree."""
    folder = ws.leases / unit_id
    folder.mkdir(exist_ok=True)
    return dispatch(ws.engine, unit_id, ws.root, LeaseTerms(ttl=ttl, lease_dir=folder))


def unit_result(ws: Any, unit_id: str, outcome: str, summary: str) -> dict:
    """The unit's own report_result, through its lease (as the door calls it)."""
    lease = read_lease(ws.leases / unit_id / ".regulator-lease.json")
    return report_result(ws.engine, {"outcome": outcome, "summary": summary}, lease)


def state_of(ws: Any) -> Any:
    return load(ws.engine)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("15m", 900), ("2h", 7200), ("14d", 14 * 86400), ("1s", 1)]
)
def test_durations_are_n_and_a_unit(text: Any, seconds: Any) -> None:
    assert clock.parse_duration(text) == seconds
    assert clock.parse_duration(clock.format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    "text", ["30", "0s", "-5m", "1.5h", "15 m", "15M", "m", "", "15mm", "٣s", "01m", None, 15]
)
def test_anything_else_is_bad_input_naming_the_field(text: Any) -> None:
    with pytest.raises(BadInput, match="--ttl: .* is not a duration such as 30s, 15m, 2h or 14d"):
        clock.parse_duration(text, "--ttl")


def test_a_lease_past_its_time_expires_once_and_the_unit_is_lost(fleet: Any) -> None:
    event = run_lease(fleet, "r1", ttl=60)
    lease = read_lease(fleet.leases / "r1" / ".regulator-lease.json")
    assert lease.worktree == fleet.root.resolve()  # the lease file names where the unit works
    assert (fleet.leases / "r1" / ".regulator-lease.json").stat().st_mode & 0o777 == 0o600
    dispatched = clock.parse_time(event["at"])
    assert event["expiresAt"] == clock.iso(dispatched + timedelta(seconds=60)) and event["ttl"] == 60
    beats = ProcessHeartbeats(started=dispatched)
    # before its time: nothing written
    assert expire_leases(fleet.engine, fleet.at(59), beats) == []
    written = expire_leases(fleet.engine, fleet.at(61), beats)
    assert [(e["kind"], e["unit"], e["leaseHash"]) for e in written] == [
        ("lease-expired", "r1", lease_hash(lease.lease))
    ]
    # run again (a retry, a second host): writes nothing more, the id is the lease's
    assert expire_leases(fleet.engine, fleet.at(90), beats) == []
    assert sum(e["kind"] == "lease-expired" for e in fleet.events("units")) == 1
    state = state_of(fleet)
    assert unit_status(state, state.units["r1"]) == "lost"
    with pytest.raises(Refused, match="not the unit's current lease"):
        check_lease(fleet.engine, state, lease)
    status = fleet.json("status")
    row = next(u for u in status["units"] if u["id"] == "r1")
    assert (row["status"], row["confined"], row["awaitingClose"]) == ("lost", False, False)
    # Next-up shows it as it shows in-progress: not queued, the reason named
    once = json.loads(fleet.run("controlroom", "--once", "--json").stdout)
    assert {"id": "r1", "priority": 100, "reasons": ["status lost"]} in once["excluded"]
    # counted where the header and CI look first (an operator's review: only a row said it)
    assert (once["counts"]["lost"], once["counts"]["awaitingDecision"]) == (1, 0)
    assert " · ⚠ 1 lost · " in fleet.run("controlroom", "--once").stdout.splitlines()[0]
    # nothing was released: a lost unit can be dispatched again (a new lease), not closed
    with pytest.raises(BadInput, match="r1 is lost; close needs an in-progress unit"):
        close(fleet.engine, "r1")
    again = run_lease(fleet, "r1", ttl=60)
    state = state_of(fleet)
    assert unit_status(state, state.units["r1"]) == "in-progress"
    assert state.units["r1"].lease == again["leaseHash"] != lease_hash(lease.lease)


def test_a_lost_unit_is_held_as_before(fleet: Any) -> None:
    run_lease(fleet, "u1", ttl=5)
    fleet.run(*report_args(severity="blocking"), "--by", "alice", check=True)
    fleet.run("signals", "route", check=True)
    beats = ProcessHeartbeats(started=fleet.at(0))
    expire_leases(fleet.engine, fleet.at(10), beats)
    once = fleet.run("controlroom", "--once", "--json")
    assert once.returncode == 1
    reasons = json.loads(once.stdout)["exitReasons"]
    assert any(
        r.startswith("u1 is lost (its lease expired while in progress) and held by blocking") for r in reasons
    )
    # dispatch from lost is allowed, but vetoes apply first
    with pytest.raises(Refused, match="dispatch of u1 vetoed: held by open obligation"):
        run_lease(fleet, "u1")


def test_heartbeats_and_a_restart_grace_extend_a_lease(fleet: Any) -> None:
    event = run_lease(fleet, "r1", ttl=60)
    dispatched = clock.parse_time(event["at"])
    beats = ProcessHeartbeats(started=dispatched)
    fleet.at(50)
    heartbeat.beat(event["leaseHash"])  # a door call, 50 s in
    assert expire_leases(fleet.engine, fleet.at(100), beats) == []  # beat + 60 = 110
    # a host that (re)started later gives every lease one full TTL from its start
    restarted = ProcessHeartbeats(started=dispatched + timedelta(seconds=200))
    assert expire_leases(fleet.engine, fleet.at(250), restarted) == []
    assert len(expire_leases(fleet.engine, fleet.at(261), restarted)) == 1


def test_old_leases_and_recorded_results_never_expire(fleet: Any) -> None:
    old = dispatch(fleet.engine, "u1", fleet.root)  # `unit dispatch`: no time, as before this round
    assert "expiresAt" not in old
    run_lease(fleet, "r1", ttl=5)
    run_lease(fleet, "u3", ttl=5)
    unit_result(fleet, "u3", "done", "found nothing")
    beats = ProcessHeartbeats(started=fleet.at(0))
    written = expire_leases(fleet.engine, fleet.at(400 * 86400), beats)
    assert [e["unit"] for e in written] == ["r1"]


def test_one_result_per_lease_and_a_failed_one_asks_for_recovery(fleet: Any) -> None:
    event = run_lease(fleet, "r1")
    with pytest.raises(Refused, match="lease is not its current one"):
        record_host_result(fleet.engine, "r1", "0" * 64, "done", "x", 0, 1)
    with pytest.raises(BadInput, match="outcome: 'finished' is not one of done, blocked, failed"):
        unit_result(fleet, "r1", "finished", "x")
    written = record_host_result(fleet.engine, "r1", event["leaseHash"], "failed", "exit 3", 3, 2)
    assert written["opens"]["severity"] == "advisory"  # type: ignore[index]
    with pytest.raises(Refused, match="already reported its result \\(failed\\)"):
        unit_result(fleet, "r1", "done", "again")
    # the host's result stands aside for one already recorded: it writes nothing
    assert record_host_result(fleet.engine, "r1", event["leaseHash"], "done", "x", 0, 1) is None
    state = state_of(fleet)
    recovery = state.obligations[written["opens"]["id"]]  # type: ignore[index]
    assert (recovery.kind, recovery.blocks, recovery.unit, recovery.owed_to) == (
        "recovery",
        False,
        "r1",
        "S3",
    )
    row = next(u for u in fleet.json("status")["units"] if u["id"] == "r1")
    assert row["status"] == "in-progress" and row["awaitingClose"] is False
    once = fleet.run("controlroom", "--once")
    assert " · 1 awaiting decision · " in once.stdout.splitlines()[0]
    # a dispatch refused says what `status` says, and what a person does (an operator's review:
    # "it runs under a lease already (`regulator unit close` it ...)", which closed it undecided)
    again = fleet.run("unit", "dispatch", "r1")
    assert again.returncode == 2 and "`regulator unit close`" not in again.stderr, again.stderr
    assert (
        "its result is failed, awaiting a recovery decision (`regulator unit decide r1 --action retry|repair|abort|…`)"
        in again.stderr
    )
    assert row["result"] == {
        "id": written["id"],  # type: ignore[index]
        "outcome": "failed",
        "summary": "exit 3",
        "by": "host",
        "exitCode": 3,
        "durationS": 2,
        "at": written["at"],  # type: ignore[index]
    }
    # a recovery decision disposes of it with the unit's other S3 obligations (§4.4)
    fleet.run(
        "unit", "decide", "r1", "--action", "retry", "--by", "alice", "--rationale", "again", check=True
    )
    state = state_of(fleet)
    assert state.obligations[recovery.id].status == "resolved"
    assert unit_status(state, state.units["r1"]) == "todo"
    assert json.loads(fleet.run("controlroom", "--once", "--json").stdout)["counts"]["awaitingDecision"] == 0


def test_a_recovery_decision_names_each_obligation_it_disposes_of(fleet: Any) -> None:
    """An operator's first day: `unit decide --action retry` on a failed unit said "2 obligation(s)
    rework", and one of them was a blocking security finding on the unit, disposed of unseen. Each
    is now named, with whether it blocked the unit."""
    from tests.helpers import report_args

    event = run_lease(fleet, "u1")
    fleet.run(*report_args(subject="API key in repo", affects=["u1"]), "--by", "alice", check=True)
    fleet.run("signals", "route", check=True)
    record_host_result(fleet.engine, "u1", event["leaseHash"], "failed", "exit 1", 1, 2)
    finding = next(o for o in state_of(fleet).obligations.values() if o.subject == "API key in repo")
    done = fleet.run("unit", "decide", "u1", "--action", "retry", "--by", "alice", "--rationale", "again")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "u1: retry recorded by alice; 2 obligation(s) rework:"
    assert f"  {finding.id} blocking, blocked the unit: API key in repo" in lines
    assert any(line.startswith("  ") and "advisory: recovery: u1 reported failed" in line for line in lines)


def test_awaiting_close_is_a_done_result_and_a_held_close(fleet: Any) -> None:
    run_lease(fleet, "u1")
    unit_result(fleet, "u1", "done", "implemented")
    state = state_of(fleet)
    assert not awaiting_close(state, state.units["u1"])  # nothing holds it: it may close
    fleet.run(*report_args(severity="blocking", affects=["u1"]), "--by", "alice", check=True)
    done = fleet.run("unit", "close", "u1")
    assert done.returncode == 3 and "close of u1 vetoed" in done.stderr
    row = next(u for u in fleet.json("status")["units"] if u["id"] == "u1")
    assert (row["status"], row["held"], row["awaitingClose"]) == ("in-progress", True, True)
    line = next(li for li in fleet.run("status").stdout.splitlines() if li.startswith("u1 "))
    assert line.split()[:5] == ["u1", "implement", "awaiting", "close", "held"]
    assert line.endswith("unconfined; result done: implemented")
    text = fleet.run("controlroom", "--once").stdout
    assert "awaiting close" in text and "u1 is in progress, awaiting close, and held by blocking" in text
    # Next-up says what status says (design §23: shown in status, the room and Next-up alike)
    explained = fleet.run("registry", "next-up", "--explain").stdout
    assert "  u1: status awaiting close; held by blocking obligation " in explained
    # the hold dispositioned, the unit is ready to close, and saying so is the resolve's last word
    # (an operator's review: it read as plainly in progress; nothing closes it by itself)
    ob = row["blockedBy"][0]
    done = fleet.run(
        "obligation", "resolve", ob, "--by", "alice", "--disposition", "no-action", "--rationale", "ok"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "regulator: note: unit u1's result is done and no other obligation holds it now: "
        "`regulator unit close u1` closes it\n"
    )
    row = next(u for u in fleet.json("status")["units"] if u["id"] == "u1")
    assert (row["status"], row["awaitingClose"], row["waitsFor"]) == ("in-progress", False, "ready to close")
    line = next(li for li in fleet.run("status").stdout.splitlines() if li.startswith("u1 "))
    assert line.split()[:5] == ["u1", "implement", "ready", "to", "close"]
    refused = fleet.run("unit", "dispatch", "u1").stderr
    assert "its result is done and nothing holds it (`regulator unit close u1` closes it)" in refused
    # counted where a person looks first (the re-check: nothing closes it by itself)
    assert json.loads(fleet.run("controlroom", "--once", "--json").stdout)["counts"]["readyToClose"] == 1
    assert " · 1 ready to close · " in fleet.run("controlroom", "--once").stdout.splitlines()[0]
    assert "  u1: status ready to close\n" in fleet.run("registry", "next-up", "--explain").stdout
    fleet.run("unit", "close", "u1", check=True)
    assert next(u for u in fleet.json("status")["units"] if u["id"] == "u1")["waitsFor"] is None


def test_a_finding_keeps_a_done_unit_awaiting_close(fleet: Any) -> None:
    """An adversarial review of D-285: a unit whose result is done, held by an obligation and an
    unresolved finding, read `ready to close` once the obligation was resolved, and the resolve said
    `unit close` closes it, which the finding then refused. A finding holds as an obligation does."""
    from tests.clonehost import FINDING, finding

    run_lease(fleet, "u1")
    unit_result(fleet, "u1", "done", "implemented")
    fleet.run(*report_args(severity="blocking", affects=["u1"]), "--by", "alice", check=True)
    (fleet.root / FINDING).parent.mkdir(exist_ok=True)
    (fleet.root / FINDING).write_text(finding(affects=("u1",)))
    fleet.commit("a finding naming u1")
    fleet.run("signals", "route", check=True)
    ob = next(u for u in fleet.json("status")["units"] if u["id"] == "u1")["blockedBy"][0]
    done = fleet.run(
        "obligation", "resolve", ob, "--by", "alice", "--disposition", "no-action", "--rationale", "ok"
    )
    assert (done.returncode, done.stderr) == (0, "")  # no `unit close` offered: the finding holds it
    row = next(u for u in fleet.json("status")["units"] if u["id"] == "u1")
    assert (row["waitsFor"], row["awaitingClose"], row["staleKnowledge"]) == ("awaiting close", True, ["F-x"])
    assert fleet.run("unit", "close", "u1").returncode == 3


def test_forged_expiry_and_result_lines_count_for_nothing(fleet: Any) -> None:
    """A writer appending host events by hand, well chained: the fold re-derives them."""
    from engine.log.store import canonical_line, event_hash

    event = run_lease(fleet, "r1", ttl=3600)
    path = fleet.store("units")
    lines = path.read_bytes().splitlines()
    prev = json.loads(lines[-1])["hash"]
    for forged in (
        {"kind": "lease-expired", "unit": "r1", "leaseHash": event["leaseHash"], "at": event["at"]},
        {"kind": "result", "id": "Rforged", "unit": "r1", "leaseHash": "0" * 64, "outcome": "done",
         "summary": "x", "by": "host", "at": event["at"]},
    ):  # fmt: skip
        forged["prev"] = prev
        forged["hash"] = prev = event_hash(forged)
        with path.open("ab") as handle:
            handle.write(canonical_line(forged))
    state = state_of(fleet)
    assert unit_status(state, state.units["r1"]) == "in-progress" and state.units["r1"].result is None
    reasons = [u.reason for u in state.uncounted]
    assert any("lease-expired for r1 before its lease's time" in r for r in reasons)
    assert any("result for r1 under a lease that is not its current one" in r for r in reasons)


def test_heartbeats_on_postgresql_are_a_row_that_only_moves_forward(pg_url: Any) -> None:
    """Every host's door beats; the leader reads them from `regulator.leases` (never the log)."""
    from engine.host.leases import PgHeartbeats
    from engine.log.pg import admin as pg_admin
    from engine.log.pg import connection as pg_connection

    pg_admin.create_schema(pg_url)
    start = clock.parse_time(NOW)
    beats = PgHeartbeats(pg_url, start)
    other = PgHeartbeats(pg_url, start)  # a second host: it sees what the first wrote
    beats.record("a" * 64, start + timedelta(seconds=30))
    assert other.last("a" * 64) == start + timedelta(seconds=30)
    other.record("a" * 64, start + timedelta(seconds=10))  # a late beat of an earlier moment
    assert beats.last("a" * 64) == start + timedelta(seconds=30)
    assert beats.last("b" * 64) is None
    heartbeat.beat("c" * 64)  # a door call on this host: written through for the other hosts to see
    assert other.last("c" * 64) is not None
    events = pg_connection._run(
        pg_url, lambda c: c.execute("SELECT count(*) FROM regulator.events").fetchone()[0], tx=False
    )
    assert events == 0  # heartbeats never grow the log
