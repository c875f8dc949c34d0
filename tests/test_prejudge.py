"""Signed person lines judged in a forked child while the stores parse (engine.read.prejudge,
D-180): the fold with the child's verdicts equals the fold that judges every person event itself,
for honest, forged, replayed and misplaced signed lines; a child that fails or hangs changes
nothing but the time."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.checkout.workspace import Workspace as EngineWorkspace
from engine.read import fold, prejudge
from engine.read.load import load
from tests.helpers import Workspace, make_workspace, report_args


def _signed_workspace(tmp: Path) -> Workspace:
    """alice's signed signals and dispositions, then lines appended by hand: a disposition whose
    text was edited after signing, the same signed line again (a replayed id), a signed line put in
    another store, and a routing-shaped line that carries a `sig` key (no person event)."""
    ws = make_workspace(tmp)
    for subject in ("a.js", "b.js", "c.js"):
        ws.run(*report_args(subject=subject, severity="advisory"), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    obligations = ws.json("obligations")
    for ob in obligations[:2]:
        ws.run("obligation", "resolve", ob["id"], "--disposition", "no-action", "--rationale", "checked",
               "--by", "alice", check=True)  # fmt: skip
    lines = ws.store("signals").read_text().splitlines()
    dispositions = [json.loads(line) for line in lines if '"kind":"disposition"' in line]
    edited = dict(dispositions[0], rationale="edited after signing", id="01EDITEDEDITEDEDITEDEDITED")
    replayed = dispositions[1]
    misplaced = dict(dispositions[0])
    routing_with_sig = {
        "kind": "routing",
        "signal": "nothing",
        "obligations": [],
        "sig": "x",
        "at": "2026-11-29",
    }
    with ws.store("signals").open("a") as handle:
        for event in (edited, replayed, routing_with_sig):
            handle.write(json.dumps(event) + "\n")
    with ws.store("memory").open("a") as handle:
        handle.write(json.dumps(misplaced) + "\n")
    return ws


def _summary(state: Any) -> Any:
    """What the verdicts decide: each obligation's status and disposer, what counts for nothing
    and why, the person event ids that counted, and the signals kept."""
    return msgspec.to_builtins(
        {
            "obligations": {i: (o.status, o.disposition, o.by) for i, o in state.obligations.items()},
            "uncounted": sorted((u.store, u.offset, u.reason, u.id or "") for u in state.uncounted),
            "person_ids": {k: sorted(v) for k, v in state.person_ids.items()},
            "signals": sorted(state.signals.refs),
            "memory": sorted(state.memory),
        }
    )


def _load(ws: Workspace, monkeypatch: pytest.MonkeyPatch, child: bool) -> tuple[Any, bool]:
    """The state read with the child (forced at any size) or without it; whether a child ran."""
    started: list[bool] = []
    real = prejudge.start

    def start(*args: Any) -> Any:
        found = real(*args)
        started.append(found is not None)
        return found

    with monkeypatch.context() as patch:
        patch.setenv("REGULATOR_CHECKPOINT", "off")
        patch.setattr(prejudge, "MIN_BYTES", 0 if child else 1 << 62)
        patch.setattr(prejudge, "start", start)
        state = load(EngineWorkspace(ws.root))
    return _summary(state), any(started)


def test_the_childs_verdicts_are_the_folds_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _signed_workspace(tmp_path)
    with_child, ran = _load(ws, monkeypatch, child=True)
    without, ran_without = _load(ws, monkeypatch, child=False)
    assert ran and not ran_without
    assert with_child == without
    reasons = " ".join(reason for _, _, reason, _ in without["uncounted"])
    assert "signature" in reasons and "replayed" in reasons  # the forgeries were judged, and refused
    assert sum(1 for status, _, _ in without["obligations"].values() if status == "resolved") == 2


def test_a_child_that_fails_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _signed_workspace(tmp_path)
    without, _ = _load(ws, monkeypatch, child=False)

    def broken(*args: Any) -> list[int]:
        raise OSError("the child cannot read the store")

    monkeypatch.setattr(prejudge, "signed_pieces", broken)
    failed, ran = _load(ws, monkeypatch, child=True)
    assert ran and failed == without


def test_a_child_behind_the_fold_is_stopped_and_its_work_done_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _signed_workspace(tmp_path)
    without, _ = _load(ws, monkeypatch, child=False)
    real = prejudge.signed_pieces

    def slow(path: Path, offset: int, index: int) -> Any:
        if index == 0:  # signals, the first store the fold asks about
            time.sleep(60)
        return real(path, offset, index)

    monkeypatch.setattr(prejudge, "signed_pieces", slow)
    began = time.monotonic()
    hung, ran = _load(ws, monkeypatch, child=True)
    assert ran and hung == without
    assert time.monotonic() - began < 30  # stopped at the deadline, not waited for


def test_signed_lines_finds_each_line_holding_a_signature_once(tmp_path: Path) -> None:
    path = tmp_path / "s.ndjson"
    lines = [b'{"a":1}', b'{"sig":"x","b":"\\"sig\\":"}', b'{"c":2,"sig":"y"}', b'{"d":"sig"}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    starts = [sum(len(x) + 1 for x in lines[:k]) for k in range(len(lines))]
    assert prejudge.signed_lines(path, 0, 0) == [starts[1] << 2, starts[2] << 2]
    assert prejudge.signed_lines(path, starts[2], 2) == [starts[2] << 2 | 2]
    assert prejudge.signed_lines(path, path.stat().st_size, 0) == []
    assert fold.INDEX["signals"] == 0


def test_the_child_keeps_only_its_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From an adversarial review: killed during a read, the parent left its child running with
    the parent's stdout and stderr (a caller reading them to their end waited) and any lock's
    descriptor. The child keeps its pipe alone, its standard streams on /dev/null."""
    store = tmp_path / "s.ndjson"
    store.write_bytes(b'{"sig":"x"}\n')
    held = (tmp_path / "held").open("wb")  # a descriptor the parent has open, as a lock's would be

    def slow(name: str, path: Path, found: list[int]) -> list[tuple[int, Any, str | None]]:
        time.sleep(60)
        return []

    monkeypatch.setattr(prejudge, "MIN_BYTES", 0)
    monkeypatch.delenv("REGULATOR_PREJUDGE_BYTES", raising=False)
    child = prejudge.start([("signals", store, 0, 0)], slow)
    assert child is not None
    try:
        deadline = time.monotonic() + 10
        while True:  # until the child has settled (it is closing what it inherited meanwhile)
            fds: dict[int, str] = {}
            for fd in os.listdir(f"/proc/{child.pid}/fd"):
                try:
                    fds[int(fd)] = os.readlink(f"/proc/{child.pid}/fd/{fd}")
                except FileNotFoundError:  # closed between the listing and the look
                    continue
            # besides its pipe, only the store it reads, which it opened itself (a piece at a time)
            others = {fd: target for fd, target in fds.items() if fd > 2 and target != str(store)}
            settled = all(fds.get(fd) == os.devnull for fd in (0, 1, 2)) and len(others) == 1
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert {fds.get(fd) for fd in (0, 1, 2)} == {os.devnull}
        assert len(others) == 1 and next(iter(others.values())).startswith("pipe:"), others
        assert str(tmp_path / "held") not in fds.values()
    finally:
        child.close()
        held.close()


