"""The command line's shape (SPEC §13): one root, every group one command away, global options shown
where they apply, --version, -h and shell completion."""

from __future__ import annotations

import os
import subprocess

from tests.helpers import REGULATOR


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    merged = {k: v for k, v in os.environ.items() if not k.startswith("_REGULATOR")}
    merged.update(env or {})
    return subprocess.run([REGULATOR, *args], capture_output=True, text=True, env=merged, timeout=60)


def test_version_and_short_help():
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


def test_global_options_are_shown_and_accepted_on_both_sides_of_the_command(ws):
    for args in (("--help",), ("status", "--help"), ("signals", "report", "-h")):
        done = run(*args)
        assert done.returncode == 0, done.stderr
        for option in ("--root", "--lease", "--key"):
            assert option in done.stdout, (args, option)
    before = ws.run("--root", str(ws.root), "status", "--json", cwd=ws.root.parent)
    after = ws.run("status", "--json", "--root", str(ws.root), cwd=ws.root.parent)
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert before.stdout == after.stdout and '"units"' in before.stdout


def test_an_unknown_option_is_one_line_and_exit_2():
    done = run("status", "--nope")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--nope" in done.stderr and "Traceback" not in done.stderr


def test_shell_completion_offers_groups_and_commands():
    script = run(env={"_REGULATOR_COMPLETE": "source_bash"})  # what --install-completion bash installs
    assert script.returncode == 0 and "_regulator_completion" in script.stdout
    words = run(
        env={"_REGULATOR_COMPLETE": "complete_bash", "COMP_WORDS": "regulator signals r", "COMP_CWORD": "2"}
    )
    assert words.stdout.split() == ["report", "route"]
