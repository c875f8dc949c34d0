"""Registers fail closed (design §16.2 lint, §16.3; issue 13): what cannot be read still holds, is
an error, is listed; trunk history that cannot be read fails `--require-history`; a direct push
to trunk is checked commit by commit with `--range A..B`."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import helpers
from tests.helpers import git, make_workspace

FINDING = "findings/F-alert-path-dead.md"
BODY = "The alerter exits 127 on the failure path.\n"


def finding_text(
    resolved: Any = False,
    affects: Any = ("u1",),
    ack: Any = "",
    title: Any = "The alerter cannot run",
    fid: Any = None,
) -> Any:
    front = {
        "id": fid or "F-alert-path-dead",
        "date": "2026-08-11",
        "title": title,
        "affects": list(affects),
        "ack": ack,
        "resolved": resolved,
    }
    return "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + BODY


VALID_HEAD = "---\nid: F-alert-path-dead\ndate: '2026-08-11'\ntitle: x\naffects: [u1]\nack: ''\n"
UNREADABLE = {
    "bad-yaml": (VALID_HEAD + "resolved: [false\n---\n").encode(),
    "conflict-markers": (
        b"---\nid: F-alert-path-dead\ndate: '2026-08-11'\n<<<<<<< HEAD\ntitle: ours\n=======\n"
        b"title: theirs\n>>>>>>> desk\naffects: [u1]\nack: ''\nresolved: false\n---\n"
    ),
    "impossible-date": (
        b"---\nid: F-alert-path-dead\ndate: 2026-02-30\ntitle: x\naffects: [u1]\nack: ''\nresolved: false\n---\n"
    ),
    "invalid-utf8": (VALID_HEAD + "resolved: false\n---\n").encode() + b"caf\xe9 au lait\n",
    "bom": b"\xef\xbb\xbf" + (VALID_HEAD + "resolved: false\n---\n").encode(),
    "duplicate-key": (VALID_HEAD + "resolved: true\nresolved: false\n---\n").encode(),
}
CODE = {
    "bad-yaml": ("unreadable", "not safe YAML"),
    "conflict-markers": ("unreadable", "merge conflict markers (line 4)"),
    "impossible-date": ("schema", "field date: 2026-02-30 is not a real date (line 3)"),
    "invalid-utf8": ("unreadable", "not valid UTF-8 (line 9"),
    "bom": ("unreadable", "byte-order mark"),
    "duplicate-key": ("unreadable", "duplicate key 'resolved' (first given on line 7)"),
}


@pytest.fixture
def ws(tmp_path: Path) -> Any:
    return make_workspace(tmp_path)


def lint(ws: helpers.Workspace, *extra: Any, cwd: Any = None) -> Any:
    done = ws.run("registry", "lint", "--json", *extra, cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    assert (done.returncode == 1) == bool(data["errors"])
    return data


def codes(result: Any, level: Any = "errors") -> Any:
    return sorted((i["code"], i["entry"]) for i in result[level])


def next_up(ws: helpers.Workspace) -> Any:
    return [u["id"] for u in ws.json("registry", "next-up")]


def stale(ws: helpers.Workspace, unit_id: Any) -> Any:
    return next(u for u in ws.json("status")["units"] if u["id"] == unit_id)["staleKnowledge"]


def head(ws: helpers.Workspace) -> Any:
    return ws.git("rev-parse", "HEAD").strip()


# ---- §16.3: unreadable is not absent ------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_an_unreadable_finding_is_an_error_and_keeps_its_trunk_hold(ws: helpers.Workspace, case: Any) -> None:
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    on_trunk = head(ws)
    assert "u1" not in next_up(ws)
    ws.git("checkout", "-q", "-b", "edit")
    (ws.root / FINDING).write_bytes(UNREADABLE[case])
    code, words = CODE[case]

    result = lint(ws)
    assert codes(result) == [(code, FINDING)]
    assert words in result["errors"][0]["message"]
    # the unit stays held as trunk's version holds it, wherever the ladder is asked
    assert stale(ws, "u1") == ["F-alert-path-dead"]
    done = ws.run("registry", "next-up", "--explain", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    data = json.loads(done.stdout)
    assert "u1" not in [u["id"] for u in data["nextUp"]]
    reasons = {u["id"]: u["reasons"] for u in data["excluded"]}["u1"]
    assert reasons == [
        f"stale-knowledge: unresolved F-alert-path-dead (invalid here: {FINDING} holds as on trunk "
        f"at {on_trunk[:12]})"
    ]
    assert f"{FINDING} is invalid ({code}" in done.stderr
    before = ws.digest()
    refused = ws.run("unit", "dispatch", "u1")
    assert refused.returncode == 3 and "F-alert-path-dead" in refused.stderr
    assert ws.digest() == before
    # nothing crashes on it, and --once fails on the lint error
    for args in (["status"], ["registry", "lint"], ["registry", "views", "--check"], ["registry", "records"]):
        done = ws.run(*args)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode in (0, 1), (args, done.stderr)
    once = ws.run("controlroom", "--once", "--json")
    assert once.returncode == 1, once.stderr
    assert any(r.startswith(f"lint error {code}: {FINDING}") for r in json.loads(once.stdout)["exitReasons"])


def test_a_real_merge_conflict_still_holds_its_unit(ws: helpers.Workspace) -> None:
    """Issue 13: a finding broken by a merge conflict stopped holding its unit."""
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    ws.git("checkout", "-q", "-b", "desk")
    ws.write(FINDING, finding_text(title="The alerter cannot run: it lacks its CLI"))
    ws.commit("retitle on the desk")
    ws.git("checkout", "-q", "main")
    ws.write(FINDING, finding_text(title="The alerter is dead"))
    ws.commit("retitle on main")
    ws.git("checkout", "-q", "-b", "merge-desk")
    done = subprocess.run(["git", "merge", "-q", "desk"], cwd=ws.root, env=ws.env, capture_output=True)
    assert done.returncode != 0 and "<<<<<<<" in (ws.root / FINDING).read_text()
    assert "u1" not in next_up(ws)
    assert stale(ws, "u1") == ["F-alert-path-dead"]
    assert codes(lint(ws)) == [("unreadable", FINDING)]


def test_the_last_parseable_version_on_trunk_holds_when_trunk_holds_a_broken_one(
    ws: helpers.Workspace,
) -> None:
    ws.write(FINDING, finding_text(affects=("u3",)))
    ws.commit("file it")
    parseable = head(ws)
    (ws.root / FINDING).write_bytes(UNREADABLE["conflict-markers"])  # affects u1, but unreadable
    ws.commit("a conflict committed to trunk")
    (ws.root / FINDING).write_bytes(UNREADABLE["impossible-date"])
    ws.commit("a date that is no date, committed to trunk")
    assert stale(ws, "u3") == ["F-alert-path-dead"] and stale(ws, "u1") == []
    explained = ws.json("registry", "next-up", "--explain")
    reasons = {u["id"]: u["reasons"] for u in explained["excluded"]}
    assert f"at {parseable[:12]}" in reasons["u3"][0]
    assert "u1" in [u["id"] for u in explained["nextUp"]]


def test_an_unreadable_finding_never_on_trunk_holds_nothing_and_fails_once(ws: helpers.Workspace) -> None:
    ws.git("checkout", "-q", "-b", "new-finding")
    (ws.root / FINDING).write_bytes(UNREADABLE["duplicate-key"])
    ws.commit("a new finding, broken")
    assert "u1" in next_up(ws) and stale(ws, "u1") == []
    done = ws.run("registry", "next-up")
    assert "no parseable version on trunk: it holds nothing" in done.stderr
    once = ws.run("controlroom", "--once")
    assert once.returncode == 1
    assert f"lint error unreadable: {FINDING}" in once.stdout


def test_a_resolved_trunk_version_holds_nothing(ws: helpers.Workspace) -> None:
    ws.write(FINDING, finding_text(resolved=True))
    ws.commit("file it, resolved")
    (ws.root / FINDING).write_bytes(UNREADABLE["bad-yaml"])
    assert stale(ws, "u1") == [] and "u1" in next_up(ws)
    assert codes(lint(ws)) == [("unreadable", FINDING)]


def test_duplicate_keys_never_take_the_last_value(ws: helpers.Workspace) -> None:
    # resolved: true, then resolved: false: last-wins would read it unresolved, a reader sees true
    text = "---\nid: F-x\ndate: '2026-11-01'\ntitle: x\naffects: [u1]\nack: ''\nresolved: true\nresolved: false\n---\n"
    ws.write("findings/F-x.md", text)
    result = lint(ws, "--trunk", "nope")
    assert codes(result) == [("unreadable", "findings/F-x.md")]
    assert "duplicate key 'resolved'" in result["errors"][0]["message"]
    ws.write("findings/F-x.md", text.replace("ack: ''\n", "ack: ''\nack: '2026-11-01 alice'\n"))
    assert "duplicate key 'ack'" in lint(ws, "--trunk", "nope")["errors"][0]["message"]


def test_a_duplicate_key_in_a_policy_file_on_disk_grants_nothing(ws: helpers.Workspace) -> None:
    """Grants come from decisions (design §15.0): a hand edit with a repeated key is not read at all;
    `identity verify` names the edit. (Proposing such a file is refused: the test below.)"""
    path = ws.root / "regulator/policy/interaction.yaml"
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    path.write_text(path.read_text() + "people:\n  mallory:\n    grants: [ack]\n")
    done = ws.run("registry", "ack", "F-nope", "--by", "mallory")
    assert done.returncode in (2, 3) and "Traceback" not in done.stderr
    verify = ws.run("identity", "verify")
    assert verify.returncode == 1 and "interaction.yaml" in verify.stdout


def test_a_proposed_policy_with_a_duplicate_key_is_refused(ws: helpers.Workspace, tmp_path: Path) -> None:
    source = tmp_path / "routing.yaml"
    current = (ws.root / "regulator/policy/routing.yaml").read_text()
    source.write_text(current + "intakeDebtDays: 3\nintakeDebtDays: 30\n")
    before = ws.digest()
    done = ws.run(
        "identity", "propose", "--file", "regulator/policy/routing.yaml", "--content-from", str(source),
        "--rationale", "r", "--by", "alice",
    )  # fmt: skip
    assert done.returncode == 2 and "duplicate key 'intakeDebtDays'" in done.stderr
    assert ws.digest() == before


def test_views_list_invalid_entries_as_invalid(ws: helpers.Workspace) -> None:
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    (ws.root / FINDING).write_bytes(UNREADABLE["conflict-markers"])
    ws.write("findings/F-fine.md", finding_text(fid="F-fine", affects=("u3",)))
    ws.write("intake/I-broken.md", "---\nid: I-broken\ndate: 2026-02-30\ntitle: x\ndisposition: new\n---\n")
    assert ws.run("registry", "views").returncode == 0
    findings = (ws.root / "FINDINGS.md").read_text()
    intake = (ws.root / "INTAKE.md").read_text()
    assert " entries, " not in findings  # no count line (D-236)
    row = next(line for line in findings.splitlines() if "F-alert-path-dead" in line)
    assert (
        "INVALID (unreadable): `holds merge conflict markers (line 4): resolve the conflict; holds as on trunk at "
        in row
    )
    assert row.endswith("| `u1` |  | invalid |")
    assert "F-fine" in findings
    assert "[`I-broken`](intake/I-broken.md) |  | INVALID (schema): `field date: 2026-02-30" in intake
    assert ws.run("registry", "views", "--check").returncode == 0


def test_records_lists_an_invalid_record_and_exits_1(ws: helpers.Workspace) -> None:
    assert ws.run("registry", "records").returncode == 0
    ws.write("records/REG-CLM-broken.md", "---\nid: REG-CLM-broken\nlabel: x\nlabel: y\n---\n")
    done = ws.run("registry", "records")
    assert done.returncode == 1
    assert "REG-CLM-broken  INVALID  records/REG-CLM-broken.md: unreadable:" in done.stdout
    assert "duplicate key 'label'" in done.stdout
    assert "REG-CMP-register-lint" in done.stdout  # the valid ones are still listed
    assert "1 record(s) invalid" in done.stderr
    done = ws.run("registry", "records", "--json")
    assert done.returncode == 1
    rows = {r["id"]: r for r in json.loads(done.stdout)}
    assert rows["REG-CLM-broken"]["invalid"].startswith("unreadable: ")
    assert rows["REG-CMP-register-lint"]["invalid"] is None


# ---- §16.2: --require-history -------------------------------------------------------------------


def test_require_history_fails_in_a_shallow_clone_and_without_trunk(
    ws: helpers.Workspace, tmp_path: Path
) -> None:
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    ws.commit("another commit, so depth 1 cuts history")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{ws.root}", str(shallow), env=ws.env)
    assert git(shallow, "rev-parse", "--is-shallow-repository").strip() == "true"
    # without the flag: a warning, exit 0, never reported as passing
    done = ws.run("registry", "lint", cwd=shallow)
    assert done.returncode == 0 and "history NOT checked" in done.stdout
    done = ws.run("registry", "lint", "--require-history", cwd=shallow)
    assert done.returncode == 1
    assert (
        "error: history-unavailable: no deletion observed (trunk history unavailable: the clone is shallow)"
        in (done.stdout)
    )
    assert "(--require-history: check out with full depth)" in done.stdout
    result = lint(ws, "--require-history", cwd=shallow)
    assert codes(result) == [("history-unavailable", "(history)")] and result["historyChecked"] is False
    # no trunk: the next step is the trunk's name, not a deeper checkout (D-229), with --range too,
    # where a --trunk naming nothing passed unchecked
    range_spec = f"{ws.git('rev-parse', 'HEAD~1').strip()}..{ws.git('rev-parse', 'HEAD').strip()}"
    for extra in ((), ("--range", range_spec)):
        result = lint(ws, "--require-history", "--trunk", "nope", *extra)
        assert codes(result) == [("history-unavailable", "(history)")], (extra, result)
        message = result["errors"][0]["message"]
        assert "no trunk branch 'nope' (nor origin/nope)" in message, message
        assert "name trunk's branch as this clone has it (--trunk main, never origin/main" in message
    warned = lint(ws, "--trunk", "nope", "--range", range_spec)
    assert warned["errors"] == [] and codes(warned, "warnings") == [("history-unavailable", "(history)")]
    # full history: passes
    full = tmp_path / "full"
    git(tmp_path, "clone", "-q", f"file://{ws.root}", str(full), env=ws.env)
    done = ws.run("registry", "lint", "--require-history", cwd=full)
    assert done.returncode == 0 and "history checked" in done.stdout


# ---- §16.2: --range A..B ------------------------------------------------------------------------


@pytest.fixture
def pushed(ws: helpers.Workspace) -> Any:
    """A finding on trunk; returns (ws, A) with A the trunk commit before the push."""
    ws.write(FINDING, finding_text())
    ws.commit("file it")
    return ws, head(ws)


def test_a_direct_push_flipping_resolved_is_caught_by_range(pushed: Any) -> None:
    ws, before = pushed
    ws.write(FINDING, finding_text(resolved=True))
    ws.commit("close it quietly")  # straight on trunk, no trailer
    after = head(ws)
    # HEAD is trunk: the branch guard sees nothing uncommitted, and lint over trunk's history since
    # the baseline names the flip (design §26)
    assert codes(lint(ws)) == [("unauthorized-change", FINDING)]
    result = lint(ws, "--range", f"{before}..{after}")
    assert codes(result) == [("unauthorized-change", FINDING)] and result["historyChecked"] is True
    message = result["errors"][0]["message"]
    assert f"resolved changed by {after[:12]} (close it quietly)" in message
    assert f"no Authorized-by: <person with the ack grant> trailer in {after[:10]}" in message
    text = ws.run("registry", "lint", "--range", f"{before}..{after}")
    assert text.returncode == 1 and f"history checked (every commit of {before}..{after})" in text.stdout
    # a later authorized commit does not authorize the quiet one: the commit that changes it must
    ws.write(FINDING, finding_text(resolved=True) + "\n")
    ws.commit("resolve: the alerter ships its CLI\n\nAuthorized-by: alice")
    assert codes(lint(ws, "--range", f"{before}..{head(ws)}")) == [("unauthorized-change", FINDING)]
    # the same push made right: the flip carries the trailer itself
    ws.git("reset", "-q", "--hard", before)
    ws.write(FINDING, finding_text(resolved=True))
    ws.commit("resolve: the alerter ships its CLI\n\nAuthorized-by: alice")
    assert lint(ws, "--range", f"{before}..{head(ws)}")["errors"] == []
    # branch names are revisions too
    ws.git("branch", "before-push", before)
    assert lint(ws, "--range", "before-push..main")["errors"] == []


def test_range_checks_every_commit_for_deletions(pushed: Any) -> None:
    ws, before = pushed
    (ws.root / FINDING).unlink()
    ws.commit("drop it")
    dropped = head(ws)
    ws.write(FINDING, finding_text())
    ws.commit("put it back")
    # the tree at B has it again; the commit that deleted it is still on trunk
    result = lint(ws, "--range", f"{before}..{head(ws)}")
    assert codes(result) == [("tombstone-not-delete", FINDING)]
    assert f"deleted by {dropped[:12]} (drop it)" in result["errors"][0]["message"]
    # back by the range's end: nothing to restore, and no "resolve it" that would be refused (D-237)
    assert "a later commit of the range brought it back" in result["errors"][0]["message"]
    assert "withdraw it in place" not in result["errors"][0]["message"]
    # deleted for good within the range: restore it and withdraw it in place
    (ws.root / FINDING).unlink()
    ws.commit("drop it again")
    message = lint(ws, "--range", f"{before}..{head(ws)}")["errors"][-1]["message"]
    assert "withdraw it in place" in message


def test_range_authorizes_with_the_policy_at_a(pushed: Any) -> None:
    ws, before = pushed
    path = ws.root / "regulator/policy/interaction.yaml"
    policy = yaml.safe_load(path.read_text())
    policy["people"]["mallory"] = {"grants": ["ack"], "emails": ["mallory@example.org"]}
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    path.write_text(yaml.safe_dump(policy))
    ws.commit("grant myself ack", email="mallory@example.org")
    ws.write(FINDING, finding_text(resolved=True))
    ws.commit("resolve\n\nAuthorized-by: mallory", email="mallory@example.org")
    result = lint(ws, "--range", f"{before}..{head(ws)}")
    assert codes(result) == [("unauthorized-change", FINDING)]
    assert "Authorized-by: mallory does not hold the ack grant" in result["errors"][0]["message"]
    assert f"ack grants as the policy at {before} gives them" in result["errors"][0]["message"]


def test_range_removing_an_ack_and_arriving_acked(pushed: Any) -> None:
    ws, before = pushed
    ws.write(FINDING, finding_text(ack="2026-11-20 alice") + "\n")
    ws.commit("ack\n\nAuthorized-by: alice")
    acked = head(ws)
    ws.write(FINDING, finding_text())
    ws.commit("unack")
    ws.write("findings/F-new.md", finding_text(fid="F-new", ack="2026-11-20 alice"))
    ws.commit("a new finding, pre-acked")
    # the range from the acked commit on: the ack removal and the new entry, both unauthorized
    result = lint(ws, "--range", f"{acked}..{head(ws)}")
    assert codes(result) == [("ack-removed", FINDING), ("unauthorized-change", "findings/F-new.md")]
    assert "downgrades the hard re-gate problem to a notice" in result["errors"][0]["message"]
    # over the whole push too: alice's authorized ack does not authorize the commit that removes it
    result = lint(ws, "--range", f"{before}..{head(ws)}")
    assert codes(result) == [("ack-removed", FINDING), ("unauthorized-change", "findings/F-new.md")]


def test_range_through_a_merge(pushed: Any) -> None:
    ws, before = pushed
    ws.git("checkout", "-q", "-b", "side")
    ws.write(FINDING, finding_text(affects=()))
    ws.commit("side: clear affects")
    side = head(ws)
    ws.git("checkout", "-q", "main")
    ws.write("intake/I-x.md", "---\nid: I-x\ndate: '2026-11-20'\ntitle: x\ndisposition: new\n---\n")
    ws.commit("main: intake")
    ws.git("merge", "-q", "--no-ff", "side", "-m", "merge side")
    result = lint(ws, "--range", f"{before}..{head(ws)}")
    assert codes(result) == [("unauthorized-change", FINDING)]
    assert f"affects changed by {side[:12]} (side: clear affects)" in result["errors"][0]["message"]


def test_range_sees_what_a_merge_itself_changes(pushed: Any) -> None:
    ws, before = pushed
    ws.git("checkout", "-q", "-b", "side")
    ws.write(FINDING, finding_text(title="side title"))
    ws.commit("side: retitle")
    ws.git("checkout", "-q", "main")
    ws.write(FINDING, finding_text(title="main title"))
    ws.commit("main: retitle")
    subprocess.run(["git", "merge", "-q", "side"], cwd=ws.root, env=ws.env, capture_output=True)
    ws.write(FINDING, finding_text(title="merged", resolved=True))  # neither side resolved it
    ws.commit("merge side")
    merge = head(ws)
    assert len(ws.git("rev-list", "--parents", "-n", "1", merge).split()) == 3
    result = lint(ws, "--range", f"{before}..{merge}")
    assert codes(result) == [("unauthorized-change", FINDING)]
    assert f"resolved changed by {merge[:12]} (merge side)" in result["errors"][0]["message"]


def test_range_flags_a_push_that_makes_a_finding_unreadable(pushed: Any) -> None:
    ws, before = pushed
    (ws.root / FINDING).write_bytes(UNREADABLE["conflict-markers"])
    ws.commit("oops, a conflict")
    result = lint(ws, "--range", f"{before}..{head(ws)}")
    assert codes(result) == [("unauthorized-change", FINDING), ("unreadable", FINDING)]
    assert "made unreadable by" in " ".join(i["message"] for i in result["errors"])


@pytest.mark.parametrize("spec", ["main", "main...main", "..main", "main..", "-x..main", "main..nosuch"])
def test_a_bad_range_is_bad_input(pushed: Any, spec: Any) -> None:
    ws, _ = pushed
    done = ws.run("registry", "lint", "--range", spec)
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("regulator: --range") and done.stderr.count("\n") == 1


def test_a_range_from_forty_zeros_says_to_lint_without_it(pushed: Any) -> None:
    """What a CI system sends for a push that creates the branch (docs/ci.md): the line says what to do."""
    ws, _ = pushed
    done = ws.run("registry", "lint", "--range", f"{'0' * 40}..main")
    assert done.returncode == 2 and "run lint without --range" in helpers.one_line(done)


def test_a_root_that_is_no_folder_says_so(pushed: Any, tmp_path: Path) -> None:
    ws, _ = pushed
    done = ws.run("--root", str(tmp_path / "nowhere"), "status")
    assert done.returncode == 2 and "does not exist" in helpers.one_line(done)


def test_range_in_a_shallow_clone_needs_history(pushed: Any, tmp_path: Path) -> None:
    ws, before = pushed
    ws.write(FINDING, finding_text(resolved=True))
    ws.commit("close it quietly")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{ws.root}", str(shallow), env=ws.env)
    spec = f"{before}..{head(ws)}"
    done = ws.run("registry", "lint", "--range", spec, "--require-history", "--json", cwd=shallow)
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert codes(data) == [("history-unavailable", "(history)")] and data["historyChecked"] is False
    assert "the clone is shallow" in data["errors"][0]["message"]


def test_lint_codes_are_the_documented_set() -> None:
    """Every code lint can emit is in registry.lint.CODES, and docs/registers.md lists exactly those."""
    from registry.lint import CODES

    doc = (Path(__file__).parent.parent / "docs/registers.md").read_text()
    documented = {
        line.split("|")[1].strip().strip("`")
        for line in doc.splitlines()
        if line.startswith("| `") and line.count("|") >= 3
    }
    assert documented == set(CODES)
    sources = (Path(__file__).parent.parent / "registry").glob("*.py")
    emitted = set()
    for source in sources:
        emitted |= set(re.findall(r'Issue\(\s*"(?:error|warning|notice)",\s*"([a-z-]+)"', source.read_text()))
    assert emitted and emitted <= set(CODES)
