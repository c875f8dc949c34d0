"""What the clone tests share (tests/test_clone.py, tests/test_clone_history.py): the host's history a
clone is made from (u1 in progress, b1 aborted, an acknowledged finding, a decided routing change, the
views committed), a clone of it, and edits and decisions forged by hand."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests import helpers
from tests.helpers import (
    REGULATOR,
    alice_key,
    git,
)

ABSENT = "stores: absent — unit state unknown"
FINDING = "findings/F-x.md"
ROUTING = "regulator/policy/routing.yaml"
INTERACTION = "regulator/policy/interaction.yaml"
DOCS = Path(__file__).parent.parent / "docs"


def finding(ack: str = "2026-11-20 alice", affects: Any = ("u1", "u3")) -> str:
    units = ", ".join(affects)
    return (
        f"---\nid: F-x\ndate: '2026-11-01'\ntitle: the alerter cannot run\naffects: [{units}]\n"
        f"ack: '{ack}'\nresolved: false\n---\nThe alerter exits 127.\n"
    )


def clone(ws: helpers.Workspace, tmp_path: Path, name: str = "clone", depth: int | None = None) -> Path:
    target = tmp_path / name
    shallow = ["--depth", str(depth)] if depth else []
    git(tmp_path, "clone", "-q", *shallow, f"file://{ws.root}", str(target), env=ws.env)
    assert not (target / ".regulator").exists()
    return target


def hand_edit(ws: helpers.Workspace, relative: str, text: str) -> None:
    path = ws.root / relative
    path.chmod(0o644)  # governed files are left read-only
    path.write_text(text)


def host_history(ws: helpers.Workspace) -> str:
    before = ws.git("rev-parse", "HEAD").strip()
    ws.lease("u1")
    ws.run("unit", "decide", "b1", "--action", "abort", "--by", "alice", "--rationale", "r", check=True)
    ws.write(FINDING, finding())
    ws.commit("finding F-x, acknowledged\n\nAuthorized-by: alice")
    routing = (ws.root / ROUTING).read_text().replace("intakeDebtDays: 14", "intakeDebtDays: 21")
    assert "intakeDebtDays: 21" in routing
    ws.decide(ROUTING, routing)
    ws.run("registry", "views", check=True)
    ws.commit("views")
    return before


# ---- the documented CI commands ------------------------------------------------------------------


def documented_commands() -> list[str]:
    text = (DOCS / "ci.md").read_text()
    section = text.split("## The commands", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert commands == [
        'regulator registry lint --require-history --trunk main --range "$BEFORE..$AFTER"',
        "regulator controlroom --once --registers-only --trunk main",
    ]
    yml = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert all(f"          {c}\n" in yml for c in commands), "the workflow runs the same commands"
    assert "fetch-depth: 0" in yml
    return commands


def run_documented(ws: helpers.Workspace, where: Path, before: str) -> list[subprocess.CompletedProcess]:
    after = git(where, "rev-parse", "HEAD", env=ws.env).strip()
    env = dict(
        ws.env, BEFORE=before, AFTER=after, PATH=f"{Path(REGULATOR).parent}{os.pathsep}{os.environ['PATH']}"
    )
    return [
        subprocess.run(
            ["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True, timeout=120
        )
        for command in documented_commands()
    ]


def forge(ws: helpers.Workspace, relative: str, text: str, sign_with: Path | None, by: str = "alice") -> None:
    """A commit that carries the decision trailers without a decision behind it."""
    hand_edit(ws, relative, text)
    ws.git("add", "-A")
    message = f"regulator: accept\n\nAuthorized-by: {by}\nRegulator-Decision: 01FORGED\nRegulator-Decided-By: {by}\n"
    signing = (
        ["-c", "gpg.format=ssh", "-c", f"user.signingkey={sign_with}", "commit", "-S"]
        if sign_with
        else ["commit"]
    )
    ws.git(*signing, "-q", "-m", message)


def bob_acks(path: Path) -> dict:
    """The interaction policy at `path` with bob added, holding the ack grant and alice's keys."""
    policy = yaml.safe_load(path.read_text())
    policy["people"]["bob"] = {"grants": ["ack"], "keys": policy["people"]["alice"]["keys"]}
    return policy


def bob_resolves_and_lint_refuses(ws: helpers.Workspace, here: Path) -> None:
    """A finding resolved in `here` by a commit alice's key signs, Authorized-by bob: lint refuses it."""
    finding = next((here / "findings").glob("F-*.md"))
    finding.write_text(finding.read_text().replace("resolved: false", "resolved: true"))
    git(here, "add", "-A")
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={alice_key()}"]
    git(here, *sign, "commit", "-q", "-S", "-m", "resolve\n\nAuthorized-by: bob")
    done = ws.run("registry", "lint", "--json", cwd=here)
    errors = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and "unauthorized-change" in [e["code"] for e in errors], done.stdout
    assert any("bob does not hold the ack grant" in e["message"] for e in errors)
