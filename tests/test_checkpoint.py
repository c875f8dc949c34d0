"""The checkpoint of the read models: starting from it must give exactly what reading the log gives.

In-process (hypothesis): random logs written with the engine's own Store, cut at a random point,
checkpointed there, then grown; the state loaded through the checkpoint must equal a cold fold.
End to end: the real command, with a checkpoint that holds, one whose store was replaced or edited,
and one that is garbage.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import marshal
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base import ids
from engine.checkout.workspace import Workspace
from engine.log.store import Store
from engine.read import checkpoint
from engine.read.load import load
from engine.read.queries import history
from tests import helpers
from tests.helpers import report_args

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
UNITS = ["u1", "u2", "u3"]
STORES = ("signals", "units", "memory", "identity")


def fingerprint(state: Any) -> dict:
    """Everything a view or command can read from the state, events resolved."""
    return {
        "obligations": {
            k: tuple(getattr(ob, name) for name in ob.__struct_fields__ if name != "history")
            + (history(state, ob),)
            for k, ob in state.obligations.items()
        },
        "units": {
            k: (u.contract, u.status, u.lease, u.worktree, u.recovery, history(state, u))
            for k, u in state.units.items()
        },
        "memory": {k: (e.event, e.retraction) for k, e in state.memory.items()},
        "signals": dict(state.signals.items()),
        "routings": dict(state.routings.items()),
        "unrouted": list(state.unrouted_ids),
        "proposals": state.proposals,
        "decisions": state.decisions,
        "pending": {k: [(c.status, c.disposition) for c in v] for k, v in state.pending.items()},
        "problems": [str(p) for p in state.problems],
        "contract_problems": state.contract_problems,
        "cursors": {k: (c.offset, c.line) for k, c in state.cursors.items()},
    }


@st.composite
def events(draw: Any) -> Any:
    """(store, event or raw garbage line) in log order, as the engine would write them: a signal id
    is unique, an obligation is closed at most once and only after it was opened (the engine
    checks both under its lock), a second router's duplicate routing record may appear, and time
    moves forward across the stores (a host stamps each line as it writes it: the fold orders a
    unit's dispatch or close after the obligations that held it by their times, engine.read.vetoes.host_veto)."""
    out = []
    signals: list[str] = []
    open_obs: dict[str, str] = {}  # obligation id -> unit
    for n in range(draw(st.integers(0, 40))):
        kind = draw(
            st.sampled_from(
                ["signal", "routing", "disposition", "decision", "dispatch", "close", "demote",
                 "memory", "retraction", "proposal", "garbage"]
            )
        )  # fmt: skip
        unit = draw(st.sampled_from(UNITS))
        at = f"2026-11-29T08:{n:02d}:00Z"
        if kind == "signal":
            expires = draw(st.sampled_from([None, "2026-11-01T00:00:00Z", "2027-01-01T00:00:00+02:00"]))
            signals.append(f"s{n}")
            event = {"kind": "signal", "id": f"s{n}", "subject": f"subject {n}", "affectedUnits": [unit],
                     "expiresAt": expires, "at": at}  # fmt: skip
            out.append(("signals", event))
        elif kind == "routing" and signals:
            signal = draw(st.sampled_from(signals))
            units = draw(st.lists(st.sampled_from(UNITS), max_size=2, unique=True))
            obligations = [
                {"id": f"ob-{signal}-{u}", "unit": u, "severity": "blocking", "blocks": draw(st.booleans()),
                 "owedTo": "S3"}
                for u in units
            ]  # fmt: skip
            if not any(
                e.get("kind") == "routing" and e.get("signal") == signal
                for _, e in out
                if isinstance(e, dict)
            ):
                open_obs.update({o["id"]: o["unit"] for o in obligations})
            out.append(("signals", {"kind": "routing", "signal": signal, "obligations": obligations,
                                    "at": at}))  # fmt: skip
        elif kind == "disposition" and open_obs:
            target = draw(st.sampled_from(sorted(open_obs)))
            del open_obs[target]
            out.append(("signals", {"kind": "disposition", "obligation": target, "disposition": "no-action",
                                    "by": "alice", "rationale": "r", "at": at}))  # fmt: skip
        elif kind == "decision":
            action = draw(st.sampled_from(["retry", "repair", "abort", "pause", "escalate"]))
            owed = sorted(ob for ob, u in open_obs.items() if u == unit)
            for ob in owed:
                del open_obs[ob]
            event = {"kind": "decision", "id": f"d{n}", "unit": unit, "action": action, "by": "alice",
                     "rationale": "why", "resolves": owed, "at": at}  # fmt: skip
            if action in ("pause", "escalate") and draw(st.booleans()):  # else malformed (D-290)
                rec = ids.recovery_obligation_id(f"d{n}", unit)  # the id the engine derives
                event["opens"] = {"id": rec, "severity": "blocking", "owedTo": "S3"}
                open_obs[rec] = unit
            out.append(("units", event))
        elif kind in ("dispatch", "close", "demote"):
            out.append(("units", {"kind": kind, "unit": unit, "lease": f"l{n}", "by": "alice",
                                  "rationale": "r", "at": at}))  # fmt: skip
        elif kind == "memory":
            out.append(("memory", {"kind": "memory", "id": f"m{n % 7}", "subject": "s", "note": "n",
                                   "reviewBy": "2026-12-20", "scope": [], "at": at}))  # fmt: skip
        elif kind == "retraction":
            out.append(("memory", {"kind": "retraction", "entry": f"m{n % 7}", "by": "alice", "reason": "r",
                                   "at": at}))  # fmt: skip
        elif kind == "proposal":
            out.append(("identity", {"kind": "proposal", "id": f"p{n}", "at": at}))
        elif kind == "garbage":
            out.append(
                (draw(st.sampled_from(STORES)), draw(st.sampled_from([b"{not json", b"[1, 2]", b"\xff"])))
            )
    return out


def write(root: Path, items: Any) -> None:
    from engine.base import clock

    clock.configure(True)  # the generated times go back and forth, as a pinned clock allows
    for store, event in items:
        path = root / ".regulator" / f"{store}.ndjson"
        if isinstance(event, bytes):
            with open(path, "ab") as handle:
                handle.write(event + b"\n")
        else:
            Store(path).append(event)


def fresh_root(base: str) -> Path:
    root = Path(base) / "ws"
    (root / ".regulator").mkdir(parents=True)
    for name in STORES:  # only init (and the demo) create stores: a workspace starts with them
        (root / ".regulator" / f"{name}.ndjson").touch()
    (root / "contracts").mkdir()
    for unit in UNITS:
        (root / "contracts" / f"{unit}.json").write_text(
            json.dumps({"id": unit, "type": "implement", "profile": "implement", "title": unit})
        )
    (root / "contracts" / "bad.json").write_text("{")
    return root


@pytest.fixture(autouse=True, scope="module")
def _checkpoint_every_read() -> Iterator[Any]:
    """In-process loads here restore a checkpoint however small the stores (the default waits
    for 1 MiB of log)."""
    before = os.environ.get("REGULATOR_CHECKPOINT_BYTES")
    os.environ["REGULATOR_CHECKPOINT_BYTES"] = "0"
    yield
    if before is None:
        del os.environ["REGULATOR_CHECKPOINT_BYTES"]
    else:
        os.environ["REGULATOR_CHECKPOINT_BYTES"] = before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=events(), cut=st.floats(0, 1))
