"""The database roles of design §22 and the attacks of issue 25, on a real PostgreSQL server
(tests/pg.py), real `regulator` processes and a real git repository: no role but regulator_host
writes a host event, the reader blocks no host whatever locks it takes, a role's own session
defaults change nothing, no line over 1 MiB is written on either backend, and `store upgrade`
brings a database made by schema 1 to this one with every old line still valid."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tracemalloc
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from tests import pg_schema_v1
from tests.helpers import make_workspace, one_line, remember_args, report_args

pytestmark = pytest.mark.usefixtures("pg_server")
STORES = ("signals", "memory", "units", "identity")
MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[1]
_names = count(1)


def role_name(prefix: str) -> str:
    """A login role of this test's own (roles are the server's, shared by every test database)."""
    return f"{prefix}_{os.getpid()}_{next(_names)}"


@pytest.fixture
def hosts(tmp_path: Any, pg_server: Any) -> Any:
    """A workspace on PostgreSQL (pinned clock) with the roles made; (workspace, database, the
    host's environment): REGULATOR_STORE names regulator_host, as on a fleet host."""
    db = pg_server.database()
    ws = make_workspace(tmp_path, store=pg_server.url(db))
    done = ws.run("store", "roles", "--url", pg_server.url(db))
    assert done.returncode == 0, done.stderr
    assert "regulator_host" in done.stdout and "regulator_writer" not in done.stdout
    return ws, db, {"REGULATOR_STORE": pg_server.url(db, "regulator_host")}


def chained(conn: Any, store: str, event: dict) -> str:
    """A well-chained line for `store` as its tail stands (what psql makes by hand)."""
    from engine.log.pg.store import line_text
    from engine.log.store import event_hash

    row = conn.execute(
        "SELECT hash FROM regulator.events WHERE store = %s ORDER BY n DESC LIMIT 1", (store,)
    ).fetchone()
    event = dict(event, prev=row[0] if row else "")
    event["hash"] = event_hash(event)
    return line_text(event)


def insert(conn: Any, store: str, line: str) -> None:
    conn.execute(
        "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
        " VALUES (%s, %s, %s, '', '', now())",
        (store, line, hashlib.sha256(line.encode()).hexdigest()),
    )


def rows(pg_server: Any, db: str) -> int:
    with pg_server.admin(db) as conn:
        return conn.execute("SELECT count(*) FROM regulator.events").fetchone()[0]


def units(ws: Any, env: dict) -> dict[str, dict]:
    return {u["id"]: u for u in ws.json("status", env=env)["units"]}


# ---- the reader blocks no host ---------------------------------------------------------------------


def test_the_reader_holding_every_lock_it_can_take_blocks_no_host(hosts: Any, pg_server: Any) -> None:
    """Issue 25: the reader took the decide and store advisory locks and every host's report,
    dispatch and --once waited forever. It holds them here (and 2,000 more, and a transaction
    reading every table) while the host's commands run, each under a hard timeout."""
    import psycopg

    ws, db, host = hosts
    worktree = ws.root / "wt" / "u1"
    worktree.mkdir(parents=True, exist_ok=True)
    reader = psycopg.connect(pg_server.url(db, "regulator_reader"), autocommit=True)
    holder = psycopg.connect(pg_server.url(db, "regulator_reader"))  # a transaction left open
    with reader, holder:
        names = ["regulator.decide"] + [f"regulator.store.{name}" for name in STORES]
        for name in names:
            reader.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
        reader.execute("SELECT pg_advisory_lock(k) FROM generate_series(-1000, 1000) AS k")
        for table in ("meta", "events", "locks", "leader", "leases"):
            holder.execute(f"SELECT count(*) FROM regulator.{table}")
        holder.execute("LOCK TABLE regulator.events, regulator.locks IN ACCESS SHARE MODE")
        for sql in (  # what would block a decider needs UPDATE, which the reader lacks
            "SELECT name FROM regulator.locks FOR UPDATE",
            "SELECT name FROM regulator.locks FOR KEY SHARE",
            "LOCK TABLE regulator.locks IN ROW SHARE MODE",
            "UPDATE regulator.leader SET holder = 'reader'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), reader.transaction():
                reader.execute(sql)

        reported = ws.run(*report_args(affects=["u3"]), "--by", "alice", env=host)
        assert reported.returncode == 0, reported.stderr
        dispatched = ws.run("unit", "dispatch", "u1", "--worktree", str(worktree), env=host)
        assert dispatched.returncode == 0, dispatched.stderr
        room = ws.run("controlroom", "--once", "--json", env=host)
        assert room.returncode in (0, 1), room.stderr
        (ob,) = ws.json("obligations", env=host)  # routed, past every lock the reader holds
        assert ob["unit"] == "u3"
        status = units(ws, host)
        assert status["u1"]["status"] == "in-progress" and status["u3"]["held"] is True
    assert ws.run("verify", env=host).returncode == 0


# ---- a role's own session defaults -------------------------------------------------------------------


def test_a_hosts_alter_role_set_changes_nothing_for_the_next_host_command(hosts: Any, pg_server: Any) -> None:
    """Issue 25: `ALTER ROLE regulator_writer SET statement_timeout='1ms'`, run by the role itself,
    made every host's commands exit 3. Every connection now sets its own settings as it starts,
    ahead of any role's defaults (set here in this test's database only: roles are the server's)."""
    import psycopg

    ws, db, host = hosts
    with psycopg.connect(pg_server.url(db, "regulator_host"), autocommit=True) as conn:  # as that role
        for setting, value in (
            ("statement_timeout", "1ms"),
            ("lock_timeout", "1ms"),
            ("idle_in_transaction_session_timeout", "1ms"),
            ("default_transaction_read_only", "on"),
            ("default_transaction_isolation", "serializable"),
            ("client_encoding", "SQL_ASCII"),
            ("DateStyle", "German"),
            ("search_path", "public"),
            ("role", "regulator_reader"),
        ):
            conn.execute(f"ALTER ROLE regulator_host IN DATABASE \"{db}\" SET {setting} = '{value}'")
    with psycopg.connect(pg_server.url(db, "regulator_host"), autocommit=True) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone()[0] in ("1ms", b"1ms")  # type: ignore[index]  # as psql has it
    from engine.log.pg.connection import fresh

    conn = fresh(pg_server.url(db, "regulator_host"))
    with conn:
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "role")
        }
        assert shown == {
            "statement_timeout": "30s",
            "lock_timeout": "5s",
            "idle_in_transaction_session_timeout": "1min",
            "role": "none",
        }
    worktree = ws.root / "wt" / "u1"
    worktree.mkdir(parents=True, exist_ok=True)
    for args in (
        ("status", "--json"),
        (*report_args(affects=["u3"]), "--by", "alice"),
        ("signals", "route"),
        ("unit", "dispatch", "u1", "--worktree", str(worktree)),
        ("controlroom", "--once", "--json"),
    ):
        done = ws.run(*args, env=host)
        assert done.returncode in ((0, 1) if "--once" in args else (0,)), (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert units(ws, host)["u1"]["status"] == "in-progress"


# ---- host events: regulator_host's alone ---------------------------------------------------------------


def test_no_role_but_regulator_host_writes_a_host_event(hosts: Any, pg_server: Any) -> None:
    """Issue 25's writer-role attack: a close of a held unit inserted right after the routing
    that holds it. Any role but regulator_host (here one granted INSERT as regulator_writer was)
    is refused every host-event kind, and nothing is written; other kinds still go in."""
    import psycopg

    ws, db, host = hosts
    ws.lease("u1")
    ws.run(*report_args(affects=["u1"]), "--by", "alice", env=host, check=True)
    ws.run("signals", "route", env=host, check=True)
    assert units(ws, host)["u1"]["held"] is True
    intruder = role_name("intruder")
    with pg_server.admin(db) as admin:
        admin.execute(f"CREATE ROLE {intruder} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA regulator TO {intruder}")
        admin.execute(f"GRANT SELECT ON regulator.meta TO {intruder}")
        admin.execute(f"GRANT SELECT, INSERT ON regulator.events TO {intruder}")
    before = rows(pg_server, db)
    with psycopg.connect(pg_server.url(db, intruder), autocommit=True) as conn:
        for store, event in (
            ("units", {"kind": "close", "unit": "u1", "leaseHash": None, "at": "2026-11-29T11:59:58Z"}),
            (
                "units",
                {"kind": "dispatch", "unit": "b1", "leaseHash": "0" * 64, "at": "2026-11-29T12:00:00Z"},
            ),
            ("signals", {"kind": "routing", "signal": "S", "obligations": [], "at": "2026-11-29T12:00:00Z"}),
            ("units", {"kind": "result", "unit": "u1", "outcome": "done", "at": "2026-11-29T12:00:00Z"}),
            ("units", {"kind": "upgrade", "marks": {}, "at": "2026-11-29T12:00:00Z"}),
        ):
            with pytest.raises(
                psycopg.errors.InsufficientPrivilege, match=f"{event['kind']} is a host event"
            ):
                insert(conn, store, chained(conn, store, event))
        # the kind every reader takes is the last of duplicate keys: so does the trigger
        line = chained(conn, "units", {"kind": "note", "unit": "u1", "at": "2026-11-29T12:00:00Z"})
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="close is a host event"):
            insert(conn, "units", line[:-1] + ',"kind":"close"}')
        assert rows(pg_server, db) == before  # nothing written
        insert(conn, "memory", chained(conn, "memory", {"kind": "note", "at": "2026-11-29T12:00:00Z"}))
        who = conn.execute(  # type: ignore[index]
            "SELECT written_by FROM regulator.events WHERE store = 'memory' ORDER BY n DESC LIMIT 1"
        ).fetchone()[0]
        assert who == intruder  # session_user, recorded beside recorded_at
    assert units(ws, host)["u1"]["status"] == "in-progress" and units(ws, host)["u1"]["held"] is True
    refused = ws.run("unit", "close", "u1", env=host)
    assert refused.returncode == 3 and "vetoed" in refused.stderr


