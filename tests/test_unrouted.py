"""What is not yet routed is never shown as fine (design §16, §18): a `--once` that does not route
(--read-only, a store role that cannot write) routes the unrouted signals in memory, as the
router would, and judges holds on the result; a room whose store role cannot write shows every
write disabled with the reason, says it is read-only and routes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import NOW, clone, make_workspace, report_args

CRITICAL_ON_U1 = report_args(subject="left-pad is compromised", severity="critical", affects=["u1"])
REASON = "u1 is in progress and would be held by critical obligation {ob} (signal {sig}: left-pad is compromised), not yet routed"
WIDE = (190, 42)  # the whole header, unabbreviated
READER_REFUSAL = "this store's role (regulator_reader) cannot write: open the room as regulator_host"


def reported(ws: helpers.Workspace, args: Any = CRITICAL_ON_U1, env: dict | None = None) -> str:
    """Report a signal as alice; its id (nothing routes it)."""
    done = ws.run(*args, "--by", "alice", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


def once(ws: helpers.Workspace, *more: str, env: dict | None = None, cwd: Path | None = None) -> Any:
    text = ws.run("controlroom", "--once", *more, env=env, cwd=cwd)
    data = ws.run("controlroom", "--once", *more, "--json", env=env, cwd=cwd)
    assert "Traceback" not in text.stderr + data.stderr, text.stderr + data.stderr
    return text, data.returncode, json.loads(data.stdout)


# ---- files: --once --read-only -----------------------------------------------------------------------


def test_once_read_only_fails_on_an_unrouted_signal_that_would_hold_in_progress_work(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    ws.lease("u1")  # in progress
    signal = reported(ws)
    before = ws.digest()

    text, code, data = once(ws, "--read-only")
    assert text.returncode == 1 and code == 1
    [would] = data["wouldRoute"]
    [ob] = would["obligations"]
    assert (would["signal"], would["outcome"], ob["unit"], ob["blocks"]) == (
        signal,
        "obligations",
        "u1",
        True,
    )
    reason = REASON.format(ob=ob["id"], sig=signal)
    assert data["exitReasons"] == [reason] and data["exitCode"] == 1
    assert data["routed"] is None and data["counts"]["unrouted"] == 1  # the existing keys, as they were
    assert f"- {reason}" in text.stdout and "exit 0" not in text.stdout
    header, routed = text.stdout.splitlines()[:2]
    assert "1 unrouted · ⚠ 1 would block" in header
    assert routed.startswith("not routed (read-only); 1 signal(s) not yet routed, judged as the router")
    assert ws.digest() == before  # read-only: nothing routed, nothing written

    # the host's own --once routes and is held by exactly the obligation judged in memory
    host, code, data = once(ws)
    assert "routed 1 signal(s) before reading" in host.stdout and host.returncode == 1
    assert code == 1 and data["wouldRoute"] == [] and data["routed"] == 0
    assert [o["id"] for o in data["obligations"]] == [ob["id"]]
    assert data["exitReasons"] == [
        f"u1 is in progress and held by critical obligation {ob['id']} (signal {signal}: left-pad is compromised)"
    ]


def test_once_read_only_exits_0_when_routing_would_hold_no_in_progress_unit(tmp_path: Path) -> None:
    """An advisory signal opens nothing that blocks; a critical one on a unit not in progress
    holds no running work (as after routing), but the header still says it would block."""
    ws = make_workspace(tmp_path)
    ws.lease("u1")
    reported(ws, report_args(severity="advisory", affects=["u1"]))
    text, code, data = once(ws, "--read-only")
    assert code == 0 and data["exitReasons"] == [] and len(data["wouldRoute"]) == 1
    assert "0 blocking obligation(s) would open" in text.stdout and "would block" not in text.stdout

    reported(ws, report_args(severity="critical", affects=["u3"]))  # u3 is todo
    text, code, data = once(ws, "--read-only")
    assert code == 0 and data["exitReasons"] == []
    assert "⚠ 1 would block" in text.stdout.splitlines()[0]


def test_the_read_only_room_says_what_unrouted_signals_would_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controlroom.app import ControlRoom
    from engine.checkout.workspace import locate
    from tests.room import run

    ws = make_workspace(tmp_path)
    ws.lease("u1")
    reported(ws)
    before = ws.digest()
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    room, _ = locate(ws.root)
    app = ControlRoom(room, "alice", read_only=True, watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        seen["header"] = str(app._topbar.render())
        seen["status"] = str(app._status.render())

    run(app, script, size=WIDE)
    assert "1 unrouted · ⚠ 1 would block" in seen["header"] and "read-only" in seen["header"]
    assert (
        "⚠ not routed here (read-only): routing would open 1 blocking obligation(s) on u1" in seen["status"]
    )
    assert ws.digest() == before


# ---- PostgreSQL: the reader role from a clone ---------------------------------------------------------


@pytest.fixture
def pg_fleet(tmp_path: Path, pg_server: Any) -> Any:
    """A fleet on PostgreSQL with the roles set up: u1 in progress; one blocking obligation routed on
    u3; then a critical signal on u1 that no router has seen yet. (ws, its database, signal ids)."""
    db = pg_server.database()
    ws = make_workspace(tmp_path, store=pg_server.url(db))
    ws.run("store", "roles", "--url", pg_server.url(db), check=True)
    ws.lease("u1")
    routed = reported(ws, report_args(subject="routed one", affects=["u3"]))
    ws.run("signals", "route", check=True)
    return ws, db, routed, reported(ws)


def server_lines(pg_server: Any, db: str) -> int:
    with pg_server.admin(db) as conn:
        return conn.execute("SELECT count(*) FROM regulator.events").fetchone()[0]


def test_a_reader_clone_once_fails_on_what_routing_would_hold(
    pg_fleet: Any, pg_server: Any, tmp_path: Path
) -> None:
    ws, db, _, signal = pg_fleet
    ci = clone(ws, tmp_path / "ci")
    reader = {"REGULATOR_STORE": pg_server.url(db, "regulator_reader")}
    lines = server_lines(pg_server, db)

    text, code, data = once(ws, env=reader, cwd=ci)
    assert text.returncode == 1 and code == 1, text.stderr
    [would] = data["wouldRoute"]
    ob = would["obligations"][0]["id"]
    assert data["exitReasons"] == [REASON.format(ob=ob, sig=signal)]
    assert data["counts"]["unrouted"] == 1 and data["routed"] is None
    assert "not routed (this store's role (regulator_reader) cannot write)" in text.stdout
    assert "⚠ 1 would block" in text.stdout.splitlines()[0]
    assert server_lines(pg_server, db) == lines  # the reader routed nothing

    host, code, data = once(ws)  # the host routes, and is held by the obligation judged above
    assert code == 1 and ob in {o["id"] for o in data["obligations"]}
    assert any(
        r.startswith(f"u1 is in progress and held by critical obligation {ob}") for r in data["exitReasons"]
    )


def test_the_room_as_a_reader_role_disables_every_write_and_routes_nothing(
    pg_fleet: Any, pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not --read-only: the role decides. Every action is shown disabled with the reason (footer
    state, detail pane, `?`), its key says why, no dialog opens, the header says read-only and
    what the unrouted signal would block, and the server gains no line."""
    from controlroom.actions import ACTIONS
    from controlroom.app import ControlRoom
    from engine.checkout.workspace import locate
    from tests.room import until

    ws, db, routed, _ = pg_fleet
    ci = clone(ws, tmp_path / "ci")
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("REGULATOR_STORE", pg_server.url(db, "regulator_reader"))
    room, _ = locate(ci)
    lines = server_lines(pg_server, db)
    app = ControlRoom(room, "alice", watch=False, background_checks=False)
    seen: dict = {}

    async def main() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert await until(pilot, lambda: app.syncs >= 1)  # the start's fold: it would route here
            seen["header"] = str(app._topbar.render())
            seen["status"] = str(app._status.render())
            seen["detail"] = app._detail.text
            await pilot.press("r")
            await pilot.pause()
            seen["screen"] = type(app.screen).__name__
            seen["notes"] = [n.message for n in app._notifications]
            seen["actions"] = {}
            for action in ACTIONS:
                await pilot.press(
                    {"obligations": "1", "units": "2", "memory": "3", "signals": "4", "registers": "5"}.get(
                        action.view, "6"
                    )
                )
                await pilot.pause()
                seen["actions"][action.name] = (
                    app.check_action("act", (action.name,)),
                    app.refusal(action, app.table.current_key),
                )
            await pilot.press("5")
            await pilot.press("question_mark")
            await pilot.pause()
            seen["help"] = "\n".join(getattr(app.screen, "lines", []))

    asyncio.run(main())
    assert "read-only: the store role cannot write" in seen["header"]
    assert "1 blocking · 1 held" in seen["header"] and "1 unrouted · ⚠ 1 would block" in seen["header"]
    assert (
        "⚠ not routed here (this store's role cannot write): routing would open 1 blocking obligation(s) on u1"
        in seen["status"]
    )
    assert READER_REFUSAL in seen["detail"]
    assert seen["screen"] != "ResolveDialog"
    assert f"resolve obligation: {READER_REFUSAL}" in seen["notes"]
    assert seen["actions"] == {a.name: (None, READER_REFUSAL) for a in ACTIONS}  # shown, disabled, why
    assert (
        f"c            acknowledge finding (commits) ({READER_REFUSAL})" in seen["help"]
    )  # `?` on Registers
    assert server_lines(pg_server, db) == lines
    signals = ws.json("signals")
    assert [s["id"] for s in signals] == [routed, signals[1]["id"]] and signals[1]["routed"] is False


