"""Order, not time (design §22, issue 25): host events record `seen`, and a dispatch or close counts
only at exactly what it saw, by the order rule, with no time tolerance.

The attack of issue 25, replayed with real `regulator` processes on the files and on a real
PostgreSQL server: a close of a held unit appended by hand, its `at` back-dated into the old 4 s
tolerance (or inserted right after the routing that holds it) made the unit `closed`. Each form of
it now counts for nothing, `verify` names it (exit 1) and `controlroom --once` still lists the unit
held. Honest sequences still count, and stores from before `seen` read as they always did.
In-process (hypothesis): the order rule's fast path answers what the pairwise rule answers, and a
fold read piece by piece (a live reader, a checkpoint) equals a cold one on logs holding `seen`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base import clock, ids
from engine.checkout.workspace import Workspace as EngineWorkspace
from engine.log.store import Store
from engine.read import checkpoint, fold
from engine.read.fold import StoreReplaced, _Order, advance
from engine.read.load import attach_contracts, load
from engine.read.model import HostOrder, State
from tests.hardening.test_trust import append_forged, held
from tests.helpers import make_workspace, report_args
from tests.test_checkpoint import fingerprint, fresh_root

ZERO = "2026-11-29T08:00:00Z"


def moment(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def sizes(ws: Any, but: str) -> dict[str, int]:
    return {
        name: ws.store(name).stat().st_size
        for name in ("signals", "units", "memory", "identity")
        if name != but
    }


def routing_of(ws: Any) -> dict:
    return next(e for e in ws.events("signals") if e["kind"] == "routing")


def verify(ws: Any) -> tuple[int, list[str]]:
    done = ws.run("verify", "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, [
        f"{f['store']}:{f['line']}: {f['message']}" for f in json.loads(done.stdout)["findings"]
    ]


def once(ws: Any) -> tuple[int, list[str]]:
    done = ws.run("controlroom", "--once", "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["exitReasons"]


def status(ws: Any) -> dict[str, dict]:
    return {u["id"]: u for u in ws.json("status")["units"]}


def assert_still_held(ws: Any, obligation: str, line: int, why: str) -> None:
    """The forged close counts for nothing: u1 in progress and held everywhere a user looks."""
    u1 = status(ws)["u1"]
    assert u1["status"] == "in-progress" and u1["held"] is True and u1["blockedBy"] == [obligation]
    code, named = verify(ws)
    assert code == 1
    forged = [n for n in named if n.startswith(f"units.ndjson:{line}: ")]
    assert len(forged) == 1 and why in forged[0] and forged[0].endswith("it counts for nothing"), named
    code, reasons = once(ws)
    assert code == 1
    assert f"u1 is in progress and held by blocking obligation {obligation}" in " ".join(reasons)
    assert f"verify: {forged[0]}" in reasons
    refused = ws.run("unit", "close", "u1")
    assert refused.returncode == 3 and "vetoed" in refused.stderr


# ---- the attack on the files: a back-dated close of a held unit ------------------------------------

FORMS = {
    # no `seen`, after host events that record it
    "without seen": (
        lambda ws, dispatch: None,
        "close of u1 without `seen`, after host events that record it",
    ),
    # what the unit's own dispatch saw: from before the routing that holds it
    "stale seen": (
        lambda ws, dispatch: dispatch["seen"],
        "close of u1 did not see the routing record of signal",
    ),
    # the stores as they are: re-derived there, the routing holds it
    "current seen": (
        lambda ws, dispatch: sizes(ws, "units"),
        "close of u1 while held by blocking obligation",
    ),
    # more than signals.ndjson holds
    "future seen": (
        lambda ws, dispatch: dict(sizes(ws, "units"), signals=sizes(ws, "units")["signals"] + 4096),
        "close of u1 says it saw",
    ),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_back_dated_close_of_a_held_unit_appended_by_hand_counts_for_nothing(
    tmp_path: Any, form: Any
) -> None:
    ws = make_workspace(tmp_path, now=None, clock="system")  # the real clock: the 4 s tolerance was there
    _, obligations = held(ws)
    dispatch = next(e for e in ws.events("units") if e["kind"] == "dispatch" and e["unit"] == "u1")
    seen, why = FORMS[form]
    forged = {"kind": "close", "unit": "u1", "leaseHash": dispatch["leaseHash"]}
    if (value := seen(ws, dispatch)) is not None:
        forged["seen"] = value
    forged["at"] = stamp(moment(routing_of(ws)["at"]) - timedelta(seconds=1))  # inside the old 4 s
    append_forged(ws, "units", forged)
    line = len(ws.events("units"))
    assert_still_held(ws, obligations["u1"], line, why)


# ---- the same on PostgreSQL: inserted through the owner's role right after the routing -------------


def insert(url: str, store: str, event: dict) -> int:
    """A well-chained line inserted with psql's powers through the given role (the trigger checks
    chain, digest and time, and what the roles allow; the order rule is the fold's); returns its
    line number."""
    import psycopg

    from engine.log.pg.store import line_text
    from engine.log.store import event_hash

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT hash FROM regulator.events WHERE store = %s ORDER BY n DESC LIMIT 1", (store,)
        ).fetchone()
        event = dict(event, prev=row[0] if row else "")
        event["hash"] = event_hash(event)
        line = line_text(event)
        return conn.execute(  # type: ignore[index]
            "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
            " VALUES (%s, %s, %s, '', '', now()) RETURNING n",
            (store, line, hashlib.sha256(line.encode()).hexdigest()),
        ).fetchone()[0]  # its line number in the store


def server_sizes(url: str) -> dict[str, int]:
    """Each store's byte length as the server holds it (a mirror's bytes are the same)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT store, sum(octet_length(convert_to(line, 'UTF8')) + 1) FROM regulator.events GROUP BY store"
        ).fetchall()
    return {store: int(size) for store, size in rows}


