"""Bad lines (design §26, issue 28): a line that parses as JSON but is no event is bad for `verify`
and `--once`; a million bad lines cost a count and the first 20, not a line each; a line over
1 MiB is refused on write and read as bad in bounded time and memory. Each command runs as a real
process under a hard timeout and an address-space limit, and must finish with its exit code."""

from __future__ import annotations

import json
import resource
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base import clock, ids
from engine.base.errors import BadInput
from engine.log.store import MAX_LINE, Store, event_hash
from tests.helpers import REGULATOR, Workspace, report_args

LIMIT = 200 << 20  # bytes of address space: less than the 200 MB line, so no command may hold it


def bounded(
    ws: Workspace, *args: str, memory: int = LIMIT, timeout: int = 120
) -> subprocess.CompletedProcess:
    """The real command under a hard timeout (TimeoutExpired fails the test) and a memory limit."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [REGULATOR, *args], cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=timeout,
        preexec_fn=limit,
    )  # fmt: skip


def append_raw(ws: Workspace, store: str, text: str) -> None:
    with open(ws.store(store), "a", encoding="utf-8") as handle:
        handle.write(text)


def chained(ws: Workspace, store: str, event: dict) -> str:
    """The line a writer with the account's shell appends: chained to the store's tail, hashed
    with Python's lenient json (which writes NaN)."""
    prev, _, _ = Store(ws.store(store))._tail()
    event = {**event, "prev": prev}
    event["hash"] = event_hash(event)
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"


def test_a_nan_line_shaped_as_a_disposition_is_a_bad_line_for_verify_and_once(ws: Workspace) -> None:
    line = chained(ws, "signals", {
        "kind": "disposition", "obligation": "01M8KJT9G0XXXXXXXXXXXXXXXX", "disposition": "no-action",
        "by": "alice", "rationale": float("nan"), "at": "2026-11-29T12:00:00Z",
    })  # fmt: skip
    assert "NaN" in line
    append_raw(ws, "signals", line)
    done = bounded(ws, "verify")
    assert done.returncode == 1 and "signals.ndjson:1: not an event line" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr
    once = bounded(ws, "controlroom", "--once")
    assert once.returncode == 1 and "verify: signals.ndjson:1: not an event line" in once.stdout
    assert "1 bad line(s)" in once.stdout
    # the line still carries the chain: the next append verifies after it
    ws.run("signals", "report", "--by", "alice", "--subject", "s", "--claim", "c", "--observation", "o",
           "--evidence", "e", "--confidence", "low", "--severity", "info", check=True)  # fmt: skip
    findings = [line for line in bounded(ws, "verify").stdout.splitlines() if line.startswith("signals")]
    assert len(findings) == 1 and findings[0].startswith("signals.ndjson:1:"), findings


def test_a_number_out_of_range_is_a_bad_line_for_verify_and_once_and_judged_no_further(
    ws: Workspace,
) -> None:
    """`1e400` is refused by every reader's decoder (out of a float's range): verify and --once
    name the line as they name a NaN line, and judge neither its time nor the next line's time
    against it (found by an adversarial review: verify said ok while readers skipped the line)."""
    event = {"kind": "memory", "id": "M-out-of-range", "subject": "s", "note": "n", "evidence": [],
             "reviewBy": "2026-12-20", "scope": [], "unit": "u1", "at": "2031-01-01T00:00:00Z",
             "pad": float("inf")}  # fmt: skip
    line = chained(ws, "memory", event).replace("Infinity", "1e400")
    assert "1e400" in line
    append_raw(ws, "memory", line)
    done = bounded(ws, "verify")
    assert done.returncode == 1 and "memory.ndjson:1: not an event line" in done.stdout, done.stdout
    assert "2031" not in done.stdout  # its time is not judged: no reader reads the line
    once = bounded(ws, "controlroom", "--once")
    assert once.returncode == 1 and "verify: memory.ndjson:1: not an event line" in once.stdout


def test_a_million_bad_lines_print_a_count_and_the_first_20(ws: Workspace) -> None:
    append_raw(ws, "signals", "x\n" * 1_000_000)
    done = bounded(ws, "verify", memory=1 << 30)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert len([line for line in lines if line.startswith("signals.ndjson:")]) == 21, lines[:30]
    assert "and 999980 more unreadable line(s) from here" in done.stdout
    once = bounded(ws, "controlroom", "--once", memory=1 << 30)
    assert once.returncode == 1 and len(once.stdout) < 200_000 and len(once.stderr) < 10_000
    assert "1000000 bad line(s)" in once.stdout
    status = bounded(ws, "status", memory=1 << 30)
    warnings = status.stderr.splitlines()
    assert status.returncode == 0 and len(warnings) == 21, warnings[-3:]
    assert "and 999980 more bad line(s) skipped" in warnings[-1]


