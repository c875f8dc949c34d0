"""`regulator unit run` end to end (design §23): real `serve`, real `unit run`, real children that call
the door. A research unit reports, asks and reports its result; the obligation it raised holds
another unit, whose run starts nothing; a held close leaves the unit awaiting close, `--wait` closes
it after a signed disposition; the child's environment is exactly the allowlist; `--user` runs it
confined (it cannot read `.regulator/`); a SIGKILLed child with its host gone loses its lease after
its TTL, its token gets 401, and a new run dispatches it again; the wall budget and SIGTERM reach
the child's process group."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.base.errors import Refused
from engine.doors.client import UNAUTHORIZED, DoorClient
from engine.host.accounts import account_processes
from engine.host.folders import private_group
from tests.helpers import REGULATOR, accounts, make_workspace, one_line, remember_args, report_args
from tests.serving import Serving, wait_for

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"PATH", "HOME", "LANG", "TERM", "TZ", "REGULATOR_DOOR", "REGULATOR_DOOR_TOKEN", "REGULATOR_UNIT"}


def system_workspace(folder: Path) -> Any:
    """A workspace on the system clock (leases expire in real time), its env without REGULATOR_NOW."""
    ws = make_workspace(folder, now=None, clock="system")
    ws.env.pop("REGULATOR_NOW", None)
    return ws


@pytest.fixture
def served(tmp_path: Any) -> Any:
    ws = system_workspace(tmp_path)
    serving = Serving(ws)
    try:
        yield ws, serving
    finally:
        serving.close()


def script(folder: Path, name: str, text: str) -> Path:
    """A shell script the child runs (`regulator` named by its path: the child's PATH is the host's)."""
    path = folder / name
    path.write_text("#!/bin/sh\nset -e\nREG=" + REGULATOR + "\n" + text)
    path.chmod(0o755)
    return path


def run_unit(ws: Any, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = ws.run("unit", "run", *args, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _stop_runs() -> Any:
    yield
    stop_runs()


def stop_runs() -> None:
    """A run a failed test left behind is stopped: SIGTERM reaches its child's group through it."""
    while STARTED:
        host = STARTED.pop()
        if host.poll() is None:
            host.send_signal(signal.SIGTERM)
            try:
                host.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(host.pid, signal.SIGKILL)