@pytest.mark.usefixtures("pg_server")
@pytest.mark.parametrize("form", ["without seen", "stale seen", "current seen"])
def test_the_same_close_inserted_right_after_the_routing_on_postgresql_counts_for_nothing(
    tmp_path: Any, pg_server: Any, form: Any
) -> None:
    db = pg_server.database()
    owner = pg_server.url(db)
    ws = make_workspace(tmp_path, now=None, clock="system", store=owner)
    _, obligations = held(ws)
    dispatch = next(e for e in ws.events("units") if e["kind"] == "dispatch" and e["unit"] == "u1")
    forged = {"kind": "close", "unit": "u1", "leaseHash": dispatch["leaseHash"]}
    if form == "stale seen":
        forged["seen"] = dispatch["seen"]
    elif form == "current seen":
        on_server = server_sizes(owner)
        forged["seen"] = {name: on_server.get(name, 0) for name in ("signals", "memory", "identity")}
    forged["at"] = stamp(datetime.now(UTC))  # the server takes only its own time, within 2 s
    line = insert(owner, "units", forged)
    why = {
        "without seen": "close of u1 without `seen`",
        "stale seen": "close of u1 did not see the routing record of signal",
        "current seen": "close of u1 while held by blocking obligation",
    }[form]
    assert_still_held(ws, obligations["u1"], line, why)


# ---- honest sequences still count ------------------------------------------------------------------


