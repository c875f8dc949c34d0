"""Fleet-mode figures (design §18, §21), files and PostgreSQL side by side:

    python bench/fleet.py [--scale quick|full] [--json] [--only appends|first-frame]
                          [--writer door|one-shot] [--runs N]

- appends_per_s: 8 long-lived writer processes, each looping over `engine.doors.api.UnitDoor.report` on
  one door under its own lease (`--writer one-shot`: `engine.doors.api.report_intelligence`, a door per
  call), the total across the 8 per second, per backend; beside it, one writer alone first, and
  its CPU time per append (steadier than the total on a shared machine); on PostgreSQL the
  transactions rolled back per append (appends that met on one line and were sent again: no lock);
- pg_incremental_ms: another host's append (a writer with no mirror of its own) until its row is
  in the open control room, through NOTIFY, on a store of `scale.events` events;
- pg_first_frame_s: first frame of the control room at `scale.obligations` open obligations read
  from PostgreSQL: cold (an empty mirror: every line fetched) and warm (the mirror there); each
  with the CPU seconds of the control room's process until its first frame and of the server's
  backends (the machine is shared: wall time alone says little);
- pg_once_reader_s: `controlroom --once --json` from a clone as the reader role.

A real server is started as the tests start it (tests/pg.py: the machine's PostgreSQL 15).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.generate import NOW, SCALES, bench_key, log_workspace, room_workspace  # noqa: E402

REGULATOR = str(Path(sys.executable).parent / "regulator")
TARGETS = {"appends_per_s": 1000, "pg_incremental_ms": 250, "pg_first_frame_s": 2.0}
WRITERS = 8

WRITER = """
import os, sys, time
from engine.doors import api
lease, seconds, name, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
door = api.UnitDoor(lease) if kind == "door" else None
def report(i):
    fields = dict(subject=f"{name} finding {i}", claim="c", observation="o", evidence=["e"],
        confidence="high", reportedSeverity="advisory", affectedUnits=[])
    if door is not None:
        door.report(fields)  # one long-lived door: the lease checked again on every call
    else:
        api.report_intelligence(lease, **fields)  # a door opened for each call
report(-1)  # warm: imports, connections, the first read
print("ready", flush=True)
sys.stdin.readline()
n, start, cpu, kids = 0, time.time(), time.process_time(), os.times()
while time.time() - start < seconds:
    report(n)
    n += 1
done = os.times()
child = done.children_user + done.children_system - kids.children_user - kids.children_system
print(n, time.time() - start, time.process_time() - cpu, child, flush=True)
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGULATOR_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", PYTHONPATH=str(HERE.parent))
    env.update(extra)
    return env


def writer_workspace(root: Path, store: str | None) -> list[Path]:
    """A workspace on the system clock with 8 research units dispatched; their lease files."""
    from engine.checkout.workspace import LEASE_FILE, locate
    from engine.commands import units
    from engine.commands.init import setup

    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for key in ("user.name", "user.email"):
        subprocess.run(["git", "-C", str(root), "config", key, "bench@regulator.invalid"], check=True)
    setup(root, owner="alice", key=bench_key(root), clock_mode="system", store=store)
    for i in range(WRITERS):
        data = {"id": f"w{i}", "type": "research", "profile": "intelligence", "title": f"writer {i}"}
        (root / "contracts" / f"w{i}.json").write_text(json.dumps(data))
    ws, _ = locate(root)
    leases = []
    for i in range(WRITERS):
        tree = root / "wt" / f"w{i}"
        tree.mkdir(parents=True)
        units.dispatch(ws, f"w{i}", tree)
        leases.append(tree / LEASE_FILE)
    return leases


def run_writers(leases: list[Path], seconds: float, kind: str) -> list[tuple[int, float, float, float]]:
    """Start one writer process per lease, let them warm up, start them at once; (appends, seconds,
    CPU seconds, CPU seconds of the processes it ran: git) of each."""
    env = clean_env()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(lease), str(seconds), f"w{i}", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i, lease in enumerate(leases)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    found = []
    for proc in procs:
        assert proc.stdout is not None
        n, span, cpu, child = proc.stdout.readline().split()
        found.append((int(n), float(span), float(cpu), float(child)))
        proc.wait()
    return found