def start_unit(ws: Any, *args: str, env: dict | None = None) -> subprocess.Popen:
    """`unit run` in the background, in a session of its own (so a test can kill the host)."""
    merged = dict(ws.env, **(env or {}))
    host = subprocess.Popen(
        [REGULATOR, "unit", "run", *args],
        cwd=ws.root,
        env=merged,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    STARTED.append(host)
    return host


def alive(pid: int) -> bool:
    """The process runs (a zombie, killed and not yet reaped by whoever adopted it, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def row(ws: Any, unit: str) -> dict:
    return next(u for u in ws.json("status")["units"] if u["id"] == unit)


def test_a_research_unit_reports_asks_and_its_obligation_holds_another(served: Any, tmp_path: Any) -> None:
    ws, serving = served
    report = {
        "subject": "vendor/left-pad.js",
        "claim": "The vendored helper is a modified copy.",
        "observation": "diff against upstream 1.3.0 shows a patched padStart",
        "evidence": ["vendor/left-pad.js"],
        "confidence": "high",
        "reportedSeverity": "blocking",
        "affectedUnits": ["u1"],
    }
    (tmp_path / "report.json").write_text(json.dumps(report))
    agent = script(
        tmp_path,
        "research.sh",
        f"""$REG door call report_intelligence --json-input {tmp_path}/report.json > {tmp_path}/reported.json
echo '{{"question": "Is upstream 1.3.0 the version we meant to vendor?"}}' | $REG door call ask_human --json-input - > {tmp_path}/asked.json
echo '{{"summary": "left-pad is a modified copy; u1 is affected", "outcome": "done"}}' | $REG door call report_result --json-input -
""",
    )
    done = run_unit(ws, "r1", "--ttl", "1m", "--", str(agent))
    assert done.returncode == 0, done.stderr
    assert "closed r1" in done.stderr and "UNCONFINED" in done.stderr
    r1 = row(ws, "r1")
    assert (r1["status"], r1["result"]["outcome"], r1["result"]["by"]) == ("closed", "done", "unit")
    signal_id = json.loads((tmp_path / "reported.json").read_text())["id"]
    asked = json.loads((tmp_path / "asked.json").read_text())
    obligations = {o["id"]: o for o in ws.json("obligations")}
    assert obligations[asked["obligation"]]["owedTo"] == "S3"  # the question, to a person
    holding = [o for o in obligations.values() if o["unit"] == "u1" and o["signal"] == signal_id]
    assert holding and holding[0]["blocks"]
    # the obligation r1 raised holds u1: its run exits 3 naming it, and starts nothing
    before = ws.digest()
    marker = tmp_path / "u1-started"
    held = run_unit(ws, "u1", "--", "sh", "-c", f"touch {marker}")
    assert held.returncode == 3 and "dispatch of u1 vetoed" in one_line(held)
    assert holding[0]["id"] in held.stderr
    assert not marker.exists() and not (ws.root / ".worktrees" / "u1").exists()
    assert ws.digest() == before
    assert ws.root.joinpath(".worktrees", "r1").is_dir()  # r1's worktree: detached at trunk
    head = subprocess.run(["git", "-C", str(ws.root / ".worktrees" / "r1"), "symbolic-ref", "-q", "HEAD"])
    assert head.returncode != 0  # detached
    assert ".worktrees" not in ws.git("status", "--porcelain")  # ignored by git


def test_making_a_units_worktree_runs_no_hook_or_filter_a_unit_planted(served: Any, tmp_path: Any) -> None:
    """A unit can write the repository's .git (its worktree shares it): the next `unit run` makes a
    worktree in the person's process, which must run none of the repository's code (no
    post-checkout hook, no smudge filter, not even one .git/config includes only inside a linked
    worktree's git folder). A driver marked required (git-lfs's) does not stop the checkout: the
    blob is checked out as stored."""
    ws, _ = served
    hooked, smudged, included = tmp_path / "hooked", tmp_path / "smudged", tmp_path / "included"
    hook = ws.root / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {hooked}\n")
    hook.chmod(0o755)
    ws.git("config", "filter.evil.smudge", f"sh -c 'touch {smudged}; cat'")
    ws.git("config", "filter.evil.required", "true")
    inner = tmp_path / "inner.cfg"
    inner.write_text(f"[filter \"worse\"]\n\tsmudge = sh -c 'touch {included}; cat'\n")
    ws.git("config", f"includeIf.gitdir:{ws.root}/.git/worktrees/**.path", str(inner))
    (ws.root / ".git" / "info" / "attributes").write_text("*.md filter=evil\n*.yaml filter=worse\n")
    trunk = ws.git("rev-parse", "main").strip()
    ws.git("tag", "main", "HEAD~1")  # a tag named like the trunk is not the trunk
    done = run_unit(ws, "r1", "--ttl", "1m", "--", "true")
    made = ws.root / ".worktrees" / "r1"
    assert (made / "regulator" / "config.yaml").read_bytes() == (
        ws.root / "regulator" / "config.yaml"
    ).read_bytes()
    assert done.returncode == 0, done.stderr
    assert not hooked.exists() and not smudged.exists() and not included.exists()
    assert (
        subprocess.run(
            ["git", "-C", str(made), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        == trunk
    )


def test_a_held_close_awaits_and_wait_closes_after_a_signed_disposition(served: Any, tmp_path: Any) -> None:
    ws, serving = served
    go = tmp_path / "go"
    started = tmp_path / "started"
    agent = script(
        tmp_path, "work.sh", f"touch {started}-$REGULATOR_UNIT\nwhile [ ! -e {go} ]; do sleep 0.1; done\n"
    )
    plain = start_unit(ws, "u1", "--", str(agent))
    waiting = start_unit(ws, "u3", "--wait", "--", str(agent))
    wait_for(
        lambda: Path(f"{started}-u1").exists() and Path(f"{started}-u3").exists(), "both children started"
    )
    for unit in ("u1", "u3"):  # a person reports what holds each while it runs
        ws.run(
            "signals", "report", "--subject", f"{unit} breaks the build", "--claim", "c", "--observation", "o",
            "--evidence", "ci", "--confidence", "high", "--severity", "blocking", "--affects", unit,
            "--by", "alice", check=True,
        )  # fmt: skip
    go.touch()
    out, err = plain.communicate(timeout=60)
    assert plain.returncode == 3, err
    assert "u1 is awaiting close: close of u1 vetoed: held by open obligation(s)" in err
    assert "once that is dispositioned, run `regulator unit close u1` (or give `unit run` --wait" in err
    u1 = row(ws, "u1")
    assert (u1["status"], u1["held"], u1["awaitingClose"], u1["result"]["outcome"]) == (
        "in-progress",
        True,
        True,
        "done",
    )
    wait_for(lambda: row(ws, "u3")["awaitingClose"], "u3 awaiting close")
    assert waiting.poll() is None  # --wait: still waiting for the disposition
    once = json.loads(ws.run("controlroom", "--once", "--json").stdout)
    assert {u["id"]: u["awaitingClose"] for u in once["status"]["units"]}["u3"] is True
    hold = row(ws, "u3")["blockedBy"][0]
    ws.run(
        "obligation", "resolve", hold, "--disposition", "no-action", "--by", "alice", "--rationale", "fixed",
        check=True,
    )  # fmt: skip
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert "closed u3" in err
    assert row(ws, "u3")["status"] == "closed"


def test_a_stream_units_folders_are_beside_its_parent_units_never_inside(served: Any, tmp_path: Any) -> None:
    """`x` and `x/y` are both units: `x/y`'s worktree and lease folder are `.worktrees/x+y` and
    `.worktrees/.leases/x+y`, never inside `x`'s worktree, which a confined `x` owns (D-211): a link
    `x` left at `.worktrees/x/y` leads nowhere."""
    ws, _ = served
    ws.contract("x", "implement", "implement")
    ws.contract("x/y", "implement", "implement")
    ws.commit("x and its stream x/y")
    victim = tmp_path / "victim"
    victim.mkdir()
    planted = ws.root / ".worktrees" / "x"
    planted.mkdir(parents=True)
    (planted / "y").symlink_to(victim)
    seen = tmp_path / "seen"
    done = run_unit(ws, "x/y", "--", "/bin/sh", "-c", f"pwd > {seen}; test -e {seen}")
    assert done.returncode == 0, done.stderr
    assert seen.read_text().strip() == str(ws.root / ".worktrees" / "x+y")
    assert list(victim.iterdir()) == []  # nothing checked out or handed over through the link
    (dispatched,) = [e for e in ws.events("units") if e["kind"] == "dispatch" and e["unit"] == "x/y"]
    assert dispatched["worktree"] == ".worktrees/x+y"


def test_the_childs_environment_is_exactly_the_allowlist(served: Any, tmp_path: Any) -> None:
    ws, serving = served
    seen, go = tmp_path / "env.json", tmp_path / "go"
    child = (
        "import json, os, pathlib, time\n"
        f"pathlib.Path({str(seen)!r}).write_text(json.dumps(dict(os.environ)))\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.1)\n"
    )
    host = {
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TZ": "UTC",
        "SECRET_TOKEN": "do-not-leak",
        "REGULATOR_STORE": "files",
        "EXTRA_OK": "passed on",
    }
    proc = start_unit(ws, "r1", "--env", "EXTRA_OK", "--", sys.executable, "-c", child, env=host)
    env = wait_for(
        lambda: seen.exists() and json.loads(seen.read_text() or "null"), "the child's environment"
    )
    assert set(env) == ALLOWED | {"EXTRA_OK"}
    assert env["EXTRA_OK"] == "passed on" and env["REGULATOR_UNIT"] == "r1"
    assert env["REGULATOR_DOOR"] == serving.url and env["HOME"] == os.environ["HOME"]
    # unconfined: every surface says so
    assert row(ws, "r1")["confined"] is False
    once = json.loads(ws.run("controlroom", "--once", "--json").stdout)
    assert {u["id"]: u["confined"] for u in once["status"]["units"]}["r1"] is False
    assert "unconfined" in ws.run("controlroom", "--once").stdout
    # the token is no file's: the lease file (0600, outside the worktree) is the only one holding it
    lease = ws.root / ".worktrees" / ".leases" / "r1" / ".regulator-lease.json"
    assert json.loads(lease.read_text())["lease"] == env["REGULATOR_DOOR_TOKEN"]
    assert lease.stat().st_mode & 0o777 == 0o600
    go.touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert not lease.exists()  # the lease's folder is removed when the run ends


def test_a_process_unit_run_started_is_its_unit_for_every_command(served: Any, tmp_path: Any) -> None:
    """No lease file lies in an unconfined unit's worktree (`unit run` keeps it beside), yet the
    child is its unit (D-218), whatever lease file it names, finds or plants and wherever it
    stands: a host operation, a person's --by and a write on the stores are each refused, and
    nothing of them is written; reads answer."""
    ws, _ = served
    other = ws.root / "wt-u3"  # another unit's worktree, its lease file in it
    other.mkdir()
    ws.run("unit", "dispatch", "u3", "--worktree", str(other), check=True)
    own = ws.root / ".worktrees" / ".leases" / "r1" / ".regulator-lease.json"
    plant = (
        'printf \'{"unit":"r1","lease":"%s","workspace":"%s","leasedAt":"2026-12-01T00:00:00Z"}\' '
        f'"$REGULATOR_DOOR_TOKEN" {shlex.quote(str(ws.root))} > planted/.regulator-lease.json; cd planted; '
    )
    tries = {
        "run": ("", ["unit", "run", "u1", "--", "true"]),
        "dispatch": ("", ["--root", str(ws.root), "unit", "dispatch", "u1"]),
        "close": ("", ["unit", "close", "r1"]),
        "own-file": ("", ["--lease", str(own), "unit", "close", "r1"]),
        "mcp": ("", ["mcp", "--lease", str(own)]),
        "other-close": (f"cd {other}; ", ["unit", "close", "u3"]),
        "other-remember": (f"cd {other}; ", remember_args()),
        "planted": ("mkdir planted; " + plant, report_args()),
        "init": (
            f"mkdir -p {tmp_path}/new; cd {tmp_path}/new; git init -q; ",
            ["init", "--owner", "mallory"],
        ),
        "roles": ("", ["store", "roles", "--url", "postgresql://db.invalid/fleet"]),
        "by": ("", report_args(by="alice")),
        "report": ("", report_args()),
        "remember": ("", remember_args()),
        "status": ("", ["status", "--json"]),
        "unnamed": ("REGULATOR_UNIT= ", ["status"]),
    }
    lines = "".join(
        f"({before}$REG {' '.join(shlex.quote(a) for a in argv)} >{tmp_path}/{name}.out "
        f"2>{tmp_path}/{name}.err || echo $? >{tmp_path}/{name}.code)\n"
        for name, (before, argv) in tries.items()
    )
    agent = script(tmp_path, "tries.sh", "set +e\n" + lines)
    done = run_unit(ws, "r1", "--", str(agent))
    assert done.returncode == 0 and "closed r1" in done.stderr, done.stderr

    def code(name: str) -> int:
        path = tmp_path / f"{name}.code"
        return int(path.read_text()) if path.exists() else 0

    def err(name: str) -> str:
        text = (tmp_path / f"{name}.err").read_text()
        assert "Traceback" not in text and len(text.splitlines()) == 1, text
        return text

    for name in ("run", "dispatch", "close", "other-close", "init", "roles"):
        assert code(name) == 3 and "a unit cannot run a host operation" in err(name), name
        assert "REGULATOR_DOOR_TOKEN is set" in err(name) and "unit r1's" in err(name)
    assert code("own-file") == 3 and "--lease is refused" in err("own-file")
    assert code("mcp") == 3 and "--lease is refused" in err("mcp") and "`regulator door stdio`" in err("mcp")
    assert code("by") == 2 and "a unit cannot act as a person" in err("by")
    for name, tool in (
        ("report", "report_intelligence"),
        ("remember", "remember"),
        ("other-remember", "remember"),
        ("planted", "report_intelligence"),
    ):
        assert code(name) == 3 and f"`regulator door call {tool}`" in err(name), name
    assert code("unnamed") == 2 and "$REGULATOR_UNIT is empty" in err("unnamed")
    assert code("status") == 0
    seen = {u["id"]: u["status"] for u in json.loads((tmp_path / "status.out").read_text())["units"]}
    assert seen["r1"] == "in-progress"
    # nothing of the refused was written: u1 never dispatched, u3 still in progress, no signal,
    # no memory entry, no new workspace
    assert row(ws, "u1")["status"] == "todo" and row(ws, "r1")["status"] == "closed"
    assert row(ws, "u3")["status"] == "in-progress"
    assert ws.json("signals") == [] and not ws.events("memory")
    assert not (ws.root / ".worktrees" / "u1").exists() and not (tmp_path / "new" / ".regulator").exists()
    # outside any run, the same variable is refused the same way: a shell that keeps a unit's token
    stale = ws.run("unit", "dispatch", "u1", env={"REGULATOR_DOOR_TOKEN": "t", "REGULATOR_UNIT": "r1"})
    assert stale.returncode == 3 and "REGULATOR_DOOR_TOKEN is set" in one_line(stale)
    assert ws.run("unit", "dispatch", "u1", env={"REGULATOR_DOOR_TOKEN": ""}).returncode == 0


def test_env_names_and_bad_input_are_refused_before_anything(served: Any) -> None:
    ws, serving = served
    before = ws.digest()
    for args, needle in (
        (["r1", "--env", "NOT_SET_ANYWHERE", "--", "true"], "--env NOT_SET_ANYWHERE: not set"),
        (["r1", "--env", "REGULATOR_DOOR_TOKEN", "--", "true"], "already given to every unit"),
        (["r1", "--ttl", "5", "--", "true"], "--ttl: '5' is not a duration"),
        (["r1", "--harness", "cursor", "--", "true"], "--harness 'cursor' is not one of env, claude-code"),
        (["r1"], "no command"),
        (["r1", "--worktree", str(ws.root / ".regulator" / "x"), "--", "true"], "never under .regulator/"),
        (["zz9", "--", "true"], "has no contract"),
        (["r1", "--user", "no-such-account-here", "--", "true"], "no such account"),
    ):
        done = run_unit(ws, *args)
        assert done.returncode == 2 and needle in one_line(done), (args, done.stderr)
    assert ws.digest() == before


def test_without_serve_unit_run_exits_3_saying_to_start_it(tmp_path: Any) -> None:
    ws = system_workspace(tmp_path)
    before = ws.digest()
    done = run_unit(ws, "r1", "--", "true")
    assert done.returncode == 3 and "start it first (`regulator serve`)" in one_line(done)
    assert ws.digest() == before and not (ws.root / ".worktrees").exists()


def test_a_sigkilled_child_with_its_host_gone_is_lost_after_its_ttl(served: Any, tmp_path: Any) -> None:
    ws, serving = served
    token_file = tmp_path / "token"
    agent = script(
        tmp_path,
        "hang.sh",
        f"echo $REGULATOR_DOOR_TOKEN $$ > {token_file}.part\nmv {token_file}.part {token_file}\nexec sleep 600\n",
    )
    host = start_unit(ws, "r1", "--ttl", "2s", "--", str(agent))
    token, child = wait_for(
        lambda: token_file.exists() and token_file.read_text().split(), "the child started"
    )
    assert DoorClient(serving.url, token).status()["status"] == "in-progress"
    os.killpg(host.pid, signal.SIGKILL)  # the host is gone
    os.killpg(int(child), signal.SIGKILL)  # and its child with it
    host.communicate(timeout=30)
    # serve's tick (every 10 s) finds the lease past its time: the unit is lost, held as before
    wait_for(lambda: row(ws, "r1")["status"] == "lost", "r1 lost", deadline=60, every=0.5)
    expired = [e for e in ws.events("units") if e["kind"] == "lease-expired"]
    assert [e["unit"] for e in expired] == ["r1"]
    with pytest.raises(Refused) as refused:
        DoorClient(serving.url, token).status()
    assert str(refused.value) == UNAUTHORIZED
    assert row(ws, "r1")["result"] is None  # nothing was recorded for it, nothing released
    # a new run dispatches it again
    again = run_unit(ws, "r1", "--ttl", "1m", "--", "true")
    assert again.returncode == 0, again.stderr
    assert row(ws, "r1")["status"] == "closed"


def test_the_wall_budget_kills_the_childs_process_group(served: Any, tmp_path: Any) -> None:
    ws, serving = served
    ws.run("unit", "new", "slow", "--type", "research", "--profile", "intelligence", "--title", "Slow",
           "--budget-wall", "2s", check=True)  # fmt: skip
    ws.commit("the slow unit", sign=False)
    background = tmp_path / "bg"
    agent = script(tmp_path, "slow.sh", f"sleep 600 &\necho $! > {background}\nwait\n")
    done = run_unit(ws, "slow", "--", str(agent))
    assert done.returncode == 1, done.stderr
    result = row(ws, "slow")["result"]
    assert result["outcome"] == "failed" and "stopped at its wall budget (2s)" in result["summary"]
    # and the run says so itself, not only the exit code of a killed command
    assert (
        "slow: result failed recorded by the host (stopped at its wall budget (2s): the command exited"
        in (done.stdout + done.stderr)
    )
    assert not alive(int(background.read_text()))  # the background process of the group went with it
    recovery = [o for o in ws.json("obligations") if o["unit"] == "slow"]
    assert [(o["severity"], o["blocks"], o["owedTo"]) for o in recovery] == [("advisory", False, "S3")]


@pytest.mark.parametrize(("sig", "name", "code"), [(signal.SIGTERM, "TERM", 7), (signal.SIGHUP, "HUP", 5)])
def test_a_stop_signal_is_forwarded_and_the_childs_exit_code_is_in_the_result(
    served: Any, tmp_path: Any, sig: int, name: str, code: int
) -> None:
    """SIGTERM, and SIGHUP (a closed terminal), reach the child's group; its own exit code is in the
    result. SIGHUP killed `unit run` outright and left the child running past its wall budget, with
    no result (the review of D-217)."""
    ws, serving = served
    ready, got = tmp_path / "ready", tmp_path / "got"
    agent = script(
        tmp_path,
        "trap.sh",
        f"trap 'echo {name} > {got}; exit {code}' {name}\ntouch {ready}\nwhile true; do sleep 0.1; done\n",
    )
    host = start_unit(ws, "b1", "--", str(agent))
    wait_for(ready.exists, "the child ready")
    host.send_signal(sig)
    out, err = host.communicate(timeout=60)
    assert host.returncode == 1, err  # failed: a person decides (the command's own code is the child's)
    assert got.read_text().strip() == name
    result = row(ws, "b1")["result"]
    assert (result["outcome"], result["exitCode"], result["by"]) == ("failed", code, "host")


# ---- confined: --user ---------------------------------------------------------------------------
@pytest.fixture
def account() -> Any:
    """A throwaway system account without a home, removed after the test."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd")
    name = f"regt{secrets.token_hex(3)}"
    accounts("useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name)
    try:
        yield pwd.getpwnam(name)
    finally:
        stop_runs()  # its processes first: userdel refuses an account still running
        accounts("userdel", name)


def test_a_confined_unit_runs_as_its_account_and_cannot_read_the_stores(account: Any, tmp_path: Any) -> None:
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir="/tmp"))
    try:
        home.chmod(0o755)  # the account passes through to its worktree, never into .regulator/
        ws = system_workspace(home)
        serving = Serving(ws)
        try:
            out, go = home / "seen", home / "go"
            out.touch()
            out.chmod(0o666)
            probe = (
                "import os, sys, json, pathlib, time\n"
                f"sys.path.insert(0, {str(ROOT)!r})\n"
                "from engine.doors.client import DoorClient\n"
                "found = {'uid': os.getuid(), 'env': sorted(os.environ)}\n"
                f"try:\n    open({str(ws.root / '.regulator' / 'units.ndjson')!r}).read(); found['stores'] = 'read'\n"
                "except OSError as exc:\n    found['stores'] = type(exc).__name__\n"
                "found['door'] = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN']).status()['status']\n"
                f"pathlib.Path({str(out)!r}).write_text(json.dumps(found))\n"
                f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.1)\n"
            )
            plain = {"LANG": "C.UTF-8", "TERM": "dumb", "TZ": "UTC", "SECRET_TOKEN": "do-not-leak"}
            host = start_unit(
                ws, "r1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe, env=plain
            )
            found = wait_for(
                lambda: out.read_text() and json.loads(out.read_text()), "the confined child's report"
            )
            assert found["uid"] == account.pw_uid
            assert found["stores"] == "PermissionError"  # .regulator/ is the host's alone
            assert found["door"] == "in-progress"  # the door is its way in
            assert set(found["env"]) == ALLOWED
            lease = ws.root / ".worktrees" / ".leases" / "r1" / ".regulator-lease.json"
            st = lease.stat()
            assert (st.st_uid, st.st_mode & 0o777) == (account.pw_uid, 0o600)
            assert row(ws, "r1")["confined"] is True
            assert "UNCONFINED" not in ws.run("controlroom", "--once").stdout
            go.touch()
            _, err = host.communicate(timeout=60)
            assert host.returncode == 0, err
            assert f"confined, as {account.pw_name}" in err
        finally:
            serving.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def account_cli() -> list[str]:
    """`regulator` as another account can run it: this venv's interpreter links under root's home
    (0700), so the system's python3 of the same version, with this checkout and the venv's
    site-packages on its path (skipped where there is none)."""
    system = Path("/usr/bin/python3")
    probe = subprocess.run(
        [str(system), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True
    )
    if probe.returncode != 0 or probe.stdout.decode().strip() != str(sys.version_info[:2]):
        pytest.skip("needs a /usr/bin/python3 of this Python's version (the account cannot run this venv's)")
    site = sysconfig.get_paths()["purelib"]
    code = f"import sys; sys.path[:0] = [{str(ROOT)!r}, {site!r}]; sys.argv[0] = 'regulator'; "
    return [str(system), "-c", code + "from controlroom.cli.start import run; run()"]


def test_an_account_that_cannot_read_the_stores_gets_one_line_naming_the_door(account: Any) -> None:
    """Every direct `regulator` command of a confined unit meets the stores it may not read before
    any rule: one line, exit 3, the door named where the environment holds a lease; never a
    traceback (found by an operator's review: 40 lines ending in PermissionError)."""
    cli = account_cli()
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir="/tmp"))
    try:
        home.chmod(0o755)
        ws = system_workspace(home)
        assert (ws.root / ".regulator").stat().st_mode & 0o777 == 0o700

        def as_account(*args: str, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [*cli, *args], cwd=ws.root, env={"PATH": "/usr/bin:/bin", **env},
                user=account.pw_uid, group=account.pw_gid, extra_groups=[], capture_output=True, text=True,
            )  # fmt: skip

        before = ws.digest()
        plain = as_account("status")
        assert plain.returncode == 3 and "Traceback" not in plain.stderr, plain.stderr
        assert (
            "permission denied; run regulator as an account that may use the workspace's files"
            in one_line(plain)
        )
        unit = {"REGULATOR_DOOR_TOKEN": "t", "REGULATOR_UNIT": "r1"}
        for args in (["status"], report_args(), ["unit", "dispatch", "u1"]):
            done = as_account(*args, **unit)
            assert done.returncode == 3 and "Traceback" not in done.stderr, (args, done.stderr)
            assert "a confined unit cannot read the stores" in one_line(done) and "door call" in done.stderr
        assert ws.digest() == before
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_permission_met_after_a_write_is_not_said_as_a_refusal(account: Any) -> None:
    """Exit 3 says "refused, nothing written": a PermissionError met once a command has written
    (here `init`, stopped by a folder of root's in the account's repository) is one line and exit 1,
    saying the command stopped there (the review of D-220)."""
    cli = account_cli()
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir="/tmp"))
    try:
        home.chmod(0o755)
        repo = home / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / "key")], check=True)
        subprocess.run(["chown", "-R", f"{account.pw_uid}:{account.pw_gid}", str(repo)], check=True)
        (repo / "records").mkdir(mode=0o755)  # root's: init cannot write its records there
        who = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org"}
        who |= {"GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org"}
        done = subprocess.run(
            [*cli, "init", "--owner", "alice", "--owner-key", str(home / "key.pub")],
            cwd=repo, env={"PATH": "/usr/bin:/bin", "HOME": str(home), **who},
            user=account.pw_uid, group=account.pw_gid, extra_groups=[], capture_output=True, text=True,
        )  # fmt: skip
        line = one_line(done)
        assert done.returncode == 1, done.stderr
        assert f"{repo / 'records'}/" in line and "permission denied" in line
        assert line.endswith("the command stopped there (exit 1)")
        assert (repo / "regulator").is_dir()  # what it wrote before stays: hence not exit 3
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_user_refuses_stores_the_account_could_read(account: Any, tmp_path: Any) -> None:
    ws = system_workspace(tmp_path)
    serving = Serving(ws)
    try:
        (ws.root / ".regulator").chmod(0o755)
        before = ws.digest()
        done = run_unit(ws, "r1", "--user", account.pw_name, "--", "true")
        assert done.returncode == 3 and "could read" in one_line(done) and "chmod 700" in done.stderr
        assert ws.digest() == before
    finally:
        (ws.root / ".regulator").chmod(0o700)
        serving.close()


