"""What a unit sharing the host's account (design §15.0's weaker deployment) can append about an
escalation's page (D-323) and what it gets: a forged escalation on a recovery obligation no longer
makes every tick page again; a forged page counts for nothing unless it is as a host writes one;
and a page record the host could not write because a line had taken its id is said, not dropped."""

from __future__ import annotations

import json
import sys

from engine.base import ids
from tests.hardening.test_bad_lines import LATER, append_raw, chained, hand_dispatch
from tests.helpers import Workspace, report_args, tick
from tests.unit_run.common import ROOT

COUNT = "import sys; sys.stdin.read(); open({log!r}, 'a').write('page\\n')\n"


def with_notify(ws: Workspace, script: str) -> None:
    path = ws.root.parent / "notify.py"
    path.write_text(script)
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing + f"notify: [{sys.executable}, {path}]\n")


def test_a_forged_escalation_on_a_recovery_obligation_does_not_page_on_every_tick(ws: Workspace) -> None:
    """The adversarial review: a forged escalation for a recovery obligation, read first, made the
    host's own "a second"; once the forged one was judged (when units.ndjson opened the obligation)
    nothing counted, so every tick escalated and paged again (a page every 10 s). Marks on an
    obligation not yet opened now wait, and are judged in log order when it opens."""
    log = ws.root.parent / "paged.log"
    with_notify(ws, COUNT.format(log=str(log)))
    hand_dispatch(ws, "u1")
    seen = {name: ws.store(name).stat().st_size for name in ("signals", "memory", "identity")}
    rec1 = ids.recovery_obligation_id("res1", "u1")
    result = {"kind": "result", "unit": "u1", "id": "res1", "leaseHash": "h" * 64, "outcome": "failed",
              "summary": "s", "by": "host", "exitCode": 1, "durationS": 3,
              "opens": {"id": rec1, "severity": "advisory"}, "at": "2026-11-29T12:00:00Z", "seen": seen}  # fmt: skip
    append_raw(ws, "units", chained(ws, "units", result))
    forged = {
        "id": "de-forged",
        "kind": "deadline-escalated",
        "obligation": rec1,
        "at": "2026-11-29T12:00:00Z",
    }
    append_raw(ws, "signals", chained(ws, "signals", forged))
    written = [tick(ws, env=LATER)["deadlines"]["outcome"]["written"] for _ in range(3)]
    assert written == [3, 0, 0]  # overdue, escalated, paged; then nothing
    assert log.read_text().count("page") == 1
    kinds = [e["kind"] for e in ws.events("signals") if e.get("obligation") == rec1]
    assert kinds.count("deadline-escalated") == 2 and kinds.count("escalation-paged") == 1  # forged, host's
    found = ws.run("verify", env=LATER)
    assert (
        found.returncode == 1 and found.stdout.count("deadline-escalated before its obligation was due") == 1
    )
    assert "a second" not in found.stdout and "person event" not in found.stdout, found.stdout


def test_a_forged_page_counts_only_as_a_host_writes_one(ws: Workspace) -> None:
    """A page for an escalation that said no notify was set, one naming another escalation, and
    one stamped before its escalation: each counts for nothing (`verify` names it as a host
    event), and the obligation keeps saying it paged no one."""
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    assert tick(ws, env=LATER)["deadlines"]["outcome"] == {"written": 2}  # no notify set
    (escalated,) = [e for e in ws.events("signals") if e["kind"] == "deadline-escalated"]
    page = {"kind": "escalation-paged", "obligation": escalated["obligation"], "people": ["alice"]}
    for n, fields in enumerate(
        (
            {"escalation": escalated["id"], "sent": True, "at": LATER["REGULATOR_NOW"]},
            {"escalation": "nonsense", "sent": False, "problem": "x", "at": LATER["REGULATOR_NOW"]},
            {"escalation": escalated["id"], "sent": False, "problem": "x", "at": "2000-01-01T00:00:00Z"},
        )
    ):
        append_raw(ws, "signals", chained(ws, "signals", page | fields | {"id": f"forged-{n}"}))
    (row,) = ws.json("obligations", env=LATER)
    assert row["notPaged"] == "routing.yaml sets no notify"
    found = ws.run("verify", env=LATER)
    assert found.returncode == 1 and "person event" not in found.stdout
    assert found.stdout.count("escalation-paged naming another escalation, stamped before it, or after") == 3


FORGER = """\
import json, pathlib, sys
sys.path.insert(0, {root!r})
from engine.base import ids
from engine.log.store import Store, event_hash
event = json.loads(sys.stdin.read())
path = pathlib.Path({store!r})
prev, _, _ = Store(path)._tail()
forged = {{"id": ids.derived_id("escalation-paged", event["obligation"]), "kind": "escalation-paged",
          "obligation": event["obligation"], "escalation": event["id"], "people": event["people"],
          "sent": True, "at": event["at"], "prev": prev}}
forged["hash"] = event_hash(forged)
with open(path, "a") as out:
    out.write(json.dumps(forged, separators=(",", ":")) + "\\n")
print("pager down: 503", file=sys.stderr)
sys.exit(3)
"""


def test_a_page_record_taken_by_another_line_is_said(ws: Workspace) -> None:
    """The adversarial review: a unit sharing the account wrote a "sent" record with the host's own
    id while the notify ran (and failed): the host dropped its record without a word. It says so in
    its outcome (serve's log), and the failure is not lost from the log."""
    with_notify(ws, FORGER.format(root=str(ROOT), store=str(ws.store("signals"))))
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    done = tick(ws, env=LATER)["deadlines"]["outcome"]
    assert done["written"] == 2, done  # overdue, escalated: its page record was taken
    assert any("exited 3: pager down: 503" in e for e in done["errors"]), done
    assert any(
        "what it did was not recorded: a line with its record's id is already" in e for e in done["errors"]
    )
    assert json.loads(json.dumps(done))  # one JSON line in serve's log