def server_cpu(folder: Path | None) -> float | None:
    """CPU seconds the PostgreSQL server has used so far: the postmaster with the backends it has
    reaped, and those still running (Linux /proc); None elsewhere. Read once the writers' backends
    have gone (a backend that exits between two reads would be counted in neither)."""
    if folder is None:
        return None
    try:
        postmaster = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    deadline = time.monotonic() + 5
    while True:
        found = _server_ticks(postmaster)
        if found is None:
            return None
        if _server_ticks(postmaster) == found or time.monotonic() > deadline:
            return found[0] / os.sysconf("SC_CLK_TCK")
        time.sleep(0.1)


def _server_ticks(postmaster: int) -> tuple[int, frozenset[int]] | None:
    total, children = 0, set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
            children.add(pid)
    return (total, frozenset(children)) if total else None


def rollbacks(url: str | None) -> int:
    """Transactions the database has rolled back so far (the server's statistics, flushed as each
    writer's session ends): on PostgreSQL every append that met another on one line is one."""
    if url is None:
        return 0
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()")
        found = row.fetchone()
        return int(found[0]) if found is not None else 0


def appends(
    root: Path, store: str | None, seconds: float, kind: str = "door", server: Path | None = None
) -> dict:
    leases = writer_workspace(root, store)
    env = clean_env()
    # one writer alone first: its CPU per append is steadier than the total on a shared machine
    before = server_cpu(server)
    ((n1, span1, cpu1, child1),) = run_writers(leases[:1], min(seconds, 2.0), kind)
    middle = server_cpu(server)
    undone = rollbacks(store)
    found = run_writers(leases, seconds, kind)
    after = server_cpu(server)
    conflicts: dict[str, Any] = {}
    if store is not None:  # appends that met on one line and were sent again (design §22: no lock)
        conflicts = {
            "rollbacks_per_append": round((rollbacks(store) - undone) / max(1, sum(n for n, *_ in found)), 4)
        }
    served: dict[str, Any] = {}
    if before is not None and middle is not None and after is not None:
        served = {
            "server_cpu_ms_per_append": round(
                1000 * (after - middle) / max(1, sum(n for n, _, _, _ in found)), 3
            )
        }
    counts = [n for n, _, _, _ in found]
    spans = [span for _, span, _, _ in found]
    verified = subprocess.run(
        [REGULATOR, "--root", str(root), "verify"], capture_output=True, text=True, env=env
    )
    return {
        "writer": kind,
        "appends": sum(counts),
        "per_writer": counts,
        "seconds": round(max(spans), 2),
        "appends_per_s": round(sum(counts) / max(spans), 1),
        "cpu_ms_per_append": round(1000 * sum(c for _, _, c, _ in found) / max(1, sum(counts)), 3),
        **served,
        **conflicts,
        "single_writer": {
            "appends_per_s": round(n1 / span1, 1),
            "cpu_ms_per_append": round(1000 * cpu1 / max(1, n1), 3),
            "child_cpu_ms_per_append": round(1000 * child1 / max(1, n1), 3),
            **(
                {"server_cpu_ms_per_append": round(1000 * (middle - before) / max(1, n1), 3)}
                if before is not None and middle is not None
                else {}
            ),
        },
        "verify_ok": verified.returncode == 0,
        **({} if verified.returncode == 0 else {"verify_said": (verified.stdout + verified.stderr)[-2000:]}),
    }


def as_postgres(source: Path, target: Path, url: str) -> Path:
    """The bench workspace moved to PostgreSQL (store copy), and a checkout of it with no stores."""
    done = subprocess.run(
        [REGULATOR, "--root", str(source), "store", "copy", "--to", url], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # a server at rest: autovacuum is not measured
        conn.execute("VACUUM (ANALYZE) regulator.events")
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".regulator"))
    return target