def test_an_honest_route_then_close_that_saw_it_counts(tmp_path: Any) -> None:
    ws = make_workspace(tmp_path, now=None, clock="system")
    _, obligations = held(ws)
    routing = routing_of(ws)
    assert set(routing["seen"]) == {"units", "memory", "identity"}
    assert routing["seen"]["units"] == ws.store("units").stat().st_size  # every dispatch before it
    ws.run(
        "obligation", "resolve", obligations["u1"], "--by", "alice", "--disposition", "no-action",
        "--rationale", "checked upstream", check=True,
    )  # fmt: skip
    ws.run("unit", "close", "u1", check=True)
    close = ws.events("units")[-1]
    assert close["kind"] == "close" and close["seen"]["signals"] == ws.store("signals").stat().st_size
    ws.run(*report_args(subject="b1 too", affects=["b1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    b1 = next(o["id"] for o in ws.json("obligations") if o["unit"] == "b1")
    assert ws.run("unit", "dispatch", "b1").returncode == 3  # held: vetoed, nothing written
    ws.run(
        "obligation", "resolve", b1, "--by", "alice", "--disposition", "no-action", "--rationale", "ok", check=True
    )  # fmt: skip
    ws.run("unit", "dispatch", "b1", check=True)
    now = status(ws)
    assert (now["u1"]["status"], now["u3"]["status"], now["b1"]["status"]) == (
        "closed",
        "in-progress",
        "in-progress",
    )
    assert verify(ws) == (0, [])
    code, reasons = once(ws)
    assert not any(r.startswith(("u1 ", "b1 ", "verify")) for r in reasons), reasons


def test_a_reader_that_read_signals_before_the_host_decided_reads_them_first(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """A live reader folds signals.ndjson, then the host routes, resolves and closes: the close saw
    more of signals.ndjson than the reader had read, so the reader reads it first (never judges the
    close on less than it saw), and ends where a cold fold ends."""
    ws = make_workspace(tmp_path)
    _, obligations = held(ws)
    monkeypatch.setenv("REGULATOR_NOW", ws.env["REGULATOR_NOW"])
    engine_ws = EngineWorkspace(ws.root)
    live = load(engine_ws, cached=False)
    ws.run(
        "obligation", "resolve", obligations["u1"], "--by", "alice", "--disposition", "no-action",
        "--rationale", "checked", check=True,
    )  # fmt: skip
    ws.run("unit", "close", "u1", check=True)
    advance(engine_ws, live, stores=("units",))  # units first: the close saw signals it has not read
    assert live.units["u1"].status == "closed" and live.uncounted == []
    advance(engine_ws, live)
    assert fingerprint(live) == fingerprint(load(engine_ws, cached=False))


# ---- stores from before `seen` ---------------------------------------------------------------------


def test_a_store_renamed_over_between_two_pieces_is_read_again_from_its_first_byte(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """An editor's save (a new file renamed over signals.ndjson) between two pieces of a cold read:
    the fold never mixes the two files (an adversarial review found it did once stores were read a
    piece at a time); it reads the new one from its first byte, as a cold read of it does."""
    import engine.log.store as store_module
    import engine.read.fold as fold

    ws = make_workspace(tmp_path)
    monkeypatch.setenv("REGULATOR_NOW", ws.env["REGULATOR_NOW"])
    for subject in ("aaaa.js", "bbbb.js", "cccc.js"):
        ws.run(*report_args(subject=subject), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    path = ws.store("signals")
    edited = path.read_bytes().replace(b'"aaaa.js"', b'"zzzz.js"')  # the first line, already read
    monkeypatch.setattr(fold, "PIECE", 1)
    monkeypatch.setattr(store_module, "_READ_CHUNK", 64)
    real = store_module.Store.read
    calls: list[int] = []

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.path == path:
            calls.append(1)
            if len(calls) == 2:  # after the first piece: the new file, renamed over the store
                (path.parent / "edited").write_bytes(edited)
                os.replace(path.parent / "edited", path)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(store_module.Store, "read", read)
    engine_ws = EngineWorkspace(ws.root)
    mixed = load(engine_ws, cached=False)
    assert len(calls) > 3
    monkeypatch.setattr(store_module.Store, "read", real)
    again = load(engine_ws, cached=False)
    assert fingerprint(mixed) == fingerprint(again)
    assert "aaaa.js" not in {
        ob.subject for ob in mixed.obligations.values()
    }  # the old file's line is not kept


def test_a_store_from_before_seen_reads_as_before_and_upgrades_in_place(tmp_path: Any) -> None:
    ws = make_workspace(tmp_path)  # a pinned clock: the old times are what the lines say
    old = clock.parse_time("2026-11-29T11:00:00Z")

    def at(seconds: int) -> str:
        return clock.iso(old + timedelta(seconds=seconds))

    # what a host before `seen` wrote: u1 and u3 dispatched, then a blocking report routed onto both
    for unit in ("u1", "u3"):
        append_forged(ws, "units", {"kind": "dispatch", "unit": unit, "leaseHash": None, "at": at(0)})
    ws.run(*report_args(), "--by", "alice", check=True)
    signal = ws.events("signals")[-1]["id"]
    ob = {unit: ids.obligation_id(signal, unit) for unit in ("u1", "u3")}  # as the router names them
    obligations = [
        {"id": ob[unit], "unit": unit, "severity": "blocking", "blocks": True, "owedTo": "S3"}
        for unit in ("u1", "u3")
    ]
    append_forged(ws, "signals", {"kind": "routing", "signal": signal, "reportedSeverity": "blocking",
                                  "derivedSeverity": "blocking", "floors": [], "obligations": obligations,
                                  "outcome": "obligations", "reason": "r", "at": at(10)})  # fmt: skip
    # the old reading: u1's close 2 s after the hold opened is within the tolerance and counts; u3's,
    # an hour on, was vetoed
    append_forged(ws, "units", {"kind": "close", "unit": "u1", "leaseHash": None, "at": at(12)})
    append_forged(ws, "units", {"kind": "close", "unit": "u3", "leaseHash": None, "at": at(3600)})
    now = status(ws)
    assert now["u1"]["status"] == "closed"
    assert now["u3"]["status"] == "in-progress" and now["u3"]["blockedBy"] == [ob["u3"]]
    code, named = verify(ws)
    assert code == 1 and len(named) == 1, named
    assert f"close of u3 while held by blocking obligation {ob['u3']}" in named[0]

    # upgraded in place: the host's next events record `seen`; the old ones keep counting
    ws.run("unit", "dispatch", "b1", check=True)
    assert "seen" in ws.events("units")[-1]
    now = status(ws)
    assert (now["u1"]["status"], now["b1"]["status"]) == ("closed", "in-progress")
    # and from then on, a host event without `seen` counts for nothing
    append_forged(ws, "units", {"kind": "close", "unit": "b1", "leaseHash": None, "at": at(3601)})
    assert status(ws)["b1"]["status"] == "in-progress"
    code, named = verify(ws)
    assert code == 1 and "close of b1 without `seen`" in named[-1]


def test_a_routing_record_without_seen_after_ones_with_it_routes_nothing(tmp_path: Any) -> None:
    """A `noted` routing record appended by hand for a blocking report, before the host routes it:
    it counts for nothing, so the host's router routes the report and its hold stands."""
    ws = make_workspace(tmp_path)
    worktrees, _ = held(ws)
    ws.run(*report_args(subject="second", affects=["u3"]), cwd=worktrees["r1"], check=True)
    signal = ws.events("signals")[-1]["id"]
    append_forged(ws, "signals", {"kind": "routing", "signal": signal, "reportedSeverity": "blocking",
                                  "derivedSeverity": "blocking", "floors": [], "obligations": [],
                                  "outcome": "noted", "reason": "nothing to see",
                                  "at": "2026-11-29T12:00:00Z"})  # fmt: skip
    code, named = verify(ws)
    assert code == 1 and len(named) == 1
    assert named[0].startswith("signals.ndjson:4: routing record of signal") and "without `seen`" in named[0]
    ws.run("signals", "route", check=True)  # the report is still unrouted: the host routes it
    assert [o["unit"] for o in ws.json("obligations") if o["signal"] == signal] == ["u3"]
    assert ws.events("signals")[-1]["outcome"] == "obligations"


# ---- in-process: the fast path equals the pairwise rule ---------------------------------------------


def pairwise(
    starts: list[int], seen_units: list[int], start: int, seen: int
) -> tuple[int | None, int | None]:
    """The order rule as design §22 states it, pair by pair: the first routing record decided before
    the line at `start` was appended that `seen` does not cover, and the first that saw the line
    though `seen` covers it."""
    unseen = next((j for j, s in enumerate(starts) if s >= seen and seen_units[j] <= start), None)
    first = next((j for j, s in enumerate(starts) if s < seen and seen_units[j] > start), None)
    return unseen, first


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 50), max_size=12),
    seen_units=st.lists(st.integers(-5, 400), max_size=12),
    monotone=st.booleans(),
    queries=st.lists(st.tuples(st.integers(-5, 400), st.integers(-5, 700)), min_size=1, max_size=10),
)
def test_the_order_rules_fast_path_answers_what_the_pairwise_rule_answers(
    gaps: Any, seen_units: Any, monotone: Any, queries: Any
) -> None:
    n = min(len(gaps), len(seen_units))
    starts = [sum(gaps[: k + 1]) for k in range(n)]
    seen = sorted(seen_units[:n]) if monotone else seen_units[:n]
    host = HostOrder(
        starts=starts, seen_units=seen, monotone=all(a <= b for a, b in zip(seen, seen[1:], strict=False))
    )
    order = _Order(host)
    slow = _Order(HostOrder(starts=starts, seen_units=seen, monotone=False))  # suffix minima, prefix maxima
    for start, covered in queries:
        expected = pairwise(starts, seen, start, covered)
        assert (order.unseen(start, covered), order.saw_first(start, covered)) == expected
        assert (slow.unseen(start, covered), slow.saw_first(start, covered)) == expected
        assert order.decided_before(start) == any(s <= start for s in seen)


# ---- in-process: read piece by piece, or through a checkpoint, a fold equals a cold one ---------------


@st.composite
def hosts(draw: Any) -> Any:
    """Steps of a workspace whose host events record `seen`, as hosts write them (`seen` of the
    stores as they are), with lines no host wrote among them: a `seen` from an earlier step, none, or
    more than a store holds. A step is (store, event) or ("read", stores) for a live reader."""
    steps: list = []
    signals: list[str] = []
    routed: set[str] = set()
    opened: list[str] = []
    for n in range(draw(st.integers(1, 30))):
        kind = draw(
            st.sampled_from(
                ["signal", "routing", "disposition", "dispatch", "close", "decision", "read", "garbage"]
            )
        )
        unit = draw(st.sampled_from(["u1", "u2", "u3"]))
        seen = draw(st.sampled_from(["now"] * 6 + ["earlier", "none", "more"]))
        at = f"2026-11-29T08:{n:02d}:00Z"
        if kind == "signal":
            signals.append(f"s{n}")
            steps.append(("signals", {"kind": "signal", "id": f"s{n}", "subject": "s", "at": at}))
        elif kind == "routing" and signals:
            signal = draw(st.sampled_from(signals))
            obligations = [
                {"id": f"ob-{signal}-{unit}", "unit": unit, "severity": "blocking", "blocks": True}
            ]
            if signal not in routed and seen == "now":
                routed.add(signal)
                opened.append(obligations[0]["id"])
            steps.append(("signals", {"kind": "routing", "signal": signal, "obligations": obligations,
                                      "seen": seen, "at": at}))  # fmt: skip
        elif kind == "disposition" and opened:
            target = opened.pop(draw(st.integers(0, len(opened) - 1)))
            steps.append(("signals", {"kind": "disposition", "obligation": target, "disposition": "no-action",
                                      "by": "alice", "rationale": "r", "at": at}))  # fmt: skip
        elif (
            kind == "decision"
        ):  # a recovery decision that waits: its blocking obligation opens in units.ndjson
            rec = ids.recovery_obligation_id(f"d{n}", unit)  # the id the engine derives (D-290)
            opened.append(rec)
            steps.append(("units", {"kind": "decision", "id": f"d{n}", "unit": unit, "action": "pause",
                                    "by": "alice", "rationale": "r", "resolves": [],
                                    "opens": {"id": rec, "severity": "blocking", "owedTo": "S3"},
                                    "at": at}))  # fmt: skip
        elif kind in ("dispatch", "close"):
            steps.append(("units", {"kind": kind, "unit": unit, "leaseHash": None, "seen": seen, "at": at}))
        elif kind == "read":
            steps.append(("read", draw(st.sampled_from([("signals",), ("units",), ("signals", "units")]))))
        elif kind == "garbage":
            steps.append((draw(st.sampled_from(["signals", "units"])), b"{not json"))
    return steps


def run_steps(root: Path, steps: Any, live: State, ws: Any) -> State:
    """Write each step as a host (or a forger) would, a live reader folding along the way; returns
    the live reader's state (read again from the first byte when a line no host wrote asks it to)."""
    clock.configure(True)
    earlier: dict[str, int] = {"signals": 0, "units": 0, "memory": 0, "identity": 0}
    for store, event in steps:
        if store == "read":
            try:
                advance(ws, live, final=False, stores=event)
            except StoreReplaced:
                live = State(now=live.now)
                advance(ws, live, final=False)
            continue
        path = root / ".regulator" / f"{store}.ndjson"
        if isinstance(event, bytes):
            with open(path, "ab") as handle:
                handle.write(event + b"\n")
            continue
        now = {name: (root / ".regulator" / f"{name}.ndjson").stat().st_size for name in earlier}
        event = dict(event)
        mode = event.pop("seen", "none")
        if mode != "none":
            chosen = {"now": now, "earlier": earlier, "more": {k: v + 999 for k, v in now.items()}}[mode]
            event["seen"] = {name: size for name, size in chosen.items() if name != store}
        earlier = now
        Store(path).append(event)
    return live


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=hosts(), cut=st.floats(0, 1))
def test_a_fold_read_piece_by_piece_or_through_a_checkpoint_equals_a_cold_one(steps: Any, cut: Any) -> None:
    with tempfile.TemporaryDirectory() as base:
        root = fresh_root(base)
        ws = EngineWorkspace(root)
        now = datetime(2026, 11, 29, 12, tzinfo=UTC)
        split = int(len(steps) * cut)
        live = run_steps(root, steps[:split], State(now=now), ws)
        os.environ["REGULATOR_CHECKPOINT_BYTES"] = "0"
        try:
            assert checkpoint.save(ws, load(ws, now))
            live = run_steps(root, steps[split:], live, ws)
            through = load(ws, now)
            os.environ["REGULATOR_CHECKPOINT"] = "off"
            cold = load(ws, now)
        finally:
            os.environ.pop("REGULATOR_CHECKPOINT", None)
            os.environ.pop("REGULATOR_CHECKPOINT_BYTES", None)
        try:
            advance(ws, live)
        except StoreReplaced:
            live = State(now=now)
            advance(ws, live)
        attach_contracts(live, cold.contracts)
        live.contract_problems = cold.contract_problems
        assert fingerprint(through) == fingerprint(cold)
        assert fingerprint(live) == fingerprint(cold)
        assert sorted(cold.uncounted, key=lambda u: (u.store, u.offset)) == sorted(
            live.uncounted, key=lambda u: (u.store, u.offset)
        )


REC_1 = ids.recovery_obligation_id("d1", "u1")
PAUSE = {"kind": "decision", "id": "d1", "unit": "u1", "action": "pause", "by": "alice", "rationale": "r",
         "resolves": [], "opens": {"id": REC_1, "severity": "blocking", "owedTo": "S3"},
         "at": "2026-11-29T08:01:00Z"}  # fmt: skip
SIGNAL = {"kind": "signal", "id": "s0", "subject": "s", "at": "2026-11-29T08:00:00Z"}
DISPATCH = {"kind": "dispatch", "unit": "u1", "leaseHash": None, "at": "2026-11-29T08:06:00Z"}


def cold_of(ws: Any, now: datetime) -> State:
    os.environ["REGULATOR_CHECKPOINT"] = "off"
    try:
        return load(ws, now)
    finally:
        os.environ.pop("REGULATOR_CHECKPOINT", None)


def uncounted_units(state: State) -> list[tuple[int, str]]:
    return sorted((u.offset, u.reason) for u in state.uncounted if u.store == "units")


def test_a_reader_asked_for_units_alone_reads_the_signals_it_holds_first(tmp_path: Any) -> None:
    """A reader that folds both stores, asked for units.ndjson alone, still reads what
    signals.ndjson gained first: the disposition that released the unit counts for its dispatch."""
    root = fresh_root(str(tmp_path))
    ws = EngineWorkspace(root)
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    close = {"kind": "disposition", "obligation": REC_1, "disposition": "no-action", "by": "alice",
             "rationale": "r", "at": "2026-11-29T08:04:00Z"}  # fmt: skip
    steps = [("signals", SIGNAL), ("units", PAUSE), ("read", ("signals", "units")), ("signals", close),
             ("units", {**DISPATCH, "seen": "none"}), ("read", ("units",))]  # fmt: skip
    live = run_steps(root, steps, State(now=now), ws)
    assert live.units["u1"].status.value == "in-progress"
    assert uncounted_units(live) == uncounted_units(cold_of(ws, now)) == []


def test_a_vetoed_dispatch_whose_routing_is_read_after_it_is_named_as_a_cold_read_names_it(
    tmp_path: Any,
) -> None:
    """A routing record and a dispatch without `seen` appended between a reader's read of
    signals.ndjson and its read of units.ndjson: the dispatch, refused by the veto then, is read
    again with the routing first once it is read, so the reader names the order rule as a cold
    read does."""
    root = fresh_root(str(tmp_path))
    ws = EngineWorkspace(root)
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    routing = {"kind": "routing", "signal": "s0", "seen": "now", "at": "2026-11-29T08:05:00Z",
               "obligations": [{"id": "ob-s0-u1", "unit": "u1", "severity": "blocking", "blocks": True}]}  # fmt: skip
    live = run_steps(
        root, [("signals", SIGNAL), ("units", PAUSE), ("read", ("signals", "units"))], State(now=now), ws
    )
    run_steps(root, [("signals", routing), ("units", {**DISPATCH, "seen": "none"})], State(now=now), ws)
    fold._read(ws, live, "units", True, {})  # units.ndjson read before what signals.ndjson gained
    (why,) = [why for _, why in uncounted_units(live)]
    assert "vetoed" in why  # held by the recovery obligation, as far as this reader knows
    with pytest.raises(StoreReplaced):
        advance(ws, live)  # the routing record bears on a dispatch judged without it: read again
    cold = cold_of(ws, now)
    again = State(now=now)
    advance(ws, again)
    assert uncounted_units(again) == uncounted_units(cold)
    assert "without `seen`, after host events that record it" in uncounted_units(cold)[0][1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=hosts(),
    piece=st.integers(1, 2048),
    chunk=st.sampled_from([7, 64, 100, 500, 4096]),
    child_piece=st.integers(1, 3000),
    child=st.booleans(),
)
def test_a_fold_read_a_few_bytes_at_a_time_equals_one_read_whole(
    steps: Any, piece: int, chunk: int, child_piece: int, child: bool
) -> None:
    """A cold read folds each store a piece at a time (engine.read.fold.PIECE, D-181), the store
    read a chunk at a time within it, and the signature child answers a piece at a time: pieces of
    any size, down to a line each, with the child or without it, fold what one read of each store
    folds. (An adversarial review found the first version of this test never split a store: the
    store's own chunk was larger than any of them.)"""
    import engine.log.store as store
    import engine.read.fold as fold
    import engine.read.prejudge as prejudge

    with tempfile.TemporaryDirectory() as base:
        root = fresh_root(base)
        ws = EngineWorkspace(root)
        now = datetime(2026, 11, 29, 12, tzinfo=UTC)
        run_steps(root, steps, State(now=now), ws)
        whole = load(ws, now, cached=False)
        saved = fold.PIECE, store._READ_CHUNK, prejudge.PIECE, prejudge.MIN_BYTES
        fold.PIECE, store._READ_CHUNK, prejudge.PIECE = piece, chunk, child_piece
        prejudge.MIN_BYTES = 0 if child else 1 << 62
        try:
            pieces = load(ws, now, cached=False)
        finally:
            fold.PIECE, store._READ_CHUNK, prejudge.PIECE, prejudge.MIN_BYTES = saved
        assert fingerprint(pieces) == fingerprint(whole)
        assert (pieces.uncounted, pieces.host, pieces.bad_lines) == (
            whole.uncounted,
            whole.host,
            whole.bad_lines,
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=hosts())
def test_the_inline_judgement_of_host_events_equals_the_one_that_says_why(steps: Any) -> None:
    """The folds judge a host event as hosts write it inline, and ask engine.read.order._ordered
    (and _routing_order) only otherwise: with the inline path off, every fold is the same."""
    import engine.read.fold as fold

    with tempfile.TemporaryDirectory() as base:
        root = fresh_root(base)
        ws = EngineWorkspace(root)
        now = datetime(2026, 11, 29, 12, tzinfo=UTC)
        live = run_steps(root, steps, State(now=now), ws)
        fast = load(ws, now, cached=False)
        fold._INLINE = False
        try:
            slow = load(ws, now, cached=False)
        finally:
            fold._INLINE = True
        assert fingerprint(fast) == fingerprint(slow)
        assert fast.uncounted == slow.uncounted
        assert fast.host == slow.host
        del live


def test_a_recovery_decision_opening_an_id_that_exists_opens_nothing(tmp_path: Any, monkeypatch: Any) -> None:
    """An obligation id opens once, whichever store opens it (D-185): a signed recovery decision
    naming an existing obligation's id in `opens` (no tool writes one: its id derives from the
    decision's) leaves the routed obligation what the routing record opened; before, the decision
    replaced it in place (its kind, subject and history gone). Since D-290 such a decision counts
    for nothing at all: an id not derived from its own is malformed (chosen ahead of routing, it
    took a routed obligation's place in an incremental fold: an adversarial review)."""
    from engine.trust import signing
    from engine.trust.signing import person_event
    from tests.helpers import NOW, alice_key

    ws = make_workspace(tmp_path)
    ws.run(*report_args(by="alice"), check=True)
    ws.run("signals", "route", check=True)
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    engine_ws = EngineWorkspace(ws.root)
    routed = next(ob for ob in load(engine_ws).obligations.values() if ob.unit == "u1")
    signing.use_key(alice_key())
    try:
        signer = signing.signer_for(engine_ws, "alice")
        event = {"kind": "decision", "unit": "u1", "action": "pause", "by": "alice", "rationale": "r",
                 "resolves": [], "opens": {"id": routed.id, "severity": "blocking", "owedTo": "S3"},
                 "at": NOW}  # fmt: skip
        engine_ws.store("units").append(person_event(engine_ws, signer, event))
    finally:
        signing.use_key(None)
    state = load(engine_ws)
    assert state.units["u1"].status.value == "todo"  # as before it: the decision counts for nothing
    assert any("opens is not the blocking recovery obligation" in u.reason for u in state.uncounted)
    kept = state.obligations[routed.id]
    assert (kept.kind, kept.subject, kept.source) == (routed.kind, routed.subject, routed.source)
    shown = json.loads(ws.run("obligations", "--all", "--json", check=True).stdout)
    assert [o["signal"] for o in shown if o["id"] == routed.id] == [routed.source]


def test_a_decision_that_names_a_pending_obligations_id_takes_nothing_of_it(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """An adversarial review: a signed `pause` whose `opens` named the id a critical signal's
    obligation would get once routed (derivable ahead), at severity info, opened it first in an
    incremental fold; routing's then opened nothing, and a person allowed only info resolved it:
    the unit dispatched while a cold read held it. The fold takes only the id the decision's own
    derives (D-290): that one counts for nothing, and both folds hold the unit by the critical one."""
    from engine.base import ids
    from engine.commands.router import route
    from engine.trust import signing
    from engine.trust.signing import person_event
    from tests.helpers import NOW, alice_key

    ws = make_workspace(tmp_path)
    ws.run(*report_args(by="alice", severity="critical", affects=["u1"]), check=True)
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    engine_ws = EngineWorkspace(ws.root)
    signal_id = next(iter(load(engine_ws).signals))
    taken = ids.obligation_id(signal_id, "u1")
    signing.use_key(alice_key())
    try:
        signer = signing.signer_for(engine_ws, "alice")
        event = {"kind": "decision", "unit": "u1", "action": "pause", "by": "alice", "rationale": "r",
                 "resolves": [], "opens": {"id": taken, "severity": "info", "owedTo": "S3"}, "at": NOW}  # fmt: skip
        engine_ws.store("units").append(person_event(engine_ws, signer, event))
    finally:
        signing.use_key(None)
    before = load(
        engine_ws
    )  # a reader's fold before routing: its checkpoint is what the next read starts from
    assert taken not in before.obligations
    route(engine_ws)
    for state in (load(engine_ws), cold_of(engine_ws, datetime(2026, 11, 29, 12, tzinfo=UTC))):
        ob = state.obligations[taken]
        assert (ob.kind, ob.severity, ob.status, ob.blocks) == ("intelligence", "critical", "open", True)
        assert state.units["u1"].status.value == "todo"
    units = json.loads(ws.run("status", "--json", check=True).stdout)["units"]
    assert next(u for u in units if u["id"] == "u1")["blockedBy"] == [taken]
