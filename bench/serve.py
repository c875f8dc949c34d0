"""serve's figures (design §25), measured from outside against real `regulator serve` processes:

    python bench/serve.py [--json] [--only door|route|failover] [--runs N]

- door_call_ms: 50 clients (threads, each its own unit and lease), each a closed loop of 20 calls
  through serve's door on its Unix socket, 3 `status` : 1 `report_intelligence`; the latency of
  every call (one HTTP POST of a JSON-RPC tools/call: engine.doors.api.DoorClient), p50 and p99;
  beside it `sdk_floor`: the same clients against the mcp SDK's own server with a tool that does
  nothing (the transport's cost alone, on this machine);
- serve_route_ms: 8 clients report at once through the door; for each report, from just before
  its call until its obligation is in the read model (`load` of the signals store, polled every
  5 ms by a reader process of its own), the median, on files and on PostgreSQL;
- leader_failover_s: two serve on one PostgreSQL store; the leader killed with SIGKILL; until the
  other logs its first tick as leader (its stderr);
- serve_start (no target; D-248): a `serve` started 5 times on one workspace: until serve.json names
  it (ready_s) and its CPU then, then a lease's first and second `status` call through the door
  (the first loads the mcp SDK).

A real PostgreSQL server is started as the tests start it (tests/pg.py). Raw runs are kept.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.doors.client import DoorClient  # noqa: E402
from tests.helpers import clone, make_workspace  # noqa: E402
from tests.serving import REPORT, Serving, healthz, token_of, wait_for  # noqa: E402

TARGETS = {"door_call_ms_p50": 50, "door_call_ms_p99": 250, "serve_route_ms": 250, "leader_failover_s": 10}
CLIENTS, CALLS = 50, 20


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def serve_start(tmp: Path, runs: int = 5) -> dict:
    """serve's start (D-248): ready_s, cpu_s at ready, first_call_ms (the SDK's load), second_call_ms;
    medians, and the raw runs."""
    ws, tokens = fleet(tmp / "start", 1)
    ticks = os.sysconf("SC_CLK_TCK")
    raw: dict[str, list[float]] = {"ready_s": [], "cpu_s": [], "first_call_ms": [], "second_call_ms": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        serving = Serving(ws)
        try:
            raw["ready_s"].append(round(time.perf_counter() - t0, 3))
            fields = Path(f"/proc/{serving.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            raw["cpu_s"].append(round((int(fields[11]) + int(fields[12])) / ticks, 2))
            for name in ("first_call_ms", "second_call_ms"):
                t1 = time.perf_counter()
                DoorClient(serving.url, tokens[0]).status()
                raw[name].append(round((time.perf_counter() - t1) * 1000, 1))
        finally:
            serving.close()
    return {name: statistics.median(values) for name, values in raw.items()} | {"raw": raw}


def fleet(tmp: Path, units: int, store: str | None = None) -> Any:
    """A workspace with `units` research units dispatched (each its lease and worktree)."""
    tmp.mkdir(parents=True, exist_ok=True)
    ws = make_workspace(tmp, now=None, clock="system", store=store, fresh=True)
    for i in range(units):
        ws.contract(f"b{i}", "research", "intelligence")
    ws.commit("bench units", sign=False)
    tokens = [token_of(ws.lease(f"b{i}")) for i in range(units)]
    return ws, tokens


def closed_loops(url: str, tokens: list[str], report: bool = True) -> dict:
    """CLIENTS threads, each a closed loop of CALLS door calls (3 status : 1 report where `report`,
    else status only), released together after one warm call each: every call's latency."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start_line = threading.Barrier(len(tokens))

    def client(i: int) -> None:
        door = DoorClient(url, tokens[i])
        door.status()  # warm: the door's session for this lease
        start_line.wait()
        mine = []
        for k in range(CALLS):
            t0 = time.perf_counter()
            try:
                if report and k % 4 == 3:
                    door.report(
                        {**REPORT, "affectedUnits": [], "reportedSeverity": "info", "subject": f"b{i} {k}"}
                    )
                else:
                    door.status()
            except Exception as exc:  # noqa: BLE001 - counted, not fatal to the figure
                with lock:
                    errors.append(repr(exc))
            mine.append((time.perf_counter() - t0) * 1000)
        with lock:
            latencies.extend(mine)

    wall = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(tokens))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall
    return {
        "p50": round(percentile(latencies, 50), 1),
        "p99": round(percentile(latencies, 99), 1),
        "calls": len(latencies),
        "errors": len(errors),
        "wall_s": round(wall, 2),
        "calls_per_s": round(len(latencies) / wall, 1),
        "raw": [round(x, 1) for x in latencies],
    }


def door_call(tmp: Path) -> dict:
    ws, tokens = fleet(tmp / "door", CLIENTS)
    serving = Serving(ws)
    try:
        found = closed_loops(serving.url, tokens)
    finally:
        serving.close()
    return found | {"sdk_floor": sdk_floor(tmp)}


FLOOR_SERVER = """
import sys
import anyio, uvicorn
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

async def tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="status", input_schema={"type": "object"})])

async def call(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="{}")], structured_content={},
                                is_error=False)

manager = StreamableHTTPSessionManager(Server("floor", on_list_tools=tools, on_call_tool=call),
                                       stateless=True, json_response=True)

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        async with manager.run():
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
    else:
        await manager.handle_request(scope, receive, send)

uvicorn.run(app, uds=sys.argv[1], log_level="warning")
"""