def test_user_refuses_a_workspace_the_account_cannot_reach(account: Any, tmp_path: Any) -> None:
    """pytest's folders are 0700 (root's): a unit confined to another account could not enter its
    worktree there. Refused before anything is written, not dispatched into a failed start."""
    ws = system_workspace(tmp_path)
    assert tmp_path.stat().st_mode & 0o777 == 0o700
    serving = Serving(ws)
    try:
        before = ws.digest()
        done = run_unit(ws, "r1", "--user", account.pw_name, "--", "true")
        assert done.returncode == 3 and f"--user {account.pw_name} cannot enter" in one_line(done)
        assert "nothing was written" in done.stderr and "namei -l" in done.stderr
        assert ws.digest() == before and not (ws.root / ".worktrees").exists()
        assert row(ws, "r1")["status"] == "todo"
    finally:
        serving.close()


def test_a_process_of_the_account_cannot_stop_the_reach_check(account: Any, tmp_path: Any) -> None:
    """The reach check runs a child as the account: a process of the account that stopped it
    (kill(-1, SIGSTOP) in a loop) hung `unit run` for good, and one that killed it made the check
    answer "enterable" (the review of D-219). It now runs once the account is claimed, so such a
    process is found first: refused at once, nothing written."""
    ws = system_workspace(tmp_path)  # under pytest's 0700 folder: the account cannot reach it
    serving = Serving(ws)
    stopper = subprocess.Popen(
        ["/usr/bin/python3", "-c", "import os, signal, time\nend = time.time() + 60\n"
         "while time.time() < end:\n    try: os.kill(-1, signal.SIGSTOP)\n    except OSError: pass\n"],
        user=account.pw_uid, group=account.pw_gid, extra_groups=[], cwd="/",
    )  # fmt: skip
    try:
        wait_for(lambda: account_processes(account.pw_uid), "the account's stopper")
        before = ws.digest()
        done = subprocess.run(  # it hung here for good before
            [REGULATOR, "unit", "run", "r1", "--user", account.pw_name, "--", "true"],
            cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 3 and "the account runs processes already" in one_line(done)
        assert ws.digest() == before and not (ws.root / ".worktrees").exists()
    finally:
        stopper.kill()
        stopper.wait()
        serving.close()


def test_a_lease_the_door_refuses_stops_the_run(served: Any, tmp_path: Any) -> None:
    """A person demotes the running unit: its lease is released, the door answers 401 to the run's
    next heartbeat, and the child's process group is killed; nothing more is recorded."""
    ws, serving = served
    ready = tmp_path / "ready"
    agent = script(tmp_path, "long.sh", f"echo $$ > {ready}.part\nmv {ready}.part {ready}\nexec sleep 600\n")
    host = start_unit(ws, "b1", "--ttl", "3s", "--", str(agent))  # a beat every second
    wait_for(ready.exists, "the child started")
    ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "wrong brief", check=True)
    _, err = host.communicate(timeout=60)
    assert host.returncode == 3, err
    assert "the door refused b1's lease (it expired or was released): the command was stopped" in err
    assert not alive(int(ready.read_text()))  # the child is gone
    b1 = row(ws, "b1")
    assert (b1["status"], b1["result"]) == ("todo", None)
    assert not [e for e in ws.events("units") if e["kind"] == "result"]


