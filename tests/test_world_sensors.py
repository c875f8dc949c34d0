"""A command sensor (design §24): a declared argument vector, run confined, whose standard output is
report_intelligence JSON objects, one a line; a bad line is one error and never a partial signal."""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.helpers import one_line, tick

GOOD = {
    "subject": "deploy key rotated late",
    "claim": "The deploy key was rotated 40 days after the policy's 30.",
    "observation": "rotation log shows 40 days; this breaks INV-002 reading of the audit trail",
    "evidence": ["ops/rotation.log:12"],
    "confidence": "medium",
    "affectedUnits": ["u1"],
}
QUIET = {
    "subject": "disk 80% full",
    "claim": "The build cache will fill the disk within a week.",
    "observation": "du shows 80% used, growing 3% a day",
    "evidence": ["df -h"],
    "confidence": "low",
    "reportedSeverity": "info",
    "prediction": {"resolvesAt": "2026-12-06T00:00:00Z"},
}
SCAN = """\
import json, os, sys
lines = json.load(open(sys.argv[1]))
for line in lines:
    print(line if isinstance(line, str) else json.dumps(line))
with open(sys.argv[2], "w") as out:
    json.dump(sorted(os.environ), out)
"""


def declare(
    ws: Any, lines: list, *, timeout: str = "60s", every: str = "1h", command: list[str] | None = None
) -> None:
    script = ws.root.parent / "scan.py"
    script.write_text(SCAN)
    given = ws.root.parent / "lines.json"
    given.write_text(json.dumps(lines))
    argv = command or [sys.executable, str(script), str(given), str(ws.root.parent / "env.json")]
    ws.decide(
        "regulator/policy/sensors.yaml",
        "sensors:\n  scan:\n    kind: command\n"
        f"    command: {json.dumps(argv)}\n    every: {every}\n    severity: advisory\n    timeout: {timeout}\n",
    )


def sensor_signals(ws: Any) -> list[dict]:
    return [e for e in ws.events("signals") if e["kind"] == "signal" and e.get("sensor")]


def test_a_command_sensor_reports_and_its_bad_line_is_one_error(ws: Any) -> None:
    declare(ws, [GOOD, "{not json at all", QUIET])
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1
    assert one_line(done).startswith("regulator: sensor scan: line 2: not JSON")  # one line for one bad line
    assert done.stdout == (  # what went wrong is on stderr; what was written and skipped, here
        "sensor scan: 1 problem(s), each on stderr; wrote the run's record and 2 new "
        "signal(s) or withdrawal(s); what failed was skipped, never written in part\n"
    )
    raised = sensor_signals(ws)
    assert [s["subject"] for s in raised] == [GOOD["subject"], QUIET["subject"]]
    good, quiet = raised
    assert good["sensor"] == "scan" and good["unit"] is None and good["by"] is None and good["source"] == "S4"
    assert good["reportedSeverity"] == "advisory"  # the sensor's severity where the line says none
    assert quiet["reportedSeverity"] == "advisory"  # the feed never lowers the sensor's severity
    assert quiet["prediction"] == {"resolvesAt": "2026-12-06T00:00:00Z"}
    seen = json.loads((ws.root.parent / "env.json").read_text())
    assert set(seen) <= {"PATH", "HOME", "LANG", "TERM", "TZ", "LC_CTYPE", "PYTHONDONTWRITEBYTECODE"}, seen
    (run,) = [e for e in ws.events("signals") if e["kind"] == "sensor-run"]
    assert (
        run["outcome"] == "error" and run["errorCount"] == 1 and run["signals"] == [good["id"], quiet["id"]]
    )

    # its report passes the severity floors like any other: INV-002 in the observation
    ws.run("signals", "route", check=True)
    routed = {s["id"]: s for s in ws.json("signals")}
    assert (
        routed[good["id"]]["derivedSeverity"] == "blocking" and routed[good["id"]]["outcome"] == "obligations"
    )
    (ob,) = [o for o in ws.json("obligations") if o["signal"] == good["id"]]
    assert ob["unit"] == "u1" and ob["blocks"]

    # the same output again raises nothing again (each line's id is derived from the line)
    assert ws.run("sensors", "run", "scan").returncode == 1
    assert len(sensor_signals(ws)) == 2


def test_every_kind_of_bad_line_writes_nothing_for_itself(ws: Any) -> None:
    bad = [
        [1, 2],  # not an object
        {**GOOD, "unit": "u3"},  # a sensor cannot say it is a unit
        {**GOOD, "claim": ""},  # an empty field
        {**GOOD, "affectedUnits": ["nobody"]},  # a unit with no contract
        {**GOOD, "reportedSeverity": "apocalyptic"},
        {**GOOD, "supersedes": "01NOSUCHSIGNAL"},  # names no signal
        "\u00ff\u00fe not json",
    ]
    declare(ws, [*bad, GOOD])
    before = ws.digest()
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    errors = done.stderr.strip().splitlines()
    assert len(errors) == len(bad), errors
    assert [s["subject"] for s in sensor_signals(ws)] == [GOOD["subject"]]
    assert ws.digest() != before and ws.run("verify").returncode == 0


