"""`regulator serve` on PostgreSQL (design §22): routing through LISTEN, two hosts routing every
signal exactly once, leadership that moves when the leader is killed, and the stdio door that
refuses to start. Real serve subprocesses, the real server of tests/pg.py; the other host is a
clone of the workspace with a mirror of its own."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

from engine.doors.client import DoorClient
from tests.helpers import clone, make_workspace, one_line
from tests.serving import REPORT, Serving, healthz, sdk_call, token_of, wait_for


def _url(ws: Any) -> str:
    return (ws.root / "regulator/policy/store.yaml").read_text().split("url:", 1)[1].strip()


@pytest.fixture
def pg_ws(tmp_path: Any, pg_url: Any) -> Any:
    ws = make_workspace(tmp_path, store=pg_url)
    for i in range(4):
        ws.contract(f"r{i}", "research", "intelligence")
    ws.commit("research units", sign=False)
    return ws


@pytest.fixture
def hosts(pg_ws: Any, tmp_path: Any) -> Any:
    """Two hosts: the workspace and a clone of it on the same database, each running serve."""
    other = clone(pg_ws, tmp_path / "other-host")
    started: list[Serving] = []
    try:
        started.append(Serving(pg_ws))
        started.append(Serving(pg_ws, cwd=other, env={"REGULATOR_STORE": _url(pg_ws)}))
        yield pg_ws, started
    finally:
        for serving in started:
            serving.close()


def test_a_report_through_the_door_becomes_its_obligation_with_serve_running(pg_ws: Any) -> None:
    worktree = pg_ws.lease("r1")
    serving = Serving(pg_ws)
    try:
        result = sdk_call(serving.sock, token_of(worktree), "report_intelligence", REPORT)
        assert not result.is_error, result.content
        signal_id = result.structured_content["id"]
        found = wait_for(
            lambda: [o for o in pg_ws.json("obligations") if o["signal"] == signal_id],
            "the report's obligation",
        )
        assert [(o["unit"], o["blocks"]) for o in found] == [("u1", True)]
        assert healthz(serving.sock)["leader"] is True
    finally:
        serving.close()


def test_two_hosts_serving_route_every_signal_exactly_once(hosts: Any) -> None:
    ws, (one, two) = hosts
    tokens = [token_of(ws.lease(f"r{i}")) for i in range(4)]
    per = 6
    ids: list[str] = []
    lock = threading.Lock()

    def report(i: int) -> None:
        for k in range(per):
            door = (one, two)[(i + k) % 2]  # every unit's token works at either host's door
            got = DoorClient(door.url, tokens[i]).report({**REPORT, "subject": f"r{i} report {k}"})
            with lock:
                ids.append(got["id"])

    threads = [threading.Thread(target=report, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(ids) == 4 * per

    def all_routed() -> bool:
        status = ws.json("status")
        return status["unrouted"] == 0 and len(ws.json("obligations")) == 4 * per

    wait_for(all_routed, "every signal routed by one host or the other", deadline=60)
    routings = [e for e in ws.events("signals") if e["kind"] == "routing"]
    assert sorted(r["signal"] for r in routings) == sorted(ids)  # one routing record per signal
    assert ws.run("verify").returncode == 0


@pytest.mark.slow
def test_killing_the_leader_moves_the_duties_to_the_other_host(hosts: Any) -> None:
    ws, servings = hosts

    def leader() -> Serving | None:
        found = [s for s in servings if healthz(s.sock)["leader"]]
        return found[0] if len(found) == 1 else None

    first = wait_for(leader, "one leader among the two hosts")
    other = next(s for s in servings if s is not first)
    assert healthz(other.sock)["leader"] is False
    first.kill(signal.SIGKILL)
    wait_for(lambda: healthz(other.sock)["leader"], "the other host leads", deadline=15)

    def duties_on_other() -> bool:
        lines = other.lines()
        took = max((i for i, x in enumerate(lines) if x.get("outcome") == "took leadership"), default=None)
        return took is not None and any(
            x.get("duty") == "tick" and x["outcome"]["leader"] for x in lines[took + 1 :]
        )

    wait_for(duties_on_other, "a tick of duties on the new leader", deadline=15)


def test_the_stdio_door_refuses_to_start_on_postgresql(pg_ws: Any) -> None:
    worktree = pg_ws.lease("r1")
    done = pg_ws.run("mcp", "--lease", str(worktree / ".regulator-lease.json"))
    assert done.returncode == 3 and "regulator serve" in one_line(done)


def test_once_tick_on_postgresql_routes_and_leads_only_when_it_can(pg_ws: Any) -> None:
    from tests.helpers import report_args

    pg_ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    done = pg_ws.run("serve", "--once-tick")
    assert done.returncode == 0, done.stderr
    assert '"leader": true' in done.stderr and pg_ws.json("status")["unrouted"] == 0


def lease_used(ws: Any, token: str, folder: Any, root: Any, env: dict) -> str:
    """A `--lease` file holding a run's token, given to `signals report` on the checkout at `root`:
    refused (exit 3, nothing written); which of the two refusals said it."""
    import json

    from tests.helpers import report_args

    lease = folder / "taken-lease.json"
    lease.write_text(
        json.dumps({"unit": "r1", "lease": token, "workspace": str(root), "leasedAt": "2026-12-01T00:00:00Z"})
    )
    before = len(ws.events("signals"))
    done = ws.run(
        "--lease", str(lease), *report_args(affects=["u1"], subject="by a taken lease"), cwd=root, env=env
    )
    assert done.returncode == 3 and len(ws.events("signals")) == before, done.stderr
    said = one_line(done)
    assert "belongs to a `unit run`" in said, said
    return "another host" if "on another host" in said else "is over" if "that is over" in said else said


def test_a_unit_runs_lease_acts_only_at_the_door_of_the_host_that_runs_it(hosts: Any, tmp_path: Any) -> None:
    """An adversarial review: the only thing that made a door refuse a lease whose `unit run` was
    over was a file in that host's `.regulator/`, so another host on the same database took the
    token for ever after a failed or killed run (a critical report, memory, questions as the unit).
    A `unit run`'s dispatch now names its host: the other host's door refuses the token during the
    run and after it; this host's answers while the child lives, then refuses it too. A lease of
    `unit dispatch` still works at either door (test_two_hosts_serving_route_every_signal_exactly_once)."""
    import os
    import subprocess

    from engine.base.errors import Refused
    from tests.helpers import REGULATOR
    from tests.unit_run.common import script

    ws, (here, other) = hosts
    other_root, other_env = tmp_path / "other-host", {"REGULATOR_STORE": _url(ws)}
    folder = tmp_path / "run"
    folder.mkdir()
    token_file, finish = folder / "token", folder / "finish"
    agent = script(
        folder,
        "leaks.sh",
        f'printf %s "$REGULATOR_DOOR_TOKEN" > {token_file}.part\nmv {token_file}.part {token_file}\n'
        f"while [ ! -e {finish} ]; do sleep 0.1; done\nexit 1\n",
    )
    host = subprocess.Popen(
        [REGULATOR, "unit", "run", "r1", "--", str(agent)],
        cwd=ws.root,
        env=ws.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        token = wait_for(
            lambda: token_file.exists() and token_file.read_text(), "the child's token", deadline=60
        )
        assert DoorClient(here.url, token).status()["unit"] == "r1"
        with pytest.raises(Refused, match="HTTP 401"):
            DoorClient(other.url, token).report({**REPORT, "subject": "from the other host, during the run"})
        # nor as a lease file given to a command on the other host's checkout (D-276: one rule)
        assert lease_used(ws, token, folder, other_root, other_env) == "another host"
        finish.touch()
        err = host.communicate(timeout=120)[1]
        assert host.returncode == 1, err
        for door in (here, other):
            with pytest.raises(Refused, match="HTTP 401"):
                DoorClient(door.url, token).report({**REPORT, "subject": "after the run"})
        assert lease_used(ws, token, folder, ws.root, {}) == "is over"
        assert lease_used(ws, token, folder, other_root, other_env) == "another host"
    finally:
        if host.poll() is None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait(timeout=30)
    assert not [e for e in ws.events("signals") if e.get("kind") == "signal" and e.get("unit") == "r1"]


SLOW_PAGE = """\
import json, sys, time
event = json.loads(sys.stdin.read())
with open(sys.argv[1], "a") as out:
    out.write(event["obligation"] + "\\n")