def test_a_line_over_1_mib_is_refused_on_write(ws: Workspace) -> None:
    clock.configure(True)
    store = Store(ws.store("signals"))
    before = ws.store("signals").read_bytes()
    with pytest.raises(BadInput, match="over the limit of 1,048,576 bytes"):
        store.append({"kind": "note", "text": "a" * MAX_LINE, "at": "2026-11-29T12:00:00Z"})
    assert ws.store("signals").read_bytes() == before


@pytest.mark.parametrize("newline", [True, False], ids=["ended", "torn"])
def test_a_200_mb_line_is_read_as_bad_in_bounded_time_and_memory(ws: Workspace, newline: bool) -> None:
    with open(ws.store("signals"), "ab") as handle:
        block = b"a" * (1 << 20)
        for _ in range(200):
            handle.write(block)
        if newline:
            handle.write(b"\n")
    status = bounded(ws, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert "longer than 1048576 bytes" in status.stderr and "Traceback" not in status.stderr
    verify = bounded(ws, "verify")
    assert verify.returncode == 1 and "signals.ndjson:1:" in verify.stdout, verify.stderr
    if not newline:
        return  # torn: read as bad by every reader (above); the rest is the ended line's
    once = bounded(ws, "controlroom", "--once")
    assert once.returncode == 1 and "1 bad line(s)" in once.stdout, once.stderr[-2000:]
    # the store still takes appends, chained past it
    report = ["signals", "report", "--by", "alice", "--subject", "s", "--claim", "c", "--observation", "o",
              "--evidence", "e", "--confidence", "low", "--severity", "info"]  # fmt: skip
    assert bounded(ws, *report).returncode == 0
    assert "s" in [s["subject"] for s in json.loads(bounded(ws, "signals", "--json").stdout)]


@pytest.mark.parametrize("junk", ["1e999", "1" * 5000], ids=["1e999", "5000 digits"])
def test_a_signal_whose_skipped_field_is_out_of_range_is_noted_and_blocks_no_routing(
    ws: Workspace, junk: str
) -> None:
    """A signal line appended by hand with a number out of range in a field the fold does not
    build (msgspec's shape skips it unlooked-at; a whole decode refuses it): the fold counts the
    signal, its line does not read back whole. Before D-184 `status`, `signals route` and
    `controlroom --once` died on it with a traceback, and routing stopped for every later signal.
    Now it is routed as noted (raising nothing), named by its id, and verify names the line,
    not the host's routing record of it."""
    event = {"kind": "signal", "id": "sx1", "subject": "hand", "reportedSeverity": "blocking",
             "affectedUnits": ["u1"], "unit": None, "by": None, "at": "2026-11-29T12:00:00Z",
             "pad": float("inf")}  # fmt: skip
    line = chained(ws, "signals", event).replace("Infinity", junk)
    assert junk in line
    append_raw(ws, "signals", line)
    status = bounded(ws, "status", "--json")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr[-800:]
    assert json.loads(status.stdout)["unroutedSignals"] == [{"id": "sx1", "subject": None}]
    routed = bounded(ws, "signals", "route")
    assert routed.returncode == 0 and "routed 1 signal(s)" in routed.stdout, routed.stderr[-800:]
    ws.run(*report_args(by="alice"), check=True)  # a later signal is routed as ever
    assert "routed 1 signal(s)" in bounded(ws, "signals", "route").stdout
    after = json.loads(bounded(ws, "status", "--json").stdout)
    assert after["unrouted"] == 0
    assert [u["held"] for u in after["units"] if u["id"] == "u1"] == [True]  # by the later signal only
    done = bounded(ws, "verify")
    named = [line for line in done.stdout.splitlines() if line.startswith("signals.ndjson:")]
    assert done.returncode == 1 and len(named) == 1, done.stdout  # the line, not the routing record
    assert named[0].startswith(("signals.ndjson:1: not an event line", "signals.ndjson:1: unreadable line"))
    once = bounded(ws, "controlroom", "--once", "--json")
    assert once.returncode == 1 and "Traceback" not in once.stderr, once.stderr[-800:]
    rows = {row["id"]: row for row in json.loads(once.stdout)["signals"]}
    assert rows["sx1"]["outcome"] == "noted" and rows["sx1"]["subject"] is None
    assert not [o for o in json.loads(once.stdout)["obligations"] if o["signal"] == "sx1"]


# ---- fields of a type no writer gives them (an adversarial review, 2026-12-04) ----------------------


def hand_dispatch(ws: Workspace, unit: str, **more: object) -> None:
    """A dispatch appended by a unit with the account's shell, `seen` as a host writes it (so the
    order rule counts it), its fields as given."""
    seen = {name: ws.store(name).stat().st_size for name in ("signals", "memory", "identity")}
    event = {"kind": "dispatch", "unit": unit, "leaseHash": "h" * 64, "worktree": None, "type": "implement",
             "profile": "implement", "at": "2026-11-29T12:00:00Z", "seen": seen, **more}  # fmt: skip
    append_raw(ws, "units", chained(ws, "units", event))


@pytest.mark.parametrize(
    "bad", [{"ttl": 10**30}, {"ttl": -5}, {"leaseHash": {"x": 1}}], ids=["ttl", "negative", "hash"]
)
def test_one_dispatch_with_a_field_of_another_type_does_not_stop_the_lease_duty(
    ws: Workspace, bad: dict
) -> None:
    """u3's lease is past its time; u1's dispatch, written by hand, has a ttl no timedelta holds or a
    lease hash that is an object. The duty expired nothing for any unit, every tick ("failed"); now
    u1's lease never expires (no time a host wrote: fail closed) and u3's expires."""
    hand_dispatch(ws, "u3", expiresAt="2026-11-29T11:00:00Z", ttl=0)
    hand_dispatch(ws, "u1", **{"expiresAt": "2026-11-29T12:01:00Z", "ttl": 60, **bad})
    tick = bounded(ws, "serve", "--once-tick")
    assert tick.returncode == 0 and '"failed"' not in tick.stdout + tick.stderr, tick.stdout + tick.stderr
    units = {u["id"]: u["status"] for u in json.loads(bounded(ws, "status", "--json").stdout)["units"]}
    assert units["u3"] == "lost" and units["u1"] == "in-progress"


@pytest.mark.parametrize("worktree", [5, ["a"]], ids=["number", "list"])
def test_a_dispatch_whose_worktree_is_not_text_is_closed_and_demoted_cleanly(
    ws: Workspace, worktree: object
) -> None:
    """`unit close` appended its close, then died removing a lease file at root / 5 (exit 1 after
    the write); the fold now keeps a worktree, type and profile only as text."""
    hand_dispatch(ws, "u1", worktree=worktree, profile=["implement"])
    done = bounded(ws, "unit", "close", "u1")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-800:]
    hand_dispatch(ws, "u3", worktree=worktree)
    done = bounded(ws, "unit", "demote", "u3", "--by", "alice", "--rationale", "x")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-800:]