def sdk_floor(tmp: Path) -> dict:
    """The same clients against the mcp SDK's own stateless Streamable HTTP server on a Unix socket,
    with one tool that does nothing: what the door's transport costs before regulator does any
    work (no engine, no token check), the floor under door_call_ms on this machine."""
    sock = tmp / "floor.sock"
    proc = subprocess.Popen([sys.executable, "-c", FLOOR_SERVER, str(sock)], stderr=subprocess.PIPE)
    try:
        wait_for(sock.exists, "the SDK's server listening")
        found = closed_loops(f"unix:{sock}", ["t" * 43] * CLIENTS, report=False)
    finally:
        proc.terminate()
        proc.wait()
    found.pop("raw")
    return found


POLLER = """
import json, sys, time
from pathlib import Path
from engine.read.load import load
from engine.checkout.workspace import locate
ws, _ = locate(Path(sys.argv[1]))
prefix, count = sys.argv[2], int(sys.argv[3])
load(ws, stores=("signals",))  # warm: imports and the first read, before the reports start
print("ready", flush=True)
seen = {}
while len(seen) < count:
    ws.sync()
    for ob in load(ws, stores=("signals",)).obligations.values():
        if ob.subject.startswith(prefix) and ob.subject not in seen:
            seen[ob.subject] = time.time()
    time.sleep(0.005)
print(json.dumps(seen), flush=True)
"""


def reports_at_once(serving: Serving, tokens: list[str], run: int) -> dict[str, float]:
    """Each of the 8 units reports once, all released together: subject -> when its call began."""
    sent: dict[str, float] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(len(tokens))

    def client(i: int) -> None:
        door = DoorClient(serving.url, tokens[i])
        door.status()
        barrier.wait()
        t0 = time.time()
        door.report({**REPORT, "affectedUnits": [f"b{i}"], "subject": f"run {run} b{i}"})
        with lock:
            sent[f"run {run} b{i}"] = t0

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(tokens))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sent


def serve_route(tmp: Path, store: str | None, runs: int) -> dict:
    """8 clients report at once; each report's time until its obligation is in the read model."""
    ws, tokens = fleet(tmp, 8, store)
    serving = Serving(ws)
    samples: list[float] = []
    try:
        for run in range(runs):
            poller = subprocess.Popen(
                [sys.executable, "-c", POLLER, str(ws.root), f"run {run} ", str(len(tokens))],
                stdout=subprocess.PIPE,
                text=True,
                env={**ws.env, "PYTHONPATH": str(HERE.parent)},
            )
            try:
                assert poller.stdout is not None and poller.stdout.readline().strip() == "ready"
                sent = reports_at_once(serving, tokens, run)
                seen = json.loads(poller.stdout.readline())
            finally:
                poller.kill()
                poller.wait()
            samples += [(seen[s] - sent[s]) * 1000 for s in sent]
    finally:
        serving.close()
    return {"median": round(statistics.median(samples), 1), "raw": [round(x, 1) for x in samples]}


def failover(tmp: Path, url: str, runs: int) -> dict:
    ws, _ = fleet(tmp / "failover", 1, url)
    store = (ws.root / "regulator/policy/store.yaml").read_text().split("url:", 1)[1].strip()
    other_root = clone(ws, tmp / "failover-other")
    samples = []
    for _ in range(runs):
        hosts = [Serving(ws), Serving(ws, cwd=other_root, env={"REGULATOR_STORE": store})]
        try:
            leader = wait_for(
                lambda hosts=hosts: next((h for h in hosts if healthz(h.sock)["leader"]), None),  # type: ignore[misc]
                "a leader",
            )
            other = next(h for h in hosts if h is not leader)
            before = len(other.lines())
            t0 = time.time()
            leader.kill(signal.SIGKILL)

            def first_duty(other: Serving = other, before: int = before) -> float | None:
                for line in other.lines()[before:]:
                    if line.get("duty") == "tick" and line["outcome"].get("leader"):
                        return time.time()
                return None

            t1 = wait_for(first_duty, "the other host's first duty as leader", deadline=30, every=0.05)
            samples.append(t1 - t0)
        finally:
            for h in hosts:
                h.close()
    return {
        "max": round(max(samples), 2),
        "median": round(statistics.median(samples), 2),
        "raw": [round(x, 2) for x in samples],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=("door", "route", "failover", "start"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.pop("REGULATOR_NOW", None)
    report: dict = {"targets": TARGETS, "load": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="regulator-bench-serve-") as folder:
        tmp = Path(folder)
        if args.only in (None, "door"):
            report["door_call_ms"] = door_call(tmp)
        if args.only in (None, "start"):
            report["serve_start"] = serve_start(tmp)
        server = None
        if args.only in (None, "route", "failover"):
            from tests import pg

            server = pg.launch()
        try:
            if args.only in (None, "route"):
                assert server is not None
                report["serve_route_ms"] = {
                    "files": serve_route(tmp / "route-files", None, args.runs),
                    "postgresql": serve_route(
                        tmp / "route-pg", server.url(server.database("bench")), args.runs
                    ),
                }
            if args.only in (None, "failover"):
                assert server is not None
                report["leader_failover_s"] = failover(tmp, server.url(server.database("bench")), args.runs)
        finally:
            if server is not None:
                from tests import pg

                pg.stop(server)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, value in report.items():
            if isinstance(value, dict):
                value = {k: v for k, v in value.items() if k != "raw"}
            print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