time.sleep(9)
"""


@pytest.mark.slow
def test_a_second_host_ticking_while_a_notify_runs_pages_no_one_again(pg_ws: Any, tmp_path: Any) -> None:
    """An adversarial re-check of D-315: with the escalation written after its notify, a second
    host ticking while the first's notify ran (its leadership, 6 s, lapsed in the tick) found no
    escalation and paged each again (4 pages for 2). The escalation is written first (D-323): one
    page each, and what each did is recorded once."""
    import subprocess
    import sys
    import time

    from tests.helpers import REGULATOR, report_args

    log, script = tmp_path / "paged.txt", tmp_path / "page.py"
    script.write_text(SLOW_PAGE)
    routing = (pg_ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    pg_ws.decide("regulator/policy/routing.yaml", routing + f"notify: [{sys.executable}, {script}, {log}]\n")
    pg_ws.run(*report_args(), "--by", "alice", check=True)  # blocking, on u1 and u3: two obligations
    pg_ws.run("serve", "--once-tick", check=True)  # routed now: due in 48 h
    later = {"REGULATOR_NOW": "2026-12-20T12:00:00Z"}
    other = clone(pg_ws, tmp_path / "other-host")
    first = subprocess.Popen(
        [REGULATOR, "serve", "--once-tick"],
        cwd=pg_ws.root,
        env=pg_ws.env | later,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 2, "the first host's pages")
        time.sleep(7)  # past the first host's leadership: the second leads its own tick
        second = pg_ws.run("serve", "--once-tick", cwd=other, env=later | {"REGULATOR_STORE": _url(pg_ws)})
    finally:
        _, said = first.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, (said, second.stderr)
    assert '"leader": true' in second.stderr  # it led, and found the escalations written
    assert len(log.read_text().splitlines()) == 2  # one page each
    events = pg_ws.events("signals")
    assert [e["kind"] for e in events].count("deadline-escalated") == 2
    pages = [e for e in events if e["kind"] == "escalation-paged"]
    assert len(pages) == 2 and all(p["sent"] for p in pages)
    assert pg_ws.run("verify", env=later).returncode == 0