FIRST_FRAME = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[3])
from bench.run import first_frame
result = {}
asyncio.run(first_frame(__import__("pathlib").Path(sys.argv[1]), sys.argv[2], 0, result))
result.pop("first_row_at")
print(json.dumps(result))
"""


def first_frame(room: Path, url: str, cold: bool, folder: Path | None = None) -> dict:
    """In a fresh process, as an operator starts it; cold: no mirror and no checkpoint."""
    if cold:
        shutil.rmtree(room / ".regulator", ignore_errors=True)
    else:
        (room / ".regulator" / "readmodel.checkpoint").unlink(missing_ok=True)
    name = "pg_first_frame_s" if cold else "pg_first_frame_warm_s"
    served = server_cpu(folder)  # the server's: folder is its own (tests/pg.py), None: not measured
    done = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME, str(room), name, str(HERE.parent)],
        capture_output=True,
        text=True,
        env=clean_env(REGULATOR_STORE=url, REGULATOR_NOW=NOW),
        check=True,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    after = server_cpu(folder)
    if served is not None and after is not None:
        result[name.replace("_s", "_server_cpu_s")] = round(after - served, 2)
    return result


def first_frames(room: Path, url: str, runs: int, folder: Path | None) -> dict:
    """`runs` cold starts and `runs` warm ones (median, and every run with its CPU seconds)."""
    report: dict = {}
    for cold, name in (
        (True, "pg_first_frame_s"),
        (False, "pg_first_frame_warm_s"),
    ):  # warm: the last cold's mirror
        results = [first_frame(room, url, cold=cold, folder=folder) for _ in range(runs)]
        cpu, server = name.replace("_s", "_cpu_s"), name.replace("_s", "_server_cpu_s")
        report[name] = statistics.median(r[name] for r in results)
        report[name.replace("_s", "_runs_s")] = [r[name] for r in results]
        report[cpu] = statistics.median(r[cpu] for r in results)
        report[cpu.replace("_s", "_runs_s")] = [r[cpu] for r in results]
        if all(server in r for r in results):
            report[server] = statistics.median(r[server] for r in results)
        report["pg_obligations_shown"] = results[0]["obligations_shown"]
    return report


APPENDER = """
import sys, time
from engine.log.pg.store import PgStore
store = PgStore(sys.argv[1], sys.argv[2], "signals", mirrored=False)  # another host: it only writes
sys.stdin.readline()
store.append({"kind": "signal", "subject": "bench append " + sys.argv[3], "claim": "c",
              "observation": "o", "evidence": ["e"], "confidence": "low", "reportedSeverity": "advisory",
              "affectedUnits": ["unit-00001"], "observedAt": "2026-11-29T12:00:00Z", "expiresAt": None,
              "rationale": None, "unit": "unit-00002", "by": None, "revision": None, "source": "S4",
              "destination": "S3", "at": "2026-11-29T12:00:00Z"}, assign_id=True)
