"""Fleet mode (design §18): the stores on a real PostgreSQL server, started by tests/pg.py."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import NOW, REGULATOR, clean_env, clone, git, make_workspace, report_args

pytestmark = pytest.mark.usefixtures("pg_server")
STORES = ("signals", "memory", "units", "identity")

ID = re.compile(r"[0-9A-Z]{8,26}|[0-9a-f]{8,64}")


def once_json(ws: helpers.Workspace, env: dict | None = None, cwd: Path | None = None) -> dict:
    done = ws.run("controlroom", "--once", "--json", env=env, cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    for key in ("workspace", "now", "routed"):  # routed: what this run did (a reader routes nothing)
        data.pop(key, None)
    return data


# ---- the end-to-end demo, on both backends --------------------------------------------------------


def renamed(a: str, b: str) -> dict[str, str]:
    """How `b` renames the ids of `a`, where the two say the same thing otherwise (every other
    word equal; each id always renamed to the same id). Two workspaces built apart differ in
    their ids: their baseline commits differ (the store.yaml line), and ids derive from content."""
    words_a, words_b = re.split(r"(\W+)", a), re.split(r"(\W+)", b)
    assert len(words_a) == len(words_b), (a, b)
    mapping: dict[str, str] = {}
    for x, y in zip(words_a, words_b, strict=True):
        if x != y:
            assert ID.fullmatch(x) and ID.fullmatch(y), (x, y)
            assert mapping.setdefault(x, y) == y, (x, y)
    return mapping


def test_the_demo_says_the_same_on_files_and_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    env = clean_env(REGULATOR_NOW=NOW, HOME=str(tmp_path))
    runs, kinds = {}, {}
    for name, more in (("files", []), ("postgresql", ["--store", pg_url])):
        target = tmp_path / name / "demo"  # the same folder name: the header names it
        done = subprocess.run(
            [REGULATOR, "demo", "--dir", str(target), "--once", "--clock", "pinned", *more],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        runs[name] = done.stdout.replace(str(target), "DIR")
        kinds[name] = {
            n: [
                json.loads(line)["kind"]
                for line in (target / ".regulator" / f"{n}.ndjson").read_text().splitlines()
            ]
            for n in STORES
        }
    assert "u1 is in progress and held by blocking obligation" in runs["postgresql"]
    # on PostgreSQL the Identity view has one row more: store.yaml, governed there (D-90)
    rows = [line for line in runs["postgresql"].splitlines(keepends=True) if "policy/store.yaml" in line]
    assert len(rows) == 1 and rows[0].rstrip().endswith("as decided"), rows
    shown = re.search(r"== Identity \((\d+)\)", runs["files"])
    assert shown is not None
    on_pg = runs["postgresql"].replace(rows[0], "", 1)
    on_pg = on_pg.replace(f"== Identity ({int(shown[1]) + 1})", shown[0], 1)
    assert renamed(runs["files"], on_pg)  # ids differ, nothing else does
    assert kinds["postgresql"]["identity"][0] == "decision"  # the baseline holds store.yaml too
    kinds["postgresql"]["identity"].pop(0)
    assert kinds["files"] == kinds["postgresql"] and kinds["files"]["signals"]
    from engine.log.pg import server as pg_srv

    mirror = tmp_path / "postgresql" / "demo" / ".regulator"
    for name in STORES:  # the mirror holds exactly the server's lines
        held = b"".join(line.encode() + b"\n" for _, line in pg_srv.lines(pg_url, name))
        assert held == (mirror / f"{name}.ndjson").read_bytes()
    assert (mirror.parent / "regulator/policy/store.yaml").read_text() == f"url: {pg_url}\n"


# ---- init, selection, bad input ---------------------------------------------------------------------


def test_init_records_the_url_without_its_password_and_bad_urls_are_refused(
    tmp_path: Path, pg_server: Any
) -> None:
    from engine.log.pg.connection import redact

    assert redact("postgresql://w:s3cret@db.example:5432/fleet?sslmode=require") == (
        "postgresql://w@db.example:5432/fleet?sslmode=require"
    )
    root = tmp_path / "repo"
    root.mkdir()
    env = clean_env()
    git(root, "init", "-q", "-b", "main", env=env)
    done = subprocess.run(
        [REGULATOR, "init", "--owner", "alice", "--store", "mysql://db/x"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "not a postgresql:// URL" in done.stderr
    assert not (root / ".regulator").exists()
    url = pg_server.url(pg_server.database())
    ws = make_workspace(tmp_path, store=url)
    again = tmp_path / "again"
    again.mkdir()
    git(again, "init", "-q", "-b", "main", env=env)
    key = ws.env["REGULATOR_SIGNING_KEY"]
    done = subprocess.run(
        [REGULATOR, "init", "--owner", "alice", "--owner-key", f"{key}.pub", "--store", url],
        cwd=again,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3 and "already holds regulator stores" in done.stderr
    assert sorted(p.name for p in again.iterdir()) == [".git"]  # nothing written
    bad = ws.run("status", env={"REGULATOR_STORE": "redis://x"})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "REGULATOR_STORE" in bad.stderr
    gone = ws.run("status", env={"REGULATOR_STORE": pg_server.url("no_such_db")})
    assert gone.returncode == 3 and "cannot reach the store" in gone.stderr
    assert "Traceback" not in gone.stderr and gone.stderr.count("\n") == 1


def test_store_yaml_is_in_the_baseline_and_a_repoint_nobody_decided_fails_identity_verify(
    tmp_path: Path, pg_server: Any
) -> None:
    """store.yaml is governed (D-90): `init --store` decides it in the baseline (the stores' first
    events and the signed baseline commit). A commit that points the workspace at another
    database fails `identity verify`, even where that database carries a baseline of its own that
    agrees with the file (it judges the file that chose it): git history has no decision for it."""
    store = "regulator/policy/store.yaml"
    ws = make_workspace(tmp_path, store=pg_server.url(pg_server.database()))
    baseline = [e["file"] for e in ws.events("identity") if e.get("decision") == "baseline"]
    assert store in baseline and len(baseline) == 7
    commit = ws.git("log", "--format=%H", "--grep=^Regulator-Decision: baseline").strip()
    assert store in ws.git("show", "--name-only", "--format=", commit).split()
    data = ws.json("identity", "verify")
    assert data["ok"] is True and store in [f["file"] for f in data["files"]]
    done = ws.run("controlroom", "--once", "--registers-only", cwd=clone(ws, tmp_path / "ci"))
    assert done.returncode == 0 and "7 file(s) as decided (signed)" in done.stdout, done.stdout
    # another database, made by a real init of its own (the same owner, key and policy files)
    (tmp_path / "other").mkdir()
    other = make_workspace(tmp_path / "other", store=pg_server.url(pg_server.database()))
    path = ws.root / store
    path.chmod(0o644)
    path.write_text((other.root / store).read_text())
    ws.commit("point the fleet at the other database (signed by alice, but no decision)")
    done = ws.run("identity", "verify")
    assert done.returncode == 1, done.stdout
    assert f"{store}: its content matches no decision in git history" in done.stdout
    assert [f["file"] for f in json.loads(ws.run("identity", "verify", "--json").stdout)["files"]
            if not f["ok"]] == [store]  # fmt: skip
    once = ws.run("controlroom", "--once", "--json")
    assert once.returncode == 1 and any(store in r for r in json.loads(once.stdout)["exitReasons"])
    done = ws.run("controlroom", "--once", "--registers-only", cwd=clone(ws, tmp_path / "ci-after"))
    assert done.returncode == 1 and f"identity verify: {store}" in done.stdout, done.stdout


# ---- the database enforces what the files only promise ----------------------------------------------


def test_append_only_for_every_role_and_the_trigger_checks_at_chain_and_digest(
    tmp_path: Path, pg_server: Any
) -> None:
    import psycopg

    from engine.log.pg import admin as pg_admin
    from engine.log.pg import connection as pg_connection
    from engine.log.pg import store as pg_store
    from engine.log.store import event_hash

    db = pg_server.database()
    owner_url = pg_server.url(db)
    pg_admin.create_schema(owner_url, "system")
    ok = subprocess.run([REGULATOR, "store", "roles", "--url", owner_url], capture_output=True, text=True)
    assert ok.returncode == 0 and "regulator_host" in ok.stdout, ok.stderr
    store = pg_store.PgStore(pg_server.url(db, "regulator_host"), tmp_path / "m", "signals")
    store.mirror.prepare()
    first = store.append({"kind": "note", "at": pg_connection.now_text()}, assign_id=True)
    assert first["prev"] == ""
    from datetime import timedelta

    from engine.base import clock
    from engine.base.errors import Refused

    late = clock.iso(clock.now() - timedelta(seconds=5))  # prepared, then a long wait for the lock
    with pytest.raises(Refused, match="before the store's last event|more than 2 s"):  # signed: kept
        store.append({"kind": "note", "at": late, "sig": "signature over that at"})
    restamped = store.append({"kind": "note", "at": late})  # a host event is stamped again
    assert restamped["at"] != late and restamped["prev"] == first["hash"]
    first = restamped

    def line_for(prev: str, at: str) -> str:
        event = {"kind": "note", "at": at, "prev": prev}
        event["hash"] = event_hash(event)
        return pg_store.line_text(event)

    def insert(conn: Any, text: str, digest: str | None = None) -> None:
        import hashlib

        conn.execute(
            "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
            " VALUES ('signals', %s, %s, '', '', now())",
            (text, digest or hashlib.sha256(text.encode()).hexdigest()),
        )

    now = pg_connection.now_text()
    with psycopg.connect(pg_server.url(db, "regulator_host"), autocommit=True) as writer:
        for sql in (
            "UPDATE regulator.events SET line = line",
            "DELETE FROM regulator.events",
            "TRUNCATE regulator.events",
            "UPDATE regulator.meta SET clock = 'pinned'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                writer.execute(sql)
        with pytest.raises(psycopg.errors.CheckViolation, match="more than 2 s"):
            insert(writer, line_for(first["hash"], "2026-01-01T00:00:00Z"))  # a forged at
        with pytest.raises(
            psycopg.errors.SerializationFailure, match="chain broken"
        ):  # the client reads again
            insert(writer, line_for("0" * 64, now))
        with pytest.raises(psycopg.errors.CheckViolation, match="SHA-256"):
            insert(writer, line_for(first["hash"], now), digest="0" * 64)
        with pytest.raises(psycopg.errors.CheckViolation, match="SHA-256"):
            insert(writer, line_for(first["hash"], now), digest="0" * 64)
        with pytest.raises(psycopg.errors.CheckViolation, match="UTC time"):  # read in a session zone
            insert(writer, line_for(first["hash"], now.removesuffix("Z")))
        with pytest.raises(psycopg.errors.CheckViolation, match="line break"):  # splits in a mirror
            insert(writer, line_for(first["hash"], now).replace(",", ",\n", 1))
        # the writer cannot pass for the owner's import (which keeps old `at`s): neither by the
        # setting alone, nor with a temporary table standing in for pg_class
        writer.execute("CREATE TEMP TABLE pg_class (oid oid, relowner oid)")
        writer.execute(
            "INSERT INTO pg_temp.pg_class SELECT 'regulator.events'::regclass,"
            " (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)"
        )
        writer.execute("SET search_path = pg_temp, pg_catalog, public")
        writer.execute("SET regulator.import = 'on'")
        with pytest.raises(psycopg.errors.CheckViolation, match="more than 2 s"):
            insert(writer, line_for(first["hash"], "2020-01-01T00:00:00Z"))
        writer.execute("RESET regulator.import")
        writer.execute("RESET search_path")
        insert(writer, line_for(first["hash"], now))  # the honest line goes in
        stamped = writer.execute(
            "SELECT n, at, recorded_at FROM regulator.events WHERE store = 'signals' ORDER BY n"
        ).fetchall()
        assert [row[0] for row in stamped] == [1, 2, 3] and all(row[2] is not None for row in stamped)
    reader = psycopg.connect(pg_server.url(db, "regulator_reader"), autocommit=True)
    with reader, pytest.raises(psycopg.errors.InsufficientPrivilege):
        insert(reader, line_for(first["hash"], now))
    with psycopg.connect(owner_url, autocommit=True) as owner:  # the owner's ordinary session too
        for sql in ("UPDATE regulator.events SET line = line", "DELETE FROM regulator.events"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                owner.execute(sql)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            owner.execute("TRUNCATE regulator.events")
        assert owner.execute("SELECT count(*) FROM regulator.events").fetchone() == (3,)
    reader_store = pg_store.PgStore(pg_server.url(db, "regulator_reader"), tmp_path / "r", "signals")

    with pytest.raises(Refused, match="reader role cannot write"):
        reader_store.append({"kind": "note", "at": pg_connection.now_text()})


# ---- copy both ways; the clone that sees the fleet ----------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, pg_server: Any) -> Any:
    """A file workspace with signals, routing, a disposition, memory and signed person events."""
    tmp = tmp_path_factory.mktemp("fleet")
    ws = make_workspace(tmp)
    ws.run(*report_args(subject="café\u202e \\ [red]x[/red]"), "--by", "alice", check=True)
    ws.run(*report_args(subject="second", severity="advisory", affects=["u3"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    first = ws.json("obligations")[0]["id"]
    ws.run(
        "obligation",
        "resolve",
        first,
        "--by",
        "alice",
        "--disposition",
        "no-action",
        "--rationale",
        "ok",
        check=True,
    )
    ws.commit("contracts", sign=False)
    return ws


def test_copy_to_postgresql_and_back_is_lossless_and_a_reader_clone_sees_the_host(
    fleet: Any, tmp_path: Path, pg_server: Any
) -> None:
    db = pg_server.database()
    url = pg_server.url(db)
    done = fleet.run("store", "copy", "--to", url)
    assert done.returncode == 0, done.stderr
    assert "copied" in done.stdout
    again = fleet.run("store", "copy", "--to", url)  # only into an empty store
    assert again.returncode == 3 and "already holds events" in again.stderr
    subprocess.run([REGULATOR, "store", "roles", "--url", url], check=True, capture_output=True)
    host = once_json(fleet)

    # CI from a clone: no .regulator/, the reader role
    ci = clone(fleet, tmp_path / "ci")
    reader = {"REGULATOR_STORE": pg_server.url(db, "regulator_reader")}
    assert once_json(fleet, env=reader, cwd=ci) == host
    verified = fleet.run("verify", "--json", env=reader, cwd=ci)
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True
    refused = fleet.run(*report_args(), "--by", "alice", env=reader, cwd=ci)
    assert refused.returncode == 3 and "reader role cannot write" in refused.stderr
    assert refused.stderr.count("\n") == 1

    # and back: every line as it was, byte for byte
    back = clone(fleet, tmp_path / "back")
    done = fleet.run("store", "copy", "--to", str(back), env=reader, cwd=ci)
    assert done.returncode == 0, done.stderr
    for name in ("signals", "memory", "units", "identity"):
        assert (back / ".regulator" / f"{name}.ndjson").read_bytes() == fleet.store(name).read_bytes()
    assert fleet.run("verify", cwd=back).returncode == 0
    assert once_json(fleet, cwd=back) == host
    twice = fleet.run("store", "copy", "--to", str(back), env=reader, cwd=ci)
    assert twice.returncode == 3 and "empty target" in twice.stderr


def test_a_mirror_is_never_taken_for_file_stores_when_no_postgresql_store_is_selected(
    tmp_path: Path, pg_server: Any
) -> None:
    """After `store copy` and moving .regulator/ aside, one process with REGULATOR_STORE leaves a
    mirror; a later command without it must not write the mirror as if it were file stores (the
    line would vanish at the next fetch) nor read it as the host's state (a clone's stale copy)."""
    ws = make_workspace(tmp_path)
    ws.run(*report_args(), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    db = pg_server.database()
    url = pg_server.url(db)
    ws.run("store", "copy", "--to", url, check=True)
    (ws.root / ".regulator").rename(tmp_path / "aside")
    host = once_json(ws, env={"REGULATOR_STORE": url})
    mirror = ws.root / ".regulator"
    before = {n: (mirror / f"{n}.ndjson").read_bytes() for n in STORES}
    obligation = host["obligations"][0]["id"]
    for store in (None, "files"):
        env = {"REGULATOR_STORE": store} if store else None
        for args in (
            (
                "obligation",
                "resolve",
                obligation,
                "--by",
                "alice",
                "--disposition",
                "accepted-risk",
                *("--rationale", "r"),
            ),
            ("status",),
            ("controlroom", "--once", "--json"),
        ):
            done = ws.run(*args, env=env) if env else ws.run(*args)
            assert done.returncode == 3, (args, done.stdout, done.stderr)
            assert done.stderr.count("\n") == 1 and "is the local mirror" in done.stderr, done.stderr
            assert "REGULATOR_STORE" in done.stderr and done.stdout == ""
    assert {n: (mirror / f"{n}.ndjson").read_bytes() for n in STORES} == before
    assert once_json(ws, env={"REGULATOR_STORE": url}) == host  # nothing reached the server either

    subprocess.run([REGULATOR, "store", "roles", "--url", url], check=True, capture_output=True)
    ci = clone(ws, tmp_path / "ci")
    reader = {"REGULATOR_STORE": pg_server.url(db, "regulator_reader")}
    assert once_json(ws, env=reader, cwd=ci) == host
    done = ws.run("status", cwd=ci)  # the clone's mirror is not "stores: present"
    assert done.returncode == 3 and "is the local mirror" in done.stderr, done.stdout


# ---- exactly once, across processes ------------------------------------------------------------------


WRITER = """
import sys
from pathlib import Path
from engine.commands import signals
from engine.commands.actors import Actor
from engine.checkout.workspace import locate, read_lease
lease = read_lease(Path(sys.argv[1]))
ws, _ = locate(lease_file=Path(sys.argv[1]))
for i in range(int(sys.argv[2])):
    fields = dict(
        subject=f"{sys.argv[3]} finding {i}", claim="c", observation="o", evidence=["e"],
        confidence="high", reportedSeverity="blocking", affectedUnits=["u1", "u3"],
    )
    signals.report_intelligence(ws, fields, Actor(unit=lease.unit, lease=lease))