def test_a_writer_role_in_a_clone_routes_and_may_act(
    pg_fleet: Any, pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The role decides both ways: the schema owner's room in a clone routes the unrouted signal."""
    from controlroom.app import ControlRoom
    from engine.checkout.workspace import locate
    from tests.room import until

    ws, db, _, signal = pg_fleet
    ci = clone(ws, tmp_path / "ci")
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("REGULATOR_STORE", pg_server.url(db))
    room, _ = locate(ci)
    app = ControlRoom(room, "alice", watch=False, background_checks=False)
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with app.run_test(size=(150, 42)) as pilot:
            await pilot.pause()
            assert await until(pilot, lambda: signal in app.snap.state.routings)
            await pilot.pause()
            seen["header"] = str(app._topbar.render())
            seen["resolve"] = app.check_action("act", ("resolve",))

    asyncio.run(main())
    assert seen["resolve"] is True
    assert "read-only" not in seen["header"] and "would block" not in seen["header"]


def test_a_role_without_grants_is_told_to_run_store_roles_not_that_it_is_a_reader(
    tmp_path: Path, pg_server: Any
) -> None:
    db = pg_server.database()
    ws = make_workspace(tmp_path, store=pg_server.url(db))
    with pg_server.admin(db) as conn:  # a host role made by hand, before `store roles` granted it anything
        conn.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_host') THEN "
            "CREATE ROLE regulator_host LOGIN; END IF; END $$"
        )  # roles are the server's: another test's `store roles` may have made it (grants are per database)
    host = {"REGULATOR_STORE": pg_server.url(db, "regulator_host")}
    done = ws.run("status", env=host, cwd=clone(ws, tmp_path / "ci"))
    assert done.returncode == 3 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "permission denied for schema regulator" in line and "reader role" not in line
    assert (
        "role regulator_host has no grants on the stores: run `regulator store roles` as the schema owner"
        in line
    )

    ws.run("store", "roles", "--url", pg_server.url(db), check=True)
    assert ws.run("status", env=host, cwd=tmp_path / "ci").returncode == 0
    reader = {"REGULATOR_STORE": pg_server.url(db, "regulator_reader")}
    refused = ws.run(*CRITICAL_ON_U1, "--by", "alice", env=reader, cwd=tmp_path / "ci")
    assert refused.returncode == 3 and refused.stderr.strip().endswith("(a reader role cannot write)")