def test_folding_on_from_a_checkpoint_equals_reading_the_whole_log(log: Any, cut: Any) -> None:
    with tempfile.TemporaryDirectory() as base:
        root = fresh_root(base)
        ws = Workspace(root)
        split = int(len(log) * cut)
        write(root, log[:split])
        first = load(ws, NOW)
        assert checkpoint.save(ws, first)
        write(root, log[split:])
        restored = checkpoint.restore(ws, NOW)
        assert restored is not None  # the stores only grew: the checkpoint holds
        through = load(ws, NOW)
        assert through.checkpointed == first.checkpointed
        os.environ["REGULATOR_CHECKPOINT"] = "off"
        try:
            cold = load(ws, NOW)
        finally:
            del os.environ["REGULATOR_CHECKPOINT"]
        assert fingerprint(through) == fingerprint(cold)


def test_a_checkpoint_holds_only_for_the_bytes_it_was_folded_from(tmp_path: Path) -> None:
    root = fresh_root(str(tmp_path))
    ws = Workspace(root)
    store = root / ".regulator" / "signals.ndjson"
    Store(store).append({"kind": "signal", "id": "s1", "subject": "first", "at": "2026-11-29T10:00:00Z"})
    Store(store).append({"kind": "signal", "id": "s2", "subject": "second", "at": "2026-11-29T10:00:00Z"})
    assert checkpoint.save(ws, load(ws, NOW))
    assert checkpoint.restore(ws, NOW) is not None
    text = store.read_bytes()

    # a line it covers edited in place, same length, not the last: read from the start
    store.write_bytes(text.replace(b"first", b"FIRST"))
    assert checkpoint.restore(ws, NOW) is None
    assert load(ws, NOW).signals["s1"]["subject"] == "FIRST"

    # the same bytes again (a copy put back): it holds, and says what the log says
    copy = tmp_path / "copy"
    copy.write_bytes(text)
    os.replace(copy, store)
    assert checkpoint.restore(ws, NOW) is not None
    assert [s["subject"] for s in load(ws, NOW).signals.values()] == ["first", "second"]

    # truncated below what it covers
    store.write_bytes(text[: len(text) // 2])
    assert checkpoint.restore(ws, NOW) is None
    assert list(load(ws, NOW).signals) == ["s1"]


def test_garbage_or_foreign_checkpoints_are_ignored(tmp_path: Path) -> None:
    root = fresh_root(str(tmp_path))
    ws = Workspace(root)
    Store(root / ".regulator" / "signals.ndjson").append({"kind": "signal", "id": "s1", "subject": "x"})
    path = checkpoint.path_of(ws)
    for junk in (b"", b"\x00garbage", b"\xe9" * 100, json.dumps({"format": 1}).encode()):
        path.write_bytes(junk)
        assert checkpoint.restore(ws, NOW) is None
        assert list(load(ws, NOW).signals) == ["s1"]


def _rewrite(ws: Workspace, header_change: dict, body: bytes) -> None:
    """Replace the checkpoint with one carrying this body, MAC'd with the real host key."""
    path = checkpoint.path_of(ws)
    data = path.read_bytes()[32:]
    size = int.from_bytes(data[:8], "little")
    header = {**json.loads(data[8 : 8 + size]), **header_change}
    first = json.dumps(header).encode()
    signed = len(first).to_bytes(8, "little") + first + body
    key = checkpoint.host_key(ws)
    assert key is not None
    path.write_bytes(hmac.new(key, signed, hashlib.sha256).digest() + signed)
    assert checkpoint.authentic(ws)  # the host's own MAC: only its content can disqualify it


def test_an_older_or_mistyped_checkpoint_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    root = fresh_root(str(tmp_path))
    ws = Workspace(root)
    Store(root / ".regulator" / "signals.ndjson").append({"kind": "signal", "id": "s1", "subject": "x"})
    assert checkpoint.save(ws, load(ws, NOW))
    # FORMAT 5: positional tuples in marshal, claiming a signal the log does not hold
    old = {"signals": {"s1": 0, "forged": 4}, "routings": {}, "unrouted": ["s1", "forged"]}
    _rewrite(ws, {"format": 5}, marshal.dumps(old))
    assert checkpoint.restore(ws, NOW) is None
    assert list(load(ws, NOW).signals) == ["s1"]
    # the current FORMAT, but a body that is not the model's types
    _rewrite(ws, {}, msgspec.msgpack.encode({**old, "obligations": [["ob", 1, 2]]}))
    assert checkpoint.restore(ws, NOW) is None
    assert list(load(ws, NOW).signals) == ["s1"]
    assert checkpoint.save(ws, load(ws, NOW))  # what the next writer does: a good one again
    restored = checkpoint.restore(ws, NOW)
    assert restored is not None and list(restored.signals) == ["s1"]


def test_a_torn_tail_is_never_checkpointed(tmp_path: Path) -> None:
    root = fresh_root(str(tmp_path))
    ws = Workspace(root)
    store = root / ".regulator" / "signals.ndjson"
    Store(store).append({"kind": "signal", "id": "s1", "subject": "x"})
    with open(store, "ab") as handle:
        handle.write(b'{"kind": "signal", "id": "s2"')  # a writer cut off mid-line
    state = load(ws, NOW)
    assert [p.kind for p in state.problems] == ["torn"]
    assert not checkpoint.save(ws, state)
    assert not checkpoint.path_of(ws).exists()


# ---- end to end: the real command --------------------------------------------------------------

READS = (["status"], ["obligations", "--all"], ["signals"], ["registry", "next-up"], ["memory", "--all"])


def outputs(ws: helpers.Workspace, env: dict) -> list:
    """What every reading command prints; each must succeed (two failures would compare equal)."""
    done = [ws.run(*args, "--json", env=env) for args in READS]
    assert [d.returncode for d in done] == [0] * len(READS), [d.stderr for d in done]
    return [d.stdout for d in done]


def test_commands_answer_the_same_with_and_without_a_checkpoint(ws: helpers.Workspace) -> None:
    every = {"REGULATOR_CHECKPOINT_BYTES": "0"}  # a writer leaves one whenever it folded anything
    off = {"REGULATOR_CHECKPOINT": "off"}
    cached = checkpoint.path_of(Workspace(ws.root))
    ws.run(*report_args(), "--by", "alice", check=True, env=every)
    ws.run("signals", "route", check=True, env=every)
    for read in READS:  # readers never write, not even a cache
        ws.run(*read, env=every)
    assert not cached.exists()
    ws.run("unit", "dispatch", "r1", check=True, env=every)  # a writer: leaves the checkpoint
    assert cached.exists()
    assert outputs(ws, every) == outputs(ws, off)

    # the log grows past the checkpoint: commands fold only the rest, and still agree
    ob = ws.json("obligations", env=off)[0]["id"]
    ws.run("obligation", "resolve", ob, "--disposition", "no-action", "--rationale", "checked upstream",
           "--by", "alice", check=True, env=off)  # fmt: skip
    ws.run(*report_args(subject="docs/readme.md", severity="advisory"), "--by", "alice", check=True, env=off)
    assert outputs(ws, every) == outputs(ws, off)
    show = ["obligation", "show", ob, "--json"]
    assert ws.run(*show, env=every).stdout == ws.run(*show, env=off).stdout
    assert [e["kind"] for e in json.loads(ws.run(*show, env=every).stdout)["history"]] == [
        "routing",
        "disposition",
    ]


def test_an_edit_anywhere_it_covers_sends_readers_back_to_the_log(ws: helpers.Workspace) -> None:
    every = {"REGULATOR_CHECKPOINT_BYTES": "0"}
    ws.run(*report_args(), "--by", "alice", check=True, env=every)
    ws.run(*report_args(subject="second"), "--by", "alice", check=True, env=every)
    ws.run("unit", "dispatch", "r1", check=True, env=every)
    cached = checkpoint.path_of(Workspace(ws.root))
    assert cached.exists()
    store = ws.store("signals")
    store.write_bytes(store.read_bytes().replace(b'"confidence":"high"', b'"confidence":"HIGH"', 1))
    assert checkpoint.restore(Workspace(ws.root), NOW) is None
    assert outputs(ws, every) == outputs(ws, {"REGULATOR_CHECKPOINT": "off"})
    done = ws.run("verify", env=every)
    assert done.returncode == 1 and "edited" in done.stdout
    assert cached.exists()  # verify reads only: the checkpoint is simply not used


@pytest.mark.parametrize("junk", [b"\x00\x01garbage", b"", (2**40).to_bytes(8, "little") + b"x"])
def test_a_garbage_checkpoint_changes_nothing_a_command_says(ws: helpers.Workspace, junk: Any) -> None:
    ws.run(*report_args(), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    expected = outputs(ws, {"REGULATOR_CHECKPOINT": "off"})
    checkpoint.path_of(Workspace(ws.root)).write_bytes(junk)
    assert outputs(ws, {"REGULATOR_CHECKPOINT_BYTES": "0"}) == expected


def test_a_fifo_where_the_checkpoint_belongs_blocks_nothing(ws: helpers.Workspace) -> None:
    """A unit with the account's shell puts a FIFO at the checkpoint's path: readers take it for no
    checkpoint (a regular file or nothing), never wait on it forever."""
    os.mkfifo(ws.root / ".regulator" / "readmodel.checkpoint")
    for args in (("status", "--json"), ("verify",), ("controlroom", "--once", "--json", "--read-only")):
        done = ws.run(*args)  # ws.run times out (a failure) rather than hang
        assert "Traceback" not in done.stderr and done.returncode in (0, 1), (args, done.stderr)


def test_verify_does_not_call_a_true_checkpoint_false_when_a_signal_is_reported_meanwhile(
    ws: helpers.Workspace, monkeypatch: Any
) -> None:
    """verify compares the checkpoint, read on to the stores' end, with its own fold made moments
    before: a signal reported in between is in one and not the other, and the checkpoint is not
    called one that "does not fold to what the stores fold to" (the next run compares them)."""
    from engine.commands.verification import _checkpoint

    monkeypatch.setenv("REGULATOR_NOW", ws.env["REGULATOR_NOW"])
    ws.run(*report_args(subject="first"), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    engine_ws = Workspace(ws.root)
    assert checkpoint.save(engine_ws, load(engine_ws, cached=False))
    assert checkpoint.authentic(engine_ws)
    fresh = load(engine_ws, cached=False)
    assert _checkpoint(engine_ws, fresh) == []
    ws.run(
        *report_args(subject="meanwhile"), "--by", "alice", check=True
    )  # after the fold, before the compare
    assert _checkpoint(engine_ws, fresh) == []
    assert ws.run("verify").returncode == 0