"""

ROUTER = """
import sys, time
from pathlib import Path
from engine.commands import router
from engine.read.load import load
from engine.checkout.workspace import locate
ws, _ = locate(Path(sys.argv[1]))
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    router.route(ws)
    done = load(ws, stores=("signals",))
    if len(done.signals) >= int(sys.argv[2]) and not done.unrouted_ids:
        break
    time.sleep(0.3)
"""


@pytest.fixture
def pg_fleet(tmp_path: Path, pg_url: str) -> Any:
    ws = make_workspace(tmp_path, store=pg_url)
    for i in range(8):
        ws.contract(f"r{i}", "research", "intelligence")
    ws.commit("research units", sign=False)
    return ws


@pytest.mark.slow
def test_eight_writers_three_routers_two_rooms_route_every_signal_exactly_once(pg_fleet: Any) -> None:
    ws = pg_fleet
    leases = []
    for i in range(8):
        leases.append(ws.lease(f"r{i}") / ".regulator-lease.json")
    per = 50
    env = dict(ws.env, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    routers = [
        subprocess.Popen([sys.executable, "-c", ROUTER, str(ws.root), str(8 * per)], env=env)
        for _ in range(3)
    ]
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(lease), str(per), f"w{i}"], env=env)
        for i, lease in enumerate(leases)
    ]
    rooms_ran = 0
    while any(p.poll() is None for p in writers) and rooms_ran < 4:  # two rooms, twice, meanwhile
        rooms = [
            subprocess.Popen(
                [REGULATOR, "controlroom", "--once", "--json"],
                cwd=ws.root,
                env=ws.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        for room in rooms:
            out, err = room.communicate(timeout=120)
            assert room.returncode in (0, 1), err
            json.loads(out)
            rooms_ran += 1
    assert [p.wait(timeout=120) for p in writers] == [0] * 8
    assert [p.wait(timeout=150) for p in routers] == [0, 0, 0]
    assert rooms_ran >= 2
    ws.run("signals", "route", check=True)  # brings this host's mirror up to date too
    events = ws.events("signals")
    reported = [e for e in events if e["kind"] == "signal"]
    routings = [e for e in events if e["kind"] == "routing"]
    assert len(reported) == 8 * per
    assert len(routings) == 8 * per and len({r["signal"] for r in routings}) == 8 * per
    obligations = ws.json("obligations")
    assert len(obligations) == 2 * 8 * per and len({o["id"] for o in obligations}) == 2 * 8 * per
    assert ws.run("verify").returncode == 0


def test_three_resolutions_at_once_exactly_one_counts(pg_fleet: Any) -> None:
    ws = pg_fleet
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    (ob,) = ws.json("obligations")
    procs = [
        subprocess.Popen(
            [
                REGULATOR,
                "obligation",
                "resolve",
                ob["id"],
                "--by",
                "alice",
                "--disposition",
                d,
                "--rationale",
                "r",
            ],
            cwd=ws.root,
            env=ws.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for d in ("no-action", "accepted-risk", "rework")
    ]
    results = [(p.wait(timeout=60), (p.stderr.read() if p.stderr else "")) for p in procs]
    assert sorted(code for code, _ in results) == [0, 3, 3], results
    assert all("already resolved" in err for code, err in results if code), results
    shown = ws.run("obligation", "show", ob["id"], "--json")
    dispositions = [e for e in json.loads(shown.stdout)["history"] if e.get("kind") == "disposition"]
    assert len(dispositions) == 1
    assert ws.run("verify").returncode == 0


KILLED = """
import sys
from engine.base import clock
from engine.log.pg.store import PgStore
store = PgStore(sys.argv[1], sys.argv[2], "memory")
store.mirror.prepare()
i = 0
while True:
    written = store.append({"kind": "note", "i": i, "at": clock.iso(clock.now())}, assign_id=True)
    print(written["id"], flush=True)
    i += 1