@pytest.mark.parametrize("at", [None, 5], ids=["absent", "number"])
def test_a_memory_entry_without_a_text_time_is_malformed_and_every_context_still_builds(
    ws: Workspace, at: object
) -> None:
    """`context` (what every unit receives at start) orders entries by `at`: one entry without it
    made `context` die for every unit. It is now malformed: counted for nothing, named by verify."""
    good: dict[str, object] = {"kind": "memory", "id": "m0", "unit": "u1", "subject": "kept", "note": "n", "reviewBy": "2026-12-20",
            "scope": [], "evidence": [], "at": "2026-11-29T12:00:00Z"}  # fmt: skip
    append_raw(ws, "memory", chained(ws, "memory", good))
    bad: dict[str, object] = {**good, "id": "m1", "subject": "odd"}
    if at is None:
        del bad["at"]
    else:
        bad["at"] = at
    append_raw(ws, "memory", chained(ws, "memory", bad))
    for unit in ("u1", "u3"):
        done = bounded(ws, "context", unit)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-800:]
    assert "kept" in bounded(ws, "context", "u1").stdout
    found = bounded(ws, "verify")
    assert found.returncode == 1 and "memory.ndjson:2: event malformed: at is not text" in found.stdout


HAND_SIGNAL = {"kind": "signal", "id": "s-hand", "subject": "hand", "claim": "c", "observation": "o",
               "reportedSeverity": "blocking", "affectedUnits": ["u3"], "unit": "r1", "by": None,
               "evidence": [1, 2], "confidence": "high", "observedAt": "2026-11-29T12:00:00Z"}  # fmt: skip


@pytest.mark.parametrize(
    "odd", [{"evidence": [1, 2]}, {"at": None}, {"confidence": None}], ids=["evidence", "at", "confidence"]
)
def test_obligation_show_reads_a_hand_written_signal_as_the_raw_values_it_holds(
    ws: Workspace, odd: dict
) -> None:
    """A signal the router routes (its routed fields are fine) with evidence that is not text, or
    no `at` or `confidence`: `obligation show` died with a KeyError or TypeError; now it prints
    each field as the raw value it holds, escaped."""
    event = {**HAND_SIGNAL, "at": "2026-11-29T12:00:00Z", **odd}
    append_raw(
        ws, "signals", chained(ws, "signals", {k: v for k, v in event.items() if v is not None or k == "by"})
    )
    assert "routed 1 signal(s)" in bounded(ws, "signals", "route").stdout
    (ob,) = json.loads(bounded(ws, "obligations", "--json").stdout)
    done = bounded(ws, "obligation", "show", ob["id"])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-800:]
    assert "subject: hand" in done.stdout
    if "evidence" in odd:
        assert "evidence: 1, 2" in done.stdout


