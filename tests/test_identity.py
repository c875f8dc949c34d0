"""Identity and policy change only by decision (design §7); the host's Python API (issue 3)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import helpers
from tests.helpers import git, make_key, report_args

INVARIANTS = "regulator/identity/invariants.md"


def hand_edit(path: Any, text: Any) -> None:
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    path.write_text(text)


def propose(ws: helpers.Workspace, file: Any, content: Any, tmp_path: Path, **kw: Any) -> Any:
    source = tmp_path / "proposed.txt"
    source.write_text(content)
    args = ["identity", "propose", "--file", file, "--content-from", str(source), "--rationale", "because"]
    if "by" in kw:
        args += ["--by", kw["by"]]
    return ws.run(*args, "--json", cwd=kw.get("cwd"))


def test_hand_edit_fails_verify_and_accepted_proposal_passes(ws: helpers.Workspace, tmp_path: Path) -> None:
    path = ws.root / INVARIANTS
    assert not os.access(path, os.W_OK) or os.geteuid() == 0  # left read-only on disk
    assert not (os.stat(path).st_mode & stat.S_IWUSR)
    assert ws.run("identity", "verify").returncode == 0
    original = path.read_text()
    hand_edit(path, original + "- INV-005: edited by hand\n")
    done = ws.run("identity", "verify")
    assert done.returncode == 1 and INVARIANTS in done.stdout
    hand_edit(path, original)
    assert ws.run("identity", "verify").returncode == 0

    new = original + "- INV-005: every unit names its evidence.\n"
    done = propose(ws, INVARIANTS, new, tmp_path, by="alice")
    assert done.returncode == 0, done.stderr
    proposal = json.loads(done.stdout)["id"]
    assert path.read_text() == original  # a proposal changes nothing yet
    done = ws.run("identity", "accept", proposal, "--by", "alice", "--rationale", "agreed at review")
    assert done.returncode == 0, done.stderr
    assert path.read_text() == new
    assert ws.run("identity", "verify").returncode == 0
    decision = ws.events("identity")[-1]
    assert (decision["decision"], decision["by"], decision["rationale"]) == (
        "accepted",
        "alice",
        "agreed at review",
    )
    assert decision["contentHash"].startswith("sha256:")
    log = git(ws.root, "log", "-1", "--format=%B")
    assert proposal in log and "alice" in log and "agreed at review" in log
    assert git(ws.root, "status", "--porcelain", "--", INVARIANTS) == ""
    # deciding again is refused
    assert ws.run("identity", "reject", proposal, "--by", "alice", "--rationale", "x").returncode == 3


def test_policy_change_takes_effect_at_once(ws: helpers.Workspace, tmp_path: Path) -> None:
    policy = yaml.safe_load((ws.root / "regulator/policy/interaction.yaml").read_text())
    bob_key = make_key(tmp_path / "keys", "bob")
    bob = {"REGULATOR_SIGNING_KEY": str(bob_key)}
    policy["people"]["bob"] = {
        "grants": ["resolve"],
        "resolve": ["info", "advisory"],
        "keys": [Path(f"{bob_key}.pub").read_text().strip()],
    }
    done = propose(ws, "regulator/policy/interaction.yaml", yaml.safe_dump(policy), tmp_path, by="alice")
    assert done.returncode == 0, done.stderr
    ws.run(
        "identity",
        "accept",
        json.loads(done.stdout)["id"],
        "--by",
        "alice",
        "--rationale",
        "bob joins",
        check=True,
    )
    ws.run(*report_args(severity="advisory", affects=["u1"]), "--by", "alice", check=True)
    ws.run(*report_args(severity="blocking", affects=["u3"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    obs = {o["unit"]: o["id"] for o in ws.json("obligations")}
    before = ws.digest()
    done = ws.run(
        "obligation",
        "resolve",
        obs["u3"],
        "--by",
        "bob",
        "--disposition",
        "no-action",
        "--rationale",
        "looks fine",
        env=bob,
    )
    assert done.returncode == 3 and "blocking" in done.stderr
    assert ws.digest() == before
    ws.run(
        "obligation",
        "resolve",
        obs["u1"],
        "--by",
        "bob",
        "--disposition",
        "no-action",
        "--rationale",
        "looks fine",
        env=bob,
        check=True,
    )


def test_proposal_rules(ws: helpers.Workspace, tmp_path: Path) -> None:
    before = ws.digest()
    # not a governed file; a broken policy; a person not in the policy; a lease without the tool
    assert propose(ws, "README.md", "x", tmp_path, by="alice").returncode == 2
    assert propose(ws, "../etc/passwd", "x", tmp_path, by="alice").returncode == 2
    assert propose(ws, "regulator/policy/routing.yaml", "severities: 3", tmp_path, by="alice").returncode == 2
    assert propose(ws, INVARIANTS, "x", tmp_path, by="mallory").returncode == 3
    b1 = ws.lease("b1")
    before = ws.digest()
    assert propose(ws, INVARIANTS, "x", tmp_path, cwd=b1).returncode == 3
    assert ws.digest() == before
    u1 = ws.lease("u1")
    done = propose(ws, INVARIANTS, "# Invariants\n", tmp_path, cwd=u1)
    assert done.returncode == 0, done.stderr
    proposal = json.loads(done.stdout)["id"]
    assert ws.events("identity")[-1]["unit"] == "u1"
    # only a person with the accept grant decides
    assert ws.run("identity", "accept", proposal, "--by", "mallory", "--rationale", "x").returncode == 3
    # a file changed since the proposal is refused
    path = ws.root / INVARIANTS
    hand_edit(path, path.read_text() + "drift\n")
    done = ws.run("identity", "accept", proposal, "--by", "alice", "--rationale", "x")
    assert done.returncode == 3 and "propose again" in done.stderr
    ws.run("identity", "reject", proposal, "--by", "alice", "--rationale", "drifted", check=True)
    shown = ws.json("identity", "show")
    assert [p["status"] for p in shown["proposals"]] == ["rejected"]


def test_python_api_for_a_host(ws: helpers.Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.doors import api

    monkeypatch.setenv("REGULATOR_NOW", "2026-11-29T12:00:00Z")
    u1 = ws.lease("u1")
    r1 = ws.lease("r1")
    entry = api.remember(
        u1 / ".regulator-lease.json", "TZ", "set TZ=UTC", ["ci.log"], "2026-12-29", scope=["implement"]
    )
    signal = api.report_intelligence(
        r1 / ".regulator-lease.json",
        subject="vendor/left-pad.js",
        claim="modified copy",
        observation="diff",
        evidence=["vendor/left-pad.js"],
        confidence="high",
        reportedSeverity="blocking",
        affectedUnits=["u1"],
    )
    assert ws.events("memory")[0]["id"] == entry and ws.events("memory")[0]["unit"] == "u1"
    assert ws.events("signals")[0]["id"] == signal and ws.events("signals")[0]["unit"] == "r1"
    text = api.render_context(ws.root, "u1")
    assert text == ws.run("context", "u1", check=True).stdout
    assert "set TZ=UTC" in text


def test_a_proposals_diff_shows_control_characters_escaped_in_their_line(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """A carriage return, a separator or NEL inside proposed content is one line's character, shown
    escaped (`\\x0d`), never a line break that could draw a fake `+` line (design §16.1)."""
    path = "regulator/identity/glossary.md"
    current = (ws.root / path).read_text()
    done = propose(ws, path, current + "safe line\r+EVIL\x1c\x85\u2028end\n", tmp_path, by="alice")
    assert done.returncode == 0, done.stderr
    shown = ws.run("identity", "show", json.loads(done.stdout)["id"])
    assert shown.returncode == 0, shown.stderr
    added = [line for line in shown.stdout.splitlines() if "safe line" in line]
    assert added and "\\x0d+EVIL\\x1c\\x85\\u2028end" in added[0], shown.stdout
    assert not any(line.startswith("+EVIL") for line in shown.stdout.split("\n"))


def test_a_unit_proposing_to_move_the_stores_is_said_plainly_to_the_person_deciding(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """store.yaml is governed (D-90): a unit may propose to repoint every host at another database.
    `identity show` puts that first, as it does a key a unit would add, with the URL escaped, and
    the diff from no decided file has no phantom empty line."""
    worktree = ws.lease("r1")
    url = "postgresql://evil@/x?host=/tmp/\x1b[2Jz"
    done = propose(ws, "regulator/policy/store.yaml", f"url: {url}\n", tmp_path, cwd=worktree)
    assert done.returncode == 0, done.stderr
    shown = ws.run("identity", "show", json.loads(done.stdout)["id"])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    warning = "! moves the stores: files -> postgresql://evil@/x?host=/tmp/\\x1b[2Jz (proposed by unit r1)"
    assert warning in lines and "\x1b" not in shown.stdout
    # one line, its newline ending it: no empty `+` line after it (an operator's review, D-334)
    assert "@@ -0,0 +1 @@" in lines and "+" not in lines


def test_a_unit_has_at_most_ten_proposals_awaiting_a_decision(ws: helpers.Workspace, tmp_path: Path) -> None:
    """An adversarial review: a unit with `propose_policy_change` appended a proposal a second, each
    one making every reader (the door's status for every unit too) fold the stores from their first
    byte again, and each landing in the owner's review. Ten may await a decision; the eleventh is
    refused (exit 3, nothing written) until a person decides one; a person is never capped."""
    from engine.commands.proposals import MAX_PENDING_PER_UNIT

    u1 = ws.lease("u1")
    ids = []
    for i in range(MAX_PENDING_PER_UNIT):
        done = propose(ws, INVARIANTS, f"# Invariants {i}\n", tmp_path, cwd=u1)
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["id"])
    before = ws.digest()
    done = propose(ws, INVARIANTS, "# one more\n", tmp_path, cwd=u1)
    assert done.returncode == 3
    assert f"u1 has {MAX_PENDING_PER_UNIT} proposals awaiting a person's decision" in helpers.one_line(done)
    assert ws.digest() == before
    assert propose(ws, INVARIANTS, "# alice's\n", tmp_path, by="alice").returncode == 0  # a person
    ws.run("identity", "reject", ids[0], "--by", "alice", "--rationale", "no", check=True)
    assert propose(ws, INVARIANTS, "# one more\n", tmp_path, cwd=u1).returncode == 0  # room again


def test_the_review_marks_a_proposal_that_widens_what_a_profile_grants(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """An adversarial review: a unit's profiles.yaml mapping Bash and Write under `read` (so every
    profile that reads gets a shell) showed as a plain diff. `identity show` marks each tool a
    profile gains and each name a harness maps under a tool, as it marks a key or a command."""
    profiles = (ws.root / "regulator" / "policy" / "profiles.yaml").read_text()
    wider = profiles.replace(
        "  bookkeeper:\n    tools:\n    - read\n", "  bookkeeper:\n    tools:\n    - read\n    - shell\n"
    )
    wider += "harnessTools:\n  claude-code:\n    read: [Read, Grep, Glob, LS, Bash, Write]\n"
    assert wider.count("- shell") == profiles.count("- shell") + 1
    u1 = ws.lease("u1")
    done = propose(ws, "regulator/policy/profiles.yaml", wider, tmp_path, cwd=u1)
    assert done.returncode == 0, done.stderr
    shown = ws.run("identity", "show", json.loads(done.stdout)["id"], check=True).stdout
    assert "! grants profile bookkeeper: shell (proposed by unit u1)" in shown
    assert "\nstatus: pending, 2 !\n" in shown  # as the lists say it
    assert "! maps claude-code's Bash, Write under read: every profile granting read gets them" in shown
    listed = ws.run("identity", "show", check=True).stdout  # the list says it too (an operator's review)
    row = next(line for line in listed.splitlines() if json.loads(done.stdout)["id"] in line)
    assert "pending, 2 !" in row
    assert (
        "! what accepting it would grant, run, move, loosen or hasten: `regulator identity show ID` lists each"
        in listed
    )
    # the room's Identity rows (and --once's, the same rows) mark it as the list does
    once = ws.run("controlroom", "--once").stdout.splitlines()
    (room_row,) = [
        line for line in once if line.startswith("proposal ") and json.loads(done.stdout)["id"][-8:] in line
    ]
    assert "pending, 2 !" in room_row
    # and the JSON of both, for a script (an operator's review: --once --json had no proposals)
    ident = json.loads(done.stdout)["id"]
    once_json = json.loads(ws.run("controlroom", "--once", "--json").stdout)  # its exit code is the fleet's
    for document in (ws.json("identity", "show"), once_json):
        (listed_row,) = [p for p in document["proposals"] if p["id"] == ident]
        assert (listed_row["status"], listed_row["marks"], listed_row["unit"]) == ("pending", 2, "u1")


def test_units_proposing_at_once_from_processes_of_their_own_pass_no_cap(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    """An adversarial review of the cap: processes with u1's lease proposing at once were each
    counted before any appended, and most passed (20 of 24). Held here at the identity store's own
    lock until all of them wait (/proc/locks), they still pass only ten: the count and the append
    are one step inside the decide lock."""
    import fcntl
    import subprocess

    from engine.commands.proposals import MAX_PENDING_PER_UNIT
    from tests.serving import lock_waiters, wait_for

    lease = ws.lease("u1") / ".regulator-lease.json"
    identity, decide = ws.store("identity"), ws.root / ".regulator" / "decide.lock"
    sources = []
    for i in range(MAX_PENDING_PER_UNIT + 4):
        source = tmp_path / f"glossary-{i}.md"
        source.write_text(f"# Glossary {i}\n")
        sources.append(source)
    fd = os.open(identity, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # no append gets through until every process waits
        running = [
            subprocess.Popen(
                [
                    helpers.REGULATOR,
                    "--lease",
                    str(lease),
                    "identity",
                    "propose",
                    "--file",
                    "regulator/identity/glossary.md",
                    "--content-from",
                    str(source),
                    "--rationale",
                    "at once",
                ],
                cwd=ws.root,
                env=ws.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for source in sources
        ]
        wait_for(lambda: lock_waiters(identity, decide) == len(sources), "every proposal waiting on a lock")
    finally:
        os.close(fd)
    codes = sorted(p.wait(timeout=120) for p in running)
    assert codes == [0] * MAX_PENDING_PER_UNIT + [3] * 4, codes
    proposals = [e for e in ws.events("identity") if e["kind"] == "proposal" and e.get("unit") == "u1"]
    assert len(proposals) == MAX_PENDING_PER_UNIT
