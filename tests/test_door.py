"""A UnitDoor kept open (engine.doors.door): it keeps its reads between calls, and nothing it keeps
outlives the change it depends on. A lease released, a grant withdrawn, units.ndjson replaced or
rewritten, HEAD moved: the next call from the same door sees it. On PostgreSQL the one-trip append
writes only while the units and identity stores are as the door read them, and exactly once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import HealthCheck, example, settings
from hypothesis import strategies as st

from engine.checkout.head import Head
from engine.log.events import STORES
from tests import helpers, scratch
from tests.helpers import REGULATOR, Workspace, git, make_workspace

REPORT = {
    "subject": "vendor/left-pad.js",
    "claim": "The vendored helper is a modified copy.",
    "observation": "diff against upstream",
    "evidence": ["vendor/left-pad.js"],
    "confidence": "high",
    "reportedSeverity": "advisory",
    "affectedUnits": [],
}
PROFILES = "regulator/policy/profiles.yaml"
ROOT = str(Path(__file__).resolve().parents[1])


def fields(subject: str) -> dict:
    return dict(REPORT, subject=subject)


@pytest.fixture(params=["files", "postgresql"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A workspace on the system clock (the one-trip path needs it), files or PostgreSQL, with r1
    dispatched into a folder of its own; the door's process sees no REGULATOR_NOW."""
    url = None
    if request.param == "postgresql":
        server = request.getfixturevalue("pg_server")
        url = server.url(server.database())
    ws = make_workspace(tmp_path, now=None, clock="system", store=url)
    ws.env.pop("REGULATOR_NOW", None)
    ws.url = url
    ws.lease_file = ws.lease("r1") / ".regulator-lease.json"
    return ws


def signals_held(ws: helpers.Workspace) -> list[dict]:
    """The signals as the store holds them: the server's lines on PostgreSQL, else the file."""
    if ws.url is None:
        return [e for e in ws.events("signals") if e["kind"] == "signal"]
    return signals_held_url(ws.url)


def elsewhere(ws: helpers.Workspace) -> Workspace:
    """Where another process changes the stores: on PostgreSQL another host's checkout of the
    workspace, with a mirror of its own, so the door's host hears of the change only from the
    server; on files the workspace itself."""
    if ws.url is None:
        return ws
    other = ws.root.parent / "other-host"
    if not other.exists():
        shutil.copytree(ws.root, other, symlinks=True)
    return Workspace(other, ws.env)


def held_bytes(ws: helpers.Workspace) -> bytes:
    """Every line the stores hold (the server's, on PostgreSQL: the host's mirror is a cache a
    refused call may bring up to date)."""
    if ws.url is None:
        return ws.digest().encode()
    from engine.log.pg import server as pg_srv

    return b"".join(
        line.encode() + b"\n" for name in sorted(STORES) for _, line in pg_srv.lines(ws.url, name)
    )


@pytest.fixture(autouse=True)
def _no_pinned_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REGULATOR_NOW", raising=False)


# ---- the lease, the grant ------------------------------------------------------------------------


def test_a_lease_released_meanwhile_is_refused_by_the_next_call(fleet: Any) -> None:
    from engine.doors.api import Refused, UnitDoor

    door = UnitDoor(fleet.lease_file)
    first = door.report(fields("before the close")).id
    second = door.report(fields("still open")).id
    assert [s["id"] for s in signals_held(fleet)] == [first, second]
    elsewhere(fleet).run("unit", "close", "r1", check=True)  # another process releases the lease
    before = held_bytes(fleet)
    with pytest.raises(Refused) as refused:
        door.report(fields("after the close"))
    assert refused.value.exit_code == 3 and "not the unit's current lease" in str(refused.value)
    assert held_bytes(fleet) == before


def test_a_lease_demoted_then_dispatched_again_stays_refused_in_the_open_door(fleet: Any) -> None:
    from engine.doors.api import Refused, UnitDoor

    door = UnitDoor(fleet.lease_file)
    door.report(fields("before"))
    fleet.run("unit", "demote", "r1", "--by", "alice", "--rationale", "re-gate", check=True)
    before = held_bytes(fleet)
    with pytest.raises(Refused):
        door.report(fields("demoted"))
    assert held_bytes(fleet) == before
    # dispatched again: a new lease; the old one, in the open door, stays refused
    fleet.run("unit", "dispatch", "r1", "--worktree", str(fleet.lease_file.parent), check=True)
    with pytest.raises(Refused):
        door.report(fields("the old lease"))
    assert UnitDoor(fleet.lease_file).report(fields("the new lease")).id
    assert [s["subject"] for s in signals_held(fleet)][-1] == "the new lease"
    assert fleet.run("verify").returncode == 0


