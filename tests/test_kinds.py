"""A typed shape per event kind (engine.commands.written, engine.read.kinds): every event the writers append converts to
its written shape, and every field the fold reads of a kind is one the writers write."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine.base import clock
from engine.checkout.workspace import LEASE_FILE, locate, read_lease
from engine.commands import written as as_written
from engine.commands.results import report_result
from engine.commands.units import LeaseTerms, dispatch
from engine.host.leases import ProcessHeartbeats, expire_leases
from engine.log.events import HOST_KINDS
from engine.log.store import Store
from engine.read import kinds
from tests.helpers import NOW, Workspace, make_workspace, remember_args, report_args, tick


def _shapes(store: str, kind: str) -> tuple[type, ...]:
    return as_written.WRITTEN[store][kind]


def _keys(shape: type) -> set[str]:
    return set(shape.__required_keys__) | set(shape.__optional_keys__)  # type: ignore[attr-defined]


def _fits(event: dict[str, Any], shape: type) -> bool:
    """The event holds no field its shape lacks, and converts to it (every type checked)."""
    if not set(event) <= _keys(shape):
        return False
    try:
        msgspec.convert(event, shape, strict=True)
    except msgspec.ValidationError:
        return False
    return True


def _every_writer(ws: Workspace) -> None:
    """Run every command that appends: each kind of each store is written at least once."""
    ws.run(*report_args(severity="blocking", affects=["u1"]), "--by", "alice", check=True)
    r1 = ws.lease("r1")
    ws.run(*report_args(severity="advisory", affects=["u3"]), cwd=r1, check=True)
    ws.run("signals", "route", check=True)
    held = next(o["id"] for o in ws.json("obligations") if o["unit"] == "u1")
    ws.run("obligation", "resolve", held, "--by", "alice", "--disposition", "no-action",
           "--rationale", "seen", check=True)  # fmt: skip
    u1 = ws.lease("u1")
    ws.run(*remember_args(), cwd=u1, check=True)
    entry = ws.json("memory")[0]["id"]
    ws.run("memory", "retract", entry, "--by", "alice", "--reason", "wrong", check=True)
    ws.run("unit", "close", "u1", check=True)
    ws.run("unit", "dispatch", "b1", check=True)
    ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "re-gate", check=True)
    ws.run("unit", "decide", "u3", "--action", "pause", "--by", "alice", "--rationale", "wait", check=True)
    ws.run("unit", "decide", "b1", "--action", "retry", "--by", "alice", "--rationale", "again", check=True)
    routing = (ws.root / "regulator/policy/routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing.replace("intakeDebtDays: 14", "intakeDebtDays: 15"))
    source = ws.root.parent / "proposed"
    source.write_text(routing)
    proposal = ws.json("identity", "propose", "--file", "regulator/policy/routing.yaml", "--content-from",
                       str(source), "--rationale", "back", "--by", "alice")["id"]  # fmt: skip
    ws.run("identity", "reject", proposal, "--by", "alice", "--rationale", "no", check=True)
    # a line verify names (an unsigned person event where signatures are required), dismissed
    Store(ws.store("signals")).append({"kind": "disposition", "obligation": held, "unit": "u1",
                                  "disposition": "no-action", "by": "alice", "rationale": "x",
                                  "at": "2026-11-29T12:00:00Z", "id": "01UNSIGNEDUNSIGNEDUNSIGNED"})  # fmt: skip
    line = len(ws.events("signals"))
    ws.run("verify", "--dismiss", f"signals:{line}", "--by", "alice", "--rationale", "seen", check=True)


def _kinds_written(ws: Workspace, forged: frozenset[str] = frozenset()) -> set[tuple[str, str]]:
    """Every line of every store converts to its kind's written shape; the (store, kind) seen."""
    seen: set[tuple[str, str]] = set()
    for store, shapes in as_written.WRITTEN.items():
        for raw in ws.store(store).read_text().splitlines():
            event = json.loads(raw)
            if event.get("id") in forged:
                continue
            kind = event["kind"]
            assert kind in shapes, (store, kind)
            assert any(_fits(event, shape) for shape in _shapes(store, kind)), (store, event)
            seen.add((store, kind))
    return seen


# kinds written only by `serve`'s duties, `unit run`'s leases and the door: driven by the test after
# the next; an advisory withdrawn needs an OSV feed (tests/test_world_osv.py writes it), so its shape
# is checked there by the fold's reading only
HOSTED = {
    ("signals", "evidence-expired"),
    ("signals", "overdue"),
    ("signals", "deadline-escalated"),
    ("signals", "advisory-withdrawn"),
    ("signals", "sensor-run"),
    ("signals", "escalation-paged"),
    ("signals", "prediction-outcome"),
    ("units", "result"),
    ("units", "lease-expired"),
}