def test_a_command_that_hangs_is_killed_and_writes_nothing(ws: Any) -> None:
    declare(ws, [], timeout="1s", command=[sys.executable, "-c", f"print({json.dumps(json.dumps(GOOD))}, flush=True); import time; time.sleep(60)"])  # fmt: skip
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1 and "killed after its 1 s time limit" in one_line(done)
    assert sensor_signals(ws) == []
    assert ws.json("sensors")[0]["outcome"] == "error"


def test_the_tick_runs_a_sensor_when_it_is_due(ws: Any) -> None:
    declare(ws, [GOOD], every="1h")
    runs = lambda: [e for e in ws.events("signals") if e["kind"] == "sensor-run"]  # noqa: E731
    first = tick(ws, env={"REGULATOR_NOW": "2026-11-29T12:00:00Z"})
    # what the sensor raised is routed before the tick ends (cron ran a whole interval behind it:
    # an operator's review): a second `route` line, and no signal left unrouted
    assert first["route"]["outcome"] == {"routed": 1, "after": "duties"}
    assert [s["outcome"] for s in ws.json("signals")] == ["obligations"]
    tick(ws, env={"REGULATOR_NOW": "2026-11-29T12:30:00Z"})
    assert len(runs()) == 1
    listed = ws.json("sensors", env={"REGULATOR_NOW": "2026-11-29T12:30:00Z"})[0]
    assert listed["lastRun"] == "2026-11-29T12:00:00Z" and listed["nextRun"] == "2026-11-29T13:00:00Z"
    tick(ws, env={"REGULATOR_NOW": "2026-11-29T13:00:00Z"})
    tick(ws, env={"REGULATOR_NOW": "2026-11-29T13:00:00Z"})  # the same tick twice: once
    assert len(runs()) == 2
    assert len(sensor_signals(ws)) == 1
    shown = ws.run("sensors", env={"REGULATOR_NOW": "2026-11-29T13:00:00Z"}, check=True).stdout
    assert "scan" in shown and "2026-11-29T13:00:00Z" in shown and "1 in all" in shown


def test_a_sensors_command_runs_with_the_decide_lock_free(ws: Any) -> None:
    """A sensor's command may run for its whole timeout (a scan, a feed): the tick ran it inside
    the decide lock, so every writer waited for it. It runs first, the lock free (the probe, as the
    command, takes it without waiting); what it found is written under the lock after."""
    from tests.test_world_time import PROBE

    probe, said = ws.root.parent / "probe.py", ws.root.parent / "said.txt"
    probe.write_text(PROBE)
    lock = ws.root / ".regulator" / "decide.lock"
    declare(ws, [], command=[sys.executable, str(probe), str(lock), str(said)])
    done = tick(ws)["sensors"]["outcome"]
    assert done["note"] == "1 of 1 sensor(s) ran" and "errors" not in done, done
    assert said.read_text().splitlines() == ["free"]


def test_a_command_flooding_its_standard_error_is_killed_at_its_limit(ws: Any) -> None:
    """An adversarial review: a command's standard error (like its output) went to a temporary
    file read at its end, with no limit, so a command writing without end until its time limit
    could fill the temporary folder. Past 16 MiB it is killed, and the run says why."""
    flood = "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n"
    declare(ws, [], timeout="20s", command=[sys.executable, "-c", flood])
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1
    assert "wrote over 16777216 bytes on its standard error; killed" in one_line(done), done.stderr


def test_a_flood_of_bad_lines_is_counted_and_a_long_error_is_cut_so_the_run_is_recorded(ws: Any) -> None:
    """An adversarial review: a command printing millions of bad lines held every error in memory
    (3.2 GB for 20 MiB of output) and wrote them all to serve's log; an error over a store line's
    limit made the run itself unrecordable, so the sensor ran again on every tick. Now the run
    holds a bounded number of errors and counts the rest, prints 20 and a count, and keeps each
    error cut: its run is recorded."""
    declare(ws, [GOOD, {"reportedSeverity": "x" * (1 << 20)}] + ["x"] * 2999)
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    said = done.stderr.strip().splitlines()
    assert (
        len(said) == 21 and said[-1] == "regulator: sensor scan: and 2980 more error(s), counted in its run"
    )
    (run,) = [e for e in ws.events("signals") if e["kind"] == "sensor-run"]
    assert run["errorCount"] == 3000 and len(run["errors"]) == 20
    assert max(len(e) for e in run["errors"]) <= 1000
    assert [s["subject"] for s in sensor_signals(ws)] == [GOOD["subject"]]