"""

MIDWAY = """
import hashlib, sys, time
import psycopg
from engine.base import clock
from engine.log.pg.store import line_text
from engine.log.store import event_hash
conn = psycopg.connect(sys.argv[1])  # not autocommit: the INSERT waits for a COMMIT never sent
prev = conn.execute("SELECT hash FROM regulator.events WHERE store = 'memory' ORDER BY n DESC LIMIT 1").fetchone()[0]
event = {"kind": "note", "i": "midway", "at": clock.iso(clock.now()), "prev": prev}
event["hash"] = event_hash(event)
text = line_text(event)
conn.execute(
    "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at) VALUES ('memory', %s, %s, '', '', now())",
    (text, hashlib.sha256(text.encode()).hexdigest()),
)
print("inserted", flush=True)
time.sleep(60)
"""

HOLDER = """
import sys, time
from pathlib import Path
from engine.checkout.workspace import locate
ws, _ = locate(Path(sys.argv[1]))
with ws.exclusive():
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_writer_killed_mid_write_loses_nothing_committed_and_frees_the_lock(
    pg_fleet: Any, tmp_path: Path
) -> None:
    ws = pg_fleet
    url = (ws.root / "regulator/policy/store.yaml").read_text().split("url:", 1)[1].strip()
    env = dict(ws.env, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, url, str(tmp_path / "mirror")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    seen = [proc.stdout.readline().strip() for _ in range(30)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    from engine.log.pg import server as pg_srv
    from engine.log.pg import store as pg_store

    stored = [json.loads(line)["id"] for _, line in pg_srv.lines(url, "memory")]
    assert set(seen) <= set(stored) and len(stored) >= 30
    midway = subprocess.Popen([sys.executable, "-c", MIDWAY, url], stdout=subprocess.PIPE, text=True, env=env)
    assert midway.stdout is not None
    assert midway.stdout.readline().strip() == "inserted"  # holding the store's lock, uncommitted
    midway.send_signal(signal.SIGKILL)
    midway.wait(timeout=30)
    after = [json.loads(line) for _, line in pg_srv.lines(url, "memory")]
    assert len(after) == len(stored) and not any(e.get("i") == "midway" for e in after)
    from engine.base import clock

    nxt = pg_store.PgStore(url, tmp_path / "mirror", "memory").append(
        {"kind": "note", "at": clock.iso(clock.now())}
    )
    assert nxt["prev"] == after[-1]["hash"]  # the next writer chains on, not stuck behind the dead one
    assert ws.run("verify").returncode == 0  # the chain holds: nothing half-written
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ws.root)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(ws.env, PYTHONPATH=str(Path(__file__).resolve().parents[1])),
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)  # appends need no decide lock
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    start = time.monotonic()
    ws.run("signals", "route", check=True)  # the dead holder's lock went with its connection
    assert time.monotonic() - start < 30
    assert len(ws.json("obligations")) == 1