def test_the_owner_writes_host_events_only_by_its_import(tmp_path: Any, pg_server: Any) -> None:
    """The schema's owner (not a superuser) imports a workspace's host events with `store copy`,
    and is refused the same kinds in an ordinary session: a host writes them, as regulator_host."""
    import psycopg

    ws = make_workspace(tmp_path)  # files
    ws.lease("u1")
    ws.run(*report_args(affects=["u3"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    owner = role_name("owner")
    with pg_server.admin() as admin:
        admin.execute(f"CREATE ROLE {owner} LOGIN CREATEROLE")
        db = f"owned_{owner}"
        admin.execute(f'CREATE DATABASE "{db}" OWNER {owner}')
    pg_server.made.append(db)
    url = pg_server.url(db, owner)
    copied = ws.run("store", "copy", "--to", url)
    assert copied.returncode == 0, copied.stderr
    with psycopg.connect(url, autocommit=True) as conn:
        kinds = [json.loads(r[0])["kind"] for r in conn.execute("SELECT line FROM regulator.events")]
        assert "dispatch" in kinds and "routing" in kinds  # imported
        before = rows(pg_server, db)
        event = {"kind": "close", "unit": "u1", "leaseHash": None, "at": "2026-11-29T12:00:00Z"}
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="close is a host event"):
            insert(conn, "units", chained(conn, "units", event))
        assert rows(pg_server, db) == before  # nothing was written
    shutil.move(ws.root / ".regulator", tmp_path / "files-aside")
    as_owner = {"REGULATOR_STORE": url}
    done = ws.run("controlroom", "--once", "--json", env=as_owner)
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["routed"] is None  # not a host: it routes nothing, and says why
    refused = ws.run("unit", "close", "u1", env=as_owner)
    assert refused.returncode == 3
    assert "close is a host event: only regulator_host writes it" in one_line(refused)


# ---- no line over 1 MiB ----------------------------------------------------------------------------------


def sized(prev: str, size: int) -> str:
    """A chained note line of exactly `size` bytes."""
    from engine.log.pg.store import line_text
    from engine.log.store import event_hash

    def line(pad: int) -> str:
        event = {"kind": "note", "pad": "x" * pad, "at": "2026-11-29T12:00:00Z", "prev": prev}
        event["hash"] = event_hash(event)
        return line_text(event)

    text = line(size - len(line(0)))
    assert len(text.encode()) == size
    return text


def test_a_line_over_1_mib_is_refused_by_the_trigger_and_nothing_is_written(
    hosts: Any, pg_server: Any
) -> None:
    import psycopg

    ws, db, host = hosts
    with psycopg.connect(pg_server.url(db, "regulator_host"), autocommit=True) as conn:
        tail = conn.execute(
            "SELECT hash FROM regulator.events WHERE store = 'memory' ORDER BY n DESC LIMIT 1"
        ).fetchone()
        prev = tail[0] if tail else ""
        before = rows(pg_server, db)
        for size in (MIB + 1, 100 * MIB):
            with pytest.raises(psycopg.errors.CheckViolation, match="over the limit of 1048576 bytes"):
                insert(conn, "memory", sized(prev, size))
            assert rows(pg_server, db) == before
        insert(conn, "memory", sized(prev, MIB))  # exactly 1 MiB goes in
        assert rows(pg_server, db) == before + 1
    from engine.base.errors import BadInput
    from engine.log.pg.store import PgStore

    store = PgStore(pg_server.url(db, "regulator_host"), tmp_path_of(ws), "memory")
    with pytest.raises(BadInput, match="over the limit of 1,048,576 bytes"):  # refused before it is sent
        store.append({"kind": "note", "pad": "x" * MIB, "at": "2026-11-29T12:00:00Z"})
    assert rows(pg_server, db) == before + 1


def tmp_path_of(ws: Any) -> Path:
    folder = ws.root.parent / "mirror"
    folder.mkdir(exist_ok=True)
    return folder


def test_a_line_over_1_mib_is_refused_by_the_file_store_in_bounded_memory(ws: Any) -> None:
    from engine.base.errors import BadInput
    from engine.log.store import Store

    store = Store(ws.store("memory"))
    before = ws.store("memory").read_bytes()
    big = "x" * (100 * MIB)
    tracemalloc.start()
    try:
        with pytest.raises(BadInput, match="over the limit of 1,048,576 bytes"):
            store.append({"kind": "note", "pad": big, "at": "2026-11-29T12:00:00Z"}, assign_id=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * len(big)  # one copy of its text at most: never its bytes, its id's text, its line
    assert ws.store("memory").read_bytes() == before
    store.append({"kind": "note", "pad": "", "at": "2026-11-29T12:00:00Z"})
    written = store.append({"kind": "note", "pad": "", "at": "2026-11-29T12:00:00Z"})  # chained on a hash
    pad = MIB - len(json.dumps(written, ensure_ascii=False, separators=(",", ":")).encode())
    with pytest.raises(BadInput):  # a line of 1 MiB + 1 byte
        store.append({"kind": "note", "pad": "x" * (pad + 1), "at": "2026-11-29T12:00:00Z"})
    grown = ws.store("memory").read_bytes()
    store.append({"kind": "note", "pad": "x" * pad, "at": "2026-11-29T12:00:00Z"})  # exactly 1 MiB
    last = ws.store("memory").read_bytes()[len(grown) :]
    assert len(last) == MIB + 1 and last.endswith(b"\n")


# ---- the decide lock: a row lock, probed per backend ---------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from engine.checkout.workspace import locate
ws, _ = locate(Path(sys.argv[1]))
with ws.exclusive():
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("backend", ["files", "postgresql"])
def test_the_room_asks_the_backend_whether_another_writer_holds_the_decide_lock(
    backend: Any, tmp_path: Any, pg_server: Any
) -> None:
    """The room's "waiting for another writer" probed a file lock even on PostgreSQL."""
    from engine.checkout.workspace import locate

    env = {}
    if backend == "postgresql":
        db = pg_server.database()
        ws = make_workspace(tmp_path, store=pg_server.url(db))
        ws.run("store", "roles", "--url", pg_server.url(db), check=True)
        env = {"REGULATOR_STORE": pg_server.url(db, "regulator_host")}
    else:
        ws = make_workspace(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ws.root)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(ws.env, **env, PYTHONPATH=str(ROOT)),
    )
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        local, _ = locate(ws.root)
        assert local.decide_lock_held() is True
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        for _ in range(100):  # the server ends the dead holder's session at once, or nearly
            if not local.decide_lock_held():
                break
        assert local.decide_lock_held() is False
        with local.exclusive():  # and the lock is there to take
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---- store upgrade ----------------------------------------------------------------------------------------


def old_database(pg_server: Any, clock: str = "pinned") -> str:
    """A database made by schema 1 (tests/pg_schema_v1.py) with its roles, as the previous
    rounds' `init --store` and `store roles` made it."""
    db = pg_server.database()
    with pg_server.admin(db) as conn:
        conn.execute(pg_schema_v1.SCHEMA_SQL)
        conn.execute(
            "INSERT INTO regulator.meta (instance, version, clock) VALUES (%s, %s, %s)",
            (os.urandom(16).hex(), pg_schema_v1.VERSION, clock),
        )
        conn.execute(pg_schema_v1.ROLES_SQL)
    return db


def test_store_upgrade_keeps_every_old_line_valid_and_takes_the_writers_insert(
    tmp_path: Any, pg_server: Any
) -> None:
    import psycopg

    ws = make_workspace(tmp_path)  # files: the history the old database holds
    ws.lease("u1")
    ws.run(*report_args(affects=["u1", "u3"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    held = next(o["id"] for o in ws.json("obligations") if o["unit"] == "u1")
    ws.run(*remember_args(), cwd=ws.root / "wt" / "u1", check=True)  # a unit's memory
    db = old_database(pg_server)
    url = pg_server.url(db)
    ws.run("store", "copy", "--to", url, check=True)  # the import, into schema 1
    shutil.move(ws.root / ".regulator", tmp_path / "files-aside")
    writer = pg_server.url(db, "regulator_writer")
    with psycopg.connect(writer, autocommit=True) as conn:  # an old host's honest line, as schema 1 took it
        insert(conn, "memory", chained(conn, "memory", {"kind": "note", "at": "2026-11-29T12:00:00Z"}))
    as_owner = {"REGULATOR_STORE": url}
    sizes = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name in STORES:
            lines = [
                r[0] for r in conn.execute("SELECT line FROM regulator.events WHERE store = %s", (name,))
            ]
            sizes[name] = sum(len(line.encode()) + 1 for line in lines)

    refused = ws.run("store", "upgrade", "--url", pg_server.url(db, "regulator_writer"))
    assert refused.returncode == 3 and "only the owner" in one_line(refused)
    done = ws.run("store", "upgrade", "--json", env=as_owner)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["from"], report["schema"], report["upgraded"]) == (1, 2, True)
    assert report["writerRevoked"] is True and report["marks"] == sizes

    checked = ws.run("verify", "--json", env=as_owner)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # every old line still valid
    assert json.loads(checked.stdout)["findings"] == []
    mark = [e for e in ws.events("units") if e["kind"] == "upgrade"]
    assert len(mark) == 1 and mark[0]["marks"] == sizes and mark[0]["schema"] == 2
    assert ws.store("units").stat().st_size == sizes["units"] + len(json.dumps(mark[0], ensure_ascii=False,
                                                                                separators=(",", ":"))) + 1  # fmt: skip

    with psycopg.connect(writer, autocommit=True) as conn:  # the writer's back-dated close: refused
        close = {"kind": "close", "unit": "u1", "leaseHash": None, "at": "2026-11-29T11:59:58Z"}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            insert(conn, "units", chained(conn, "units", close))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            insert(conn, "memory", chained(conn, "memory", {"kind": "note", "at": "2026-11-29T12:00:00Z"}))
        assert conn.execute("SELECT count(*) FROM regulator.events").fetchone()[0] > 0  # type: ignore[index]  # it still reads

    ws.run("store", "roles", env=as_owner, check=True)
    host = {"REGULATOR_STORE": pg_server.url(db, "regulator_host")}
    worktree = ws.root / "wt" / "b1"
    worktree.mkdir(parents=True, exist_ok=True)
    ws.run("unit", "dispatch", "b1", "--worktree", str(worktree), env=host, check=True)
    resolved = ws.run("obligation", "resolve", held, "--by", "alice", "--disposition", "no-action",
                      "--rationale", "ok", env=host)  # fmt: skip
    assert resolved.returncode == 0, resolved.stderr
    assert units(ws, host)["u1"]["held"] is False
    with pg_server.admin(db) as conn:
        found = conn.execute(
            "SELECT written_by, line FROM regulator.events WHERE store = 'units' ORDER BY n"
        ).fetchall()
        kinds = [(who, json.loads(line)["kind"]) for who, line in found]
    assert kinds[-2:] == [("regulator_admin", "upgrade"), ("regulator_host", "dispatch")]
    assert all(who is None for who, _ in kinds[:-2])  # lines before the mark: no writer was recorded
    assert ws.run("verify", env=host).returncode == 0

    again = ws.run("store", "upgrade", env=as_owner)
    assert again.returncode == 0 and "at schema 2 already; nothing written" in again.stdout
    assert len([e for e in ws.events("units") if e["kind"] == "upgrade"]) == 1


def test_new_code_on_a_database_not_yet_upgraded_says_to_upgrade_it(tmp_path: Any, pg_server: Any) -> None:
    ws = make_workspace(tmp_path)
    ws.run(*report_args(), "--by", "alice", check=True)  # unrouted: routing needs the decide lock
    db = old_database(pg_server)
    ws.run("store", "copy", "--to", pg_server.url(db), check=True)
    shutil.move(ws.root / ".regulator", tmp_path / "files-aside")
    env = {"REGULATOR_STORE": pg_server.url(db)}
    assert ws.run("status", env=env).returncode == 0  # reads work
    done = ws.run("signals", "route", env=env)
    assert done.returncode == 3
    assert "run `regulator store upgrade` as the schema's owner" in one_line(done)
    roles = ws.run("store", "roles", env=env)
    assert roles.returncode == 3 and "store upgrade" in one_line(roles)
    fresh = pg_server.database()
    (tmp_path / "new").mkdir()
    made = make_workspace(tmp_path / "new", store=pg_server.url(fresh))
    current = made.run("store", "upgrade", "--json")
    assert current.returncode == 0 and json.loads(current.stdout)["upgraded"] is False


def test_store_roles_as_a_role_that_owns_nothing_says_it_granted_nothing(hosts: Any, pg_server: Any) -> None:
    """An adversarial review: `store roles` as regulator_reader printed `roles ready` and exited 0;
    PostgreSQL had turned each of its GRANTs into a warning. Now it is refused: exit 3, one line."""
    ws, db, _ = hosts
    for role in ("regulator_reader", "regulator_host"):
        done = ws.run("store", "roles", "--url", pg_server.url(db, role))
        assert (done.returncode, done.stdout) == (3, ""), done.stderr
        assert "this role does not own the stores' tables, so it can grant nothing" in done.stderr
        assert "roles ready" not in done.stderr and "Traceback" not in done.stderr
