"""The command line's shape (design §13): one root, every group one command away, global options shown
where they apply, --version, -h and shell completion."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests import helpers
from tests.helpers import REGULATOR


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    merged = {k: v for k, v in os.environ.items() if not k.startswith("_REGULATOR")}
    merged.update(env or {})
    return subprocess.run([REGULATOR, *args], capture_output=True, text=True, env=merged, timeout=60)


def test_version_and_short_help() -> None:
    from importlib.metadata import version

    done = run("--version")
    assert done.returncode == 0 and done.stdout == f"regulator {version('regulator')}\n"
    short, long = run("-h"), run("--help")
    assert short.returncode == long.returncode == 0
    assert short.stdout == long.stdout
    for group in (
        "signals",
        "obligations",
        "obligation",
        "unit",
        "memory",
        "identity",
        "registry",
        "controlroom",
    ):
        assert f"  {group} " in long.stdout


def test_global_options_are_shown_and_accepted_on_both_sides_of_the_command(ws: helpers.Workspace) -> None:
    for args in (("--help",), ("status", "--help"), ("signals", "report", "-h")):
        done = run(*args)
        assert done.returncode == 0, done.stderr
        for option in ("--root", "--lease", "--key"):
            assert option in done.stdout, (args, option)
    before = ws.run("--root", str(ws.root), "status", "--json", cwd=ws.root.parent)
    after = ws.run("status", "--json", "--root", str(ws.root), cwd=ws.root.parent)
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert before.stdout == after.stdout and '"units"' in before.stdout


def test_an_unknown_option_is_one_line_and_exit_2() -> None:
    done = run("status", "--nope")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--nope" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["door", "call", "status", "--json", "{}"],
            "No such option: --json (Possible options: --json-input) (see `regulator door call --help`)",
        ),
        (["signals", "report", "--nope"], "No such option: --nope (see `regulator signals report --help`)"),
        (["unit", "new"], "Missing argument 'ID'. (see `regulator unit new --help`)"),
        (["nosuch"], "No such command 'nosuch'. (see `regulator --help`)"),
        (["status", "--nope\x1b[2J"], "No such option: --nope\\x1b[2J (see `regulator status --help`)"),
        (["status", "--nope\u202e"], "No such option: --nope\\u202e (see `regulator status --help`)"),
        (
            ["unit", "run", "u9", "--user"],
            "Option '--user' requires an argument. (see `regulator unit run --help`)",
        ),
        (
            ["--root", "/nonexistent", "signals", "report", "--subject"],
            "Option '--subject' requires an argument. (see `regulator signals report --help`)",
        ),
    ],
    ids=[
        "door-call",
        "signals-report",
        "missing-argument",
        "command",
        "escaped-by-click",
        "escaped-here",
        "option-without-its-value",
        "after-a-global-option",
    ],
)
def test_a_usage_error_points_at_the_help_of_its_own_command(args: list[str], said: str) -> None:
    """A usage error names the help that lists the command's own options (the top-level help lists
    only the groups), and what the person typed is escaped onto the one line."""
    done = run(*args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"regulator: {said}\n")


def test_shell_completion_offers_groups_and_commands() -> None:
    script = run(env={"_REGULATOR_COMPLETE": "source_bash"})  # what --install-completion bash installs
    assert script.returncode == 0 and "_regulator_completion" in script.stdout
    words = run(
        env={"_REGULATOR_COMPLETE": "complete_bash", "COMP_WORDS": "regulator signals r", "COMP_CWORD": "2"}
    )
    assert words.stdout.split() == ["report", "resolve-prediction", "route"]


def test_the_lean_roots_table_names_every_command_of_every_group() -> None:
    """A command line that gives no global, help or completion option imports only its own group
    (controlroom.cli.root.GROUP_OF): the table must name what each group module really adds."""
    from typer.main import get_command

    from controlroom.cli import root as cli

    for module in cli.MODULES:
        names = set(get_command(cli.build((module,))).commands)  # type: ignore[attr-defined]
        assert names == {name for name, m in cli.GROUP_OF.items() if m == module}, module


def test_a_command_line_answers_the_same_on_the_lean_root_and_the_full_one(
    ws: helpers.Workspace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Output, errors and exit codes are the full root's, whichever root parsed them; a typo or a
    bare group is parsed again by the full root so that its suggestions and help are complete."""
    from controlroom.cli.root import main

    monkeypatch.chdir(ws.root)
    for name, value in ws.env.items():
        monkeypatch.setenv(name, value)
    for args in (
        ["status", "--json"],
        ["status"],
        ["status", "--lese", "x"],  # did you mean --lease: only the full root declares it
        ["status", "extra"],
        ["obligations", "--al"],
        ["obligation", "show"],
        ["unit"],  # a bare group: its help, exit 2
        ["statu"],
        ["--version", "status"],
        [],
        ["--root", str(ws.root), "status", "--json"],
        [f"--root={ws.root}", "status"],
        ["status", "--root", str(ws.root), "--json"],
        ["--root", "status", "status"],  # a folder named like a command: no workspace there
        ["--key", "no-such-key", "obligation", "show", "nope"],
        ["status", "--lease", "no-such-lease"],
        ["--lease", "no-such-lease", "unit", "close", "u1"],
        ["--root"],
        ["status", "--root"],
    ):
        answers = []
        for full in (False, True):
            code = main(list(args), full=full)
            answers.append((code, *capsys.readouterr()))
        assert answers[0] == answers[1], args
    code = main(["status", "--lese", "x"])
    assert code == 2 and "--lease" in capsys.readouterr().err


