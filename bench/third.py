"""design §25's figures: cold fresh processes on the 100,000-obligation room and the log
(`--once --json`, `status --json`, `verify`), the fleet's figures from bench/serve.py, and the OSV
sensor's run."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench.common import HERE, REGULATOR, load_now, repeat, run_rss, timed
from bench.generate import Scale, room_workspace


def cold_command(root: Path, args: list[str], name: str, runs: int, ok: tuple[int, ...] = (0, 1)) -> dict:
    """`regulator ARGS` as a fresh process, no checkpoint (discarded before each run, as an
    operator's first command after a fresh clone or an upgrade finds none): median, raw runs,
    peak RSS of each, and the load average beside each run."""
    from engine.checkout.workspace import Workspace
    from engine.read import checkpoint

    times, cpu, rss, loads = [], [], [], []
    out = ""
    for _ in range(repeat(runs)):
        checkpoint.discard(Workspace(root))
        loads.append(load_now())
        seconds, used, peak, code, out = run_rss([REGULATOR, *args], root)
        if code not in ok:
            raise RuntimeError(f"regulator {' '.join(args)} exited {code}")
        times.append(seconds)
        cpu.append(used)
        rss.append(peak)
    return {
        name: round(statistics.median(times), 3),
        f"{name.removesuffix('_s')}_runs_s": [round(t, 3) for t in times],
        f"{name.removesuffix('_s')}_cpu_s": [round(t, 3) for t in cpu],
        f"{name.removesuffix('_s')}_rss_kb": rss,
        f"{name.removesuffix('_s')}_load": loads,
        f"{name.removesuffix('_s')}_output_bytes": len(out.encode()),
    }


def room_of(root: Path, obligations: int) -> dict:
    """design §25's workspace: `obligations` open obligations, 10 per unit."""
    n = obligations
    return room_workspace(root, Scale("x", 0, n // 10, n, 0, 0))


def third_round(room: Path, log_root: Path, meta: dict) -> dict:
    """design §25 at the room workspace's size (100,000 obligations at full scale): `controlroom
    --once --json` (verification included) and `status --json`, each a cold fresh process; and
    `verify` of the log workspace (1,000,000 events at full scale)."""
    result = {"third_round_sizes": {"room": meta}}
    result |= cold_command(room, ["controlroom", "--once", "--json"], "once_json_s", 3)
    result |= cold_command(room, ["status", "--json"], "status_cold_100k_s", 5)
    result |= cold_command(log_root, ["verify"], "verify_s", 3)
    return result


def fleet(runs: int) -> dict:
    """The fleet figures of design §25 from bench/serve.py (real `serve` processes, a real PostgreSQL
    server), named here: door_call_ms (p50, p99), serve_route_ms (median, files and PostgreSQL),
    leader_failover_s; each with its raw runs; and serve_start (no target)."""
    load_before = load_now()
    done = subprocess.run(
        [sys.executable, str(HERE / "serve.py"), "--json", "--runs", str(runs)],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
    )
    if done.returncode != 0:
        return {"fleet_error": done.stderr[-2000:]}
    report = json.loads(done.stdout)
    door, route, failover = report["door_call_ms"], report["serve_route_ms"], report["leader_failover_s"]
    return {
        "door_call_ms_p50": door["p50"],
        "door_call_ms_p99": door["p99"],
        "door_call_ms": door,
        "serve_route_ms": max(route["files"]["median"], route["postgresql"]["median"]),
        "serve_route_ms_by_store": route,
        "leader_failover_s": failover["max"],
        "leader_failover_runs_s": failover,
        "serve_start": report["serve_start"],
        "fleet_load": [load_before, load_now()],
    }


def osv_sensor(root: Path, meta: dict) -> dict:
    """design §25: `regulator sensors run osv` as a fresh process, 10,000 advisories against 50
    requirements files, from the stores as they were before the sensor's first run (restored
    between runs: each run raises what the first raises); then a run over what it already raised."""
    signals = root / ".regulator" / "signals.ndjson"
    before = signals.read_bytes()
    import resource

    cmd = [REGULATOR, "sensors", "run", "osv", "--json"]
    times, cpu = [], []
    written = 0
    for _ in range(repeat(3)):
        signals.write_bytes(before)
        (root / ".regulator" / "readmodel.checkpoint").unlink(missing_ok=True)
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        median, runs, out = timed(cmd, root, 1)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)  # git's too
        times += runs
        written = len(json.loads(out)["written"])
    again, again_runs, out = timed(cmd, root, repeat(3))
    return {
        "osv_sensor_s": round(statistics.median(times), 3),
        "osv_sensor_runs_s": [round(t, 3) for t in times],
        "osv_sensor_cpu_s": [round(t, 3) for t in cpu],  # on a loaded machine, what the run itself cost
        "osv_sensor_written": written,
        "osv_sensor_again_s": round(again, 3),
        "osv_sensor_again_written": len(json.loads(out)["written"]),
        "osv_sensor_sizes": meta,
    }