def lifecycle_in_room(ws: Workspace, view: str, row: str | None = None) -> list[str]:
    """Under Pilot: the room on `ws` at REGULATOR_NOW, view `view` (its key), the cursor on `row` (a
    row's key; the first row when None), Enter: the lifecycle's lines as the room shows them."""
    from controlroom.app import ControlRoom
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from tests.room import run as room_run

    app = ControlRoom(EngineWorkspace(ws.root), "alice", watch=False)
    seen: list[str] = []

    async def script(pilot: object) -> None:
        await pilot.press(view)  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        for _ in range(0 if row is None else list(app.table.keys).index(row)):
            await pilot.press("down")  # type: ignore[attr-defined]
        await pilot.press("enter")  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]
        seen.extend(getattr(app.screen, "lines", []))

    room_run(app, script)
    return seen


def test_the_room_opens_a_hand_written_signal_row_and_goes_on(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under Pilot: Enter on the signals row of a routed hand-written signal whose evidence is
    [1, 2] raised a TypeError out of the room (the detail pane draws on highlight, so moving the
    cursor there was enough); now its lifecycle shows the values as they are."""
    append_raw(ws, "signals", chained(ws, "signals", {**HAND_SIGNAL, "at": "2026-11-29T12:00:00Z"}))
    assert bounded(ws, "signals", "route").returncode == 0
    monkeypatch.setenv("REGULATOR_NOW", "2026-11-29T12:00:00Z")
    lines = lifecycle_in_room(ws, "4")
    assert "  evidence: 1; 2" in lines, lines


@pytest.mark.parametrize("junk", ["1e999", "9" * 5000], ids=["1e999", "5000 digits"])
def test_a_forged_routing_record_the_fold_reads_is_named_forged_not_skipped(ws: Workspace, junk: str) -> None:
    """A routing record appended by a unit before the router ran, opening nothing, with a number
    out of range where the fold's shape does not look: the fold obeys it (the signal is routed,
    nothing holds), so verify must not say every reader skips it: it names the line as one the
    fold reads and no writer wrote."""
    ws.run(*report_args(by="alice"), check=True)
    signal = json.loads(ws.store("signals").read_text().splitlines()[-1])["id"]
    seen = {name: ws.store(name).stat().st_size for name in ("units", "memory", "identity")}
    forged = {"kind": "routing", "signal": signal, "reportedSeverity": "blocking", "derivedSeverity": "blocking",
              "floors": [], "obligations": [], "at": "2026-11-29T12:00:00Z", "outcome": "noted", "reason": "r",
              "seen": seen, "pad": float("inf")}  # fmt: skip
    append_raw(ws, "signals", chained(ws, "signals", forged).replace("Infinity", junk))
    assert json.loads(bounded(ws, "status", "--json").stdout)["unrouted"] == 0  # the fold obeys it
    done = bounded(ws, "verify")
    (named,) = [line for line in done.stdout.splitlines() if line.startswith("signals.ndjson:2:")]
    assert done.returncode == 1 and "readers skip it" not in named and "no writer wrote it (forged?)" in named


# ---- a second adversarial review (2026-12-04): lines that stopped a duty or the whole fold --------------

LATER = {
    "REGULATOR_NOW": "2026-12-20T12:00:00Z"
}  # 21 days on: every blocking obligation is past its deadline


def signed_line(ws: Workspace, store: str, event: dict) -> None:
    """A person event signed with alice's key (a person, or whoever holds her key, wrote it by hand)."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.trust import signing
    from tests.helpers import alice_key

    signing.use_key(alice_key())
    try:
        engine_ws = EngineWorkspace(ws.root)
        made = signing.person_event(engine_ws, signing.signer_for(engine_ws, "alice"), event)
    finally:
        signing.use_key(None)
    append_raw(ws, store, chained(ws, store, made))


def deadline_marks(ws: Workspace) -> int:
    return sum(
        json.loads(line)["kind"] in ("overdue", "deadline-escalated")
        for line in ws.store("signals").read_text().splitlines()
    )


