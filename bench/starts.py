"""Where the suite's time goes: every start of the `regulator` command during a pytest run, counted
with its CPU and the test that made it (docs/performance.md, issue 30's "README command ≤ 300 s").

    python bench/starts.py [--log FILE] [--most N] [-- PYTEST ARGS]
    python bench/starts.py --summary FILE [--most N]

The run puts a folder holding a `sitecustomize` module first on PYTHONPATH, which every Python
process of the run inherits (the tests hand their environment on). In a process whose script is
`regulator`, it writes one line as the process exits: the test (PYTEST_CURRENT_TEST), the
process's own CPU, its children's, and the first words of the command. Nothing in the project
changes. A command the suite's fork server starts (tests/forkserver.py, D-326) runs its exit hooks
as an executed one does and is logged the same way, its CPU its own from the fork on; nothing is
logged from any other process that ends by `os._exit` (a forked child of the engine). The summary
groups the starts by command, by test file and by test, most CPU first; the run's own pytest exit
code is this script's.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

SHIM = """\
import atexit, os, sys

def _log() -> None:
    # asked as the process ends: a command the suite's fork server forks (tests/forkserver.py) was
    # its server when this module was imported, and is `regulator` by the time it exits
    if os.path.basename(sys.argv[0]) != "regulator" or not os.environ.get("REGULATOR_STARTS_LOG"):
        return
    import resource
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    test = os.environ.get("PYTEST_CURRENT_TEST", "-")
    words, args = [], iter(sys.argv[1:])
    for arg in args:  # the command's words: the global options and their values left out
        if arg in ("--root", "--lease", "--key"):
            next(args, None)
        elif arg.startswith("-"):
            if words:
                break
        else:
            words.append(arg)
    words = " ".join(words)[:60]
    fields = [test, f"{own.ru_utime + own.ru_stime:.4f}", f"{kids.ru_utime + kids.ru_stime:.4f}", words]
    line = "\\t".join(f.replace("\\t", " ").replace("\\n", " ") for f in fields) + "\\n"
    fd = os.open(os.environ["REGULATOR_STARTS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8", "replace"))  # one write per line: the workers append at once
    finally:
        os.close(fd)

if os.environ.get("REGULATOR_STARTS_LOG"):
    atexit.register(_log)
"""

Start = tuple[str, float, float, str]  # test, own CPU, children's CPU, command words


def read_log(path: Path) -> list[Start]:
    starts: list[Start] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) == 4:
            starts.append((parts[0].split(" ")[0], float(parts[1]), float(parts[2]), parts[3]))
    return starts


def summary(starts: list[Start], most: int) -> str:
    if not starts:
        return "no start of regulator was logged"
    own = sum(s[1] for s in starts)
    kids = sum(s[2] for s in starts)
    ordered = sorted(s[1] for s in starts)
    lines = [
        f"{len(starts)} starts of regulator: {own:.1f} s of their own CPU, {kids:.1f} s of their children's; "
        f"median {ordered[len(ordered) // 2] * 1000:.0f} ms a start"
    ]
    groups: dict[str, Callable[[Start], str]] = {
        "command": lambda s: " ".join(s[3].split()[:2]) or "(none)",
        "test file": lambda s: s[0].split("::")[0],
        "test": lambda s: s[0],
    }
    for title, key in groups.items():
        count: collections.Counter[str] = collections.Counter()
        cpu: dict[str, float] = collections.defaultdict(float)
        for start in starts:
            count[key(start)] += 1
            cpu[key(start)] += start[1]
        lines.append(f"\nby {title} (CPU s, starts):")
        lines += [
            f"{seconds:8.1f} {count[name]:6d}  {name}"
            for name, seconds in sorted(cpu.items(), key=lambda kv: -kv[1])[:most]
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log", type=Path, help="write the starts here (default: a temporary file)")
    parser.add_argument("--summary", type=Path, help="summarize a log written before; run nothing")
    parser.add_argument("--most", type=int, default=20, help="rows in each group")
    parser.add_argument("pytest", nargs="*", help="arguments for pytest, after --")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(read_log(args.summary), args.most))
        return 0
    with tempfile.TemporaryDirectory(prefix="regulator-starts-") as folder:
        (Path(folder) / "sitecustomize.py").write_text(SHIM)
        log = args.log or Path(folder) / "starts.log"
        log.unlink(missing_ok=True)
        env = dict(os.environ, REGULATOR_STARTS_LOG=str(log.absolute()))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)
        code = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args.pytest], env=env
        ).returncode
        print(summary(read_log(log) if log.exists() else [], args.most))
    return code


if __name__ == "__main__":
    sys.exit(main())
