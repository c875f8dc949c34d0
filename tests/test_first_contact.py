"""First contact, third cut (issue 31): the demo says where it lives, its worktrees are git
worktrees (evidence current and changed), a finding is resolved by a signed action from the CLI and
the room, a bad line is dismissed from the room, and the README says all of it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from controlroom.app import ControlRoom
from controlroom.demo import KEY_DIR, OWNER
from controlroom.header import HEADER_LEGEND
from controlroom.views import RowKey
from engine.base import clock
from engine.checkout.workspace import Workspace
from tests.helpers import NOW, REGULATOR, clean_env
from tests.room import demo_workspace, run, screen_lines, until

ROOT = Path(__file__).resolve().parent.parent
FIXED = clock.parse_time(NOW)


@pytest.fixture
def demo(tmp_path: Any, monkeypatch: Any) -> Workspace:
    return demo_workspace(tmp_path, monkeypatch)


def cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess:
    """The real command on the demo, signing with the demo's key for alice, from a shell whose git
    identity (GIT_AUTHOR_EMAIL=alice@example.org) is not one the demo's policy lists for her."""
    env = clean_env(REGULATOR_NOW=NOW, GIT_CONFIG_GLOBAL="/dev/null")
    key = str(ws.root / KEY_DIR / OWNER)
    return subprocess.run(
        [REGULATOR, "--root", str(ws.root), "--key", key, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def git(ws: Workspace, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ws.root), *args], capture_output=True, text=True, check=True
    ).stdout


FINDING = "F-alert-path-dead"


# ---- resolving a finding: the CLI -------------------------------------------------------------------


def test_registry_resolve_writes_commits_signed_and_releases_the_unit(demo: Any) -> None:
    path = demo.root / "findings" / f"{FINDING}.md"
    before = path.read_text()
    assert cli(demo, "unit", "dispatch", "release-hardening/manifest").returncode == 3  # held by the finding
    empty = cli(demo, "registry", "resolve", FINDING, "--by", "alice", "--rationale", " ", "--commit")
    assert empty.returncode == 2 and "--rationale" in empty.stderr and path.read_text() == before
    bad = cli(demo, "registry", "resolve", "alert-path-dead", "--by", "alice", "--rationale", "r")
    assert bad.returncode == 2 and "not a finding id" in bad.stderr and path.read_text() == before
    head = git(demo, "rev-parse", "HEAD")

    done = cli(
        demo,
        "registry",
        "resolve",
        FINDING,
        "--by",
        "alice",
        "--rationale",
        "the runner ships it",
        "--commit",
    )
    assert done.returncode == 0, done.stderr
    assert f"resolved {FINDING} and committed it with Authorized-by: alice" in done.stdout
    text = path.read_text()
    assert "resolved: true" in text and text.rstrip().endswith(
        "Resolved 2026-11-29 by alice: the runner ships it"
    )
    log = git(demo, "log", "-1", "--format=%B%n%G?%n%H")
    assert f"registry: resolve {FINDING} by alice" in log and "Authorized-by: alice" in log
    assert git(demo, "rev-parse", "HEAD^").strip() == head.strip()  # one commit
    assert "-----BEGIN SSH SIGNATURE-----" in git(demo, "cat-file", "commit", "HEAD")  # signed by alice's key
    # authored by alice as the policy lists her (lint authorizes only a listed email), whatever the
    # shell's git identity says
    assert git(demo, "log", "-1", "--format=%an <%ae>").strip() == "alice <demo@regulator.invalid>"
    assert git(demo, "status", "--porcelain").strip() == ""  # the views followed it in the same commit
    lint = cli(demo, "registry", "lint", "--json")
    assert lint.returncode == 0, lint.stdout
    assert not [i for i in json.loads(lint.stdout)["errors"] if i["entry"] == FINDING]
    queue = json.loads(cli(demo, "registry", "next-up", "--json").stdout)
    assert "release-hardening/manifest" in [u["id"] for u in queue]
    assert cli(demo, "unit", "dispatch", "release-hardening/manifest").returncode == 0

    again = cli(demo, "registry", "resolve", FINDING, "--by", "alice", "--rationale", "r", "--commit")
    assert again.returncode == 3 and "already resolved" in again.stderr