@pytest.mark.parametrize("at", [None, "x", 5], ids=["absent", "not a time", "number"])
def test_an_obligation_opened_without_a_time_stops_no_deadline_and_no_reader(
    ws: Workspace, at: object
) -> None:
    """A routing record appended before the router, its `at` absent or no time: its obligation's
    opening time was None or "x", and the deadline duty failed on every tick for every obligation
    (nothing overdue, nothing escalated), `obligations` and `--once` died. Now its time is text, it
    is never judged overdue (no time to judge), and every other obligation is."""
    ws.run(*report_args(by="alice"), check=True)
    ws.run("signals", "route", check=True)
    signal = {"kind": "signal", "id": "s1", "subject": "hand", "claim": "c", "observation": "o", "evidence": ["e"],
              "confidence": "high", "reportedSeverity": "blocking", "affectedUnits": ["u3"], "unit": "r1", "by": None,
              "at": "2026-11-29T12:00:00Z"}  # fmt: skip
    append_raw(ws, "signals", chained(ws, "signals", signal))
    seen = {name: ws.store(name).stat().st_size for name in ("units", "memory", "identity")}
    routing = {"kind": "routing", "signal": "s1", "reportedSeverity": "blocking", "derivedSeverity": "blocking",
               "floors": [], "outcome": "obligations", "reason": "r", "seen": seen, "at": at,
               "obligations": [{"id": "ob1", "unit": "u3", "severity": "blocking", "blocks": True, "owedTo": "S3"}]}  # fmt: skip
    append_raw(ws, "signals", chained(ws, "signals", {k: v for k, v in routing.items() if v is not None}))
    tick = ws.run("serve", "--once-tick", env=LATER)
    assert tick.returncode == 0 and '"failed"' not in tick.stdout + tick.stderr, (tick.stdout + tick.stderr)[
        -800:
    ]
    assert deadline_marks(ws) >= 2  # the routed obligation's overdue and escalation
    for args in (["obligations", "--all"], ["obligations", "--json"], ["controlroom", "--once", "--json"]):
        done = ws.run(*args, env=LATER)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (args, done.stderr[-800:])


@pytest.mark.parametrize(
    "odd",
    [
        {"resolves": 5},
        {"resolves": [[1]]},
        {"opens": [1]},
        {"opens": {"severity": "blocking"}},
        {"action": "zzz"},
    ],
    ids=["resolves number", "resolves nested", "opens list", "opens without id", "no action"],
)
def test_a_signed_decision_of_another_shape_is_malformed_not_the_end_of_every_read(
    ws: Workspace, odd: dict
) -> None:
    """A recovery decision signed with a person's key but shaped as `unit decide` never writes it:
    the fold died on it (`for ob_id in event.resolves`), so did every command and duty, `verify`
    included, which could not even name it. Now it counts for nothing and verify names it."""
    decision = {"kind": "decision", "unit": "u1", "action": "pause", "by": "alice", "rationale": "r", "resolves": [],
                "disposition": "escalated", "opens": None, "at": "2026-11-29T12:00:00Z", **odd}  # fmt: skip
    signed_line(ws, "units", decision)
    assert ws.run("status", "--json", check=True).returncode == 0
    found = bounded(ws, "verify")
    assert found.returncode == 1 and "units.ndjson:1: event malformed:" in found.stdout, (
        found.stdout + found.stderr
    )


@pytest.mark.parametrize("store", ["signals", "units"])
@pytest.mark.parametrize("kind", [[1], {"a": 1}], ids=["list", "object"])
def test_a_line_whose_kind_is_a_list_or_an_object_is_malformed_not_the_end_of_every_read(
    ws: Workspace, store: str, kind: object
) -> None:
    """A well-chained line whose `kind` is a list or an object (anyone with the account's shell can
    append one): the fold asked a set whether it held it, and every read command and `verify` died
    with a traceback (an adversarial review). Now it counts for nothing and verify names it."""
    append_raw(ws, store, chained(ws, store, {"kind": kind, "unit": "u1", "at": "2026-11-29T12:00:00Z"}))
    for args in (["status", "--json"], ["obligations", "--json"], ["controlroom", "--once", "--json"]):
        done = bounded(ws, *args)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (args, done.stderr[-800:])
        json.loads(done.stdout)
    found = bounded(ws, "verify")
    assert found.returncode == 1, found.stdout + found.stderr
    assert (
        f"{store}.ndjson:1: event malformed: fields of the wrong type; it counts for nothing" in found.stdout
    )


