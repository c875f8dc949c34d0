"""A cold start of a large log reads the contract files in a second process (engine.read.contracts.Prefetch).

It must come to exactly what reading them here gives, bad files included, and any way the helper
can fail (it cannot start, exits with an error, writes garbage) must only mean reading them here.
End to end: the real command answers the same with the helper as without it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.checkout.workspace import Workspace as EngineWorkspace
from engine.read import contracts
from engine.read.load import load
from tests.helpers import report_args
from tests.test_checkpoint import outputs

HELPER = {"REGULATOR_PREFETCH_BYTES": "0"}  # any log is large enough: every cold read uses it
HERE = {"REGULATOR_PREFETCH_BYTES": "off"}


def more_contracts(root: Path) -> None:
    """Beside the workspace's four: a nested id, and three files that are left out with a problem."""
    folder = root / "contracts"
    (folder / "team").mkdir()
    (folder / "team" / "n1.json").write_text(
        json.dumps({"id": "team/n1", "type": "implement", "profile": "implement", "title": "nested"})
    )
    (folder / "broken.json").write_text('{"id": "broken", "type": ')
    (folder / "other.json").write_text(
        json.dumps({"id": "not-other", "type": "implement", "profile": "implement", "title": "t"})
    )
    (folder / "untitled.json").write_text(json.dumps({"id": "untitled", "type": "x", "profile": "y"}))


def loaded(ws, monkeypatch, env: dict):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return load(EngineWorkspace(ws.root))


def test_the_helper_reads_what_this_process_would(ws, monkeypatch):
    more_contracts(ws.root)
    here = loaded(ws, monkeypatch, HERE)
    there = loaded(ws, monkeypatch, HELPER)
    assert sorted(there.contracts) == ["b1", "r1", "team/n1", "u1", "u3"]
    assert there.contracts == here.contracts
    assert len(there.contract_problems) == 3
    assert there.contract_problems == here.contract_problems
    assert {k: u.contract for k, u in there.units.items()} == {k: u.contract for k, u in here.units.items()}
    assert there.contract_files.seen == here.contract_files.seen  # the same cache for the next read
    assert here.contract_files.read == 8  # read here, file by file
    assert there.contract_files.read == 0  # none: all came from the helper


@pytest.mark.parametrize("helper", ["/bin/false", "/bin/echo", "/nonexistent/python"])
def test_a_helper_that_fails_only_means_reading_here(ws, monkeypatch, helper):
    """/bin/false exits 1; /bin/echo exits 0 having written its arguments (not marshal data);
    a missing interpreter cannot start at all."""
    more_contracts(ws.root)
    expected = loaded(ws, monkeypatch, HERE)
    monkeypatch.setattr(sys, "executable", helper)
    got = loaded(ws, monkeypatch, HELPER)
    assert got.contracts == expected.contracts and got.contract_problems == expected.contract_problems
    assert got.contract_files.read == 8  # the helper gave nothing: every file was read here


def test_a_contract_changed_after_the_helper_read_it_is_read_again_next_time(ws, monkeypatch):
    """The helper's answer is the cache a checkpoint keeps: the next read looks at each file's
    identity and reads again only the one that changed."""
    helper = contracts.prefetch(EngineWorkspace(ws.root))
    files = helper.files()
    helper.close()
    assert files is not None and files.read == 0 and len(files.seen) == 4
    path = ws.root / "contracts" / "u1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "title": "changed since"}))
    found = contracts.load_contracts(EngineWorkspace(ws.root), [], files)
    assert found["u1"].title == "changed since"
    assert files.read == 1


def test_commands_answer_the_same_with_the_helper(ws):
    more_contracts(ws.root)
    ws.run(*report_args(), "--by", "alice", check=True, env=HERE)
    ws.run("signals", "route", check=True, env=HERE)
    off = {**HERE, "REGULATOR_CHECKPOINT": "off"}
    on = {**HELPER, "REGULATOR_CHECKPOINT": "off"}
    assert outputs(ws, on) == outputs(ws, off)
    assert "team/n1" in {u["id"] for u in ws.json("status", env=on)["units"]}
    status = ws.run("status", env=on)
    assert status.stdout == ws.run("status", env=off).stdout