# ---- one account per confined unit; nothing acts as the unit after its run -----------------------
@pytest.fixture
def confined(account: Any) -> Any:
    """A system-clock workspace under /tmp (the account passes through to its worktree, never into
    .regulator/), its serve, and a folder the account may write to."""
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir="/tmp"))
    home.chmod(0o755)
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    ws = system_workspace(home)
    serving = Serving(ws)
    try:
        yield ws, serving, account, shared
    finally:
        stop_runs()
        serving.close()
        shutil.rmtree(home, ignore_errors=True)


def test_user_refuses_an_account_another_run_or_process_holds_and_root(confined: Any) -> None:
    ws, serving, account, shared = confined
    go, ready = shared / "go", shared / "ready"
    agent = script(shared, "hold.sh", f"touch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n")
    first = start_unit(ws, "r1", "--user", account.pw_name, "--", str(agent))
    wait_for(ready.exists, "the first confined child started")
    before = ws.digest()
    second = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert second.returncode == 3, second.stderr
    assert f"another `unit run` (pid {first.pid}) is confined as {account.pw_name} now" in one_line(second)
    assert "each confined unit needs an account of its own" in second.stderr
    assert ws.digest() == before and row(ws, "b1")["status"] == "todo"  # nothing started, nothing written
    go.touch()
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    # a process of the account outside any run: refused as well
    stray = subprocess.Popen(["sleep", "600"], user=account.pw_uid, group=account.pw_gid, extra_groups=[])
    try:
        before = ws.digest()
        done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
        assert done.returncode == 3, done.stderr
        assert f"the account runs processes already (pid {stray.pid})" in one_line(done)
        assert ws.digest() == before
    finally:
        stray.kill()
        stray.wait(timeout=30)
    done = run_unit(ws, "b1", "--user", "root", "--", "true")
    assert done.returncode == 2 and "that is this host's own account" in one_line(done)
    assert run_unit(ws, "b1", "--user", account.pw_name, "--", "true").returncode == 0  # free again


LEFTOVER = (
    "echo $REGULATOR_DOOR_TOKEN > {token}\n"
    "setsid sh -c 'echo $$ > {pid}.part; mv {pid}.part {pid}; while [ ! -e {go} ]; do sleep 0.1; done; "
    "{reg} door call remember --json-input {note} > {out}.part 2>&1; echo $? >> {out}.part; mv {out}.part {out}' "
    "< /dev/null > /dev/null 2>&1 &\n"
    "while [ ! -e {pid} ]; do sleep 0.1; done\n"
    "exit 1\n"
)
NOTE = {"subject": "TZ", "note": "left behind", "evidence": ["ci.log"], "reviewBy": "2026-12-20"}