def test_every_event_a_writer_appends_has_its_kinds_shape(ws: Workspace) -> None:
    _every_writer(ws)
    seen = _kinds_written(ws, frozenset({"01UNSIGNEDUNSIGNEDUNSIGNED"}))
    written = {(store, kind) for store, shapes in as_written.WRITTEN.items() for kind in shapes}
    assert seen == written - HOSTED  # every other kind was written here, so its shape was checked


SENSOR = """\
import json
print(json.dumps({"subject": "scan found it", "claim": "c", "observation": "o", "evidence": ["e"],
                  "confidence": "low", "prediction": {"resolvesAt": "2026-12-06T00:00:00Z"}}))
"""


def test_every_event_the_host_writes_has_its_kinds_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sensor, a report that expires and predicts, a unit's result, a lease that runs out, then a
    tick thirty days on: each host-written kind converts to its written shape."""
    ws = make_workspace(tmp_path)
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    engine_ws, _ = locate(ws.root)
    script = tmp_path / "scan.py"
    script.write_text(SENSOR)
    ws.decide(
        "regulator/policy/sensors.yaml",
        f"sensors:\n  scan:\n    kind: command\n    command: {json.dumps([sys.executable, str(script)])}\n"
        "    every: 1h\n    severity: advisory\n    timeout: 60s\n",
    )
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing + "notify: [/bin/true]\n")  # its escalation-paged
    ws.run(*report_args(expires_at="2026-12-01T00:00:00Z", resolves_at="2026-11-30T00:00:00Z"),
           "--by", "alice", check=True)  # fmt: skip
    ws.run("signals", "route", check=True)
    (tmp_path / "r1").mkdir()
    (tmp_path / "b1").mkdir()
    dispatch(engine_ws, "r1", ws.root, LeaseTerms(ttl=60, lease_dir=tmp_path / "r1"))  # never renewed
    dispatch(engine_ws, "b1", ws.root, LeaseTerms(ttl=3600, lease_dir=tmp_path / "b1"))
    report_result(engine_ws, {"outcome": "failed", "summary": "s"}, read_lease(tmp_path / "b1" / LEASE_FILE))
    later = {"REGULATOR_NOW": "2026-12-29T12:00:00Z"}
    tick(ws, env=later)
    # serve's lease duty, in a serve that ran since NOW (a tick just started gives a lease its grace)
    monkeypatch.setenv("REGULATOR_NOW", later["REGULATOR_NOW"])
    expire_leases(engine_ws, clock.now(), ProcessHeartbeats(started=clock.parse_time(NOW)))
    predicted = next(
        s["id"] for s in ws.events("signals") if s["kind"] == "signal" and s.get("by") == "alice"
    )
    ws.run("signals", "resolve-prediction", predicted, "--came-true", "no", "--by", "alice",
           "--rationale", "it did not", env=later, check=True)  # fmt: skip
    assert _kinds_written(ws) >= HOSTED - {("signals", "advisory-withdrawn")}
    # design §22: every host event records `seen`, how far the host had folded every other store
    for store in ("signals", "units"):
        for event in ws.events(store):
            if event["kind"] in HOST_KINDS and event["kind"] != "upgrade":
                marks = event.get("seen")
                assert isinstance(marks, dict) and store not in marks, (store, event)
                assert all(isinstance(n, int) and n >= 0 for n in marks.values()), (store, event)


def test_the_fold_reads_only_fields_the_writers_write() -> None:
    """Each read shape's fields are written by some writer of its store (a typo in a read shape
    would read every line as its default)."""
    for (store, kind), read in kinds.READ.items():
        written = set().union(
            *(_keys(shape) for shapes in as_written.WRITTEN[store].values() for shape in shapes)
        )
        fields = set(read.__struct_fields__) | (
            {"kind"} if "kind" in getattr(read, "__annotations__", {}) else set()
        )
        assert fields <= written | {"kind"}, (store, kind, fields - written)
    for lenient, store in ((kinds.SignalsLine, "signals"), (kinds.UnitsLine, "units")):
        written = set().union(
            *(_keys(shape) for shapes in as_written.WRITTEN[store].values() for shape in shapes)
        )
        assert set(lenient.__struct_fields__) <= written, (store, set(lenient.__struct_fields__) - written)