def test_lines_past_the_limit_are_one_error_not_judged(ws: Any) -> None:
    """A second adversarial review: every line of a command's output was judged, so 20 million
    bad lines held the tick 78 s past the command's timeout. Past 100,000 lines the rest is one
    error; what came before is judged as ever."""
    declare(ws, [GOOD] + ["x"] * 100_000 + [QUIET])
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (
        done.stderr.strip().splitlines()[-1]
        == "regulator: sensor scan: and 99980 more error(s), counted in its run"
    )
    (run,) = [e for e in ws.events("signals") if e["kind"] == "sensor-run"]
    assert run["errorCount"] == 100_000  # 99,999 bad lines judged, and one for the 2 lines past the limit
    assert [s["subject"] for s in sensor_signals(ws)] == [GOOD["subject"]]


def test_a_failing_sensor_is_said_in_the_header(ws: Any) -> None:
    """An operator's day: a sensor whose runs fail showed only in the Sensors view, which nothing
    sends one to. The header (the room's, and `controlroom --once`'s first line) says it."""
    declare(ws, [GOOD])
    assert ws.run("sensors", "run", "scan").returncode == 0
    assert "failing" not in ws.run("controlroom", "--once").stdout.splitlines()[0]
    declare(ws, ["{not json at all"])
    assert ws.run("sensors", "run", "scan").returncode == 1
    assert "⚠ 1 sensor(s) failing" in ws.run("controlroom", "--once").stdout.splitlines()[0]


def test_a_script_in_the_workspace_runs_only_as_trunk_has_it(ws: Any) -> None:
    """An operator's review (D-310): the review marked `! runs tools/scan.py on the host`, then an
    edit of the script in the host's checkout, never committed, ran. A file the command names inside
    the workspace runs only with the bytes trunk holds; a program outside it is the host's."""
    lines = ws.root.parent / "lines.json"
    lines.write_text(json.dumps([GOOD]))
    ws.write("tools/scan.py", SCAN)
    ws.commit("the scan, reviewed")
    declare(
        ws, [GOOD], command=[sys.executable, "tools/scan.py", str(lines), str(ws.root.parent / "env.json")]
    )
    assert ws.run("sensors", "run", "scan").returncode == 0
    assert len(sensor_signals(ws)) == 1

    # edited in the checkout, not committed: not run, one error, nothing raised
    (ws.root / "tools" / "scan.py").write_text(SCAN + 'print(\'{"subject": "forged"}\')\n')
    lines.write_text(json.dumps([QUIET]))
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1
    assert one_line(done) == (
        "regulator: sensor scan: not run: tools/scan.py: tools/scan.py differs from trunk's ("
        f"{ws.git('rev-parse', 'main').strip()[:12]}); the host runs only what trunk holds in the workspace "
        "(commit the change to trunk, or undo it)"
    )
    assert len(sensor_signals(ws)) == 1
    # a script never committed, named by a link, is no better
    (ws.root / "tools" / "new.py").write_text(SCAN)
    (ws.root / "tools" / "scan.py").unlink()
    (ws.root / "tools" / "scan.py").symlink_to("new.py")
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1 and "tools/scan.py is a link; name the file it leads to" in one_line(done)
    # the script as trunk has it, an uncommitted file beside it (a library it may source): not run
    ws.git("checkout", "--", "tools/scan.py")
    done = ws.run("sensors", "run", "scan")
    assert (
        done.returncode == 1
        and "tools/new.py is not on trunk" in one_line(done)
        and "in tools/" in one_line(done)
    )
    # the folder as trunk has it: it runs
    (ws.root / "tools" / "new.py").unlink()
    assert ws.run("sensors", "run", "scan").returncode == 0
    assert [s["subject"] for s in sensor_signals(ws)] == [GOOD["subject"], QUIET["subject"]]