def test_an_unrouted_signals_subject_is_text_in_the_exit_reason(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    ws.lease("u1")
    reported(ws, report_args(subject="[red]pwn[/red] \x1b[2J\u202e", severity="critical", affects=["u1"]))
    text, code, data = once(ws, "--read-only")
    assert code == 1 and text.returncode == 1
    [reason] = [line for line in text.stdout.splitlines() if line.startswith("- u1 ")]
    assert "[red]pwn[/red] \\x1b[2J\\u202e), not yet routed" in reason and "\x1b" not in text.stdout
    assert "[red]pwn[/red] \x1b[2J\u202e" in data["exitReasons"][0]  # JSON is JSON


def test_obligations_says_when_signals_wait_to_be_routed(ws: Any) -> None:
    """An operator's review: `regulator obligations` showed an empty table, exit 0, while signals
    that would block waited to be routed. It says how many wait, on stderr, and how they are routed;
    the table and the JSON list stay what they were."""
    ws.run(*report_args(), "--by", "alice", check=True)
    done = ws.run("obligations")
    assert done.returncode == 0
    assert done.stderr == (
        "regulator: note: 1 signal(s) not yet routed: their obligations open when they are routed "
        "(`regulator serve` does it within moments, `regulator signals route` by hand; "
        "`regulator status` lists them)\n"
    )
    listed = ws.run("obligations", "--json")  # the JSON list as it was; the note on stderr too
    assert json.loads(listed.stdout) == [] and listed.stderr == done.stderr
    ws.run("signals", "route", check=True)
    done = ws.run("obligations")
    assert done.returncode == 0 and done.stderr == "" and "left-pad" in done.stdout
    # the JSON list says what each obligation is about, as the table does (kind, subject, openedAt):
    # a script needed a join with `signals --json` to tell a question from a finding (D-250)
    rows = ws.json("obligations")
    assert rows and {(r["kind"], r["subject"]) for r in rows} == {("intelligence", "vendor/left-pad.js")}
    assert all(r["openedAt"].endswith("Z") for r in rows)