def test_a_confined_units_dispatch_and_memory_carry_its_worktrees_revision(confined: Any) -> None:
    """git refuses a worktree another account owns ("dubious ownership"): the host reads the
    confined unit's HEAD from its own side, so its dispatch and what it remembers name the revision,
    and the memory's evidence is checked against trunk (not "unchecked" for ever)."""
    ws, serving, account, shared = confined
    out = shared / "remembered"
    probe = (
        "import os, sys, json, pathlib\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from engine.doors.client import DoorClient\n"
        "door = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN'])\n"
        "said = door.remember({'subject': 'pad', 'note': 'pinned', 'evidence': ['vendor/pad.js'],"
        f" 'reviewBy': {str(datetime.now(UTC).date() + timedelta(days=30))!r}}})\n"
        f"pathlib.Path({str(out)!r}).write_text(json.dumps(said))\n"
    )
    ws.write("vendor/pad.js", "// 1\n")
    ws.commit("pad")
    head = ws.git("rev-parse", "HEAD").strip()
    done = run_unit(ws, "u1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert out.exists(), done.stderr
    dispatched = [e for e in ws.events("units") if e["kind"] == "dispatch" and e["unit"] == "u1"]
    assert [e["revision"] for e in dispatched] == [head]
    (entry,) = [e for e in ws.events("memory") if e.get("subject") == "pad"]
    assert (entry["unit"], entry["revision"]) == ("u1", head)
    ws.write("vendor/pad.js", "// 2\n")
    ws.commit("pad changed")
    listed = ws.run("memory")
    assert listed.returncode == 0 and "evidence changed: vendor/pad.js" in listed.stdout, listed.stdout


def test_user_refuses_a_worktree_under_a_folder_another_account_owns(confined: Any) -> None:
    ws, serving, account, shared = confined
    theirs = shared / "theirs"
    theirs.mkdir()
    os.chown(theirs, account.pw_uid, account.pw_gid)
    before = ws.digest()
    done = run_unit(ws, "b1", "--user", account.pw_name, "--worktree", str(theirs / "wt"), "--", "true")
    assert done.returncode == 3, done.stderr
    assert f"{theirs} belongs to another account (uid {account.pw_uid})" in one_line(done)
    assert ws.digest() == before and not (theirs / "wt").exists() and row(ws, "b1")["status"] == "todo"
    # root's, but others may write in it: another account could make the worktree's folder first
    for mode in (0o777, 0o1777):  # sticky (as /tmp) protects what exists, not what is still to be made
        open_to_all = ws.root.parent / f"open-{mode:o}"  # in a folder of root's, 0755
        open_to_all.mkdir()
        open_to_all.chmod(mode)
        done = run_unit(
            ws, "b1", "--user", account.pw_name, "--worktree", str(open_to_all / "wt"), "--", "true"
        )
        assert done.returncode == 3, done.stderr
        assert f"{open_to_all} is writable by other accounts, which could make" in one_line(done)
        assert ws.digest() == before and not (open_to_all / "wt").exists()


def test_user_walks_a_worktrees_links_where_they_stand_and_refuses_acls(confined: Any) -> None:
    """A link on the way is checked where it stands and followed once: one another account made (in
    a folder it may write to) is refused; a folder with an ACL is refused whatever its mode; a link
    of root's to a folder of root's is resolved, and the run uses the folder it names (D-211)."""
    ws, serving, account, shared = confined
    home = ws.root.parent  # root's, 0755, in /tmp
    target = home / "target"
    target.mkdir()
    (shared / "real").symlink_to(target)  # shared: 0777, and the link is the other account's
    os.lchown(shared / "real", account.pw_uid, account.pw_gid)
    (home / "lnk").symlink_to(shared / "real")  # root's link, through the other account's
    before = ws.digest()
    done = run_unit(ws, "b1", "--user", account.pw_name, "--worktree", str(home / "lnk" / "wt"), "--", "true")
    assert done.returncode == 3 and f"{shared / 'real'} belongs to another account" in one_line(done)
    assert ws.digest() == before and not (target / "wt").exists()
    if shutil.which("setfacl"):
        acl = home / "acl"
        acl.mkdir(mode=0o755)
        subprocess.run(["setfacl", "-d", "-m", f"u:{account.pw_name}:rwx", str(acl)], check=True)
        done = run_unit(ws, "b1", "--user", account.pw_name, "--worktree", str(acl / "wt"), "--", "true")
        assert done.returncode == 3 and f"{acl} is writable by other accounts" in one_line(done)
        assert ws.digest() == before and not (acl / "wt").exists()
    (home / "safe").symlink_to(target)  # root's link to root's folder: followed once, then not again
    seen = shared / "pwd"
    done = run_unit(
        ws, "b1", "--user", account.pw_name, "--worktree", str(home / "safe" / "wt"), "--",
        "/bin/sh", "-c", f"pwd > {seen}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert seen.read_text().strip() == str(target / "wt")


def test_a_confined_units_set_user_id_file_loses_its_bit_when_the_run_ends(confined: Any) -> None:
    """A set-user-id file the account left would let anyone run code as it after its processes are
    gone (and race what root does for its next run): the bits go when the run ends."""
    ws, serving, account, shared = confined
    planted = ws.root / ".worktrees" / "b1" / "planted"
    # the unit cannot set the bits itself (D-213): the file gets them meanwhile, as it might by a
    # way this host does not foresee
    go, ready = shared / "go", shared / "ready"
    agent = script(
        shared, "plant.sh", f"cp /bin/true planted\ntouch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n"
    )
    host = start_unit(ws, "b1", "--user", account.pw_name, "--", str(agent))
    wait_for(ready.exists, "the unit ready")
    planted.chmod(0o6755)
    go.touch()
    _, err = host.communicate(timeout=60)
    assert host.returncode == 0, err
    mode = planted.stat().st_mode
    assert planted.stat().st_uid == account.pw_uid and not mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)
    assert mode & 0o755 == 0o755  # only the set-id bits went


def test_a_confined_unit_can_neither_give_nor_gain_a_set_id_bit(confined: Any) -> None:
    """A set-user-id file the unit made (anywhere it may write, /tmp included) would let another
    account start a process as the unit, beyond the account's own kill(-1), and run code as it
    after its run; a set-user-id program of another account would let the unit's process take that
    account's uid as its real one. Neither (D-213): every way to give a mode a set-id bit is EPERM,
    and so are a namespace and a mount (a file system mounted in its own user namespace could show a
    set-user-id file for overlayfs to copy up onto the disk: the review); clone3 is ENOSYS and
    threads start all the same; another account's set-user-id program runs without its rights."""
    ws, serving, account, shared = confined
    numbers = {"x86_64": (240, 272, 165), "aarch64": (180, 97, 40)}.get(os.uname().machine)
    if numbers is None:
        pytest.skip("the raw system calls' numbers are known here for x86_64 and aarch64 only")
    mq_open, unshare, mount = numbers
    theirs = shared / "theirs"  # another account's set-user-id program: `id -u` says whose rights it has
    shutil.copy("/usr/bin/id", theirs)
    os.chown(theirs, 65534, 65534)
    theirs.chmod(0o4755)
    report = shared / "report"
    child = (
        "import os, subprocess\n"
        "out = []\n"
        "open('made', 'w').close()\n"
        "def attempt(name, call):\n"
        "    try:\n"
        "        call()\n"
        "        out.append(name + ' ok')\n"
        "    except OSError as exc:\n"
        "        out.append(name + ' ' + str(exc.errno))\n"
        "attempt('chmod', lambda: os.chmod('made', 0o4755))\n"
        "attempt('chmod-g', lambda: os.chmod('made', 0o2755))\n"
        "attempt('fchmod', lambda: os.fchmod(os.open('made', os.O_RDONLY), 0o6755))\n"
        "attempt('open', lambda: os.open('new', os.O_CREAT | os.O_WRONLY, 0o4755))\n"
        f"attempt('tmp', lambda: os.open({str(shared / 'tmpfile')!r}, os.O_CREAT | os.O_WRONLY, 0o4755))\n"
        "attempt('mkdir', lambda: os.mkdir('dir', 0o4755))\n"
        "attempt('mkdir-g', lambda: os.mkdir('gdir', 0o2755))\n"
        "import ctypes, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def raw(*args):\n"
        "    if libc.syscall(*args) == -1: raise OSError(ctypes.get_errno(), 'refused')\n"
        f"attempt('mq', lambda: raw({mq_open}, b'/regt', os.O_CREAT | os.O_RDWR, 0o4755, None))\n"
        f"attempt('userns', lambda: raw({unshare}, 0x10000000))\n"
        f"attempt('mount', lambda: raw({mount}, b'none', b'.', b'tmpfs', 0, None))\n"
        "attempt('clone3', lambda: raw(435, None, 0))\n"
        "ran = []\n"
        "t = threading.Thread(target=lambda: ran.append(1)); t.start(); t.join()\n"
        "out.append('thread ' + str(ran))\n"
        "attempt('plain', lambda: os.chmod('made', 0o755))\n"
        f"out.append('euid ' + subprocess.run([{str(theirs)!r}, '-u'], capture_output=True, text=True).stdout.strip())\n"
        f"open({str(report)!r}, 'w').write('\\n'.join(out))\n"
    )
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", child)
    assert done.returncode == 0, done.stderr
    lines = report.read_text().splitlines()
    assert lines == [
        "chmod 1", "chmod-g 1", "fchmod 1", "open 1", "tmp 1", "mkdir 1", "mkdir-g ok", "mq 1", "userns 1",
        "mount 1", "clone3 38", "thread [1]", "plain ok", f"euid {account.pw_uid}",
    ], lines  # fmt: skip
    assert not (shared / "tmpfile").exists()
    made = ws.root / ".worktrees" / "b1" / "made"
    assert stat.S_IMODE(made.stat().st_mode) == 0o755


def test_a_confined_run_is_refused_where_no_filter_is_known_for_the_architecture() -> None:
    """No confined run starts unfiltered (D-213): the filter is built for x86_64 and aarch64 only,
    and each is a whole number of BPF instructions ending in a return."""
    from engine.host.confine import program

    with pytest.raises(Refused, match=r"no filter for this machine's architecture \(riscv64\)"):
        program("riscv64")
    for machine in ("x86_64", "aarch64"):
        code = program(machine)
        assert len(code) % 8 == 0 and code[:2] == b"\x20\x00" and code[-8:-6] == b"\x06\x00"


def test_a_confined_worktree_is_closed_to_other_accounts_when_its_run_ends(confined: Any) -> None:
    """A set-user-id file 300 folders deep is past any walk's depth: the worktree the account was
    given is 0700 again when the run ends, so no other account passes into it to start one. A
    folder of root's that `--worktree` named is neither closed nor stripped (D-211, sixth review)."""
    ws, serving, account, shared = confined
    go, ready = shared / "go", shared / "ready"
    agent = script(
        shared, "deep.sh",
        "chmod 755 .\nd=deep; for i in $(seq 300); do d=$d/d; done\nmkdir -p $d\ncp /bin/true $d/planted\n"
        f"touch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n",
    )  # fmt: skip
    worktree = ws.root / ".worktrees" / "b1"
    planted = worktree.joinpath("deep", *["d"] * 300, "planted")
    host = start_unit(ws, "b1", "--user", account.pw_name, "--", str(agent))
    wait_for(ready.exists, "the unit ready")
    os.chmod(
        os.path.join(*planted.parts[len(worktree.parts) :]), 0o6755, dir_fd=os.open(worktree, os.O_RDONLY)
    )
    go.touch()
    _, err = host.communicate(timeout=60)
    assert host.returncode == 0, err
    assert planted.exists()  # root sees it
    other = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-e", str(planted)], check=False)
    assert other.returncode == 1  # nobody else passes into the worktree
    assert (worktree.stat().st_uid, stat.S_IMODE(worktree.stat().st_mode)) == (account.pw_uid, 0o700)
    # a folder of root's, named by --worktree: its files and mode are not the run's to change, and
    # a confined unit could not write in it: refused before anything (D-215, its review)
    theirs = ws.root.parent / "roots"
    theirs.mkdir(mode=0o755)
    kept = theirs / "kept"
    shutil.copy("/bin/true", kept)
    kept.chmod(0o4755)
    done = run_unit(ws, "u1", "--user", account.pw_name, "--worktree", str(theirs), "--", "true")
    assert done.returncode == 3, done.stderr
    assert one_line(done) == (
        f"regulator: the worktree {theirs} is the host's (made for an unconfined run, or a folder you named): a "
        f"confined unit could not write in it; remove it (`rm -rf {theirs} && git worktree prune`) for a fresh "
        "one, or run the unit unconfined"
    )
    assert stat.S_IMODE(kept.stat().st_mode) == 0o4755 and stat.S_IMODE(theirs.stat().st_mode) == 0o755


def test_what_a_unit_leaves_at_its_worktrees_lease_path_changes_nothing_of_its_close(served: Any) -> None:
    """The close is recorded; the stale lease file is removed as a courtesy: a link to a device there
    is not read, and `unit run` still says the unit closed (exit 0)."""
    ws, _ = served
    done = run_unit(ws, "b1", "--", "/bin/sh", "-c", "ln -s /dev/zero .regulator-lease.json")
    assert done.returncode == 0, done.stderr
    assert row(ws, "b1")["status"] == "closed" and "awaiting close" not in done.stderr


def test_a_link_to_a_fifo_in_a_worktree_hangs_no_walk(tmp_path: Any) -> None:
    """Another account flips a path between a folder and a FIFO; a worktree holds links to it. The
    hand-over, the set-id strip and the lease folder's removal never open it as a folder (os.fwalk
    and shutil.rmtree did, and hung): each walk ends (D-211, fifth review)."""
    import threading

    tree, flip = tmp_path / "wt", tmp_path / "flip"
    tree.mkdir()
    (tree / "sub").mkdir()
    for i in range(200):
        (tree / f"l{i}").symlink_to(flip)
        (tree / "sub" / f"l{i}").symlink_to(flip)
    stop = threading.Event()

    def flipper() -> None:
        made = tmp_path / "made"
        while not stop.is_set():
            for make in (os.mkdir, os.mkfifo):
                make(made)
                with contextlib.suppress(OSError):
                    os.rmdir(flip) if flip.is_dir() and not flip.is_symlink() else os.unlink(flip)
                with contextlib.suppress(OSError):
                    os.rename(made, flip)
                with contextlib.suppress(OSError):
                    os.rmdir(made) if made.is_dir() else os.unlink(made)

    code = (
        "import os, sys\nfrom pathlib import Path\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from engine.host.folders import give_worktree, remove_tree, strip_set_ids\n"
        "top = Path(sys.argv[1])\n"
        "for _ in range(20):\n"
        "    give_worktree(top, os.getuid(), os.getgid())\n"
        "    strip_set_ids(top, os.getuid())\n"
        "remove_tree(top)\n"
    )
    runner = threading.Thread(target=flipper, daemon=True)
    runner.start()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(tree)], capture_output=True, text=True, timeout=60
        )
    finally:
        stop.set()
        runner.join(timeout=10)
    assert done.returncode == 0, done.stderr
    assert not tree.exists()  # removed, its links as links


