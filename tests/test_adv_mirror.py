"""Adversarial review (rev-adv): the PostgreSQL mirror's bytes past the last mirrored line, and
postgresql.json's record of them, replayed with a real server and real `regulator` processes."""

from __future__ import annotations

import json
import subprocess

import pytest

from engine.log.pg.store import line_text
from engine.log.store import event_hash
from tests.helpers import REGULATOR, make_workspace

pytestmark = pytest.mark.usefixtures("pg_server")


@pytest.fixture
def fleet(tmp_path, pg_server):
    db = pg_server.database()
    ws = make_workspace(tmp_path, store=pg_server.url(db))
    done = subprocess.run(
        [REGULATOR, "store", "roles", "--url", pg_server.url(db)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    ws.lease("u1")
    return ws


def status(ws) -> dict[str, str]:
    done = ws.run("status", "--json")
    assert done.returncode == 0, done.stderr
    return {u["id"]: u["status"] for u in json.loads(done.stdout)["units"]}


def forged_tail(ws) -> bytes:
    """A well-chained dispatch of b1 after the mirror's last units line (the server has none)."""
    lines = ws.store("units").read_bytes().splitlines()
    last = json.loads(lines[-1])
    dispatch = next(json.loads(x) for x in lines if json.loads(x).get("kind") == "dispatch")
    event = {k: v for k, v in dispatch.items() if k not in ("hash", "prev")}
    event.update(unit="b1", prev=last["hash"])
    event["hash"] = event_hash(event)
    return (line_text(event) + "\n").encode()


def test_bytes_appended_past_the_mirrored_lines_are_not_read_even_when_postgresql_json_says_so(fleet):
    ws = fleet
    assert status(ws)["b1"] == "todo"  # a read that leaves the mirror sealed
    forged = forged_tail(ws)
    marker = ws.root / ".regulator" / "postgresql.json"

    def plant() -> None:
        with open(ws.store("units"), "ab") as handle:
            handle.write(forged)
        state = json.loads(marker.read_text())
        state["stores"]["units"][1] += len(forged)  # the size only: n and the last hash stay the server's
        marker.write_text(json.dumps(state))

    plant()
    done = ws.run("status", "--json")
    assert done.returncode == 0, done.stderr
    assert {u["id"]: u["status"] for u in json.loads(done.stdout)["units"]}["b1"] == "todo"
    assert "differed from the server at line" in done.stderr
    assert forged not in ws.store("units").read_bytes()

    plant()
    done = ws.run("verify", "--json")
    assert done.returncode == 1
    assert [f["store"] for f in json.loads(done.stdout)["findings"]] == ["units.ndjson"]

    plant()
    done = ws.run("controlroom", "--once", "--json")
    assert done.returncode == 1
    assert "units.ndjson" in [v["store"] for v in json.loads(done.stdout)["verify"]]
    assert status(ws)["b1"] == "todo"
