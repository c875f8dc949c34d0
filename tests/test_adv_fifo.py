"""Adversarial review (rev-adv): a FIFO put where a store belongs makes no reader wait."""

import os
import subprocess
from pathlib import Path

from tests.helpers import REGULATOR, make_workspace


def test_a_fifo_in_place_of_a_store_is_refused_in_one_line_not_waited_on(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    store = ws.store("signals")
    store.unlink()
    os.mkfifo(store)
    for cmd in (["controlroom", "--once", "--json"], ["verify"], ["status"]):
        try:
            done = subprocess.run(
                [REGULATOR, *cmd], cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{cmd} waited on the FIFO") from None
        assert done.returncode == 3, (cmd, done.stderr)
        assert "is not a regular file" in done.stderr and "Traceback" not in done.stderr
        assert done.stderr.strip().count("\n") == 0