def test_a_folder_a_module_or_an_options_value_in_the_workspace_runs_only_as_trunk_has_it(ws: Any) -> None:
    """An adversarial review ran uncommitted code past D-310's first form: `python3 tools/pkg` (a
    package's `__main__.py`), `python3 -m tools.pkg`, and a script named by an option's value."""
    lines = ws.root.parent / "lines.json"
    lines.write_text(json.dumps([GOOD]))
    ws.write("tools/pkg/__init__.py", "")
    ws.write(
        "tools/pkg/__main__.py",
        SCAN.replace("sys.argv[1]", "sys.argv[-2]").replace("sys.argv[2]", "sys.argv[-1]"),
    )
    ws.write(
        "tools/run.py",
        "import runpy, sys\nrunpy.run_path(sys.argv[1].split('=', 1)[1], run_name='__main__')\n",
    )
    ws.commit("the scanners, reviewed")
    out = [str(lines), str(ws.root.parent / "env.json")]
    shapes = {
        "folder": [sys.executable, "tools/pkg", *out],
        "option": [sys.executable, "tools/run.py", "--script=tools/pkg/__main__.py", *out],
    }
    for shape, argv in shapes.items():
        declare(ws, [GOOD], command=argv)
        assert ws.run("sensors", "run", "scan").returncode == 0, shape
        (ws.root / "tools" / "pkg" / "__main__.py").write_text('print(\'{"subject": "forged"}\')\n')
        done = ws.run("sensors", "run", "scan")
        assert done.returncode == 1 and "tools/pkg/__main__.py differs from trunk's" in one_line(done), shape
        ws.git("checkout", "--", "tools/pkg/__main__.py")
    assert "forged" not in json.dumps(sensor_signals(ws))


def test_what_python_imports_from_the_workspace_runs_only_as_trunk_has_it(ws: Any) -> None:
    """Re-checks' bypasses of D-310: `-m` in any form and the top named as a program have Python
    import from anywhere under the top (an untracked or ignored `json.py`, a `.pyc`, an edit in a
    folder the check never named), so they are not run; a folder whose own `.gitignore` hides it, a
    bytecode cache, and an `ident` attribute making an edit compare clean are each refused; a CRLF
    checkout of trunk's own bytes runs."""
    lines = ws.root.parent / "lines.json"
    lines.write_text(json.dumps([GOOD]))
    scanner = "import json, sys\nprint(json.dumps(json.load(open(sys.argv[1]))[0]))\n"
    ws.write("tools/__init__.py", "")
    ws.write("tools/sub/__init__.py", "")
    ws.write("tools/sub/scanner.py", scanner)
    ws.write("tools/run.sh", "#!/bin/sh\n. tools/lib.sh\n")
    ws.write("tools/lib.sh", "true $Id$\n")
    ws.commit("the scanners, reviewed")
    marker = ws.root.parent / "ran-unreviewed"
    # refused at review (tests/hardening/test_policy_abuse.py); a policy that holds one anyway (put in
    # force before D-310, appended by hand) is not run either
    from engine.checkout.workspace import Workspace
    from engine.commands.trunkfiles import not_trunks

    for args in (["-m", "tools.sub.scanner"], ["-um", "tools.sub.scanner"], ["-mtools.sub.scanner"], ["."]):
        said = not_trunks(Workspace(ws.root), [sys.executable, *args, str(lines)])
        assert said is not None and "Python would read the workspace's top as a whole" in said, args
    # the script by its path runs; a bytecode cache beside it, or a folder hiding itself, does not
    declare(ws, [GOOD], command=[sys.executable, "tools/sub/scanner.py", str(lines)])
    assert ws.run("sensors", "run", "scan").returncode == 0
    cache = ws.root / "tools" / "sub" / "__pycache__"
    cache.mkdir()
    (cache / "scanner.cpython-311.pyc").write_bytes(b"\0")
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1 and "(a bytecode cache: remove it;" in one_line(done)
    (cache / "scanner.cpython-311.pyc").unlink()
    cache.rmdir()
    hidden = ws.root / "tools" / "sub" / "scanner"
    hidden.mkdir()
    (hidden / ".gitignore").write_text("*\n")
    (hidden / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    done = ws.run("sensors", "run", "scan")
    assert (
        done.returncode == 1
        and "tools/sub/scanner/" in one_line(done)
        and "is not on trunk" in one_line(done)
    )
    for name in (".gitignore", "__init__.py"):
        (hidden / name).unlink()
    hidden.rmdir()
    # CRLF line endings of trunk's own bytes run
    (ws.root / "tools" / "sub" / "scanner.py").write_bytes(scanner.replace("\n", "\r\n").encode())
    assert ws.run("sensors", "run", "scan").returncode == 0
    ws.git("checkout", "--", "tools/sub/scanner.py")
    # an ident attribute: git diff calls the edited library clean; its bytes are not trunk's
    (ws.root / ".gitattributes").write_text("tools/lib.sh ident\n")
    (ws.root / "tools" / "lib.sh").write_text(f"true $Id: ; touch {marker} ; : $\n")
    declare(ws, [GOOD], command=["/bin/sh", "tools/run.sh"])
    done = ws.run("sensors", "run", "scan")
    assert done.returncode == 1 and "tools/lib.sh differs from trunk's" in one_line(done)
    assert not marker.exists()