def test_a_process_whose_first_thread_exited_is_killed_with_its_account(confined: Any) -> None:
    """A process whose main thread exits (raw SYS_exit) while another thread runs shows `Z` in its
    status: it is still alive, found and killed when the run ends, and blocks a later claim
    meanwhile (D-166, D-168; a seventh review)."""
    ws, serving, account, shared = confined
    number = {"x86_64": 60, "aarch64": 93}.get(os.uname().machine)
    if number is None:
        pytest.skip("SYS_exit's number is known here for x86_64 and aarch64 only")
    beat = shared / "beat"
    beat.touch()
    beat.chmod(0o666)
    child = (
        "import ctypes, os, threading, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        def beating():\n"
        "            while True:\n"
        f"                with open({str(beat)!r}, 'a') as handle: handle.write('x')\n"
        "                time.sleep(0.05)\n"
        "        threading.Thread(target=beating).start()\n"
        "        time.sleep(0.3)\n"
        f"        ctypes.CDLL(None).syscall({number}, 0)  # the main thread alone\n"
        "    os._exit(0)\n"
        "time.sleep(1)\n"
    )
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", child)
    assert done.returncode == 0, done.stderr
    from engine.host.accounts import account_processes

    assert account_processes(account.pw_uid) == []
    size = beat.stat().st_size
    assert size > 0  # it did beat while the run lasted
    time.sleep(0.5)
    assert beat.stat().st_size == size  # and beats no more