@pytest.mark.parametrize("piece", [1, 97, 600])
def test_the_fold_and_the_child_a_few_bytes_at_a_time_equal_one_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int
) -> None:
    """The fold reads a store a piece at a time (fold.PIECE) and takes the child's verdicts a piece
    at a time (prejudge.PIECE): pieces of any size, down to one line each, decide what one read of
    each store decides."""
    ws = _signed_workspace(tmp_path)
    whole, _ = _load(ws, monkeypatch, child=False)
    monkeypatch.setattr(fold, "PIECE", piece)
    monkeypatch.setattr(prejudge, "PIECE", piece)
    pieces, ran = _load(ws, monkeypatch, child=True)
    alone, _ = _load(ws, monkeypatch, child=False)
    assert ran and pieces == whole and alone == whole


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from([b'{"a":1}', b'{"sig":"x"}', b'{"b":"\\"sig\\":"}', b"", b"x" * 40]), max_size=30
    ),
    piece=st.integers(1, 200),
    torn=st.booleans(),
)
def test_signed_pieces_find_what_one_pass_finds(lines: list[bytes], piece: int, torn: bool) -> None:
    with tempfile.TemporaryDirectory() as base:
        path = Path(base) / "s.ndjson"
        data = b"\n".join(lines) + (b"" if torn or not lines else b"\n")
        path.write_bytes(data)
        starts = [sum(len(x) + 1 for x in lines[:k]) for k in range(len(lines))]
        whole = len(lines) - (1 if torn and lines else 0)  # a line without its newline: still being written
        marked = [
            start << 2 | 1
            for start, line in zip(starts[:whole], lines[:whole], strict=True)
            if b'"sig":' in line
        ]
        pieces = list(prejudge.signed_pieces(path, 0, 1, piece))
        assert [ref for _, found in pieces for ref in found] == marked
        ends = [end for end, _ in pieces]
        assert ends == sorted(set(ends)) and (not ends or ends[-1] == len(data))
        assert all(end == len(data) or data[end - 1 : end] == b"\n" for end in ends)


def test_the_fold_takes_the_childs_verdicts_and_judges_none_of_those_lines_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the child in time (its deadline made long here), no signed line the child judged is
    judged again by the fold: the verdicts are used, not only computed."""
    from engine.read import persons

    ws = _signed_workspace(tmp_path)
    judged: list[int] = []
    real = persons._judge

    def counting(state: Any, event: Any, previous: object, store: str, at: int) -> Any:
        judged.append(at)
        return real(state, event, previous, store, at)

    monkeypatch.setattr(prejudge, "GRACE_S", 30.0)
    monkeypatch.setattr(persons, "_judge", counting)
    with_child, ran = _load(ws, monkeypatch, child=True)
    assert ran and judged == []
    without, _ = _load(ws, monkeypatch, child=False)
    assert with_child == without and len(judged) >= 5  # here every person event is judged in this process
