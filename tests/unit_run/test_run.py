"""`regulator unit run` end to end (design §23): real `serve`, real `unit run`, real children that call
the door. A research unit reports, asks and reports its result; the obligation it raised holds
another unit, whose run starts nothing; a held close leaves the unit awaiting close, `--wait` closes
it after a signed disposition; the child's environment is exactly the allowlist; a SIGKILLed child
with its host gone loses its lease after its TTL, its token gets 401, and a new run dispatches it
again; the wall budget and SIGTERM reach the child's process group. Confined runs (`--user`):
tests/unit_run/test_confined.py and test_confined_end.py."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from engine.base.errors import Refused
from engine.doors.client import UNAUTHORIZED, DoorClient
from tests.helpers import REGULATOR, git, one_line, remember_args, report_args
from tests.serving import Serving, wait_for
from tests.unit_run.common import (
    ALLOWED,
    LEFTOVER,
    NOTE,
    ROOT,
    alive,
    row,
    run_unit,
    script,
    serve_back_and_finish,
    start_unit,
    system_workspace,
    tcp_serve,
    waiting_run,
)


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
    marks = ws.root / ".regulator" / "runs"
    wait_for(lambda: any('"waiting": true' in m.read_text() for m in marks.glob("*.json")), "the wait marked")
    resolved = ws.run(
        "obligation", "resolve", hold, "--disposition", "no-action", "--by", "alice", "--rationale", "fixed",
        check=True,
    )  # fmt: skip
    # the note does not send the person to close a unit its waiting run closes (an operator's review)
    assert resolved.stderr == (
        "regulator: note: unit u3's result is done and no other obligation holds it now: "
        "its waiting `unit run --wait` closes it\n"
    )
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert "closed u3" in err
    assert row(ws, "u3")["status"] == "closed"
    # the room's lifecycle says where a run's lease was and what a done result waits for
    # (an operator's review: "lease file in .worktrees/u3", "a person decides what is next")
    from controlroom.lifecycle import lifecycle
    from controlroom.readmodel import snapshot
    from engine.checkout.workspace import Workspace as Checkout

    told = "\n".join(lifecycle("units", snapshot(Checkout(ws.root), "alice"), "u3"))
    assert "its lease file in the run's own folder, removed when the run ends" in told, told
    assert "a result is recorded (once nothing holds it, `regulator unit close` or a waiting" in told
    assert "decides" not in told


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


def test_a_contract_not_committed_is_said_and_a_committed_one_is_not(served: Any) -> None:
    """An operator's first day: `unit new` then `unit run` without a commit ran, exit 0, unsaid,
    though `unit new` says to commit it. The run goes on (the working tree's contract is the one
    it takes, as before), with one warning line; a committed contract runs without it."""
    ws, serving = served
    ws.contract("fresh", "research", "intelligence")
    done = run_unit(ws, "fresh", "--", "true")
    assert done.returncode == 0, done.stderr
    warning = "regulator: warning: contracts/fresh.json is not as committed: this run takes it as the working tree holds it"
    assert warning in done.stderr.splitlines()
    ws.commit("fresh's contract", sign=False)
    # an ignored path says nothing to `git status` without --ignored (a second review)
    (ws.root / ".gitignore").write_text((ws.root / ".gitignore").read_text() + "contracts/hidden.json\n")
    ws.commit("ignore one contract", sign=False)
    ws.contract("hidden", "research", "intelligence")
    ignored = run_unit(ws, "hidden", "--", "true")
    assert "regulator: warning: contracts/hidden.json is not as committed" in ignored.stderr, ignored.stderr
    ws.contract("fresh2", "research", "intelligence")
    ws.commit("fresh2's contract", sign=False)
    again = run_unit(ws, "fresh2", "--", "true")
    assert again.returncode == 0 and "not as committed" not in again.stderr, again.stderr


def test_a_shell_agent_waits_for_its_answer_as_docs_agents_md_says(served: Any, tmp_path: Any) -> None:
    """The loop docs/agents.md gives a shell agent that asked a person stopped at once (an open
    question carries `"answer": null`, an operator's re-check): run as written there (only its
    sleep shortened), it now waits until a person answers and reads the answer."""
    import re

    from tests.unit_run.common import start_unit

    ws, serving = served
    doc = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    loop = re.search(r"`(until regulator door call obligations [^`]+)`", doc)
    assert loop is not None, "docs/agents.md no longer shows the loop"
    waits = loop.group(1).replace("sleep 30", "sleep 0.2").replace("regulator ", '"$REG" ')
    answer = tmp_path / "answer.json"
    agent = script(
        tmp_path,
        "asks.sh",
        'echo \'{"question": "ship it?"}\' | "$REG" door call ask_human --json-input - >/dev/null\n'
        f'{waits}\n"$REG" door call obligations > {answer}\n',
    )
    host = start_unit(ws, "r1", "--", str(agent))
    question = wait_for(
        lambda: [o for o in ws.json("obligations") if o["unit"] == "r1" and o.get("kind") == "question"],
        "the question's obligation",
    )[0]
    assert host.poll() is None  # still waiting: no answer yet
    resolved = ws.run(
        "obligation", "resolve", question["id"], "--by", "alice", "--disposition", "answered",
        "--rationale", "Yes, ship it",
    )  # fmt: skip
    assert resolved.returncode == 0, resolved.stderr
    out, err = host.communicate(timeout=120)
    assert host.returncode == 0, err
    answered = [o for o in json.loads(answer.read_text())["obligations"] if o["id"] == question["id"]]
    assert answered[0]["answer"] == "Yes, ship it"


def test_a_units_commit_that_claims_a_persons_authority_is_named(served: Any, tmp_path: Any) -> None:
    """An adversarial review: a unit's commit ending `Authorized-by: alice`, cherry-picked by alice
    with her signing on, became her signed authorization and lifted a hold. A unit cannot authorize:
    when its child ends, `unit run` names each of its commits that trunk lacks and that carries a
    person's trailer, and says how to take its work without making the claim one's own."""
    ws, serving = served
    agent = script(
        tmp_path,
        "claims.sh",
        'echo x > note.txt && git add note.txt && git commit -q -m "plain work"\n'
        # a record separator (\\036, which git keeps in a message) hid the trailer from a first reading
        "echo y >> note.txt && git commit -q -am 'resolve it' -m \"$(printf '\\036')\" -m 'Authorized-by: alice'\n",
    )
    done = run_unit(ws, "r1", "--", str(agent))
    assert done.returncode == 0, done.stderr
    claimed = [line for line in done.stderr.splitlines() if "claim a person's authority" in line]
    assert len(claimed) == 1 and "(Authorized-by)" in claimed[0], done.stderr
    assert claimed[0].startswith("regulator: warning: r1's commits claim a person's authority: ")
    assert "never by a cherry-pick, rebase or amend with your signing on" in claimed[0]
    worktree = ws.root / ".worktrees" / "r1"
    head, plain = (git(worktree, "rev-parse", rev).strip()[:10] for rev in ("HEAD", "HEAD~1"))
    assert f"{head} (Authorized-by)" in claimed[0] and plain not in claimed[0]


def test_without_serve_unit_run_exits_3_saying_to_start_it(tmp_path: Any) -> None:
    ws = system_workspace(tmp_path)
    before = ws.digest()
    done = run_unit(ws, "r1", "--", "true")
    assert done.returncode == 3 and "start it first (`regulator serve`)" in one_line(done)
    assert ws.digest() == before and not (ws.root / ".worktrees").exists()


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_door_that_stops_answering_is_said_once_its_return_once_and_a_door_moved_elsewhere(
    served: Any, tmp_path: Any
) -> None:
    """serve stops while a unit runs: `unit run` says once that the door does not answer the
    heartbeat (the unit's own calls fail; when the lease lapses), and once that it answers again
    when serve is back on the same socket; the run goes on. serve started again on another socket
    can never answer this run's unit: `unit run` says where it is and what to do, and beats there
    (its lease kept; an operator's review: the run went on to its end with its unit lost). A demote
    meanwhile stops the run, as the warning says: the log's word, asked at every beat (D-336)."""
    ws, serving = served
    host, said, finish = waiting_run(ws, tmp_path, "15s")  # a heartbeat every 5 s
    serving.close()
    opening = "regulator: warning: b1: serve's door did not answer its heartbeat ("
    closing = (
        "): the unit's own door calls fail until it does; a running serve that takes no call on the "
        "lease for 15s lets it lapse (a serve started again counts from its start), and the run then "
        "stops its command; a demote stops the run meanwhile\n"
    )

    def warnings() -> list[str]:  # why: serve stopping (503) or gone (no door at …), as the beat found it
        return [line for line in said if line.startswith(opening)]

    wait_for(warnings, f"the warning (said: {said})", deadline=30, every=0.2)
    assert warnings()[0].endswith(closing) and str(serving.sock) in warnings()[0], said
    back = Serving(ws, sock=serving.sock)
    again = "regulator: b1: serve's door answers its heartbeat again\n"
    try:
        wait_for(lambda: again in said, "the door's return", deadline=30, every=0.2)
    finally:
        back.close()
    wait_for(lambda: len(warnings()) == 2, f"the second warning (said: {said})", deadline=30, every=0.2)
    elsewhere = Serving(ws)  # its own socket
    moved = (
        f"regulator: warning: b1: serve runs again, with its door at {elsewhere.url}; this run's unit was "
        f"given {serving.url}, which no serve answers: start serve with --listen {serving.url} (or stop "
        "this run and run the unit again); its lease's heartbeats go to the new door meanwhile\n"
    )
    try:
        wait_for(lambda: moved in said, f"the moved door (said: {said})", deadline=30, every=0.2)
        # a demote stops the run, whichever door answers (the log's word: D-336)
        ws.run("unit", "demote", "b1", "--by", "alice", "--rationale", "moved door", check=True)
        host.wait(timeout=60)
    finally:
        elsewhere.close()
    assert host.returncode == 3, said
    assert len(warnings()) == 2 and said.count(again) == 1 and said.count(moved) == 1, said
    assert any("b1's lease ended (alice demoted b1 at " in line and ": moved door): the command was stopped" in line
               for line in said), said  # fmt: skip
    assert not finish.exists() and row(ws, "b1")["status"] == "todo"


@pytest.mark.slow
def test_a_run_never_sends_its_token_to_a_plain_tcp_door_serve_moved_to(served: Any, tmp_path: Any) -> None:
    """serve started again on plain TCP (another workspace's confined unit could hold that port: a
    fourth adversarial review): the run says where serve is and that no heartbeat goes there, and
    none does; the run goes on and closes."""
    import signal

    ws, serving = served
    host, said, finish = waiting_run(ws, tmp_path, "15s")  # a heartbeat every 5 s
    serving.close()
    tcp, door = tcp_serve(ws)
    try:
        moved = (
            f"regulator: warning: b1: serve runs again, with its door at {door}; this run's unit was given "
            f"{serving.url}, which no serve answers: start serve with --listen {serving.url} (or stop this run "
            "and run the unit again); no heartbeat goes to a plain TCP door (anyone may have taken its port)\n"
        )
        wait_for(lambda: moved in said, f"the moved door (said: {said})", deadline=30, every=0.2)
    finally:
        tcp.send_signal(signal.SIGTERM)
        tcp.wait(timeout=60)
    serve_back_and_finish(ws, serving.sock, finish, host)
    assert host.returncode == 0 and said.count(moved) == 1, said


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
        # nor with its token in a lease file, at the stdio door or a command's --lease (D-276)
        taken = tmp_path / "taken.json"
        fields = {"unit": "u1", "workspace": str(ws.root), "leasedAt": "2026-12-01T00:00:00Z"}
        taken.write_text(json.dumps({**fields, "lease": token.read_text().strip()}))
        remember = ["memory", "remember", "--subject", "TZ", "--note", "n", "--evidence", "ci.log"]
        for args in (["mcp"], [*remember, "--review-by", "2026-12-20"], ["mcp"]):
            done = ws.run("--lease", str(taken), *args, input="")
            assert done.returncode == 3 and "belongs to a `unit run` that is over" in one_line(done), (
                done.stderr
            )
            # the run's mark removed (as the leftover, the host's account, may): still over (D-291)
            for mark in (ws.root / ".regulator" / "runs").glob("*.json"):
                mark.unlink()
        assert ws.digest() == before
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover, signal.SIGKILL)


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


def test_a_command_that_is_not_where_the_unit_runs_is_refused_before_the_dispatch(served: Any) -> None:
    """An operator's review: a script not yet committed to trunk is not in the unit's worktree, so
    the run dispatched the unit, failed to start it, and opened a recovery to decide; a retry after
    the commit failed the same way, in the worktree kept from the first run. Now the command is
    looked for where it will run before anything is written: a path in the worktree, a bare name
    on the unit's PATH. Exit 2, nothing written, no worktree left by the refused run."""
    ws, _ = served
    worktree = ws.root / ".worktrees" / "r1"
    (ws.root / "agents").mkdir()
    (ws.root / "agents" / "new.sh").write_text("#!/bin/sh\nexit 0\n")
    (ws.root / "agents" / "new.sh").chmod(0o755)  # in the workspace, not yet on trunk
    before = ws.digest()
    done = run_unit(ws, "r1", "--", "./agents/new.sh")
    assert done.returncode == 2, done.stderr
    assert one_line(done).startswith(
        f"regulator: './agents/new.sh' is not in the unit's worktree {worktree}, where it runs: "
    )
    assert "nothing was dispatched" in done.stderr
    assert ws.digest() == before and not worktree.exists()
    done = run_unit(ws, "r1", "--", "no-such-agent-here")
    assert done.returncode == 2 and "no 'no-such-agent-here' on the unit's PATH" in one_line(done)
    assert ws.digest() == before
    # committed, with a link to nothing beside it: a folder or a dangling link is no program (a
    # second review), refused as well; the script itself starts
    (ws.root / "agents" / "dang").symlink_to("/nonexistent/agent.sh")
    subprocess.run(["git", "add", "agents"], cwd=ws.root, check=True)
    subprocess.run(["git", "commit", "-qm", "the agent"], cwd=ws.root, check=True, env=ws.env)
    before = ws.digest()
    for command in ("./agents/dang", "./agents", "/usr/bin"):
        done = run_unit(ws, "r1", "--", command)
        assert done.returncode == 2 and "nothing was dispatched" in one_line(done), (command, done.stderr)
    assert ws.digest() == before and not worktree.exists()
    done = run_unit(ws, "r1", "--", "./agents/new.sh")
    assert done.returncode != 2 and "dispatched r1" in done.stderr, done.stderr
