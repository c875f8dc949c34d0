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