def test_a_grant_withdrawn_by_decision_is_refused_by_the_next_call(fleet: Any) -> None:
    from engine.doors.api import Refused, UnitDoor

    door = UnitDoor(fleet.lease_file)
    door.report(fields("granted"))
    text = (fleet.root / PROFILES).read_text()
    withdrawn = text.replace("- report_intelligence\n", "")
    assert withdrawn != text
    elsewhere(fleet).decide(PROFILES, withdrawn)  # the identity store moves on, in another process
    before = held_bytes(fleet)
    with pytest.raises(Refused) as refused:
        door.report(fields("no longer granted"))
    assert refused.value.exit_code == 3 and "does not grant report_intelligence" in str(refused.value)
    assert held_bytes(fleet) == before
    elsewhere(fleet).decide(PROFILES, text)
    assert door.report(fields("granted again")).id
    assert [s["subject"] for s in signals_held(fleet)] == ["granted", "granted again"]


def test_bad_input_is_exit_2_and_an_affected_unit_needs_a_contract(fleet: Any) -> None:
    from engine.doors.api import BadInput, UnitDoor

    door = UnitDoor(fleet.lease_file)
    before = held_bytes(fleet)
    with pytest.raises(BadInput) as bad:
        door.report(dict(REPORT, affectedUnits=["zz9"]))
    assert bad.value.exit_code == 2 and "unit 'zz9' has no contract" in str(bad.value)
    assert held_bytes(fleet) == before
    fleet.contract("zz9", "implement", "implement")  # a contract written meanwhile is seen
    door.report(dict(REPORT, affectedUnits=["zz9"]))
    assert signals_held(fleet)[-1]["affectedUnits"] == ["zz9"]


def test_fields_that_are_not_a_mapping_are_bad_input_and_write_nothing(fleet: Any) -> None:
    from engine.doors.api import BadInput, UnitDoor

    door = UnitDoor(fleet.lease_file)
    before = held_bytes(fleet)
    for call, given in ((door.report, "text"), (door.remember, [("subject", "s")]), (door.report, {1: "x"})):
        with pytest.raises(BadInput) as bad:
            call(given)  # type: ignore[arg-type]  # what a harness passing the wrong shape does
        assert bad.value.exit_code == 2 and "fields must be a mapping" in str(bad.value)
    assert held_bytes(fleet) == before


def test_stores_committed_to_git_meanwhile_are_refused_by_the_next_call(fleet: Any) -> None:
    from engine.doors.api import Refused, UnitDoor

    door = UnitDoor(fleet.lease_file)
    door.report(fields("before"))
    fleet.git("add", "-f", ".regulator/identity.ndjson")  # git's index changes: git is asked again
    before = held_bytes(fleet)
    with pytest.raises(Refused) as refused:
        door.report(fields("tracked"))
    assert refused.value.exit_code == 3 and "tracked by git" in str(refused.value)
    assert held_bytes(fleet) == before
    fleet.git("rm", "-q", "--cached", ".regulator/identity.ndjson")
    door.report(fields("untracked again"))
    assert [s["subject"] for s in signals_held(fleet)] == ["before", "untracked again"]


# ---- units.ndjson replaced or rewritten (files) ----------------------------------------------------


