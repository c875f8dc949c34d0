"""What every bench module shares: the regulator it runs, its environment, the smoke setting,
and how a fresh process is timed (wall, CPU, peak RSS) beside the machine's load."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.generate import NOW

HERE = Path(__file__).resolve().parent
REGULATOR = str(Path(sys.executable).parent / "regulator")


@dataclass
class Settings:
    """smoke: one run of each figure (tests/test_demo.py runs the bench at a tiny scale)."""

    smoke: bool = False


SETTINGS = Settings()


def repeat(n: int) -> int:
    return 1 if SETTINGS.smoke else n


def bench_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TEXTUAL_THEME")}
    env.update(REGULATOR_NOW=NOW, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return env


def timed(cmd: list[str], cwd: Path, runs: int) -> tuple[float, list[float], str]:
    times, out = [], ""
    for _ in range(runs):
        t = time.perf_counter()
        done = subprocess.run(cmd, cwd=cwd, env=bench_env(), capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        out = done.stdout
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{cmd} exited {done.returncode}: {done.stderr}")
    return statistics.median(times), times, out


def load_now() -> float:
    """The machine's 1-minute load average as a figure is measured (2 cores; others' work too)."""
    return round(os.getloadavg()[0], 2)


def run_rss(cmd: list[str], cwd: Path) -> tuple[float, float, int, int, str]:
    """(wall seconds, CPU seconds, peak RSS in KB, exit code, stdout) of one fresh process; its CPU
    time (user and system, its reaped children's included) is what a loaded machine cannot inflate.
    The peak is the command's own, measured by `/usr/bin/time` between this process and it: a
    child's `ru_maxrss` counts the memory of the process it was forked from (Linux keeps the
    larger of the two at exec), and the bench's own process holds 2 GB at full scale."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as peak:
        measured = [TIME, "-f", "%M", "-o", peak.name, *cmd] if TIME else cmd
        t = time.perf_counter()
        proc = subprocess.Popen(measured, cwd=cwd, env=bench_env(), stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        rss = int(peak.read().split()[-1]) if TIME else usage.ru_maxrss
        return seconds, cpu, rss, proc.returncode, out.read().decode()


TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
