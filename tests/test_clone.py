"""A checkout without the stores says so (design §16.2; issue 13): a CI clone shows no unit as
`todo`, lint's re-gate reports `unit state unknown`, `controlroom --once` exits 1 there unless
`--registers-only`, the documented CI commands exit as documented, and a branch cannot grant itself
what trunk's policy asks. Identity read from git history, and the leftovers of design §16.4:
tests/test_clone_history.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import helpers
from tests.clonehost import (
    ABSENT,
    DOCS,
    INTERACTION,
    ROUTING,
    bob_acks,
    bob_resolves_and_lint_refuses,
    clone,
    hand_edit,
    host_history,
    run_documented,
)
from tests.helpers import (
    alice_key,
    git,
    one_line,
)


@pytest.fixture
def fleet(tmp_path: Path) -> Any:
    """A host workspace with u1 in progress, b1 aborted, an acknowledged finding on u1 and u3 (so
    the host's lint has a re-gate error), a decided routing change, and the views committed.
    Returns (ws, BEFORE): the trunk commit before these were pushed. Built once per test process
    (helpers.prepared), copied for each test."""
    return helpers.prepared(tmp_path, host_history)


def test_the_readers_say_stores_absent_first_and_show_no_unit_as_todo(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    host = ws.json("status")
    assert host["stores"] == "present"
    assert {u["id"]: u["status"] for u in host["units"]} == {
        "u1": "in-progress", "u3": "todo", "r1": "todo", "b1": "aborted"
    }  # fmt: skip
    assert isinstance(ws.json("obligations"), list)  # the §13 list where the stores are present
    assert ws.json("registry", "next-up") == [{"id": "r1", "priority": 100}]
    assert ws.json("registry", "next-up", "--explain")["stores"] == "present"
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["stores"] == "present"

    here = clone(ws, tmp_path)
    for args in (
        ["status"],
        ["obligations"],
        ["signals"],
        ["memory"],
        ["calibration"],
        ["registry", "next-up"],
        ["registry", "next-up", "--explain"],
        ["registry", "lint"],
        ["controlroom", "--once"],
    ):
        done = ws.run(*args, cwd=here)
        assert done.stdout.splitlines()[0] == ABSENT, (args, done.stdout)
        assert "Traceback" not in done.stderr
        assert not re.search(r"\btodo\b", done.stdout), (args, done.stdout)
    status = ws.json("status", cwd=here)
    assert status["stores"] == "absent"
    assert {u["status"] for u in status["units"]} == {"unknown"}
    assert {u["held"] for u in status["units"]} == {None} and status["unrouted"] is None
    dismissed = ws.run("verify", "--dismiss", "memory:1", "--by", "alice", "--rationale", "x", cwd=here)
    assert dismissed.returncode == 2 and "stores: absent" in one_line(dismissed)
    assert not (here / ".regulator").exists()
    for args in (["signals"], ["memory"], ["calibration"]):  # a listing's text: unknown, exit 1
        done = ws.run(*args, cwd=here)
        assert (
            done.returncode == 1
            and f"{args[0].replace('calibration', 'predictions')}: unknown" in done.stdout
        )
        assert "no predictions yet" not in done.stdout, done.stdout
    for args in (["obligations"], ["signals"], ["memory"], ["calibration"], ["registry", "next-up"]):
        done = ws.run(*args, "--json", cwd=here)
        assert (done.returncode, json.loads(done.stdout)) == (1, [])
        assert done.stderr.endswith(f"regulator: {ABSENT}\n")
    explained = json.loads(ws.run("registry", "next-up", "--explain", "--json", cwd=here).stdout)
    assert explained["nextUp"] == [] and {u["id"] for u in explained["excluded"]} == {"u1", "u3", "r1", "b1"}
    assert all("status unknown" in u["reasons"][0] for u in explained["excluded"])
    lint = json.loads(ws.run("registry", "lint", "--json", cwd=here).stdout)
    assert lint["stores"] == "absent"
    once = json.loads(ws.run("controlroom", "--once", "--json", cwd=here).stdout)
    assert once["stores"] == "absent" and {u["status"] for u in once["status"]["units"]} == {"unknown"}
    # what only the stores can say is null, never 0 (an operator's review read `0 lost` here); lint
    # is git's, known in a clone too
    assert {k for k, v in once["counts"].items() if v is not None} == {"lintErrors"}, once["counts"]
    assert not (here / ".regulator").exists()


def test_lint_re_gate_is_unit_state_unknown_in_a_clone(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    host = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert [(i["code"], i["entry"]) for i in host["errors"]] == [("regate", "F-x")]
    here = clone(ws, tmp_path)
    done = ws.run("registry", "lint", "--json", cwd=here)
    assert done.returncode == 0, done.stdout
    data = json.loads(done.stdout)
    assert data["errors"] == []
    unknown = [i for i in data["warnings"] if i["code"] == "regate-unknown"]
    assert [i["entry"] for i in unknown] == ["F-x", "F-x"]
    assert "unit state unknown" in unknown[0]["message"] and "u1" in unknown[0]["message"]
    text = ws.run("registry", "lint", cwd=here).stdout
    assert "warning: regate-unknown: F-x (acknowledged) affects u1: unit state unknown" in text


def test_once_in_a_clone_exits_1_with_stores_absent_and_writes_nothing(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    before = sorted(p.relative_to(here) for p in here.rglob("*") if ".git" not in p.parts)
    done = ws.run("controlroom", "--once", cwd=here)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"- {ABSENT} (run --once on the host" in done.stdout
    header = done.stdout.splitlines()[1]
    assert "stores absent: unit state unknown" in header  # the header line
    for part in ("? blocking", "? held", "? stale", "? expiring", "? unrouted"):  # unknown, never 0
        assert part in header, header
    data = json.loads(ws.run("controlroom", "--once", "--json", cwd=here).stdout)
    assert data["exitCode"] == 1 and data["exitReasons"][0].startswith(ABSENT)
    # identity is judged from git history there, not from a store that is not here
    assert not [r for r in data["exitReasons"] if r.startswith("identity verify")]
    assert sorted(p.relative_to(here) for p in here.rglob("*") if ".git" not in p.parts) == before


def test_registers_only_on_the_host_checks_git_and_the_re_gate(fleet: Any) -> None:
    ws, _ = fleet
    done = ws.run("controlroom", "--once", "--registers-only", "--json")
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["stores"] == "present"
    assert data["exitReasons"] == [
        "lint error regate: F-x (acknowledged) affects in-progress u1: demote to todo (re-gate) or resolve "
        "the finding"
    ]
    assert data["identity"]["ok"] is True and data["views"] == {"differ": []}


def test_registers_only_fails_on_views_that_differ(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    findings_md = ws.root / "FINDINGS.md"
    findings_md.write_text(findings_md.read_text() + "hand edit\n")
    ws.commit("a hand edit of the generated view")
    here = clone(ws, tmp_path)
    done = ws.run("controlroom", "--once", "--registers-only", cwd=here)
    assert done.returncode == 1
    assert "- views: FINDINGS.md differs from what `regulator registry views` generates" in done.stdout


def test_the_documented_ci_commands_exit_as_documented(fleet: Any, tmp_path: Path) -> None:
    ws, before = fleet
    full, shallow = clone(ws, tmp_path, "full"), clone(ws, tmp_path, "shallow", depth=1)
    lint, room = run_documented(ws, full, before)
    assert (lint.returncode, room.returncode) == (0, 0), (lint.stdout, room.stdout)
    assert lint.stdout.splitlines()[0] == ABSENT and "history checked (every commit of" in lint.stdout
    assert room.stdout.splitlines()[0] == ABSENT
    assert "identity (git history): ok, 6 file(s) as decided (signed)" in room.stdout
    assert "warning: regate-unknown" in room.stdout and "Traceback" not in lint.stderr + room.stderr

    lint, room = run_documented(ws, shallow, before)
    assert (lint.returncode, room.returncode) == (1, 1)
    assert "error: history-unavailable" in lint.stdout
    assert (
        "- identity verify: git history unavailable (the clone is shallow); check out with full depth"
        in room.stdout
    )
    assert "- lint error history-unavailable" in room.stdout

    # the third row: a governed file edited by hand and committed without a decision
    hand_edit(ws, "regulator/identity/invariants.md", "Anything goes.\n")
    ws.commit("loosen the invariants (no decision)")
    lint, room = run_documented(ws, clone(ws, tmp_path, "edited"), before)
    assert (lint.returncode, room.returncode) == (0, 1)
    assert (
        "- identity verify: regulator/identity/invariants.md: its content matches no decision" in room.stdout
    )
    doc = (DOCS / "ci.md").read_text()
    for row in ("| exit 0 | exit 0 |", "| exit 1: `history-unavailable` | exit 1:", "| exit 0 (lint reads"):
        assert row in doc


def test_identity_verify_in_a_clone_reads_decisions_from_history(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    done = ws.run("identity", "verify", cwd=here)
    assert done.returncode == 0, done.stdout
    assert done.stdout.splitlines()[0] == "stores: absent — identity checked against git history"
    data = ws.json("identity", "verify", cwd=here)
    assert data["source"] == "history" and data["ok"] is True
    decided = {f["file"]: f["decided"] for f in data["files"]}
    accept = ws.git("log", "-1", "--format=%H", "--grep=accept proposal", "--", ROUTING).strip()
    baseline = ws.git("log", "--format=%H", "--grep=Regulator-Decision: baseline").strip()
    assert decided[ROUTING] == accept and decided[INTERACTION] == baseline
    assert {f["how"] for f in data["files"]} == {"signed"}


def test_the_room_in_a_clone_shows_unknown_and_disables_actions(fleet: Any, tmp_path: Path) -> None:
    """The interactive room under Pilot in a clone: it watches only what exists (no .regulator/),
    shows every unit `unknown`, says `stores absent` in its header and writes nothing."""
    import asyncio

    from controlroom.app import ControlRoom
    from engine.checkout.workspace import locate

    ws, _ = fleet
    here = clone(ws, tmp_path)
    room, _ = locate(here)
    app = ControlRoom(room, "alice")  # watching, as the real room does
    seen: dict = {}

    async def main() -> None:
        async with app.run_test(size=(150, 42)) as pilot:
            await pilot.pause()
            await pilot.press("2")
            await pilot.pause()
            seen["rows"] = [app.table.render_line(y).text for y in range(1, 5)]
            seen["header"] = str(app._topbar.render())
            seen["decide"] = app.check_action("act", ("decide",))
            await pilot.press("d")
            await pilot.pause()
            seen["detail"] = app._detail.text

    asyncio.run(main())
    assert all(" unknown " in row and " todo " not in row for row in seen["rows"]), seen["rows"]
    assert "stores absent: unit state unknown" in seen["header"]
    assert seen["decide"] is None  # shown, disabled
    assert "no regulator stores here (a clone): act on the host" in seen["detail"]
    assert not (here / ".regulator").exists()


def test_a_branch_cannot_grant_itself_the_ack_it_uses(fleet: Any, tmp_path: Path) -> None:
    """In a clone the policy on disk is the branch's: lint takes trunk's at the merge-base."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    git(here, "checkout", "-q", "-b", "bob-self")
    path = here / "regulator/policy/interaction.yaml"
    policy = bob_acks(path)
    path.chmod(0o644)
    path.write_text(yaml.safe_dump(policy))
    git(here, "add", "-A")
    git(here, "commit", "-q", "-m", "bob joins, by hand")
    bob_resolves_and_lint_refuses(ws, here)


def test_a_replace_ref_cannot_stand_in_for_trunks_policy(fleet: Any, tmp_path: Path) -> None:
    """Refs are shared by every worktree: a unit's `git replace` of the blob trunk's policy names
    would grant it the ack for every reader that honours replace refs. Lint reads objects as stored."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    git(here, "checkout", "-q", "-b", "bob-self")
    path = here / INTERACTION
    policy = bob_acks(path)
    forged = tmp_path / "forged.yaml"
    forged.write_text(yaml.safe_dump(policy))
    stored = git(here, "rev-parse", f"HEAD:{INTERACTION}").strip()
    git(here, "replace", stored, git(here, "hash-object", "-w", str(forged)).strip())
    git(here, "config", "core.useReplaceRefs", "true")  # nor can the repository turn them back on
    assert "bob" in git(here, "show", f"main:{INTERACTION}")  # what a reader honouring replace refs sees
    bob_resolves_and_lint_refuses(ws, here)


def test_a_resolve_committed_in_a_clone_is_signed_as_trunks_policy_asks(fleet: Any, tmp_path: Path) -> None:
    """A clone has no decisions: `--commit` signs by the keys trunk's policy lists, which is what
    lint judges the commit by (it made an unsigned commit that lint then refused, and without a key
    it committed anyway)."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    finding = next((here / "findings").glob("F-*.md")).stem
    args = ["registry", "resolve", finding, "--by", "alice", "--rationale", "fixed upstream", "--commit"]
    keyless = ws.run(*args, cwd=here, env={"REGULATOR_SIGNING_KEY": ""})
    assert keyless.returncode == 3 and "no signing key for alice" in keyless.stderr, keyless.stderr
    git(here, "checkout", "-q", "--", ".")
    done = ws.run("--key", str(alice_key()), *args, cwd=here)
    assert done.returncode == 0, done.stderr
    assert "-----BEGIN SSH SIGNATURE-----" in git(here, "cat-file", "commit", "HEAD")
    lint = ws.run("registry", "lint", "--json", cwd=here)
    assert json.loads(lint.stdout)["errors"] == [], lint.stdout


def test_memory_and_context_in_a_clone_are_unknown_not_empty(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    for args in (["memory"], ["memory", "--json"], ["context", "u1"], ["context", "u1", "--json"]):
        done = ws.run(*args, cwd=here)
        assert done.returncode == 1 and done.stderr.endswith(f"regulator: {ABSENT}\n"), args


def test_identity_show_in_a_clone_is_unknown_not_every_file_differing(fleet: Any, tmp_path: Path) -> None:
    """A reread's try: `identity show` in a clone listed every governed file DIFFERS (no decisions
    to judge them by), exit 0, where `identity verify` found them as decided by git history. It says
    the stores are absent and where the files are judged, exit 1, as the other listings do."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    done = ws.run("identity", "show", cwd=here)
    assert done.returncode == 1 and "DIFFERS" not in done.stdout
    assert done.stdout.splitlines() == [
        ABSENT,
        "decisions and proposals (`regulator identity verify` judges the files by git history): unknown "
        "(the stores hold them, and a clone does not have the stores)",
    ]
    listed = ws.run("identity", "show", "--json", cwd=here)
    assert listed.returncode == 1 and json.loads(listed.stdout) == {"files": [], "proposals": []}
    assert listed.stderr.endswith(f"regulator: {ABSENT}\n")
    assert ws.run("identity", "verify", cwd=here).returncode == 0  # the files, by git history


def test_verify_in_a_clone_is_not_ok(fleet: Any, tmp_path: Path) -> None:
    ws, _ = fleet
    here = clone(ws, tmp_path)
    done = ws.run("verify", cwd=here)
    assert done.returncode == 1 and done.stdout.splitlines()[0] == ABSENT
    assert json.loads(ws.run("verify", "--json", cwd=here).stdout)["ok"] is False


def test_a_branch_that_changes_an_entry_without_its_views_is_told_what_to_run(
    fleet: Any, tmp_path: Path
) -> None:
    """Operator review of D-227: a pull request changing a finding's title failed the views check
    with "(a hand edit?)", though nothing was edited by hand; the docs said trunk's CI writes the
    views. The message now names the command and the commit (D-229)."""
    ws, _ = fleet
    here = clone(ws, tmp_path)
    entry = next((here / "findings").glob("F-*.md"))
    entry.write_text(entry.read_text().replace("title: ", "title: renamed ", 1))
    git(here, "commit", "-qam", "rename a finding", env=ws.env)
    done = ws.run("registry", "views", "--check", cwd=here)
    assert done.returncode == 1
    assert (
        "FINDINGS.md differs from what `regulator registry views` generates: run `regulator registry "
        "views` and commit FINDINGS.md with the entries it lists" in done.stdout
    )
    room = ws.run("controlroom", "--once", "--registers-only", "--trunk", "main", cwd=here)
    assert room.returncode == 1 and "run `regulator registry views` and commit FINDINGS.md" in room.stdout
    ws.run("registry", "views", cwd=here, check=True)
    git(here, "commit", "-qam", "its views", env=ws.env)
    assert ws.run("registry", "views", "--check", cwd=here).returncode == 0