def test_units_file_replaced_shrunk_or_rewritten_is_read_again(tmp_path: Path) -> None:
    from engine.doors.api import Refused, UnitDoor

    ws = make_workspace(tmp_path)
    lease = ws.lease("r1") / ".regulator-lease.json"
    door = UnitDoor(lease)
    door.report(fields("one"))
    units = ws.store("units")
    original = units.read_bytes()

    def refused_and_nothing_written() -> None:
        before = ws.store("signals").read_bytes()
        with pytest.raises(Refused) as refused:
            door.report(fields("refused"))
        assert refused.value.exit_code == 3
        assert ws.store("signals").read_bytes() == before

    # replaced by a copy of itself (another file, the same bytes): read again, still the lease
    copy = units.with_suffix(".copy")
    shutil.copyfile(units, copy)
    os.replace(copy, units)
    door.report(fields("two"))
    # rewritten in place, the same size: the dispatch's leaseHash edited
    dispatch = json.loads(original.splitlines()[-1])
    assert dispatch["kind"] == "dispatch"
    token = dispatch["leaseHash"]
    edited = original.replace(token.encode(), ("0" if token[0] != "0" else "1").encode() + token[1:].encode())
    assert len(edited) == len(original)
    with open(units, "r+b") as handle:
        handle.write(edited)
    refused_and_nothing_written()
    with open(units, "r+b") as handle:  # and back
        handle.write(original)
    door.report(fields("three"))
    # shrunk: cut back to before the dispatch
    units.write_bytes(b"".join(line + b"\n" for line in original.splitlines()[:-1]))
    refused_and_nothing_written()
    # emptied, then written again in place with more than the door read, the dispatch gone: the
    # same file, grown, but not by appending
    units.write_bytes(b"")
    refused_and_nothing_written()
    units.write_bytes(original)
    door.report(fields("again"))
    padded = b"".join(line + b"\n" for line in original.splitlines()[:-1]) + b'{"kind":"note","pad":"'
    units.write_bytes(padded + b"x" * (len(original) + 100 - len(padded)) + b'"}\n')
    assert len(units.read_bytes()) > len(original)
    refused_and_nothing_written()
    units.write_bytes(original)
    door.report(fields("four"))
    assert [s["subject"] for s in ws.events("signals") if s["kind"] == "signal"] == [
        "one",
        "two",
        "three",
        "again",
        "four",
    ]


def test_a_line_appended_to_units_is_folded_without_reading_the_rest(tmp_path: Path) -> None:
    """Dispatching another unit appends to units.ndjson; the door folds only that, and the
    unit's lease, released afterwards, is refused at once."""
    from engine.doors.api import Refused, UnitDoor

    ws = make_workspace(tmp_path)
    lease = ws.lease("r1") / ".regulator-lease.json"
    door = UnitDoor(lease)
    door.report(fields("one"))
    for unit in ("u1", "u3"):
        ws.lease(unit)
        door.report(fields(f"after {unit}"))
    ws.run("unit", "close", "r1", check=True)
    with pytest.raises(Refused):
        door.report(fields("closed"))
    assert [s["subject"] for s in ws.events("signals") if s["kind"] == "signal"] == [
        "one",
        "after u1",
        "after u3",
    ]


# ---- HEAD --------------------------------------------------------------------------------------


def rev(where: Path) -> str:
    return git(where, "rev-parse", "HEAD").strip()