def test_a_confined_child_never_holds_the_hosts_terminal(confined: Any) -> None:
    """Run from a terminal, a confined child gets none of it (its own session; no terminal on its
    streams, its output relayed): it could push keystrokes into root's shell or hand the terminal
    to another account that reads what root types (D-211, eighth review)."""
    ws, serving, account, shared = confined
    probe = "import os; print('tty', os.isatty(0), os.isatty(1), os.isatty(2), os.getsid(0) == os.getpid())"
    master, slave = os.openpty()
    try:
        host = subprocess.Popen(
            [REGULATOR, "unit", "run", "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe],
            cwd=ws.root, env=ws.env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        said = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's other end is closed: the run is over
                break
            if not chunk:
                break
            said += chunk
        assert host.wait(timeout=60) == 0, said
    finally:
        os.close(master)
    assert b"tty False False False True" in said, said


def test_a_lease_folder_an_earlier_run_left_is_never_reused(confined: Any) -> None:
    """What a killed host left in a unit's lease folder (a folder the unit made, open to all) is
    moved aside whole; the run gets a fresh folder of the host's making (D-211, eighth review)."""
    ws, serving, account, shared = confined
    left = ws.root / ".worktrees" / ".leases" / "b1"
    (left / "keep").mkdir(parents=True)
    left.chmod(0o777)
    os.chown(left, account.pw_uid, account.pw_gid)
    seen = shared / "seen"
    probe = f"import os; open({str(seen)!r}, 'w').write(repr(sorted(os.listdir({str(left)!r}))))"
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert "keep" not in seen.read_text() and ".regulator-lease.json" in seen.read_text(), seen.read_text()


def test_a_fifo_left_in_a_lease_folder_does_not_hang_the_next_run(confined: Any) -> None:
    """A unit can leave anything in its lease folder; a dead host leaves it there: the next run
    removes what is not a folder before it writes the harness's files (never blocked on a FIFO)."""
    ws, serving, account, shared = confined
    leases = ws.root / ".worktrees" / ".leases"
    (leases / "b1").mkdir(parents=True)
    os.mkfifo(leases / "b1" / "mcp.json")
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert done.returncode == 0, done.stderr
    assert row(ws, "b1")["status"] == "closed"


def test_a_confined_unit_cannot_borrow_another_worktrees_revision_or_crash_the_host(confined: Any) -> None:
    """The unit owns its worktree: a `.git` made a link to another worktree's `.git`, or holding a
    NUL, gives no revision (never the other's HEAD, never a traceback): what it remembers then is
    `evidence unchecked`, not current (D-207, after review)."""
    ws, serving, account, shared = confined
    older = ws.git("rev-parse", "HEAD").strip()
    ws.write("vendor/pad.js", "// 1\n")
    ws.commit("pad")
    other = ws.root / ".worktrees" / "other"
    ws.git("worktree", "add", "-q", "--detach", str(other), older)  # the host's, at an older commit
    # a colluding unit that owned `other` left its `.git` a link to u3's: `other`'s git dir names it back
    (other / ".git").unlink()
    (other / ".git").symlink_to(ws.root / ".worktrees" / "u3" / ".git")
    # a worktree whose recorded path runs through a link that another account turned to u3's folder
    relinked = ws.root.parent / "relinked"
    ws.git("worktree", "add", "-q", "--detach", str(relinked), older)
    (ws.root / ".git" / "worktrees" / "relinked" / "gitdir").write_text(f"{shared / 'via' / '.git'}\n")
    out = shared / "said"
    probe = (
        "import os, sys, json, pathlib\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from engine.doors.client import DoorClient\n"
        "door = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN'])\n"
        f"review = {str(datetime.now(UTC).date() + timedelta(days=30))!r}\n"
        "def note(subject):\n"
        "    return door.remember({'subject': subject, 'note': 'n', 'evidence': ['vendor/pad.js'], 'reviewBy': review})\n"
        "said = [note('honest')]\n"
        "os.rename('.git', '.git.real')\n"
        f"os.symlink({str(other / '.git')!r}, '.git')\n"
        "said.append(note('linked'))\n"
        "os.remove('.git')\n"
        "pathlib.Path('.git').write_bytes(b'gitdir: \\x00\\n')\n"
        "said.append(note('nul'))\n"
        f"pathlib.Path('.git').write_text('gitdir: {ws.root / '.git' / 'worktrees' / 'other'}\\n')\n"
        "said.append(note('named back through a link'))\n"
        f"os.symlink(os.getcwd(), {str(shared / 'via')!r})\n"  # the unit's link, where it may write
        f"pathlib.Path('.git').write_text('gitdir: {ws.root / '.git' / 'worktrees' / 'relinked'}\\n')\n"
        "said.append(note('named back by a path through a link'))\n"
        f"pathlib.Path({str(out)!r}).write_text(json.dumps(said))\n"
    )
    done = run_unit(ws, "u3", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert out.exists(), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in out.read_text()
    revisions = {e["subject"]: e["revision"] for e in ws.events("memory")}
    newer = ws.git("rev-parse", "HEAD").strip()
    assert revisions["honest"] == newer  # u3's worktree was made at trunk
    assert revisions["linked"] is None and revisions["nul"] is None  # never the other's `older`
    assert revisions["named back through a link"] is None
    assert revisions["named back by a path through a link"] is None


def test_a_setsid_leftover_of_a_confined_unit_is_killed_when_its_run_ends(confined: Any) -> None:
    ws, serving, account, shared = confined
    token, pid, go, out, note = (shared / n for n in ("token", "pid", "go", "out", "note.json"))
    note.write_text(json.dumps(NOTE))
    note.chmod(0o644)
    text = LEFTOVER.format(token=token, pid=pid, go=go, out=out, note=note, reg=REGULATOR)
    agent = script(shared, "escape.sh", text)
    done = run_unit(ws, "u1", "--user", account.pw_name, "--", str(agent))
    assert done.returncode == 1, done.stderr  # failed: u1 stays in progress, a person decides
    assert row(ws, "u1")["status"] == "in-progress"
    assert not alive(int(pid.read_text()))  # escaped the process group, not the account
    from engine.host.accounts import account_processes

    assert account_processes(account.pw_uid) == []
    before = ws.digest()
    with pytest.raises(Refused) as refused:  # and its lease acts no more
        DoorClient(serving.url, token.read_text().strip()).status()
    assert str(refused.value) == UNAUTHORIZED
    go.touch()
    assert not out.exists() and ws.digest() == before


def test_a_setsid_leftover_of_an_unconfined_unit_gets_401_after_its_run(served: Any, tmp_path: Any) -> None:
    ws, serving = served
    token, pid, go, out, note = (tmp_path / n for n in ("token", "pid", "go", "out", "note.json"))
    note.write_text(json.dumps(NOTE))
    text = LEFTOVER.format(token=token, pid=pid, go=go, out=out, note=note, reg=REGULATOR)
    agent = script(tmp_path, "escape.sh", text)
    done = run_unit(ws, "u1", "--", str(agent))
    assert done.returncode == 1, done.stderr
    assert row(ws, "u1")["status"] == "in-progress"
    leftover = int(pid.read_text())
    try:
        assert alive(leftover)  # unconfined: setsid escapes the process group (docs/security.md)
        before = ws.digest()
        go.touch()
        said = wait_for(lambda: out.exists() and out.read_text(), "the leftover's door call")
        assert said.splitlines()[-1] == "3" and UNAUTHORIZED in said, said
        assert ws.digest() == before  # nothing written by it
        assert not [m for m in ws.json("memory") if m["note"] == "left behind"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover, signal.SIGKILL)


def test_a_confined_units_report_records_its_worktrees_revision(confined: Any) -> None:
    """The worktree is the account's: git run there by the host refuses it ("dubious ownership"),
    so the host reads its HEAD from the repository's worktree metadata instead."""
    from tests.serving import REPORT

    ws, serving, account, shared = confined
    report = shared / "report.json"
    report.write_text(json.dumps(REPORT))
    report.chmod(0o644)
    probe = (
        f"import json, os, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from engine.doors.client import DoorClient\n"
        "door = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN'])\n"
        f"door.call('report_intelligence', json.loads(open({str(report)!r}).read()))\n"
    )
    done = run_unit(ws, "r1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert done.returncode == 0, done.stderr
    trunk = subprocess.run(
        ["git", "-C", str(ws.root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    signal_event = next(e for e in ws.events("signals") if e.get("subject") == REPORT["subject"])
    assert signal_event["revision"] == trunk


def test_a_worktree_another_account_holds_is_refused_before_anything(confined: Any) -> None:
    """A worktree an earlier confined run's account holds: a unit under another account could not
    work in it, and an unconfined one would work, as the host, in a folder that account can change.
    Refused (exit 3) naming whose it is, nothing dispatched; the same account runs in it again."""
    ws, serving, account, shared = confined
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert done.returncode == 0, done.stderr
    worktree = ws.root / ".worktrees" / "b1"
    events = (ws.root / ".regulator" / "units.ndjson").read_bytes()
    other = run_unit(ws, "u1", "--worktree", str(worktree), "--", "true")
    assert other.returncode == 3, other.stderr
    assert one_line(other) == (
        f"regulator: the worktree {worktree} is {account.pw_name}'s (an earlier confined run's): run the unit "
        f"with `--user {account.pw_name}`, or remove it (`rm -rf {worktree} && git worktree prune`) for a fresh one"
    )
    assert (ws.root / ".regulator" / "units.ndjson").read_bytes() == events  # nothing dispatched
    again = run_unit(ws, "u1", "--user", account.pw_name, "--worktree", str(worktree), "--", "true")
    assert again.returncode == 0, again.stderr


def test_a_folder_handed_over_loses_a_set_group_id_bit_it_inherited(confined: Any) -> None:
    """Under a set-group-id folder every folder git makes inherits the bit, which the unit may not
    pass back (D-213): `chmod u+w` of one would fail in its hands. The hand-over takes it off."""
    ws, serving, account, shared = confined
    top = ws.root / ".worktrees"
    top.mkdir(exist_ok=True)
    top.chmod(0o2755)
    report = shared / "report"
    agent = script(shared, "mode.sh", f"chmod u+w contracts && echo ok > {report}\n")
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", str(agent))
    assert done.returncode == 0, done.stderr
    assert report.read_text() == "ok\n"
    assert not (top / "b1" / "contracts").stat().st_mode & stat.S_ISGID


def test_an_account_that_cannot_run_regulator_is_said_before_the_run(account: Any, tmp_path: Any) -> None:
    """The `regulator` a confined unit's harness names must be one its account can run: asked of the
    account itself, as the unit will be confined (a virtualenv under root's 0700 home is not)."""
    from engine.host.accounts import Account, cannot_run

    unit = Account(account.pw_name, account.pw_uid, account.pw_gid, "/")
    locked = Path(tempfile.mkdtemp(prefix="reglocked-", dir="/tmp"))  # 0700, root's
    try:
        program = locked / "regulator"
        program.write_text("#!/bin/sh\necho regulator 0\n")
        program.chmod(0o755)
        assert cannot_run(unit, str(program), "/usr/bin:/bin") == "Permission denied"
        assert cannot_run(unit, "/bin/true", "/usr/bin:/bin") is None
        locked.chmod(0o755)
        assert cannot_run(unit, str(program), "/usr/bin:/bin") is None
        program.write_text("#!/bin/sh\necho 'no module named controlroom' >&2\nexit 1\n")
        assert (
            cannot_run(unit, str(program), "/usr/bin:/bin") == "`--version` said: no module named controlroom"
        )
        # what the account may put in the probe (a .pth in its home's user site): its output is
        # bounded, and nothing it starts outlives the probe (the review of D-215)
        program.write_text(
            "#!/bin/sh\nsetsid sleep 600 </dev/null >/dev/null 2>&1 &\nhead -c 20000000 /dev/zero\n"
            "head -c 20000000 /dev/zero | tr '\\0' x >&2\necho >&2\necho last >&2\nexit 1\n"
        )
        assert cannot_run(unit, str(program), "/usr/bin:/bin") == "`--version` said: last"
        from engine.host.accounts import account_processes

        assert account_processes(account.pw_uid) == []
    finally:
        shutil.rmtree(locked)


def test_claude_codes_harness_is_refused_for_an_account_that_cannot_run_regulator(confined: Any) -> None:
    """The harness's hooks and MCP server name the `regulator` running `unit run`: an account that
    cannot run it would get a harness whose every hook fails (and a failing hook does not block the
    tool it guards). Refused (exit 3), nothing dispatched; the env harness runs, with a warning."""
    from engine.host.accounts import Account, cannot_run

    ws, serving, account, shared = confined
    unit = Account(account.pw_name, account.pw_uid, account.pw_gid, "/")
    why = cannot_run(unit, REGULATOR, "/usr/local/bin:/usr/bin:/bin")
    if why is None:
        pytest.skip(f"{account.pw_name} can run {REGULATOR} on this machine")
    events = (ws.root / ".regulator" / "units.ndjson").read_bytes()
    done = run_unit(ws, "b1", "--user", account.pw_name, "--harness", "claude-code", "--", "true")
    assert done.returncode == 3, done.stderr
    line = one_line(done)
    assert line.startswith(f"regulator: --user {account.pw_name} cannot run {REGULATOR} ({why}")
    assert line.endswith(
        "): the harness's hooks and MCP server name it; install regulator where every account can read "
        "and execute it (docs/units.md)"
    )
    assert (ws.root / ".regulator" / "units.ndjson").read_bytes() == events
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert done.returncode == 0, done.stderr
    assert f"warning: --user {account.pw_name} cannot run {REGULATOR} ({why}" in done.stderr
    assert "): the unit's `regulator door call` names it" in done.stderr


def test_a_script_whose_interpreter_the_account_cannot_reach_says_so(account: Any) -> None:
    """A virtualenv made from a pyenv or conda Python links its python3 under root's home: the
    script is readable, its interpreter is not, and `Permission denied` alone misleads."""
    from engine.host.accounts import Account
    from engine.host.unitrun import _interpreter_note

    home = Path(tempfile.mkdtemp(prefix="regconf-", dir="/tmp"))
    try:
        home.chmod(0o755)
        hidden, bin_ = home / "hidden", home / "bin"
        hidden.mkdir(mode=0o700)
        bin_.mkdir(mode=0o755)
        (hidden / "python3.11").write_text("")
        (bin_ / "python3").symlink_to(hidden / "python3.11")
        script = bin_ / "regulator"
        script.write_text(f"#!{bin_ / 'python3'}\n")
        unit = Account(account.pw_name, account.pw_uid, account.pw_gid, "/")
        note = _interpreter_note(unit, str(script))
        assert note == (
            f"; its interpreter {bin_ / 'python3'} is {hidden / 'python3.11'}, in a folder the account cannot enter"
        )
        hidden.chmod(0o755)  # reachable: nothing to add
        assert _interpreter_note(unit, str(script)) == ""
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_kill_helper_the_account_stopped_is_killed_not_waited_for() -> None:
    """kill_account's helper is the account's once it has switched, so a leftover of the unit may
    stop it (SIGSTOP, which nothing ignores); root waited for it with a plain waitpid, and `unit run`
    hung for good (the review of D-213). Root waits a second, then kills it and goes on."""
    from engine.host.accounts import _reap

    pid = os.fork()
    if pid == 0:  # a helper, stopped before its kill
        os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(0)
    _reap(pid)  # returns: the helper is killed and reaped
    assert not Path(f"/proc/{pid}").exists() or not alive(pid)


def test_an_unconfined_worktree_is_never_reached_through_a_link_another_account_may_turn(
    confined: Any,
) -> None:
    """An unconfined unit runs as the host: `--worktree` through a link in a folder another account
    may write would let that account choose, at any time, where the host works. Refused as for a
    confined run (exit 3, nothing written; the review of D-215)."""
    ws, serving, account, shared = confined
    link = shared / "wt"
    link.symlink_to(ws.root / ".worktrees")
    events = (ws.root / ".regulator" / "units.ndjson").read_bytes()
    done = run_unit(ws, "u1", "--worktree", str(link / "u1"), "--", "true")
    assert done.returncode == 3, done.stderr
    assert one_line(done).startswith(f"regulator: --worktree {link / 'u1'}: ")
    assert (ws.root / ".regulator" / "units.ndjson").read_bytes() == events


def test_a_confined_child_enters_its_worktree_as_its_account(account: Any) -> None:
    """The worktree is entered after the switch to the account, never as root: a worktree the
    account turned into a link to a folder only root may enter (while the host checked it can run
    regulator) gives no way in; the run does not start (the review of D-215)."""
    from engine.host.confine import lock_down

    secret = Path(tempfile.mkdtemp(prefix="regsecret-", dir="/tmp"))  # root's, 0700
    shared = Path(tempfile.mkdtemp(prefix="regopen-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        link = shared / "wt"
        link.symlink_to(secret)

        def pwd_in(folder: Path) -> subprocess.CompletedProcess:
            return subprocess.run(
                ["/bin/pwd"], user=account.pw_uid, group=account.pw_gid, extra_groups=[],
                preexec_fn=lock_down(str(folder)), capture_output=True, text=True, check=False,
            )  # fmt: skip

        with pytest.raises(subprocess.SubprocessError):
            pwd_in(link)
        assert pwd_in(shared).stdout.strip() == str(shared)
    finally:
        shutil.rmtree(secret)
        shutil.rmtree(shared)


def test_sigterm_while_the_account_is_checked_leaves_none_of_its_processes(account: Any) -> None:
    """`unit run` stopped (SIGTERM) while it checks the account can run regulator: every process of
    the account is killed on the way out, as on SIGINT, and it says so in one line; the account is
    not left running what the check started (the review of D-215)."""
    from engine.host.accounts import account_processes

    folder = Path(tempfile.mkdtemp(prefix="regprobe-", dir="/tmp"))
    try:
        folder.chmod(0o777)
        marker = folder / "started"
        program = folder / "regulator"
        program.write_text(
            f"#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\ntouch {marker}\nsleep 60\n"
        )
        program.chmod(0o755)
        check = (
            "import sys\n"
            "from engine.base.errors import Refused\n"
            "from engine.host.accounts import Account, cannot_run\n"
            f"unit = Account({account.pw_name!r}, {account.pw_uid}, {account.pw_gid}, '/')\n"
            "try:\n"
            f"    cannot_run(unit, {str(program)!r}, '/usr/bin:/bin')\n"
            "except Refused as exc:\n"
            "    print(exc)\n"
            "    sys.exit(3)\n"
        )
        host = subprocess.Popen([sys.executable, "-c", check], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            wait_for(marker.exists, "the check started as the account")
            host.send_signal(signal.SIGTERM)
            out, _ = host.communicate(timeout=60)
        finally:
            if host.poll() is None:
                host.kill()
        assert host.returncode == 3, out
        assert out.strip() == "stopped by SIGTERM while the account was checked; nothing written"
        assert account_processes(account.pw_uid) == []
    finally:
        shutil.rmtree(folder)


def test_a_group_no_one_else_is_in_and_a_read_only_acl_let_no_account_in(confined: Any) -> None:
    """Group write counts only where another account is in the group (umask 002 and a user's own
    group, the default on Debian, Ubuntu and Fedora, refused every run before), and an ACL only
    where it lets another account write: the review of D-215."""
    ws, serving, account, shared = confined
    if not private_group(0, 0):
        pytest.skip("root's group has other members here")
    home = ws.root.parent
    team = home / "team"
    team.mkdir()
    team.chmod(0o775)  # root:root, no one else in root's group
    done = run_unit(ws, "u1", "--worktree", str(team / "wt"), "--", "true")
    assert done.returncode == 0, done.stderr
    os.chown(team, 0, account.pw_gid)  # the unit account's group: another account may write here
    done = run_unit(ws, "b1", "--worktree", str(team / "wt2"), "--", "true")
    assert done.returncode == 3
    assert one_line(done) == (
        f"regulator: --worktree {team / 'wt2'}: {team} is writable by other accounts, which could make "
        f"{team / 'wt2'} first (a link; `chmod go-w {team}`, and `getfacl {team}` for an ACL); give a folder "
        "under one of yours (`--worktree DIR`)"
    )
    if shutil.which("setfacl"):
        read_only = home / "readable"
        read_only.mkdir(mode=0o755)
        subprocess.run(["setfacl", "-m", f"u:{account.pw_name}:rx", str(read_only)], check=True)
        done = run_unit(ws, "b1", "--worktree", str(read_only / "wt"), "--", "true")
        assert done.returncode == 0, done.stderr


def test_a_group_another_account_shares_by_gid_is_not_private(account: Any, tmp_path: Any) -> None:
    """A group is a user's own only when nothing else lets another account in: a second group with
    the same gid (`groupadd -o`) that the account is in made a group-writable folder pass (the
    review of D-217)."""
    if shutil.which("groupadd") is None:
        pytest.skip("needs groupadd")
    from engine.host.folders import others_may_write

    name = f"regg{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "-M", "-r", "-U", "-s", "/usr/sbin/nologin", name], check=True, capture_output=True
    )
    try:
        owner = pwd.getpwnam(name)
        folder = tmp_path / "team"
        folder.mkdir()
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        folder.chmod(0o775)
        assert private_group(owner.pw_gid, owner.pw_uid) and not others_may_write(folder.stat())
        twin = f"{name}d"
        accounts("groupadd", "-o", "-g", str(owner.pw_gid), twin)
        try:
            accounts("usermod", "-aG", twin, account.pw_name)
            assert not private_group(owner.pw_gid, owner.pw_uid) and others_may_write(folder.stat())
        finally:
            accounts("groupdel", "-f", twin)
    finally:
        accounts("userdel", name)
        import grp

        if any(group.gr_name == name for group in grp.getgrall()):  # userdel removes it, where it made it
            accounts("groupdel", name)


def test_an_unconfined_worktree_others_may_write_in_is_refused(served: Any, tmp_path: Any) -> None:
    """The host works in an unconfined unit's worktree: one others may write in is refused (exit 3,
    nothing written), and one the run makes is not left group- or other-writable, whatever the
    umask (the review of D-217)."""
    ws, serving = served
    done = run_unit(ws, "b1", "--", "true")
    assert done.returncode == 0, done.stderr
    worktree = ws.root / ".worktrees" / "b1"
    assert not stat.S_IMODE(worktree.stat().st_mode) & 0o022
    worktree.chmod(0o777)
    events = (ws.root / ".regulator" / "units.ndjson").read_bytes()
    done = run_unit(ws, "b1", "--", "true")
    assert done.returncode == 3
    assert one_line(done).startswith(f"regulator: the worktree {worktree} is writable by other accounts")
    assert (ws.root / ".regulator" / "units.ndjson").read_bytes() == events


def test_the_walks_refusal_names_the_default_worktree_when_none_was_given(served: Any) -> None:
    """Without `--worktree`, the refusal names the unit's own worktree and how to choose another,
    not an option the operator never gave."""
    ws, serving = served
    ws.root.chmod(0o777)
    try:
        done = run_unit(ws, "b1", "--", "true")
    finally:
        ws.root.chmod(0o755)
    assert done.returncode == 3
    worktree = ws.root / ".worktrees" / "b1"
    assert one_line(done).startswith(
        f"regulator: the unit's worktree {worktree}: {ws.root} is writable by other accounts, which could make "
    )
    assert one_line(done).endswith("give a folder under one of yours (`--worktree DIR`)")
