"""What a new operator met on day one (an operator's review, D-334): an option the command does not
use refused, not ignored; a key file that is not there named before anything runs; an option left
out called required; a proposal's diff with the lines the file has; a sensor's error said where
its row counts it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests import helpers
from tests.helpers import one_line

PROFILES = "regulator/policy/profiles.yaml"


def test_the_demo_refuses_a_workspace_to_find_and_builds_nothing(tmp_path: Path) -> None:
    """Given first (the group's options), the demo's own refusal; given after `demo`, which neither
    takes nor lists them (D-337), no such option: exit 2 either way, nothing built."""
    target = tmp_path / "here"
    for option in (["--root", str(target)], ["--key", str(tmp_path / "k")], ["--lease", str(tmp_path / "l")]):
        for argv in ([*option, "demo", "--once"], ["demo", "--once", *option]):
            done = subprocess.run(
                [helpers.REGULATOR, *argv], cwd=tmp_path, env=helpers.clean_env(),
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert done.returncode == 2, done.stderr
            said = one_line(done)
            if argv[0] == "demo":
                assert said == f"regulator: No such option: {option[0]} (see `regulator demo --help`)"
            else:
                assert said.startswith(f"regulator: {option[0]}: the demo builds a workspace of its own")
                assert "--dir" in done.stderr
            assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []
    shown = subprocess.run([helpers.REGULATOR, "demo", "--help"], capture_output=True, text=True, check=True)
    assert "--dir" in shown.stdout and not {"--root", "--lease", "--key"} & set(shown.stdout.split())


def test_a_key_file_that_is_not_there_is_bad_input_before_anything_runs(ws: helpers.Workspace) -> None:
    before = ws.digest()
    missing = str(ws.root.parent / "no-such-key")
    for args in (
        ["controlroom", "--once", "--as", "alice", "--key", missing],
        ["--key", missing, "obligations"],
        ["memory", "retract", "nope", "--by", "alice", "--reason", "r", "--key", missing],
    ):
        done = ws.run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert (
            one_line(done)
            == f"regulator: --key {missing}: no such file (the SSH private key that signs a person's action)"
        )
        assert done.stdout == ""
    for folder in (str(ws.root.parent), "/dev/null"):  # no key: a folder, a device (a third review)
        done = ws.run("--key", folder, "obligations")
        assert done.returncode == 2 and one_line(done) == (
            f"regulator: --key {folder}: not a file (the SSH private key that signs a person's action)"
        )
    assert ws.digest() == before


def test_a_groups_misplaced_workspace_option_says_where_it_goes(ws: helpers.Workspace) -> None:
    before = ws.digest()
    done = ws.run("unit", "--root", str(ws.root), "dispatch", "u1")
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done) == (
        "regulator: No such option: --root; it goes with the command (`regulator unit COMMAND --root …`) "
        "or first (`regulator --root … unit COMMAND`) (see `regulator unit --help`)"
    )
    # where it said so, it goes
    assert ws.digest() == before
    assert ws.run("unit", "dispatch", "u1", "--root", str(ws.root)).returncode == 0
    assert (
        ws.run("--root", str(ws.root), "unit", "demote", "u1", "--by", "alice", "--rationale", "r").returncode
        == 0
    )


def test_an_option_left_out_is_required_and_an_empty_one_is_empty(ws: helpers.Workspace) -> None:
    before = ws.digest()
    done = ws.run("identity", "accept", "nope", "--by", "alice")
    assert done.returncode == 2 and one_line(done) == "regulator: --rationale: required"
    done = ws.run("identity", "accept", "nope", "--by", "alice", "--rationale", " ")
    assert done.returncode == 2 and one_line(done) == "regulator: --rationale: must not be empty"
    assert ws.digest() == before


def _shown_diff(ws: helpers.Workspace, content: str) -> list[str]:
    source = ws.root.parent / "proposed.yaml"
    source.write_text(content)
    done = ws.run(
        "identity", "propose", "--file", PROFILES, "--content-from", str(source), "--rationale", "r", "--by", "alice", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = ws.run("identity", "show", json.loads(done.stdout)["id"])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("--- ")]
    return lines[starts[0] :] if starts else lines[-1:]


def test_a_proposals_diff_has_the_lines_the_file_has(ws: helpers.Workspace) -> None:
    decided = (ws.root / PROFILES).read_text()
    assert decided.endswith("\n")
    count = decided.count("\n")
    diff = _shown_diff(ws, decided + "# added\n")
    assert f"@@ -{count - 2},3 +{count - 2},4 @@" in diff and diff[-1] == "+# added"
    assert "+" not in diff and "-" not in diff  # no empty line the file does not have
    # a change of the last newline alone is said, not shown as nothing
    diff = _shown_diff(ws, decided.removesuffix("\n"))
    assert diff[-1] == "(only the newline at the end of the file differs)"


def test_a_sensors_error_is_said_under_its_row(ws: Any) -> None:
    from tests.test_world_sensors import GOOD, declare

    declare(ws, [GOOD, "{not json at all", "also not json"])
    assert ws.run("sensors", "run", "scan").returncode == 1
    listing = ws.run("sensors")
    assert listing.returncode == 0, listing.stderr
    said = [line for line in listing.stdout.splitlines() if line.startswith("scan: ")]
    assert said == [
        "scan: line 2: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
        " (and 1 more: sensors --json)"
    ], listing.stdout


def test_calibration_without_predictions_names_the_flag(ws: helpers.Workspace) -> None:
    done = ws.run("calibration")
    assert done.returncode == 0, done.stderr
    assert "signals report --resolves-at TIME" in done.stdout


def test_a_person_command_names_everything_left_out_at_once(ws: helpers.Workspace) -> None:
    before = ws.digest()
    for args, line in (
        (
            ["unit", "demote", "u1"],
            "--by: name the person acting (e.g. --by alice); --rationale: required too",
        ),
        (
            ["identity", "accept", "nope"],
            "--by: name the person acting (e.g. --by alice); --rationale: required too",
        ),
        (
            ["memory", "retract", "nope"],
            "--by: name the person acting (e.g. --by alice); --reason: required too",
        ),
        (["unit", "demote", "u1", "--rationale", "r"], "--by: name the person acting (e.g. --by alice)"),
    ):
        done = ws.run(*args)
        assert done.returncode == 2 and one_line(done) == f"regulator: {line}", (args, done.stderr)
    assert ws.digest() == before


def test_a_json_field_given_by_its_flags_name_says_the_json_name(ws: helpers.Workspace) -> None:
    before = ws.digest()
    report = {"subject": "s", "claim": "c", "observation": "o", "evidence": ["e"], "confidence": "high"}
    done = ws.run(
        "signals",
        "report",
        "--by",
        "alice",
        "--json-input",
        "-",
        input=json.dumps({**report, "affects": ["u1"]}),
    )
    assert done.returncode == 2 and one_line(done).startswith(
        "regulator: unknown field 'affects' (--affects's JSON field is affectedUnits); the fields are subject,"
    ), done.stderr
    done = ws.run(
        "signals", "report", "--by", "alice", "--json-input", "-",
        input=json.dumps({**report, "reportedSeverity": "info", "observed_at": "2026-11-29T00:00:00Z"}),
    )  # fmt: skip
    assert (
        done.returncode == 2
        and "unknown field 'observed_at' (--observed-at's JSON field is observedAt)" in done.stderr
    )
    assert ws.digest() == before


def test_more_commands_name_what_they_lack_at_once(ws: helpers.Workspace) -> None:
    before = ws.digest()
    for args, line in (
        (
            ["unit", "decide", "u1"],
            "--by: name the person acting (e.g. --by alice); --action, --rationale: required too",
        ),
        (
            ["unit", "decide", "u1", "--by", "alice", "--rationale", "r"],
            "--action: required (one of retry, repair, abort, remediate, replan, clarify, pause, escalate)",
        ),
        (
            ["signals", "resolve-prediction", "x"],
            "--by: name the person acting (e.g. --by alice); --came-true, --rationale: required too",
        ),
        (
            ["signals", "resolve-prediction", "x", "--by", "alice", "--rationale", "r"],
            "--came-true: required (yes or no)",
        ),
    ):
        done = ws.run(*args)
        assert done.returncode == 2 and one_line(done) == f"regulator: {line}", (args, done.stderr)
    assert ws.digest() == before


def test_init_with_a_key_file_that_is_not_there_makes_nothing(tmp_path: Path) -> None:
    """An adversarial review: `init --key TYPO` went on and committed the baseline unsigned."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    helpers.git(folder, "init", "-q", "-b", "main")
    public = helpers.make_key(tmp_path / "keys", "alice").with_suffix(".pub")
    missing = str(tmp_path / "no-such-key")
    done = subprocess.run(
        [helpers.REGULATOR, "init", "--owner", "alice", "--owner-key", str(public), "--key", missing],
        cwd=folder, env=helpers.clean_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and one_line(done) == (
        f"regulator: --key {missing}: no such file (the SSH private key that signs a person's action)"
    )
    assert sorted(p.name for p in folder.iterdir()) == [".git"]


def test_a_unit_id_near_a_contracts_is_asked_about_and_another_is_told_to_add_it(
    ws: helpers.Workspace,
) -> None:
    """An operator's typo (`unit demote alhpa`) was told to add a contract (D-337): the near ids
    first, from the write's state and from the contract read alike; an id near none, how to add it."""
    before = ws.digest()
    for args in (
        ["unit", "demote", "u1x", "--by", "alice", "--rationale", "r"],
        ["unit", "dispatch", "u1x"],
        ["unit", "run", "u1x", "--", "true"],
    ):
        done = ws.run(*args)
        assert done.returncode == 2, done.stderr
        assert one_line(done) == (
            "regulator: unit 'u1x' has no contract (contracts/u1x.json); did you mean 'u1'? If not, add it "
            "(`regulator unit new`)"
        ), args
    far = ws.run("unit", "dispatch", "zzzzzz")
    assert one_line(far) == (
        "regulator: unit 'zzzzzz' has no contract (contracts/zzzzzz.json); add it first (`regulator unit new`)"
    )
    assert ws.digest() == before