def test_a_rationale_is_written_as_text_never_as_structure(demo: Any) -> None:
    """A line break made a heading of its own in the register, and an ESC sequence or a bidi
    override went into the file raw: written escaped, one line, as a retro's title is."""
    path = demo.root / "findings" / f"{FINDING}.md"
    done = cli(
        demo, "registry", "resolve", FINDING, "--by", "alice", "--rationale", "one\n# two \x1b[31m\u202e"
    )
    assert done.returncode == 0, done.stderr
    last = path.read_text().rstrip("\n").splitlines()[-1]
    assert last.startswith("Resolved ") and "one" in last and "# two" in last
    assert not any(line.startswith("#") for line in path.read_text().splitlines())
    assert "\x1b" not in path.read_text() and "\u202e" not in path.read_text()


def test_a_relative_key_is_read_from_where_the_person_typed_it(demo: Any) -> None:
    """`--key ../KEY` from a subfolder: git, which signs the commit in the workspace's root, is
    given the key's whole path (it read `../KEY` from the root: written, then "git did not commit
    it")."""
    env = clean_env(REGULATOR_NOW=NOW, GIT_CONFIG_GLOBAL="/dev/null")
    head = git(demo, "rev-parse", "HEAD").strip()
    done = subprocess.run(
        [REGULATOR, "--key", f"../{KEY_DIR}/{OWNER}", "registry", "resolve", FINDING, "--by", "alice",
         "--rationale", "the runner ships it", "--commit"],
        cwd=demo.root / "findings", capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert git(demo, "rev-parse", "HEAD^").strip() == head
    assert "-----BEGIN SSH SIGNATURE-----" in git(demo, "cat-file", "commit", "HEAD")


@pytest.mark.parametrize("given", ["--key", "REGULATOR_SIGNING_KEY"])
def test_a_key_named_from_home_is_read_from_home(demo: Any, given: str) -> None:
    """`--key '~/…'` or `REGULATOR_SIGNING_KEY='~/…'` (quoted, so no shell expanded it): the key is
    read from the home folder, as git reads `user.signingkey`; it was looked for in a folder
    named `~`, and `--commit` refused for want of a key."""
    env = clean_env(REGULATOR_NOW=NOW, GIT_CONFIG_GLOBAL="/dev/null", HOME=str(demo.root))
    key = f"~/{KEY_DIR}/{OWNER}"
    flag = ["--key", key] if given == "--key" else []
    if given != "--key":
        env["REGULATOR_SIGNING_KEY"] = key
    path = demo.root / "findings" / f"{FINDING}.md"
    done = subprocess.run(
        [REGULATOR, *flag, "registry", "resolve", FINDING, "--by", "alice", "--rationale", "from home", "--commit"],
        cwd=demo.root, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "from home" in path.read_text()
    assert "-----BEGIN SSH SIGNATURE-----" in git(demo, "cat-file", "commit", "HEAD")


def test_registry_resolve_needs_the_ack_grant_and_writes_nothing_without(demo: Any) -> None:
    import yaml

    from engine.commands.actors import Actor
    from engine.commands.proposals import decide, propose

    policy_path = demo.root / "regulator/policy/interaction.yaml"
    policy = yaml.safe_load(policy_path.read_text())
    policy["people"]["bob"] = {"grants": ["resolve"], "resolve": ["advisory"]}
    proposal = propose(
        demo,
        "regulator/policy/interaction.yaml",
        yaml.safe_dump(policy).encode(),
        "bob",
        Actor(person="alice"),
    )
    decide(demo, proposal["id"], "alice", "bob joins", "accepted")
    path = demo.root / "findings" / f"{FINDING}.md"
    before = path.read_text()
    done = cli(demo, "registry", "resolve", FINDING, "--by", "bob", "--rationale", "r")
    assert done.returncode == 3 and "lacks the ack grant" in done.stderr
    assert path.read_text() == before


def test_the_veto_names_the_command_that_resolves_a_finding(demo: Any) -> None:
    done = cli(demo, "unit", "dispatch", "release-hardening/manifest")
    assert done.returncode == 3
    assert f"regulator registry resolve {FINDING} --by PERSON --rationale R --commit" in done.stderr


# ---- resolving a finding and dismissing a line: the room ------------------------------------------


def test_the_room_resolves_a_finding_with_the_same_signed_commit(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False, background_checks=False, now=lambda: FIXED)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        app.table.cursor = app.table.keys.index(RowKey("finding", FINDING))
        await pilot.press("r")
        await pilot.pause()
        seen["dialog"] = type(app.screen).__name__
        await pilot.click("#rationale")
        await pilot.press(*"the runner ships it", "enter")
        assert await until(
            pilot, lambda: any("resolved and committed" in n.message for n in app._notifications)
        )
        assert await until(pilot, lambda: not app.snap.stale.get("release-hardening/manifest"))
        await pilot.press("2")
        await pilot.pause()
        seen["units"] = [line for line in screen_lines(app) if "release-harden" in line]  # type: ignore[assignment]

    run(app, script)
    assert seen["dialog"] == "ResolveFindingDialog"
    text = (demo.root / "findings" / f"{FINDING}.md").read_text()
    assert "resolved: true" in text and "Resolved 2026-11-29 by alice: the runner ships it" in text
    log = git(demo, "log", "-1", "--format=%B")
    assert f"registry: resolve {FINDING} by alice" in log and "Authorized-by: alice" in log
    assert seen["units"] and "■" not in seen["units"][0] and FINDING not in seen["units"][0]


def test_the_room_dismisses_a_bad_line_verify_names_signed(demo: Any) -> None:
    with open(demo.store("memory").path, "ab") as handle:
        handle.write(b"not json at all\n")
    before = len(demo.store("identity").read().events)
    app = ControlRoom(demo, "alice", watch=False, background_checks=False, now=lambda: FIXED)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        seen["first"] = app.table.current_key
        await pilot.press("d")
        await pilot.pause()
        seen["dialog"] = " ".join(line.strip("█ ") for line in screen_lines(app))
        await pilot.click("#rationale")
        await pilot.press(*"a test wrote it", "enter")
        assert await until(pilot, lambda: any("dismissed" in n.message for n in app._notifications))
        assert await until(pilot, lambda: not app.snap.verify)  # the checks ran again

    run(app, script)
    assert seen["first"].kind == "bad"  # type: ignore[union-attr]  # the bad line is the first row of Registers
    assert "Dismiss memory:" in seen["dialog"] and "still counts for nothing" in seen["dialog"]  # type: ignore[operator]
    events = demo.store("identity").read().events
    assert len(events) == before + 1 and events[-1]["kind"] == "dismissal" and events[-1]["by"] == "alice"
    assert events[-1]["rationale"] == "a test wrote it" and events[-1]["sig"]
    done = cli(demo, "verify")
    assert done.returncode == 0 and "dismissed" in done.stdout, done.stdout


def test_the_rooms_dismiss_dialog_says_an_edited_line_is_still_read_as_it_stands(demo: Any) -> None:
    path = demo.store("memory").path
    path.write_text(path.read_text().replace("run them with TZ=UTC", "run them with TZ=EST", 1))
    app = ControlRoom(demo, "alice", watch=False, background_checks=False, now=lambda: FIXED)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5")
        await pilot.press("d")
        await pilot.pause()
        seen["dialog"] = " ".join(line.strip("█ ") for line in screen_lines(app))

    run(app, script)
    assert "Dismiss memory:1" in seen["dialog"], seen["dialog"]
    assert "still take it as it stands" in seen["dialog"] and "counts for nothing" not in seen["dialog"]


def test_dismiss_is_disabled_with_a_reason_on_other_rows(demo: Any) -> None:
    app = ControlRoom(demo, "alice", watch=False, background_checks=False, now=lambda: FIXED)
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.press("5", "d")
        await pilot.pause()
        seen["screen"] = type(app.screen).__name__
        seen["notes"] = [n.message for n in app._notifications]  # type: ignore[assignment]

    run(app, script)
    assert seen["screen"] == "Screen"
    assert any("dismiss" in n and "select a bad store line" in n for n in seen["notes"]), seen["notes"]


# ---- the demo ---------------------------------------------------------------------------------------


def test_the_demos_units_work_in_git_worktrees_and_its_evidence_is_checked(demo: Any) -> None:
    listed = git(demo, "worktree", "list", "--porcelain")
    for unit in ("u1", "u3", "r1", "b1"):
        assert f"worktree {demo.root / '.worktrees' / unit}" in listed
        assert f"branch refs/heads/unit/{unit}" in listed
    done = cli(demo, "memory", "--json")
    assert done.returncode == 0, done.stderr
    status = {e["subject"]: (e["evidenceStatus"], e["changedPaths"]) for e in json.loads(done.stdout)}
    assert status["TZ for tests"] == ("current", [])
    assert status["package mirror"] == ("changed", ["ci/mirror.yaml"])
    assert status["GREENGROCER 114"][0] == "unchecked"  # a statement line is no file


def test_the_room_says_where_the_demo_lives(demo: Any) -> None:
    """The welcome and `?` say where the demo lives and how to reopen it, with the key it was opened
    with (the fixture gives it, as `regulator demo` does; an operator's review: `?`'s command without
    `--key` was exit 2)."""
    from controlroom.cli.room import demo_welcome

    key = demo.root / KEY_DIR / OWNER
    app = ControlRoom(
        demo, OWNER, watch=False, background_checks=False, welcome=demo_welcome(demo.root, key, True)
    )
    seen = {}

    async def script(pilot: Any) -> None:
        await pilot.pause(0.3)
        seen["notes"] = [n.message for n in app._notifications]
        await pilot.press("question_mark")
        seen["help"] = "\n".join(app.screen.lines)  # type: ignore[assignment, attr-defined]

    run(app, script, notifications=True)
    note = seen["notes"][0]
    assert f"The demo workspace is {demo.root} (a temporary folder" in note
    assert f"regulator controlroom --root {demo.root} --as alice --key {key}" in note
    assert f"workspace: {demo.root}" in seen["help"]
    assert f"reopen it: regulator controlroom --root {demo.root} --as alice --key {key}\n" in seen["help"]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_regulator_demo_in_a_terminal_shows_where_it_lives(tmp_path: Any) -> None:
    """The README's first command as a person runs it, in an 80×24 terminal (tmux)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = clean_env(
        HOME=str(tmp_path), TMPDIR=str(temp), GIT_CONFIG_GLOBAL="/dev/null", TERM="xterm-256color"
    )
    socket = f"regulator-test-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", socket]
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "80", "-y", "24", REGULATOR, "demo"], env=env, check=True
    )
    try:
        screen = ""
        deadline = time.monotonic() + 90
        while "demo workspace is" not in screen.replace("\n", " ") and time.monotonic() < deadline:
            time.sleep(0.5)
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p", "-J"], capture_output=True, text=True, env=env
            ).stdout
        (folder,) = temp.glob("regulator-demo-*")
        flat = re.sub(r"[\s▌▐▊▎│█]", "", screen)
        assert "demoworkspaceis" in flat, screen
        assert (
            str(folder / "fleet-repo" if (folder / "fleet-repo").exists() else folder).replace(" ", "")
            in flat
        )
        assert "regulatorcontrolroom--root" in flat
        subprocess.run([*tmux, "send-keys", "q"], env=env)
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, capture_output=True)


# ---- the words: README, docs, --help ------------------------------------------------------------------


def test_the_readme_lists_every_header_abbreviation_and_the_first_contact_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for full, narrow, _ in HEADER_LEGEND:
        assert narrow in readme and full in readme, (full, narrow)
    # every count the header shows only when there are any takes its words from the legend
    from controlroom.header import _WHEN_ANY_COUNT, UNKNOWN_WITHOUT_STORES, WHEN_ANY

    assert [count for count, _, _ in WHEN_ANY] == list(_WHEN_ANY_COUNT.values())
    assert set(_WHEN_ANY_COUNT.values()) <= set(UNKNOWN_WITHOUT_STORES)
    assert "regulator demo [--dir DIR] [--once] [--clock pinned] [--store postgresql://HOST/DB]" in readme
    assert "regulator registry resolve F-x --by PERSON --rationale R [--commit]" in readme
    assert "pip install -e '.[postgresql]'" in readme and "pip install 'regulator[postgresql]'" not in readme
    assert "temporary folder" in readme and "regulator controlroom --root DIR" in readme
    assert "## Your first fleet" in readme  # its place, kept for `serve` and `unit run`


def test_the_fleet_move_runs_store_roles_on_the_new_database() -> None:
    fleet = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    move = fleet[fleet.index("store copy") :]
    assert "regulator store roles" in move


@pytest.mark.parametrize(
    "command, choices",
    [
        (
            ("unit", "decide"),
            ("retry", "repair", "abort", "remediate", "replan", "clarify", "pause", "escalate"),
        ),
        (("obligation", "resolve"), ("no-action", "accepted-risk", "rework", "replan", "research-requested")),
    ],
)
def test_help_at_80_columns_breaks_at_words_and_explains_each_choice(command: Any, choices: Any) -> None:
    done = subprocess.run(
        [REGULATOR, *command, "--help"], capture_output=True, text=True, env=clean_env(COLUMNS="80")
    )
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    options = done.stdout.split("Options:", 1)[1].split("\n\n", 1)[0]
    joined = " ".join(line.strip() for line in options.splitlines())
    for choice in choices:
        assert re.search(rf"(?<![\w-]){choice}(?![\w-])", joined), (choice, options)  # never cut in two
        assert any(line.strip().startswith(f"{choice}: ") for line in lines), choice