print(time.time(), flush=True)
"""


def incremental(host: Path, url: str, other: Path) -> dict:
    """Another host's append until its obligation's row is in the open room (NOTIFY → mirror)."""
    from controlroom.app import ControlRoom
    from engine.checkout.workspace import locate

    os.environ["REGULATOR_NOW"] = NOW
    os.environ["REGULATOR_STORE"] = url
    result: dict = {}

    async def measure() -> None:
        t = time.perf_counter()
        ws, _ = locate(host)
        result["pg_mirror_cold_s"] = round(time.perf_counter() - t, 2)
        app = ControlRoom(ws, "alice", watch=True, background_checks=False)
        async with app.run_test(size=(150, 42)) as pilot:
            await pilot.pause(0.5)
            result["pg_incremental_events_loaded"] = sum(c.line for c in app.snap.state.cursors.values())
            latencies = []
            for n in range(5):
                before = len(app.table.keys)
                proc = subprocess.Popen(
                    [sys.executable, "-c", APPENDER, url, str(other), str(n)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=clean_env(),
                )
                await pilot.pause(0.6)
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                deadline = time.time() + 10
                while len(app.table.keys) == before and time.time() < deadline:
                    await asyncio.sleep(0.002)
                seen = time.time()
                assert proc.stdout is not None
                appended = float(proc.stdout.readline())
                proc.wait()
                latencies.append((seen - appended) * 1000)
                await pilot.pause(0.3)
            result["pg_incremental_ms"] = round(statistics.median(latencies), 1)
            result["pg_incremental_all_ms"] = [round(x, 1) for x in latencies]

    try:
        asyncio.run(measure())
    finally:
        os.environ.pop("REGULATOR_STORE", None)
    return result


def once_reader(checkout: Path, url: str) -> dict:
    env = clean_env(REGULATOR_STORE=url, REGULATOR_NOW=NOW)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        done = subprocess.run(
            [REGULATOR, "--root", str(checkout), "controlroom", "--once", "--json"],
            capture_output=True,
            env=env,
        )
        times.append(time.perf_counter() - t)
        assert done.returncode in (0, 1), done.stderr
    return {"pg_once_reader_s": round(statistics.median(times), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="quick")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the writers append")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--only",
        choices=("appends", "first-frame"),
        help="run only this figure (appends: a minute, not several; first-frame: pg_first_frame_s cold and warm)",
    )
    parser.add_argument(
        "--writer",
        choices=("door", "one-shot"),
        default="door",
        help="door: each writer keeps one UnitDoor (default); one-shot: a door opened for every call",
    )
    parser.add_argument("--runs", type=int, default=3, help="first frames of each kind (median)")
    args = parser.parse_args()
    scale = SCALES[args.scale]
    from tests import pg

    server = pg.launch()
    report: dict = {"scale": scale.name, "targets": TARGETS, "load_average_at_start": os.getloadavg()[0]}
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            if args.only != "first-frame":
                files = appends(tmp / "files", None, args.seconds, args.writer)
                on_pg = appends(
                    tmp / "postgresql",
                    server.url(server.database("bench")),
                    args.seconds,
                    args.writer,
                    server.folder,
                )
                report["appends_per_s"] = {
                    "files": files["appends_per_s"],
                    "postgresql": on_pg["appends_per_s"],
                }
                report["appends"] = {"files": files, "postgresql": on_pg}
                if args.only == "appends":
                    return finish(report, args.json)

                log_meta = log_workspace(tmp / "log", scale)
                log_url = server.url(server.database("log"))
                host = as_postgres(tmp / "log", tmp / "log-pg", log_url)
                (tmp / "other").mkdir()
                report.update(incremental(host, log_url, tmp / "other"))

            room_meta = room_workspace(tmp / "room", scale)
            room_url = server.url(server.database("room"))
            room = as_postgres(tmp / "room", tmp / "room-pg", room_url)
            report.update(first_frames(room, room_url, args.runs, server.folder))
            report["sizes"] = {"room": room_meta}
            if args.only is None:
                subprocess.run(
                    [REGULATOR, "store", "roles", "--url", room_url], check=True, capture_output=True
                )
                reader = room_url.replace(f"{pg.ADMIN}@", "regulator_reader@")
                ci = tmp / "room-ci"
                shutil.copytree(tmp / "room", ci, ignore=shutil.ignore_patterns(".regulator"))
                report.update(once_reader(ci, reader))
                report["sizes"]["log"] = log_meta
    finally:
        pg.stop(server)
    return finish(report, args.json)


def finish(report: dict, as_json: bool) -> int:
    report["load_average_at_end"] = os.getloadavg()[0]  # others' work on a shared machine
    report["met"] = {}
    if "appends_per_s" in report:
        report["met"]["appends_per_s"] = min(report["appends_per_s"].values()) >= TARGETS["appends_per_s"]
    if "pg_incremental_ms" in report:
        report["met"]["pg_incremental_ms"] = report["pg_incremental_ms"] <= TARGETS["pg_incremental_ms"]
    if "pg_first_frame_s" in report:
        report["met"]["pg_first_frame_s"] = report["pg_first_frame_s"] <= TARGETS["pg_first_frame_s"]
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    if "appends_per_s" in report:
        single = {k: v["single_writer"]["cpu_ms_per_append"] for k, v in report["appends"].items()}
        print(
            f"appends_per_s      files {report['appends_per_s']['files']}, postgresql "
            f"{report['appends_per_s']['postgresql']}   target ≥ 1000 per backend"
            f"  (one writer's CPU per append: files {single['files']} ms, postgresql {single['postgresql']} ms)"
        )
    if "pg_incremental_ms" in report:
        print(f"pg_incremental_ms  {report['pg_incremental_ms']}   target ≤ 250")
    if "pg_first_frame_s" in report:
        print(
            f"pg_first_frame_s   {report['pg_first_frame_s']} (runs {report['pg_first_frame_runs_s']}, CPU "
            f"{report['pg_first_frame_cpu_s']} s + server {report.get('pg_first_frame_server_cpu_s')} s)   target ≤ 2.0"
        )
        print(
            f"  warm             {report['pg_first_frame_warm_s']} (runs {report['pg_first_frame_warm_runs_s']}, "
            f"CPU {report['pg_first_frame_warm_cpu_s']} s + server {report.get('pg_first_frame_warm_server_cpu_s')} s)"
        )
    if "pg_once_reader_s" in report:
        print(f"pg_once_reader_s   {report['pg_once_reader_s']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
