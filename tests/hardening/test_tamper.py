"""Tamper evidence (design §11, §7, §8.4): what is edited behind regulator's back is found."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

import pytest

from tests import helpers
from tests.helpers import remember_args, report_args

STORES = ("signals", "memory", "units", "identity")


@pytest.fixture
def filled(tmp_path: Any) -> Any:
    return helpers.prepared(tmp_path, fill)[0]


def fill(ws: helpers.Workspace) -> None:
    """Every store with lines to tamper with (run once per test process: helpers.prepared)."""
    u1 = ws.lease("u1")
    for i in range(3):
        ws.run(*report_args(subject=f"s{i}", affects=["u3"]), "--by", "alice", check=True)
        ws.run(*remember_args(subject=f"m{i}"), cwd=u1, check=True)
    ws.run("signals", "route", check=True)
    first = ws.events("memory")[0]["id"]
    ws.run("memory", "retract", first, "--by", "alice", "--reason", "wrong", check=True)
    ws.run("unit", "dispatch", "r1", check=True)
    ws.run("unit", "close", "r1", check=True)
    ws.run("unit", "dispatch", "b1", check=True)


def tampered(lines: list[bytes], how: str) -> list[bytes]:
    if how == "edit":
        event = json.loads(lines[1])
        key = next(k for k in ("subject", "note", "unit", "rationale", "file") if k in event)
        event[key] = str(event[key]) + " (edited)"
        return [lines[0], json.dumps(event).encode() + b"\n", *lines[2:]]
    if how == "insert":
        return [lines[0], lines[0], *lines[1:]]
    if how == "reorder":
        return [lines[0], lines[2], lines[1], *lines[3:]]
    return [lines[0], *lines[2:]]  # delete


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("how", ["edit", "insert", "reorder", "delete"])
def test_verify_names_the_first_bad_line(filled: Any, store: Any, how: Any) -> None:
    ws = filled
    path = ws.store(store)
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 4, store
    assert ws.run("verify").returncode == 0
    path.write_bytes(b"".join(tampered(lines, how)))
    done = ws.run("verify")
    assert done.returncode == 1
    named = [line for line in done.stdout.splitlines() if line.startswith(f"{store}.ndjson:")]
    assert named and named[0].startswith(f"{store}.ndjson:2:"), done.stdout
    assert all(
        not line.startswith(tuple(f"{s}.ndjson" for s in STORES if s != store))
        for line in done.stdout.splitlines()
    )


@pytest.mark.parametrize("file", ["regulator/identity/glossary.md", "regulator/policy/routing.yaml"])
def test_hand_edited_identity_fails(ws: helpers.Workspace, file: Any) -> None:
    path = ws.root / file
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    path.write_text(path.read_text() + "\n# tweak\n")
    done = ws.run("identity", "verify")
    assert done.returncode == 1 and file in done.stdout
    once = ws.run("controlroom", "--once", "--json")
    assert once.returncode == 1
    assert any(file in reason for reason in json.loads(once.stdout)["exitReasons"])


def test_register_entry_deleted_or_changed_fails_lint(ws: helpers.Workspace) -> None:
    ws.write(
        "findings/F-x.md",
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: [u1]\nack: ''\nresolved: false\n---\n",
    )
    ws.commit("file F-x")
    ws.write(
        "findings/F-x.md",
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: []\nack: ''\nresolved: false\n---\n",
    )
    done = ws.run("registry", "lint", "--json")
    assert done.returncode == 1 and "unauthorized-change" in done.stdout
    (ws.root / "findings/F-x.md").unlink()
    done = ws.run("registry", "lint", "--json")
    assert done.returncode == 1 and "tombstone-not-delete" in done.stdout