def test_the_room_shows_a_unit_line_whose_kind_is_a_list_for_what_it_is(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under Pilot: the units view's lifecycle of u1, behind which a unit appended a line whose
    kind is a list, opens and shows that line as counting for nothing."""
    append_raw(ws, "units", chained(ws, "units", {"kind": [1], "unit": "u1", "at": "2026-11-29T12:00:00Z"}))
    monkeypatch.setenv("REGULATOR_NOW", "2026-11-29T12:00:00Z")
    lines = lifecycle_in_room(ws, "2", "u1")
    said = "2026-11-29T12:00:00Z [1] by : COUNTS FOR NOTHING (malformed: fields of the wrong type)"
    assert said in lines, lines


def test_a_signed_disposition_no_person_writes_closes_nothing(ws: Workspace) -> None:
    """A disposition signed by alice with no `disposition`, or one no person writes: it closed a
    blocking obligation (and `obligation show` then died on it). Now it counts for nothing, as
    `obligation resolve` refuses it (engine.read.rules.disposing, the one rule both ask)."""
    ws.run(*report_args(by="alice"), check=True)
    ws.run("signals", "route", check=True)
    held = [o["id"] for o in json.loads(ws.run("obligations", "--json", check=True).stdout)]
    for value in (None, "zzz"):
        event = {"kind": "disposition", "obligation": held[0], "by": "alice", "rationale": "r", "at": "2026-11-29T12:00:00Z",
                 **({"disposition": value} if value else {})}  # fmt: skip
        signed_line(ws, "signals", event)
    still = [o["id"] for o in json.loads(ws.run("obligations", "--json", check=True).stdout)]
    assert still == held
    shown = bounded(ws, "obligation", "show", held[0])
    assert shown.returncode == 0 and "not a disposition a person writes" in shown.stdout, (
        shown.stdout + shown.stderr
    )


@pytest.mark.parametrize("at", ["9000-01-01T00:00:00Z", "9999-12-31T23:59:59Z"], ids=["far", "last second"])
def test_a_sensor_run_stamped_in_the_future_silences_no_sensor(ws: Workspace, at: str) -> None:
    """A `sensor-run` appended by hand, stamped far ahead: the sensor was never due again (or the
    sensors duty failed on the date's overflow). A last run later than now is no time a host writes:
    the sensor runs when its time comes, as if it had not."""
    ws.decide("regulator/policy/sensors.yaml", 'sensors:\n  scan:\n    kind: command\n    command: ["/bin/true"]\n'
              "    every: 1h\n    severity: advisory\n    timeout: 10s\n")  # fmt: skip
    append_raw(
        ws,
        "signals",
        chained(ws, "signals", {"id": "sr-forged", "kind": "sensor-run", "sensor": "scan", "at": at}),
    )
    tick = ws.run("serve", "--once-tick", env=LATER)
    assert tick.returncode == 0 and "1 of 1 sensor(s) ran" in tick.stdout + tick.stderr, (
        tick.stdout + tick.stderr
    )[-800:]


def test_the_room_says_a_line_behind_a_row_is_not_one_regulator_wrote(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close appended by hand without `at`: the unit's lifecycle said "gone: the row changed
    under the cursor" (a KeyError taken for a row that left); the row is there, so it says the
    line behind it is not one regulator wrote."""
    from controlroom.app import ControlRoom
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from tests.room import run as room_run

    hand_dispatch(ws, "u1")
    seen = {name: ws.store(name).stat().st_size for name in ("signals", "memory", "identity")}
    append_raw(ws, "units", chained(ws, "units", {"kind": "close", "unit": "u1", "seen": seen}))
    monkeypatch.setenv("REGULATOR_NOW", "2026-11-29T12:00:00Z")
    app = ControlRoom(EngineWorkspace(ws.root), "alice", watch=False)
    seen_lines: list[str] = []

    async def script(pilot: object) -> None:
        for key in ("2", "down", "down", "enter"):  # units: b1, r1, u1
            await pilot.press(key)  # type: ignore[attr-defined]
            await pilot.pause()  # type: ignore[attr-defined]
        seen_lines.extend(getattr(app.screen, "lines", []))

    room_run(app, script)
    assert seen_lines and "not one regulator wrote" in seen_lines[0], seen_lines


@pytest.mark.parametrize("forged", ["early", "on a unit"])
def test_a_forged_evidence_expired_marks_nothing_stale_and_holds_no_unit(ws: Workspace, forged: str) -> None:
    """An `evidence-expired` appended by a unit: before the signal's evidence expired, or opening
    a critical blocking recheck obligation on a unit of its choosing (no host writes either: the
    timed duty writes one once the evidence expired, its recheck obligation on no unit). It held
    u3 and verify said ok; now it counts for nothing and verify names it."""
    ws.run(*report_args(by="alice", expires_at="2026-12-10T00:00:00Z"), check=True)
    ws.run("signals", "route", check=True)
    routed = json.loads(ws.store("signals").read_text().splitlines()[-1])
    signal, obligations = routed["signal"], [o["id"] for o in routed["obligations"]]
    from engine.base import ids

    event = {"id": "ee-forged", "kind": "evidence-expired", "signal": signal, "obligations": obligations,
             "opens": {"id": ids.recheck_obligation_id(signal), "unit": None, "severity": "advisory", "blocks": False,
                       "owedTo": "S3"},
             "at": "2026-11-29T12:00:00Z" if forged == "early" else "2026-12-11T00:00:00Z"}  # fmt: skip
    if forged == "on a unit":
        event["opens"] = {"id": "rc1", "unit": "u3", "severity": "critical", "blocks": True, "owedTo": "S3"}
    append_raw(ws, "signals", chained(ws, "signals", event))
    status = json.loads(ws.run("status", "--json", env=LATER, check=True).stdout)
    assert not [u for u in status["units"] if "rc1" in u["blockedBy"]]
    shown = json.loads(ws.run("obligations", "--all", "--json", env=LATER, check=True).stdout)
    assert not [o for o in shown if o["id"] == "rc1" or o.get("evidenceExpired")]
    found = bounded(ws, "verify")
    assert found.returncode == 1 and "evidence-expired" in found.stdout and "forged?" in found.stdout, (
        found.stdout
    )


PAGE = {"notify": {"sent": False, "problem": "forged: page by hand"}}  # what a failed page records (D-315)


def test_a_deadline_mark_forged_before_the_deadline_stops_no_escalation(ws: Workspace) -> None:
    """`overdue` and `deadline-escalated` appended by a unit before its obligation was due: they
    counted, so the deadline duty never escalated it (nor ran `notify`) when the deadline passed.
    A mark counts only at or after the deadline of the policy then in force; the real one is
    written when it is due, and verify names the forged ones."""
    ws.run(*report_args(by="alice"), check=True)
    ws.run("signals", "route", check=True)
    (ob,) = [
        o["id"] for o in json.loads(ws.run("obligations", "--json", check=True).stdout) if o["unit"] == "u1"
    ]
    for kind, mark in (("overdue", "od-forged"), ("deadline-escalated", "de-forged")):
        append_raw(
            ws,
            "signals",
            chained(
                ws,
                "signals",
                {"id": mark, "kind": kind, "obligation": ob, "at": "2026-11-29T12:00:00Z"} | PAGE,
            ),
        )
    # counting for nothing, the forged escalation's failed page marks nothing (D-315)
    assert all(o["notPaged"] is None for o in json.loads(ws.run("obligations", "--json").stdout))
    tick = ws.run("serve", "--once-tick", env=LATER)
    assert tick.returncode == 0, tick.stderr[-800:]
    marks = [json.loads(line) for line in ws.store("signals").read_text().splitlines()]
    escalated = [m["at"] for m in marks if m["kind"] == "deadline-escalated" and m["obligation"] == ob]
    assert escalated == ["2026-11-29T12:00:00Z", LATER["REGULATOR_NOW"]]  # the forged one, then the duty's
    found = bounded(ws, "verify")
    assert found.returncode == 1 and "before its obligation was due" in found.stdout, found.stdout


def test_a_deadline_mark_forged_for_a_recovery_obligation_is_judged_when_it_opens(ws: Workspace) -> None:
    """The same forgery for a recovery obligation, which units.ndjson opens (a failed run's): a
    cold read folds signals.ndjson first, so the marks wait for their obligation and are judged
    when it opens; the duty still escalates it when it is due."""
    hand_dispatch(ws, "u1")
    seen = {name: ws.store(name).stat().st_size for name in ("signals", "memory", "identity")}
    rec1 = ids.recovery_obligation_id("res1", "u1")  # the id the engine derives (D-290)
    result = {"kind": "result", "unit": "u1", "id": "res1", "leaseHash": "h" * 64, "outcome": "failed", "summary": "s",
              "by": "host", "exitCode": 1, "durationS": 3, "opens": {"id": rec1, "severity": "advisory"},
              "at": "2026-11-29T12:00:00Z", "seen": seen}  # fmt: skip
    append_raw(ws, "units", chained(ws, "units", result))
    for kind, mark in (("overdue", "od-forged"), ("deadline-escalated", "de-forged")):
        append_raw(
            ws,
            "signals",
            chained(
                ws,
                "signals",
                {"id": mark, "kind": kind, "obligation": rec1, "at": "2026-11-29T12:00:00Z"} | PAGE,
            ),
        )
    (row,) = [o for o in json.loads(ws.run("obligations", "--json").stdout) if o["id"] == rec1]
    assert row["notPaged"] is None  # judged when its obligation opened: forged, it marks nothing
    tick = ws.run("serve", "--once-tick", env=LATER)
    assert tick.returncode == 0, tick.stderr[-800:]
    marks = [json.loads(line) for line in ws.store("signals").read_text().splitlines()]
    escalated = [m["at"] for m in marks if m["kind"] == "deadline-escalated" and m["obligation"] == rec1]
    assert escalated == ["2026-11-29T12:00:00Z", LATER["REGULATOR_NOW"]]
    found = bounded(ws, "verify")
    assert found.returncode == 1 and "before its obligation was due" in found.stdout, found.stdout


def _deep_line(prev: str, event: dict, levels: int) -> str:
    """A signal line whose `pad` nests `levels` brackets deep, chained to `prev` as a writer with
    the account's shell would chain it (hashed over its canonical text, built around the pad so
    that no encoder here recurses `levels` deep)."""
    import hashlib

    from engine.log.store import canonical

    body = canonical({**event, "pad": "PAD", "prev": prev}).replace(b'"PAD"', b"[" * levels + b"]" * levels)
    digest = hashlib.sha256(body).hexdigest()
    return body[:-1].decode() + f',"hash":"{digest}"}}\n'


@pytest.mark.parametrize("levels", [700, 975, 978, 990])
def test_a_line_nested_too_deep_is_refused_by_every_reader_alike(ws: Workspace, levels: int) -> None:
    """A line nested close to Python's recursion limit was read by one reader and refused by
    another (each reader's own call depth counts toward it): the router chained its routing record
    past it or not, verify judged otherwise and called the host's own line a broken chain, and
    --once showed its fields (found by the adversarial review of D-203). Every reader now refuses a
    line nested deeper than 500 levels (D-204): verify names it, the host chains past it as verify
    does, and no reader counts it."""
    from engine.log.lines import MAX_DEPTH

    ws.run(*report_args(subject="ordinary", by="alice", severity="info"), check=True)
    ws.run("signals", "route", check=True)
    tail = json.loads(ws.store("signals").read_bytes().splitlines()[-1])["hash"]
    event = {"kind": "signal", "id": "01DEEPDEEPDEEPDEEPDEEPDEEP", "subject": "deep", "reportedSeverity": "blocking",
             "affectedUnits": ["u1"], "unit": None, "by": None, "at": "2026-11-29T12:00:00Z"}  # fmt: skip
    append_raw(ws, "signals", _deep_line(tail, event, levels))
    # the appender reads the tail (the deep line), and the router routes what the fold counts
    ws.run(*report_args(subject="after the deep line", by="alice", severity="info"), check=True)
    ws.run("signals", "route", check=True)
    done = ws.run("verify", "--json")
    findings = [f for f in json.loads(done.stdout)["findings"] if f["store"] == "signals.ndjson"]
    assert done.returncode == 1
    assert [f["message"] for f in findings] == [
        f"unreadable line (nested deeper than {MAX_DEPTH} levels: not an event line); readers skip it"
    ], findings
    once = ws.run("controlroom", "--once", "--json")
    document = json.loads(once.stdout)
    assert once.returncode == 1 and "01DEEPDEEPDEEPDEEPDEEPDEEP" not in {r["id"] for r in document["signals"]}
    assert {r["subject"] for r in document["signals"]} >= {"ordinary", "after the deep line"}
    assert not any(o["signal"] == "01DEEPDEEPDEEPDEEPDEEPDEEP" for o in document["obligations"])


def test_a_writer_never_writes_a_line_nested_too_deep() -> None:
    """What no reader reads, no writer writes: the one line writer refuses it, exit 2's BadInput,
    however deep the caller's own stack (json's encoder recursing is caught too)."""
    from engine.log.lines import MAX_DEPTH
    from engine.log.store import line_text

    nested: object = "x"
    for _ in range(MAX_DEPTH):
        nested = [nested]
    with pytest.raises(BadInput, match=f"nested deeper than {MAX_DEPTH} levels"):
        line_text("signals", {"kind": "signal", "pad": nested})
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(BadInput, match="nothing written"):
        line_text("signals", {"kind": "signal", "pad": nested})
    assert line_text("signals", {"kind": "signal", "pad": [[["shallow"]]]}).startswith('{"kind"')


_JSON_TEXT = st.text(st.sampled_from('ab"\\[]{}\u005b'), max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), _JSON_TEXT), min_size=1, max_size=3), st.integers(1, 540), _JSON_TEXT
)
def test_the_depth_rule_is_the_depth_of_the_value(shape: list, levels: int, leaf: str) -> None:
    """`too_deep` (text taken out, brackets summed) says of a line what the depth of the value it
    holds says, whatever its strings hold (quotes, backslashes, brackets, escapes)."""
    from engine.log.lines import DEEP_BYTES, MAX_DEPTH, too_deep

    value: object = leaf
    for k in range(levels):
        as_list, text = shape[k % len(shape)]
        value = [text, value] if as_list else {text: value, "pad": text}
    for raw in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode()):
        assert too_deep(raw) == (levels > MAX_DEPTH), (levels, len(raw) > DEEP_BYTES)


def test_the_depth_rule_reads_a_line_once(ws: Workspace) -> None:
    """A line of 1 MiB that opens 501 brackets and then an unterminated string of `\\"` pairs
    (the adversarial review of D-204: a pattern that needed the string's closing quote searched
    to the end of the line from each of its 500,000 quotes, for hours, under the appender's lock):
    the text is taken out in one match, and the appender, the fold and verify read past the line."""
    from engine.log.lines import _TEXT, too_deep

    line = b'{"a":[' + b"[" * 501 + b'"' + b'\\"' * 520_000
    assert len(_TEXT.findall(line)) == 2 and too_deep(line)  # the key "a", then the rest in one
    with open(ws.store("signals"), "ab") as handle:
        handle.write(line + b"\n")
    ws.run(*report_args(subject="after", by="alice", severity="info"), check=True)  # the tail read
    assert "after" in {s["subject"] for s in ws.json("signals", "--json")}
    done = ws.run("verify", "--json")
    assert done.returncode == 1 and "nested deeper than 500 levels" in done.stdout
