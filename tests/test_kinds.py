"""A typed shape per event kind (engine.read.kinds): every event the writers append converts to
its written shape, and every field the fold reads of a kind is one the writers write."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from engine.log.store import Store
from engine.read import kinds
from tests.helpers import Workspace, remember_args, report_args


def _shapes(store: str, kind: str) -> tuple[type, ...]:
    return kinds.WRITTEN[store][kind]


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


# kinds written only by `serve`'s duties, `unit run`'s leases and the door's questions, results and
# prediction outcomes: not driven by _every_writer yet (their read shapes' fields are still checked
# against their written shapes below). TODO: write each here too.
HOSTED = {
    ("signals", "evidence-expired"),
    ("signals", "overdue"),
    ("signals", "deadline-escalated"),
    ("signals", "advisory-withdrawn"),
    ("signals", "sensor-run"),
    ("signals", "prediction-outcome"),
    ("units", "result"),
    ("units", "lease-expired"),
}


def test_every_event_a_writer_appends_has_its_kinds_shape(ws: Workspace) -> None:
    _every_writer(ws)
    seen: set[tuple[str, str]] = set()
    for store, shapes in kinds.WRITTEN.items():
        lines = ws.store(store).read_text().splitlines()
        forged = {"01UNSIGNEDUNSIGNEDUNSIGNED"}
        for raw in lines:
            event = json.loads(raw)
            if event.get("id") in forged:
                continue
            kind = event["kind"]
            assert kind in shapes, (store, kind)
            assert any(_fits(event, shape) for shape in _shapes(store, kind)), (store, event)
            seen.add((store, kind))
    written = {(store, kind) for store, shapes in kinds.WRITTEN.items() for kind in shapes}
    assert seen == written - HOSTED  # every other kind was written here, so its shape was checked


def test_the_fold_reads_only_fields_the_writers_write() -> None:
    """Each read shape's fields are written by some writer of its store (a typo in a read shape
    would read every line as its default)."""
    for (store, kind), read in kinds.READ.items():
        written = set().union(*(_keys(shape) for shapes in kinds.WRITTEN[store].values() for shape in shapes))
        fields = set(read.__struct_fields__) | (
            {"kind"} if "kind" in getattr(read, "__annotations__", {}) else set()
        )
        assert fields <= written | {"kind"}, (store, kind, fields - written)
    for lenient, store in ((kinds.SignalsLine, "signals"), (kinds.UnitsLine, "units")):
        written = set().union(*(_keys(shape) for shapes in kinds.WRITTEN[store].values() for shape in shapes))
        assert set(lenient.__struct_fields__) <= written, (store, set(lenient.__struct_fields__) - written)
