"""bench/starts.py: a start of the real `regulator` command is logged once, with its test and its
command's words, and the summary counts it; a Python process that is not `regulator` logs nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.starts import SHIM, read_log, summary
from tests.helpers import REGULATOR, clean_env


def test_a_start_of_regulator_is_logged_with_its_test_and_words_and_counted(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    log = tmp_path / "starts.log"
    env = clean_env(PYTHONPATH=str(shim), REGULATOR_STARTS_LOG=str(log))
    missing = tmp_path / "no-such-workspace"
    done = subprocess.run(
        [REGULATOR, "--root", str(missing), "status", "--json"], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0  # refused: no workspace there, and still logged as it exits
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)  # not regulator: nothing

    starts = read_log(log)
    assert len(starts) == 1
    test, own, _children, words = starts[0]
    assert test == os.environ["PYTEST_CURRENT_TEST"].split(" ")[0]
    assert own > 0 and words == "status"
    text = summary(starts, 5)
    assert text.startswith("1 starts of regulator")
    assert f"  {test}" in text and "  status" in text


FORKED = """
import sys
from pathlib import Path
from tests import forkserver, helpers
ws = helpers.make_workspace(Path(sys.argv[1]))
assert forkserver.serves(helpers.REGULATOR, dict(ws.env), str(ws.root))
print(ws.run("status", "--json").returncode)
"""


def test_a_command_started_through_the_fork_server_is_logged_as_an_executed_one(tmp_path: Path) -> None:
    """The server imports the shim as its own start (its script is not `regulator`); the command it
    forks is `regulator` when it exits, and is counted."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    log = tmp_path / "starts.log"
    root = Path(__file__).resolve().parent.parent
    env = clean_env(PYTHONPATH=f"{shim}{os.pathsep}{root}", REGULATOR_STARTS_LOG=str(log))
    env.pop("REGULATOR_TEST_EXEC", None)
    (tmp_path / "ws").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", FORKED, str(tmp_path / "ws")],
        env=env,
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert done.returncode == 0 and done.stdout == "0\n", done.stderr
    words = [start[3] for start in read_log(log)]
    assert words.count("status") == 1 and set(words) <= {"status", "init"}, words
