"""bench/common.py's `run_rss`: the peak memory it reports is the command's own, not that of the
bench's process it was started from (which holds 2 GB at full scale)."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.common import run_rss


def test_the_peak_reported_is_the_commands_not_its_parents(tmp_path: Path) -> None:
    held = b"x" * (300 << 20)  # this process: 300 MB touched, as the bench's own holds its workspaces
    seconds, cpu, peak_kb, code, out = run_rss(
        [sys.executable, "-c", "b = b'x' * (60 << 20); print(len(b))"], tmp_path
    )
    assert (code, out) == (0, f"{60 << 20}\n")
    assert 60 << 10 < peak_kb < 150 << 10  # the child's 60 MB and an interpreter, not 300 MB more
    assert seconds > 0 and cpu > 0 and len(held) == 300 << 20