# ---- live: another host's append reaches the open control room through NOTIFY ---------------------


def test_the_room_shows_another_hosts_append(pg_fleet: Any, tmp_path: Path) -> None:
    """The other host is a clone with a mirror of its own: the room's mirror learns of its append
    only through NOTIFY."""
    import asyncio

    from controlroom.app import ControlRoom
    from engine.checkout.workspace import locate

    ws = pg_fleet
    url = (ws.root / "regulator/policy/store.yaml").read_text().split("url:", 1)[1].strip()
    other = clone(ws, tmp_path / "other-host")
    local, _ = locate(ws.root)
    app = ControlRoom(local, "alice")
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with app.run_test(size=(150, 42)) as pilot:
            await pilot.pause()
            start = len(app.snap.state.signals)
            done = ws.run(
                *report_args(subject="from another host"),
                "--by",
                "alice",
                cwd=other,
                env={"REGULATOR_STORE": url},
            )
            assert done.returncode == 0, done.stderr
            deadline = time.monotonic() + 20
            while len(app.snap.state.signals) == start and time.monotonic() < deadline:
                await pilot.pause(0.05)
            seen["signals"] = (start, len(app.snap.state.signals))

    asyncio.run(main())
    assert seen["signals"][1] == seen["signals"][0] + 1


