"""Every write command × every kind of actor (issue 7): exactly the expected allow or refuse, and
nothing written on a refusal. docs/security.md shows the same table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import helpers
from tests.helpers import remember_args, report_args

ACTORS = (
    "owner",
    "no-grant",
    "unknown",
    "lease:intelligence",
    "lease:implement",
    "lease:bookkeeper",
    "unit --by",
    "no key",
)

# command -> expected exit code per actor (0 allowed, 2 bad input: a person is required, 3 refused).
# "unit --by": implement unit u1, from its own leased worktree, naming the owner with --by (§15.2).
# "no key": carol, who holds every grant but lists no key, where signatures are required (§15.1).
MATRIX = {
    "signals report": (0, 3, 3, 0, 3, 3, 2, 3),
    "memory remember": (2, 2, 2, 3, 0, 0, 2, 2),
    "identity propose": (0, 3, 3, 0, 0, 3, 2, 3),
    "obligation resolve": (0, 3, 3, 2, 2, 2, 2, 3),
    "memory retract": (0, 3, 3, 2, 2, 2, 2, 3),
    "unit decide": (0, 3, 3, 2, 2, 2, 2, 3),
    "unit demote": (0, 3, 3, 2, 2, 2, 2, 3),
    "identity accept": (0, 3, 3, 2, 2, 2, 2, 3),
    "identity reject": (0, 3, 3, 2, 2, 2, 2, 3),
    "registry ack": (0, 3, 3, 2, 2, 2, 2, 0),
    "registry resolve": (0, 3, 3, 2, 2, 2, 2, 0),
}
PERSON = {"owner": "alice", "no-grant": "bob", "unknown": "mallory", "unit --by": "alice", "no key": "carol"}
LEASED = {
    "lease:intelligence": "r1",
    "lease:implement": "u1",
    "lease:bookkeeper": "b1",
    "unit --by": "u1",
}


def setup(tmp_path: Path, command: Any) -> Any:
    """The workspace every command is tried in (prepared once per test process, copied)."""
    ws, ids = helpers.prepared(tmp_path, people_and_things)
    worktrees = {actor: ws.root / "wt" / unit for actor, unit in LEASED.items()}
    new = tmp_path / "invariants.md"
    new.write_text("# Invariants\n\n- INV-001: changed.\n")
    return ws, {"worktrees": worktrees, "tmp": tmp_path, "content": str(new), **ids}


def people_and_things(ws: helpers.Workspace) -> dict[str, str]:
    """bob without grants, carol without a key, a finding on u9, the units leased, an obligation, a
    memory entry and a proposal to act on: their ids."""
    tmp_path = ws.root.parent
    path = ws.root / "regulator/policy/interaction.yaml"
    policy = yaml.safe_load(path.read_text())
    policy["people"]["bob"] = {"grants": [], "resolve": []}
    carol = dict(policy["people"]["alice"])
    carol.pop("keys")
    policy["people"]["carol"] = carol
    source = tmp_path / "policy.yaml"
    source.write_text(yaml.safe_dump(policy))
    done = ws.run(
        "identity",
        "propose",
        "--file",
        "regulator/policy/interaction.yaml",
        "--content-from",
        str(source),
        "--rationale",
        "bob joins without grants",
        "--by",
        "alice",
        "--json",
    )
    ws.run(
        "identity", "accept", json.loads(done.stdout)["id"], "--by", "alice", "--rationale", "ok", check=True
    )
    ws.contract("u9", "implement", "implement")
    ws.write(
        "findings/F-x.md",
        "---\nid: F-x\ndate: '2026-11-01'\ntitle: t\naffects: [u9]\nack: ''\nresolved: false\n---\n",
    )
    leased = {unit: ws.lease(unit) for unit in sorted(set(LEASED.values()))}
    ws.run(*report_args(affects=["u3"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    context = {"obligation": ws.json("obligations")[0]["id"]}
    done = ws.run(*remember_args(), "--json", cwd=leased["u1"])
    context["memory"] = json.loads(done.stdout)["id"]
    new = tmp_path / "invariants.md"
    new.write_text("# Invariants\n\n- INV-001: changed.\n")
    done = ws.run(
        "identity",
        "propose",
        "--file",
        "regulator/identity/glossary.md",
        "--content-from",
        str(new),
        "--rationale",
        "r",
        "--by",
        "alice",
        "--json",
    )
    context["proposal"] = json.loads(done.stdout)["id"]
    return context


def argv(command: str, actor: str, c: dict) -> tuple[list[str], object]:
    person = ["--by", PERSON[actor]] if actor in PERSON else []
    cwd = c["worktrees"].get(actor)
    table = {
        "signals report": report_args(affects=["u1"]),
        "memory remember": remember_args(review_by="2026-12-21"),
        "identity propose": [
            "identity",
            "propose",
            "--file",
            "regulator/identity/invariants.md",
            "--content-from",
            c["content"],
            "--rationale",
            "r",
        ],
        "obligation resolve": [
            "obligation",
            "resolve",
            c["obligation"],
            "--disposition",
            "no-action",
            "--rationale",
            "r",
        ],
        "memory retract": ["memory", "retract", c["memory"], "--reason", "r"],
        "unit decide": ["unit", "decide", "u3", "--action", "retry", "--rationale", "r"],
        "unit demote": ["unit", "demote", "u1", "--rationale", "r"],
        "identity accept": ["identity", "accept", c["proposal"], "--rationale", "r"],
        "identity reject": ["identity", "reject", c["proposal"], "--rationale", "r"],
        "registry ack": ["registry", "ack", "F-x"],
        "registry resolve": ["registry", "resolve", "F-x", "--rationale", "r"],
    }
    # memory remember takes no --by: a person naming themselves is still not a unit's lease
    if command == "memory remember" and actor in PERSON:
        return table[command] + ["--by", PERSON[actor]], cwd
    return table[command] + person, cwd


def fingerprint(ws: helpers.Workspace) -> str:
    return (
        ws.digest()
        + (ws.root / "findings/F-x.md").read_text()
        + (ws.root / "regulator/identity/invariants.md").read_text()
    )


@pytest.mark.parametrize("command", list(MATRIX))
def test_matrix(tmp_path: Path, command: Any) -> None:
    ws, context = setup(tmp_path, command)
    expected = dict(zip(ACTORS, MATRIX[command], strict=True))
    # refusals first, in the same workspace: each must leave everything as it was
    for actor in [a for a in ACTORS if expected[a] != 0]:
        args, cwd = argv(command, actor, context)
        before = fingerprint(ws)
        done = ws.run(*args, cwd=cwd)
        assert done.returncode == expected[actor], (command, actor, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert fingerprint(ws) == before, (command, actor)
    allowed = [a for a in ACTORS if expected[a] == 0]
    assert allowed
    actor = allowed[0]
    args, cwd = argv(command, actor, context)
    before = fingerprint(ws)
    done = ws.run(*args, cwd=cwd)
    assert done.returncode == 0, (command, actor, done.stderr)
    assert fingerprint(ws) != before, (command, actor)


def test_matrix_is_documented() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    for command, codes in MATRIX.items():
        row = (
            f"| `{command}` | " + " | ".join({0: "allow", 2: "exit 2", 3: "exit 3"}[c] for c in codes) + " |"
        )
        assert row in text, row