def test_head_answers_as_git_does_through_commits_branches_packs_and_worktrees(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    inside = repo / "wt" / "r1"
    inside.mkdir(parents=True)
    head = Head(inside)
    assert head.revision() is None  # no commit yet: what `git rev-parse HEAD` gives, nothing
    (repo / "a").write_text("1")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    seen = []

    def same() -> None:
        seen.append(head.revision())
        assert seen[-1] == rev(inside)
        assert head.revision() == seen[-1]  # and again, from memory

    same()
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")  # the branch's loose ref moves
    same()
    git(repo, "checkout", "-q", "-b", "other")  # HEAD names another branch, at the same commit
    git(repo, "commit", "-q", "--allow-empty", "-m", "three")
    same()
    git(repo, "pack-refs", "--all")  # the loose ref goes: packed-refs holds it
    same()
    git(repo, "commit", "-q", "--allow-empty", "-m", "four")  # a loose ref again
    same()
    git(repo, "pack-refs", "--all")
    git(repo, "reset", "-q", "--hard", "HEAD~2")  # moved back while packed
    same()
    git(repo, "checkout", "-q", "--detach", "main")  # HEAD holds an object name
    same()
    git(repo, "checkout", "-q", "other")
    same()
    # a linked worktree: its HEAD in its own git dir, its branch's ref in the common one
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    in_linked = Head(linked)
    assert in_linked.revision() == rev(linked)
    git(linked, "commit", "-q", "--allow-empty", "-m", "in the worktree")
    assert in_linked.revision() == rev(linked) != rev(repo)
    git(repo, "update-ref", "refs/heads/feature", "main")  # moved from the main worktree
    assert in_linked.revision() == rev(linked) == git(repo, "rev-parse", "main").strip()
    assert len(set(seen)) >= 4
    # a repository made between the folder and the one it was in: git answers from the new one
    git(inside, "init", "-q", "-b", "main")
    git(inside, "commit", "-q", "--allow-empty", "-m", "nested")
    assert head.revision() == rev(inside) != seen[-1]


def test_a_git_file_naming_a_nul_is_no_revision_and_no_traceback(tmp_path: Path) -> None:
    """A `.git` file is the unit's to write: one naming a path with a NUL gives no revision (git
    says what it makes of it), never a ValueError out of the door (D-207, after review)."""
    folder = tmp_path / "wt"
    folder.mkdir()
    (folder / ".git").write_bytes(b"gitdir: \x00\n")
    assert Head(folder).revision() is None


def test_head_moved_the_next_signal_records_the_new_revision(fleet: Any) -> None:
    from engine.doors.api import UnitDoor

    worktree = fleet.root.parent / "r3-tree"
    fleet.git("worktree", "add", "-q", "-b", "r3", str(worktree))
    fleet.contract("r3", "research", "intelligence")
    fleet.run("unit", "dispatch", "r3", "--worktree", str(worktree), check=True)
    door = UnitDoor(worktree / ".regulator-lease.json")
    door.report(fields("first"))
    git(worktree, "commit", "-q", "--allow-empty", "-m", "the unit's work", env=fleet.env)
    door.report(fields("second"))
    fleet.commit("on main", sign=False)  # the workspace's HEAD moves; the unit's does not
    door.report(fields("third"))
    git(worktree, "commit", "-q", "--allow-empty", "-m", "more", env=fleet.env)
    door.report(fields("fourth"))
    revisions = [s["revision"] for s in signals_held(fleet)]
    log = git(worktree, "log", "--format=%H", env=fleet.env).split()
    assert revisions == [log[2], log[1], log[1], log[0]]


# ---- PostgreSQL: the one-trip append ----------------------------------------------------------------


def test_one_trip_append_writes_only_while_the_guarded_stores_are_unchanged(
    tmp_path: Path, pg_url: str
) -> None:
    """PgStore.append_unchanged: the same line append() writes, chained to the server's tail,
    and nothing at all when a guarded store moved on since its tail was read."""
    from engine.base import clock
    from engine.log.pg import connection as pg_connection
    from engine.log.pg import server as pg_srv
    from engine.log.pg import store as pg_store

    clock.configure(False)  # the system clock, as a workspace on it configures this process
    ws = make_workspace(tmp_path, now=None, clock="system", store=pg_url)
    ws.lease("r1")
    tails = {name: json.loads(pg_srv.lines(pg_url, name)[-1][1])["hash"] for name in ("units", "identity")}
    store = pg_store.PgStore(pg_url, tmp_path / "mirror", "signals", mirrored=False)
    event = {"kind": "note", "subject": "é ✓ \"it's\" 100% \\ back'); --", "at": pg_connection.now_text()}
    written = store.append_unchanged(event, tails)
    assert written is not None and list(written)[0] == "id" and list(written)[-2:] == ["prev", "hash"]
    ((n, line),) = pg_srv.lines(pg_url, "signals")
    assert line == pg_store.line_text(written) and json.loads(line)["subject"] == event["subject"]
    second = store.append({**event, "subject": "by append()"}, assign_id=True)
    third = store.append_unchanged({**event, "subject": "third"}, tails)
    assert third is not None and third["prev"] == second["hash"]
    ws.run("unit", "dispatch", "u1", check=True)  # the units store moves on, in another process
    counts = pg_srv.counts(pg_url)
    assert store.append_unchanged({**event, "subject": "guarded"}, tails) is None
    assert pg_srv.counts(pg_url) == counts
    # a store's old tail: as good as a moved one
    assert store.append_unchanged({**event, "subject": "guarded"}, {"signals": written["hash"]}) is None
    assert pg_srv.counts(pg_url) == counts
    # a connection that reads backslashes in literals as escapes: psycopg quotes the line instead
    conn = pg_connection.connect(pg_url)
    conn.execute("SET standard_conforming_strings = off")
    try:
        ws.run("unit", "close", "u1", check=True)
        tails["units"] = json.loads(pg_srv.lines(pg_url, "units")[-1][1])["hash"]
        fourth = store.append_unchanged({**event, "subject": "fourth " + event["subject"]}, tails)
    finally:
        conn.execute("SET standard_conforming_strings = on")
    assert fourth is not None
    assert pg_srv.lines(pg_url, "signals")[-1][1] == pg_store.line_text(fourth)
    assert [json.loads(line)["subject"] for _, line in pg_srv.lines(pg_url, "signals")] == [
        event["subject"],
        "by append()",
        "third",
        "fourth " + event["subject"],
    ]
    assert ws.run("verify").returncode == 0


def test_one_trip_is_not_taken_on_a_pinned_clock(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.doors import api
    from engine.log.pg import store as pg_store

    ws = make_workspace(tmp_path, store=pg_url)  # clock: pinned, REGULATOR_NOW set
    lease = ws.lease("r1") / ".regulator-lease.json"
    monkeypatch.setenv("REGULATOR_NOW", ws.env["REGULATOR_NOW"])
    door = api.UnitDoor(lease)
    store = pg_store.PgStore(pg_url, tmp_path / "m", "signals", mirrored=False)
    assert store.append_unchanged({"kind": "note", "at": ws.env["REGULATOR_NOW"]}, {}) is None
    first = door.report(fields("pinned")).id
    (held,) = signals_held_url(pg_url)
    assert held["id"] == first and held["at"] == ws.env["REGULATOR_NOW"]


def test_one_trip_as_the_writer_role_and_refused_as_the_reader(tmp_path: Path, pg_server: Any) -> None:
    from engine.base import clock
    from engine.base.errors import Refused
    from engine.log.pg import admin as pg_admin
    from engine.log.pg import connection as pg_connection
    from engine.log.pg import server as pg_srv
    from engine.log.pg import store as pg_store

    clock.configure(False)
    db = pg_server.database()
    owner = pg_server.url(db)
    pg_admin.create_schema(owner, "system")
    subprocess.run([REGULATOR, "store", "roles", "--url", owner], check=True, capture_output=True)
    writer = pg_store.PgStore(pg_server.url(db, "regulator_host"), tmp_path / "w", "signals", mirrored=False)
    first = writer.append_unchanged({"kind": "note", "at": pg_connection.now_text()}, {"units": ""})
    assert first is not None and first["prev"] == ""
    second = writer.append_unchanged({"kind": "note", "at": pg_connection.now_text()}, {})
    assert second is not None and second["prev"] == first["hash"]
    reader = pg_store.PgStore(
        pg_server.url(db, "regulator_reader"), tmp_path / "r", "signals", mirrored=False
    )
    with pytest.raises(Refused, match="a reader role cannot write"):
        reader.append_unchanged({"kind": "note", "at": pg_connection.now_text()}, {})
    assert [line for _, line in pg_srv.lines(owner, "signals")] == [
        pg_store.line_text(first),
        pg_store.line_text(second),
    ]


def signals_held_url(url: str) -> list[dict]:
    from engine.log.pg import server as pg_srv

    return [e for _, line in pg_srv.lines(url, "signals") if (e := json.loads(line))["kind"] == "signal"]


def test_a_connection_broken_during_the_one_trip_append_writes_exactly_once(
    tmp_path: Path, pg_url: str
) -> None:
    """The door's backend is killed while its insert waits on another append that took the same
    line first and has not committed: the door waits for its old session to end, asks whether its
    line went in, finds it did not, and appends it once."""
    import psycopg

    from engine.doors.api import UnitDoor
    from engine.log.pg.store import line_text
    from engine.log.store import event_hash

    ws = make_workspace(tmp_path, now=None, clock="system", store=pg_url)
    door = UnitDoor(ws.lease("r1") / ".regulator-lease.json")
    door.report(fields("warm"))
    holder = psycopg.connect(pg_url)  # an append of the store's next line, not committed
    tail = holder.execute(  # type: ignore[index]
        "SELECT hash FROM regulator.events WHERE store = 'signals' ORDER BY n DESC LIMIT 1"
    ).fetchone()[0]
    event = {"kind": "note", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "prev": tail}
    event["hash"] = event_hash(event)
    line = line_text(event)
    holder.execute(
        "INSERT INTO regulator.events (store, line, sha256, hash, prev, recorded_at)"
        " VALUES ('signals', %s, encode(sha256(convert_to(%s, 'UTF8')), 'hex'), '', '', now())",
        (line, line),
    )
    done: dict = {}

    def report() -> None:
        try:
            done["id"] = door.report(fields("once")).id
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            done["error"] = exc

    writer = threading.Thread(target=report)
    writer.start()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        deadline = time.monotonic() + 30
        waiting: list = []
        while not waiting and time.monotonic() < deadline:
            waiting = admin.execute(  # the door's insert, waiting for the holder's to commit or not
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND wait_event = 'transactionid' AND pid <> pg_backend_pid()"
            ).fetchall()
            time.sleep(0.02)
        assert len(waiting) == 1, waiting
        admin.execute("SELECT pg_terminate_backend(%s)", waiting[0])
        time.sleep(0.3)
    holder.rollback()  # the holder's line is undone: the door's look and its append go on
    holder.close()
    writer.join(60)
    assert "error" not in done, done
    assert [s["subject"] for s in signals_held_url(pg_url)] == ["warm", "once"]
    assert signals_held_url(pg_url)[-1]["id"] == done["id"]
    assert ws.run("verify").returncode == 0


# ---- many doors at once ---------------------------------------------------------------------------

WRITER = """
import sys
from engine.doors.api import UnitDoor
door = UnitDoor(sys.argv[1])
for i in range(int(sys.argv[2])):
    door.report(dict(subject=f"{sys.argv[3]} {i}", claim="c", observation="o", evidence=["e"],
                     confidence="high", reportedSeverity="advisory", affectedUnits=[]))
"""


def test_eight_doors_at_once_append_every_signal_exactly_once_in_one_chain(fleet: Any) -> None:
    for i in range(8):
        fleet.contract(f"q{i}", "research", "intelligence")
    leases = [fleet.lease(f"q{i}") / ".regulator-lease.json" for i in range(8)]
    per = 40
    env = {k: v for k, v in fleet.env.items() if k != "REGULATOR_NOW"}
    env["PYTHONPATH"] = ROOT
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(lease), str(per), f"q{i}"], env=env)
        for i, lease in enumerate(leases)
    ]
    assert [p.wait(timeout=300) for p in writers] == [0] * 8
    held = signals_held(fleet)
    assert sorted(s["subject"] for s in held) == sorted(f"q{i} {n}" for i in range(8) for n in range(per))
    assert len({s["id"] for s in held}) == 8 * per
    assert all(s["unit"] == s["subject"].split()[0] for s in held)
    done = subprocess.run([REGULATOR, "verify"], cwd=fleet.root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # the one-call function still works beside them
    from engine.doors import api

    assert api.report_intelligence(leases[0], **fields("one call")) == signals_held(fleet)[-1]["id"]


# ---- the read model serve's doors share (engine.doors.door.Reads) --------------------------------


def _two_leases(ws: helpers.Workspace) -> None:
    """prepared's steps: r1 (research) and u1 dispatched."""
    ws.lease("r1")
    ws.lease("u1")


FINDING = "---\nid: F-{n}\ndate: '2026-11-01'\ntitle: Finding {n}\naffects: [\"u1\"]\nack: ''\nresolved: {resolved}\n---\nBody.\n"
CHANGES = st.lists(
    st.sampled_from(
        [
            "advisory",
            "blocking",
            "route",
            "garbage",
            "torn",
            "ended",
            "edit",
            "grown",
            "cut",
            "replace",
            "identity",
            "finding",
            "contract",
        ]  # fmt: skip
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@hypothesis.given(changes=CHANGES)
@example(changes=["advisory", "route", "edit", "blocking"])  # each way a kept read must fold again
@example(changes=["advisory", "grown", "route", "cut", "blocking", "replace"])
@example(changes=["blocking", "torn", "route", "ended", "finding", "identity", "contract"])
def test_the_shared_reads_answer_as_a_fresh_load_after_any_change(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, changes: list[str]
) -> None:
    """Whatever the stores and files went through (appends, a torn line and its end, an edit in
    place, a last line written over by a longer one, a cut, a replaced file, a line on
    identity.ndjson, a finding, a contract touched), the kept read model gives the status and
    obligations a fresh load of every store gives. Not drawn: an edit further back than the kept
    tail together with an append, which no kept read sees (docs/decisions.md D-174)."""
    from engine.checkout.workspace import locate
    from engine.commands.obligations import record
    from engine.commands.router import route
    from engine.doors.api import UnitDoor
    from engine.doors.door import Reads
    from engine.read.load import load
    from engine.read.status import status

    tmp = tmp_path_factory.mktemp("reads")
    ws, _ = helpers.prepared(tmp, _two_leases)
    with monkeypatch.context() as env:
        for name, value in ws.env.items():
            env.setenv(name, value)
        engine_ws, _ = locate(ws.root)
        door = UnitDoor(ws.root / "wt" / "r1" / ".regulator-lease.json")
        reads = Reads()

        def answers(state: Any) -> tuple:
            obligations = sorted(
                json.dumps(record(state, ob), sort_keys=True) for ob in state.obligations.values()
            )
            return status(engine_ws, state), obligations

        for n, change in enumerate(changes):
            signals = ws.store("signals")
            if change in ("advisory", "blocking"):
                door.report(dict(REPORT, subject=f"s{n}", reportedSeverity=change, affectedUnits=["u1"]))
            elif change == "route":
                route(engine_ws)
            elif change == "garbage":
                with open(signals, "ab") as handle:
                    handle.write(b"not a line of JSON\n")
            elif change == "torn":  # a write under way: no newline yet
                with open(ws.store("memory"), "ab") as handle:
                    handle.write(b'{"kind":"mem')
            elif change == "ended":
                with open(ws.store("memory"), "ab") as handle:
                    handle.write(b'ory"}\n')
            elif change == "grown":  # the last line written over by a longer one: grown, not appended
                lines = signals.read_bytes().splitlines(keepends=True) or [b"\n"]
                signals.write_bytes(b"".join(lines[:-1]) + b"x" * len(lines[-1]) + b"\n")
            elif change == "edit":  # the same size, in place: the first subject's first letter changed
                data = signals.read_bytes()
                at = data.find(b'"subject":"')
                if at >= 0:
                    at += len(b'"subject":"')
                    time.sleep(0.02)  # past the file system's timestamp tick (docs/decisions.md D-174)
                    with open(signals, "r+b") as in_place:
                        in_place.seek(at)
                        in_place.write(b"X" if data[at : at + 1] != b"X" else b"Y")
            elif change == "cut":
                lines = signals.read_bytes().splitlines(keepends=True)
                signals.write_bytes(b"".join(lines[:-1]))
            elif change == "replace":
                copy = signals.with_suffix(".copy")
                shutil.copyfile(signals, copy)
                os.replace(copy, signals)
            elif change == "identity":
                with open(ws.store("identity"), "ab") as handle:
                    handle.write(b"not a line of JSON either\n")
            elif change == "finding":
                (ws.root / "findings" / f"F-kept-{n}.md").write_text(
                    FINDING.format(n=f"kept-{n}", resolved="false")
                )
            elif change == "contract":  # written again: read again, the same contract
                path = ws.root / "contracts" / "u1.json"
                path.write_bytes(path.read_bytes())
            with reads.reading(engine_ws) as kept:
                got = answers(kept)
            assert got == answers(load(engine_ws, cached=False)), (change, n)


def _kept_and_fresh(ws: helpers.Workspace, reads: Any) -> tuple[Any, Any]:
    """The status the kept read model gives now, and the one a fresh load of every store gives."""
    from engine.checkout.workspace import locate
    from engine.read.load import load
    from engine.read.status import status

    engine_ws, _ = locate(ws.root)
    with reads.reading(engine_ws) as kept:
        got = status(engine_ws, kept)
    return got, status(engine_ws, load(engine_ws, cached=False))


def test_an_append_during_a_kept_read_does_not_hide_a_later_rewrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append lands after the kept read looked at signals.ndjson and before its fold read it
    (the fold reads further than was looked at); later the disposition that closed u1's blocking
    obligation is rewritten in place, the same size: the next read folds again and u1 is held, as
    a fresh load says (found by an adversarial review of D-174)."""
    import engine.doors.door as kept_module
    from engine.doors.door import Reads

    ws = make_workspace(tmp_path)
    ws.run(*helpers.report_args(severity="blocking", affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    ob_id = ws.json("obligations")[0]["id"]
    ws.run("obligation", "resolve", ob_id, "--by", "alice", "--disposition", "no-action",
           "--rationale", "done", check=True)  # fmt: skip
    for name, value in ws.env.items():
        monkeypatch.setenv(name, value)
    signals = ws.store("signals")
    reads = Reads()
    real = kept_module.load

    def appended_meanwhile(*args: Any, **kwargs: Any) -> Any:
        with open(signals, "ab") as handle:
            handle.write(b"not a line of JSON\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(kept_module, "load", appended_meanwhile)
    kept, fresh = _kept_and_fresh(ws, reads)
    monkeypatch.setattr(kept_module, "load", real)
    assert kept == fresh and not next(u for u in kept["units"] if u["id"] == "u1")["held"]
    time.sleep(0.02)  # past the file system's timestamp tick
    data = signals.read_bytes()
    at = data.rindex(ob_id.encode())  # the disposition's: it names no obligation now
    with open(signals, "r+b") as in_place:
        in_place.seek(at)
        in_place.write(b"0" if data[at : at + 1] != b"0" else b"1")
    kept, fresh = _kept_and_fresh(ws, reads)
    assert next(u for u in fresh["units"] if u["id"] == "u1")["held"]
    assert kept == fresh


def test_trunk_moving_without_the_working_tree_is_seen_by_the_kept_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trunk's findings are kept with the registers: a commit that puts an unresolved finding on
    trunk while the working tree keeps it resolved (a fetch, another branch checked out) holds u1
    at the next read, as a fresh load says (found by an adversarial review of D-174)."""
    from engine.doors.door import Reads

    ws = make_workspace(tmp_path)
    for name, value in ws.env.items():
        monkeypatch.setenv(name, value)
    finding = ws.root / "findings" / "F-trunk-1.md"
    finding.write_text(FINDING.format(n="trunk-1", resolved="true"))
    reads = Reads()
    kept, fresh = _kept_and_fresh(ws, reads)
    assert kept == fresh and not next(u for u in kept["units"] if u["id"] == "u1")["held"]
    unresolved = tmp_path / "unresolved.md"
    unresolved.write_text(FINDING.format(n="trunk-1", resolved="false"))
    blob = git(ws.root, "hash-object", "-w", str(unresolved)).strip()
    git(ws.root, "update-index", "--add", "--cacheinfo", f"100644,{blob},findings/F-trunk-1.md")
    git(ws.root, "commit", "-q", "-m", "the finding, unresolved, on trunk")
    assert finding.read_text() == FINDING.format(n="trunk-1", resolved="true")  # the working tree as it was
    kept, fresh = _kept_and_fresh(ws, reads)
    assert next(u for u in fresh["units"] if u["id"] == "u1")["held"]
    assert kept == fresh


def test_a_door_that_says_nothing_in_time_is_said_as_such_not_as_no_door() -> None:
    """An adversarial review's unit held serve busy: `unit run`'s heartbeat then said "no door at
    … (timed out); is `regulator serve` running?" of a serve that ran. A door that is reached (a
    listening socket) and says nothing within the client's timeout is said as that, with the
    warning that a write the call carried may still be made."""
    import socket
    import tempfile

    from engine.base.errors import Refused
    from engine.doors.client import DoorClient

    folder = Path(tempfile.mkdtemp(prefix="r-", dir=scratch.root()))
    path = folder / "d.sock"
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(path))
        listener.listen(8)  # connections wait in the backlog: never accepted, never answered
        with pytest.raises(Refused) as refused:
            DoorClient(f"unix:{path}", "rgl_" + "0" * 43, timeout=0.3).status()
        assert str(refused.value) == (
            f"the door at unix:{path} did not answer within 0.3 s (serve busy or stuck: see its log); "
            "a write this call carried may still be made: look before calling again"
        )
    finally:
        listener.close()
        shutil.rmtree(folder)
    with pytest.raises(Refused, match=r"^no door at unix:.*; is `regulator serve` running\?$"):
        DoorClient(f"unix:{path}", "rgl_" + "0" * 43, timeout=0.3).status()
