"""Fleet mode from an operator's side (design §18, §16.2): a host whose mirror is gone is still the
workspace its leases name, CI that cannot reach the database still runs the registers-only job,
and moving the stores back to files says how to select them (D-87, D-88)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import REGULATOR, clone, make_workspace, one_line, report_args

pytestmark = pytest.mark.usefixtures("pg_server")
STORES = ("signals", "memory", "units", "identity")
ABSENT = "stores: absent — unit state unknown"
UNREACHABLE = {"REGULATOR_STORE": "postgresql://x@/db?host=/nonexistent"}


def files_under(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if ".git" not in p.parts)


# ---- 1. a workspace whose mirror was deleted is still the workspace of its leases ----------------


def test_a_lease_works_on_a_host_whose_mirror_was_moved_aside(tmp_path: Path, pg_url: str) -> None:
    ws = make_workspace(tmp_path, store=pg_url)
    host2 = clone(ws, tmp_path / "host2")  # another host: a clone, its store the committed url
    worktree = tmp_path / "wt-r1"
    worktree.mkdir()
    ws.run("unit", "dispatch", "r1", "--worktree", str(worktree), cwd=host2, check=True)
    lease = worktree / ".regulator-lease.json"
    assert json.loads(lease.read_text())["workspace"] == str(host2)
    (host2 / ".regulator").rename(tmp_path / "aside")

    done = ws.run(*report_args(subject="from host2"), cwd=worktree)
    assert done.returncode == 0, done.stderr
    assert (host2 / ".regulator" / "postgresql.json").is_file()  # the mirror, made on first use
    assert "from host2" in [s["subject"] for s in ws.json("signals")]  # on the server

    for where in ("aside-again", "aside-thrice"):
        (host2 / ".regulator").rename(tmp_path / where)
        status = ws.run("status", "--json", cwd=worktree)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["stores"] == "present"
    (host2 / ".regulator").rename(tmp_path / "aside-4")
    by_flag = ws.run("--lease", str(lease), "status", cwd=tmp_path)
    assert by_flag.returncode == 0, by_flag.stderr
    (host2 / ".regulator").rename(tmp_path / "aside-5")
    # the stdio door is not for a PostgreSQL store (design §22: no database credentials in a unit's
    # process tree): refused in one line pointing at serve, whichever way the lease is found
    config = ws.run("mcp", "--lease", str(lease), "--print-config", cwd=tmp_path)
    assert config.returncode == 3 and "regulator serve" in one_line(config), config.stderr


def test_a_lease_works_right_after_the_move_step_of_the_docs(tmp_path: Path, pg_url: str) -> None:
    """docs/fleet.md: copy the stores to the server, move the old .regulator/ aside, select the
    store (here with REGULATOR_STORE); the unit dispatched before the move goes on working."""
    ws = make_workspace(tmp_path)
    worktree = ws.lease("r1")
    ws.run("store", "copy", "--to", pg_url, check=True)
    (ws.root / ".regulator").rename(tmp_path / "aside")
    selected = {"REGULATOR_STORE": pg_url}
    done = ws.run(*report_args(subject="after the move"), cwd=worktree, env=selected)
    assert done.returncode == 0, done.stderr
    assert "after the move" in [s["subject"] for s in ws.json("signals", env=selected)]


def test_a_lease_naming_a_folder_without_stores_or_a_postgresql_store_is_still_refused(
    tmp_path: Path, pg_url: str
) -> None:
    (tmp_path / "files").mkdir()
    files = make_workspace(tmp_path / "files")
    worktree = files.lease("r1")
    (files.root / ".regulator").rename(tmp_path / "aside")
    done = files.run(*report_args(), cwd=worktree)
    assert done.returncode == 3 and "which is not a workspace" in one_line(done)
    assert not (files.root / ".regulator").exists()  # nothing made

    # file stores are never taken for a mirror, nor a mirror for file stores (D-82, D-83)
    (tmp_path / "fleet").mkdir()
    make_workspace(tmp_path / "fleet", store=pg_url)  # a database that holds a fleet's stores
    (tmp_path / "aside").rename(files.root / ".regulator")
    before = files.digest()
    done = files.run(*report_args(), cwd=worktree, env={"REGULATOR_STORE": pg_url})
    assert done.returncode == 3 and "holds file stores" in one_line(done)
    assert files.digest() == before and not (files.root / ".regulator" / "postgresql.json").exists()


# ---- 2. CI in a fleet workspace that cannot reach the database ----------------------------------


@pytest.fixture
def fleet_ci(tmp_path: Path, pg_url: str) -> Any:
    """A fleet workspace with its views committed, a push (BEFORE..AFTER) and a full clone of it."""
    ws = make_workspace(tmp_path, store=pg_url)
    before = ws.git("rev-parse", "HEAD").strip()
    ws.run("registry", "views", check=True)
    ws.commit("views")
    (ws.root / "routing-tests.yaml").write_text(
        "- name: a blocking report opens obligations\n"
        "  signal: {subject: s, claim: c, observation: o, evidence: [e], confidence: high,\n"
        "           reportedSeverity: blocking, affectedUnits: [u1], unit: r1,\n"
        '           observedAt: "2026-11-28T00:00:00Z", routedAt: "2026-11-29T12:00:00Z"}\n'
        "  expect: {outcome: obligations, obligations: [{unit: u1, blocks: true}]}\n"
    )
    ws.commit("routing tests", sign=False)
    after = ws.git("rev-parse", "HEAD").strip()
    return ws, clone(ws, tmp_path / "ci"), before, after


GIT_ONLY = (
    ("registry", "lint", "--require-history", "--range", "BEFORE..AFTER"),
    ("registry", "lint", "--require-history"),
    ("registry", "lint", "--json"),
    ("controlroom", "--once", "--registers-only"),
    ("controlroom", "--once", "--registers-only", "--json"),
    ("registry", "views", "--check"),
    ("registry", "records"),
    ("signals", "route", "--test-file", "routing-tests.yaml"),
)


def git_only_runs(ws: helpers.Workspace, ci: Path, before: str, after: str, env: dict) -> None:
    for template in GIT_ONLY:
        args = tuple(a.replace("BEFORE", before).replace("AFTER", after) for a in template)
        done = ws.run(*args, cwd=ci, env=env)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and "cannot reach" not in done.stderr, (args, done.stderr)
        if args[:2] == ("registry", "lint") or args[1] == "--once":
            if "--json" in args:
                assert json.loads(done.stdout)["stores"] == "absent", args
            else:
                assert done.stdout.splitlines()[0] == ABSENT, (args, done.stdout)


def test_the_ci_job_runs_in_a_fleet_clone_that_cannot_reach_the_database(fleet_ci: Any) -> None:
    ws, ci, before, after = fleet_ci
    files = files_under(ci)
    git_only_runs(ws, ci, before, after, UNREACHABLE)
    assert files_under(ci) == files  # nothing written: no mirror made, no view regenerated
    # what reads the stores still says it cannot reach them (exit 3), never shows them as fine
    for args in (("status",), ("registry", "next-up"), ("controlroom", "--once"), ("verify",)):
        done = ws.run(*args, cwd=ci, env=UNREACHABLE)
        assert done.returncode == 3 and "cannot reach the store" in one_line(done), args
    # and the committed url, reachable, from a host that has the mirror: the same git-only answers
    git_only_runs(ws, ws.root, before, after, {})


def test_the_ci_job_is_not_refused_by_a_mirror_left_in_a_clone(fleet_ci: Any) -> None:
    ws, ci, before, after = fleet_ci
    ws.run("status", cwd=ci, check=True)  # the committed url: the clone now holds a mirror
    mirror = {n: (ci / ".regulator" / f"{n}.ndjson").read_bytes() for n in STORES}
    git_only_runs(ws, ci, before, after, {"REGULATOR_STORE": "files"})
    assert {n: (ci / ".regulator" / f"{n}.ndjson").read_bytes() for n in STORES} == mirror
    done = ws.run("status", cwd=ci, env={"REGULATOR_STORE": "files"})  # D-83 stands for the readers
    assert done.returncode == 3 and "is the local mirror" in one_line(done)


# ---- 3. moving back to files --------------------------------------------------------------------


def test_moving_back_to_files_says_how_to_select_them_and_the_printed_steps_work(
    tmp_path: Path, pg_url: str
) -> None:
    ws = make_workspace(tmp_path, store=pg_url)
    ws.run(*report_args(), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    host = json.loads(ws.run("controlroom", "--once", "--json").stdout)
    back = clone(ws, tmp_path / "back")
    done = ws.run("store", "copy", "--to", str(back))
    assert done.returncode == 0, done.stderr
    command = f"cd {shlex.quote(str(back))} && "
    there = [line[line.index(command) :] for line in done.stdout.splitlines() if command in line]
    assert len(there) == 1 and "REGULATOR_STORE=files regulator verify" in there[0], done.stdout

    # not selecting the files: refused, saying how to select them (not how to go the other way)
    stores = {n: (back / ".regulator" / f"{n}.ndjson").read_bytes() for n in STORES}
    refused = ws.run("verify", cwd=back)
    line = one_line(refused)
    assert refused.returncode == 3 and "holds file stores" in line
    assert "REGULATOR_STORE=files" in line and "regulator/policy/store.yaml" in line

    # the steps as printed: verify here, then the command printed for there
    assert ws.run("verify").returncode == 0
    run = subprocess.run(
        ["bash", "-c", there[0]],
        env=dict(ws.env, PATH=f"{Path(REGULATOR).parent}{os.pathsep}{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (there[0], run.stdout, run.stderr)
    assert "ok: every chain holds" in run.stdout
    assert {n: (back / ".regulator" / f"{n}.ndjson").read_bytes() for n in STORES} == stores
    assert not (back / ".regulator" / "postgresql.json").exists()

    # the files selected (for good, store.yaml is governed: `url: files` is proposed and accepted,
    # D-90; a hand edit of it is named by identity verify): the same read models as the host's
    files_env = {"REGULATOR_STORE": "files"}
    assert ws.run("verify", cwd=back, env=files_env).returncode == 0
    files = json.loads(ws.run("controlroom", "--once", "--json", cwd=back, env=files_env).stdout)
    for key in ("workspace", "now", "routed"):
        host.pop(key), files.pop(key)
    assert files == host  # the same read models on both sides