def test_help_names_every_disposition_and_what_is_required() -> None:
    """`obligation resolve --help` lists `answered` with the rest; `identity propose --help` says
    --rationale is required (an empty one is refused)."""
    resolve = run("obligation", "resolve", "--help", env={"COLUMNS": "200"})
    assert resolve.returncode == 0 and "research-requested, answered" in " ".join(resolve.stdout.split())
    propose = run("identity", "propose", "--help", env={"COLUMNS": "200"})
    assert propose.returncode == 0
    line = next(x for x in propose.stdout.splitlines() if "--rationale" in x)
    assert "required" in line, propose.stdout


def test_the_start_runs_with_the_collector_paused_and_the_command_with_it_running(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The `regulator` script's entry point (D-194): no collection while the command line is built;
    what the start built frozen, and the collector running again, by the time the command has run
    (a long-running command, `serve` or the room, collects as usual)."""
    import gc
    import sys

    from controlroom.cli import root, start

    seen: dict[str, object] = {}
    real_build, real_flush = root.build, root.flush_checkpoint

    def build(*args: object, **kwargs: object) -> object:
        seen["building"] = gc.isenabled()
        return real_build(*args, **kwargs)  # type: ignore[arg-type]

    def flush() -> None:
        seen["after"], seen["frozen"] = gc.isenabled(), gc.get_freeze_count()
        real_flush()

    monkeypatch.setattr(root, "build", build)
    monkeypatch.setattr(root, "flush_checkpoint", flush)
    monkeypatch.setattr(sys, "argv", ["regulator", "--version"])
    try:
        with pytest.raises(SystemExit) as exited:
            start.run()
    finally:
        gc.unfreeze()
        gc.enable()
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("regulator ")
    assert seen["building"] is False
    assert seen["after"] is True and isinstance(seen["frozen"], int) and seen["frozen"] > 0


def test_a_command_line_giving_root_lease_or_key_builds_its_own_group_only(ws: helpers.Workspace) -> None:
    """--root, --lease and --key are declared on a lean root when given (D-194): a unit's command
    with its --lease, or a script's with --root, imports no other group's module and answers as
    the command run in the workspace does."""
    import json
    import sys

    code = (
        "import json, sys\n"
        "from controlroom.cli.root import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('controlroom.cli.'))), file=sys.stderr)\n"
        "sys.exit(code)"
    )
    for args in (["--root", str(ws.root), "status", "--json"], ["status", "--json", "--root", str(ws.root)]):
        done = subprocess.run(
            [sys.executable, "-c", code, *args], cwd="/", capture_output=True, text=True, env=ws.env
        )
        assert done.returncode == 0, done.stderr
        groups = {m.rsplit(".", 1)[1] for m in json.loads(done.stderr.strip().splitlines()[-1])}
        assert groups == {"common", "fastparams", "root", "workspace"}, groups
        assert done.stdout == ws.run("status", "--json").stdout


def test_an_empty_global_option_is_bad_input_not_an_option_left_out(ws: helpers.Workspace) -> None:
    """Operator review of D-194: `--root=` or `--lease ""` used to count as not given, so the
    command ran on whatever workspace the current folder found."""
    for args, name in (
        (["--root", "", "status"], "--root"),
        (["--root=", "status", "--json"], "--root"),
        (["status", "--lease", ""], "--lease"),
        (["--key=", "obligations"], "--key"),
        (["unit", "close", "u1", "--lease", " "], "--lease"),
    ):
        done = ws.run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert (
            done.stderr.startswith(f"regulator: {name}: must not be empty") and done.stderr.count("\n") == 1
        )
        assert done.stdout == ""