def test_a_roles_own_session_defaults_change_nothing(tmp_path: Path, pg_server: Any) -> None:
    """A host may give its own role session defaults (`ALTER ROLE regulator_host SET ...`):
    read-only transactions stopped every host's writes, and SQL_ASCII made reads crash (text came
    back as bytes). Every connection now sets what it needs. (Set here per database, as the
    admin, so that no other test on this server sees it; tests/test_pg_roles.py sets more, as the
    role itself.)"""
    db = pg_server.database()
    ws = make_workspace(tmp_path, store=pg_server.url(db))
    ws.run("store", "roles", "--url", pg_server.url(db), check=True)
    with pg_server.admin(db) as conn:
        conn.execute(f"ALTER ROLE regulator_host IN DATABASE \"{db}\" SET client_encoding = 'SQL_ASCII'")
        conn.execute(f'ALTER ROLE regulator_host IN DATABASE "{db}" SET default_transaction_read_only = on')
    host = {"REGULATOR_STORE": pg_server.url(db, "regulator_host")}
    done = ws.run("status", "--json", env=host)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    done = ws.run("unit", "dispatch", "r1", env=host)
    assert done.returncode == 0, done.stderr
    units = {u["id"]: u["status"] for u in ws.json("status", env=host)["units"]}
    assert units["r1"] == "in-progress"
