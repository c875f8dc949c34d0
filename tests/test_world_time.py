"""What time brings in (design §24): evidence that expires under an open obligation is re-asked,
an obligation open past its deadline is overdue and escalated, and `notify` runs once per
escalation; none of it resolves anything. Driven by `regulator tick` (what `serve` runs every 10 s)
with the pinned clock of a test workspace moved through 30 days."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import NOW, REGULATOR, make_workspace, one_line, report_args, tick
from tests.unit_run.common import alive

DEADLINES = {"critical": timedelta(hours=4), "blocking": timedelta(hours=48), "advisory": timedelta(days=14)}
START = datetime.fromisoformat(NOW.replace("Z", "+00:00"))
STEPS_H = [0, 3, 5, 24, 47, 49, 72, 96, 7 * 24, 10 * 24, 14 * 24, 15 * 24, 16 * 24, 20 * 24, 25 * 24, 30 * 24]

NOTIFY = """\
import json, os, sys
event = json.loads(sys.stdin.read())
with open(sys.argv[1], "a") as out:
    out.write(json.dumps({"event": event, "env": sorted(os.environ)}) + "\\n")
"""


PROBE = """\
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    said = "free"
except BlockingIOError:
    said = "held"
with open(sys.argv[2], "a") as out:
    out.write(said + "\\n")
sys.stdin.read()
"""


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def with_notify(ws: Any, log: Any) -> None:
    script = ws.root.parent / "notify.py"
    script.write_text(NOTIFY)
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    assert "deadlines:" in routing and "escalate:\n- alice" in routing  # shipped by init
    ws.decide("regulator/policy/routing.yaml", routing + f"notify: [{sys.executable}, {script}, {log}]\n")


def test_thirty_days_of_ticks_overdue_escalated_rechecked_once_and_nothing_resolved(ws: Any) -> None:
    log = ws.root.parent / "notified.ndjson"
    with_notify(ws, log)
    r1 = ws.lease("r1")
    # a unit's finding that expires in four days, under two blocking obligations
    ws.run(*report_args(expires_at="2026-12-03T12:00:00Z"), cwd=r1, check=True)
    # a person's advisory with no expiry; a critical one that expires in three weeks
    ws.run(
        *report_args(subject="upstream API deprecated", severity="advisory", affects=["u1"]),
        "--by",
        "alice",
        check=True,
    )
    ws.run(*report_args(subject="key leaked", severity="critical", affects=["u3"], expires_at="2026-12-20T00:00:00Z"), "--by", "alice", check=True)  # fmt: skip
    # one that expires after its obligation was dispositioned: nothing is re-asked
    ws.run(*report_args(subject="flaky test", severity="advisory", affects=["u1"], expires_at="2026-12-01T00:00:00Z"), "--by", "alice", check=True)  # fmt: skip
    # info: noted, no obligation, nothing to expire or escalate
    ws.run(
        *report_args(subject="fyi", severity="info", expires_at="2026-11-30T00:00:00Z"),
        "--by",
        "alice",
        check=True,
    )
    ws.run("signals", "route", check=True)
    flaky = next(
        o for o in ws.json("obligations") if o["severity"] == "advisory" and ws_subject(ws, o) == "flaky test"
    )
    ws.run("obligation", "resolve", flaky["id"], "--by", "alice", "--disposition", "no-action", "--rationale", "fixed", check=True)  # fmt: skip

    dispositions = count(ws, "disposition")
    for hours in STEPS_H:
        now = START + timedelta(hours=hours)
        outcomes = tick(ws, env={"REGULATOR_NOW": iso(now)})
        assert all(o["outcome"] != "failed" and "errors" not in o["outcome"] for o in outcomes.values()), (
            outcomes
        )
        check_invariants(ws, now, log)
    assert count(ws, "disposition") == dispositions  # time resolved nothing
    every = ws.json("obligations", "--all", env={"REGULATOR_NOW": iso(START + timedelta(days=30))})
    assert [o["id"] for o in every if o["status"] != "open"] == [flaky["id"]]
    # a recheck obligation is an obligation: the one open past 14 days is overdue and escalated too
    rechecks = [o for o in every if ws_kind(ws, o) == "recheck"]
    assert len(rechecks) == 2 and sorted(o["overdue"] for o in rechecks) == [False, True]
    assert ws.run("verify").returncode == 0
    overdue = ws.json("obligations", "--overdue", env={"REGULATOR_NOW": iso(START + timedelta(hours=5))})
    assert [o["severity"] for o in overdue] == ["critical"]  # at 5 h only the 4 h deadline had passed


def ws_subject(ws: Any, ob: dict) -> str:
    return next(e for e in ws.events("signals") if e.get("id") == ob["signal"])["subject"]


def ws_kind(ws: Any, ob: dict) -> str:
    shown = ws.json("obligation", "show", ob["id"])
    return "recheck" if shown["subject"].startswith("recheck: ") else "intelligence"


def count(ws: Any, kind: str) -> int:
    return sum(1 for e in ws.events("signals") if e["kind"] == kind)


def check_invariants(ws: Any, now: datetime, log: Any) -> None:
    events = ws.events("signals")
    by_kind: dict[str, list[dict]] = {}
    for event in events:
        by_kind.setdefault(event["kind"], []).append(event)
    obligations = ws.json("obligations", "--all", env={"REGULATOR_NOW": iso(now)})
    resolved = {e["obligation"] for e in by_kind.get("disposition", [])}
    opened = opened_at(events)
    for ob in obligations:
        due = opened[ob["id"]] + DEADLINES[ob["severity"]]
        past = ob["id"] not in resolved and now > due
        for kind in ("overdue", "deadline-escalated"):
            marks = [e for e in by_kind.get(kind, []) if e["obligation"] == ob["id"]]
            assert len(marks) == (1 if past else 0), (now, ob, kind, marks)
        assert ob["overdue"] == past and ob["dueAt"] == iso(due)
    # every signal that expired while an obligation it opened was open: one recheck, exactly
    expired = by_kind.get("evidence-expired", [])
    assert len({e["signal"] for e in expired}) == len(expired)
    for event in expired:
        recheck = [o for o in obligations if o["id"] == event["opens"]["id"]]
        assert len(recheck) == 1 and recheck[0]["severity"] == "advisory" and not recheck[0]["blocks"]
        assert (
            recheck[0]["owedTo"] == "S3"
            and recheck[0]["unit"] is None
            and recheck[0]["signal"] == event["signal"]
        )
    signals = {e["id"]: e for e in by_kind["signal"]}
    owed = set()
    for ob in obligations:
        signal = signals.get(ob["signal"])
        expires = signal.get("expiresAt") if signal else None
        rechecks = {e["opens"]["id"] for e in expired}
        if expires and ob["id"] not in resolved and ob["id"] not in rechecks and parse(expires) <= now:
            owed.add(signal["id"])  # type: ignore[index]
            assert ob["evidenceExpired"] and ob["stale"]
    assert owed == {e["signal"] for e in expired}
    # notify ran once per escalation, with the event on stdin and the allowlisted environment only
    escalations = by_kind.get("deadline-escalated", [])
    notified = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert sorted(n["event"]["id"] for n in notified) == sorted(e["id"] for e in escalations)
    for n in notified:
        assert set(n["env"]) <= {
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "TZ",
            "LC_CTYPE",
            "PYTHONDONTWRITEBYTECODE",
        }, n["env"]
        assert n["event"]["people"] == ["alice"] and n["event"]["kind"] == "deadline-escalated"
    # each escalation says its page went out (D-315), and no obligation says otherwise
    pages = by_kind.get("escalation-paged", [])
    assert sorted(p["escalation"] for p in pages) == sorted(e["id"] for e in escalations)
    assert all(p["sent"] is True and "problem" not in p and p["people"] == ["alice"] for p in pages), pages
    assert all("notify" not in e for e in escalations)  # a notify is set: the page is its own event
    assert all(ob["notPaged"] is None for ob in obligations)


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def opened_at(events: list[dict]) -> dict[str, datetime]:
    found = {}
    for event in events:
        if event["kind"] == "routing":
            for ob in event["obligations"]:
                found[ob["id"]] = datetime.fromisoformat(event["at"].replace("Z", "+00:00"))
        elif event["kind"] == "evidence-expired":
            found[event["opens"]["id"]] = datetime.fromisoformat(event["at"].replace("Z", "+00:00"))
    return found


def test_an_old_policy_without_deadlines_escalates_nothing(ws: Any) -> None:
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    old = "".join(
        line + "\n"
        for line in routing.splitlines()
        if not line.startswith(
            ("deadlines:", "  critical:", "  blocking:", "  advisory:", "escalate:", "- alice")
        )
    )
    assert "deadlines" not in old
    ws.decide("regulator/policy/routing.yaml", old)
    ws.run(*report_args(), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    later = {"REGULATOR_NOW": "2027-01-30T00:00:00Z"}
    assert tick(ws, env=later)["deadlines"]["outcome"] == {
        "written": 0,
        "note": "routing.yaml sets no deadlines",
    }
    assert count(ws, "overdue") == 0 and count(ws, "deadline-escalated") == 0
    assert all(not o["overdue"] and o["dueAt"] is None for o in ws.json("obligations", env=later))


def test_a_failing_notify_says_its_last_line_of_standard_error(ws: Any) -> None:
    """An operator's review: a notify that failed was "exited 3" in serve's log and nothing more;
    why it failed was on its standard error, discarded. The error line carries its last line."""
    script = ws.root.parent / "page.sh"
    script.write_text(
        "#!/bin/sh\necho 'starting' >&2\necho 'pager down: 503 from \x1b[31mhooks\x1b[0m' >&2\nexit 3\n"
    )
    script.chmod(0o755)
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing + f"notify: [{script}]\n")
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    later = {"REGULATOR_NOW": "2026-12-05T00:00:00Z"}
    done = tick(ws, env=later)["deadlines"]["outcome"]
    (error,) = done["errors"]
    assert error.endswith(f"{script} exited 3: pager down: 503 from \x1b[31mhooks\x1b[0m"), error


def test_a_page_that_did_not_go_out_is_shown_on_its_obligation(ws: Any) -> None:
    """D-315: a failed notify was one line in serve's log; the room showed the obligation overdue as
    if someone had been paged. The escalation records the failure, and every view of the
    obligation says it (its store text escaped); verify accepts the event as the host wrote it."""
    script = ws.root.parent / "page.sh"
    script.write_text("#!/bin/sh\ncat >/dev/null\necho 'pager down: 503 \x1b[31mred\x1b[0m' >&2\nexit 3\n")
    script.chmod(0o755)
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing + f"notify: [{script}]\n")
    ws.run(*report_args(subject="disk full on the build host", affects=["u1"]), "--by", "alice", check=True)
    ws.run(*report_args(subject="a later one", affects=["u3"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    later = {"REGULATOR_NOW": "2026-12-05T00:00:00Z"}
    assert len(tick(ws, env=later)["deadlines"]["outcome"]["errors"]) == 2
    (escalated, _) = [e for e in ws.events("signals") if e["kind"] == "deadline-escalated"]
    (page, _) = [e for e in ws.events("signals") if e["kind"] == "escalation-paged"]
    assert page["escalation"] == escalated["id"] and page["sent"] is False
    assert page["problem"].endswith("exited 3: pager down: 503 \x1b[31mred\x1b[0m")
    rows = ws.json("obligations", env=later)
    assert len(rows) == 2 and all(r["notPaged"].endswith("503 \x1b[31mred\x1b[0m") for r in rows)
    listed = ws.run("obligations", env=later, check=True).stdout
    assert listed.count("(not paged)") == 2 and "\x1b" not in listed
    shown = ws.run("obligation", "show", escalated["obligation"], env=later, check=True).stdout
    assert "deadline escalated to alice\n" in shown and "NOT PAGED: " in shown
    assert ": page alice by hand (notify is not run again" in shown
    assert "503 \\x1b[31mred" in shown and "\x1b" not in shown  # the script's bytes, escaped
    room = ws.run("controlroom", "--once", env=later, check=True).stdout
    assert "(not paged, overdue) disk full on the build host" in room  # printed whole (D-324)
    assert "⚠ 2 not paged" in room.splitlines()[0]  # the header counts them (D-323)
    assert ws.json("controlroom", "--once", env=later)["counts"]["notPaged"] == 2
    assert ws.run("verify", env=later).returncode == 0
    assert tick(ws, env=later)["deadlines"]["outcome"] == {"written": 0}  # not run again, nor written


def test_an_escalation_with_no_notify_set_says_no_one_was_paged(ws: Any) -> None:
    """D-323 (an operator's re-check): `init` sets `escalate` and no `notify`, so every escalation
    of a default workspace paged no one, and read exactly as one that had: `(overdue)`, `deadline
    escalated to alice`. It says so, where an operator looks first."""
    assert "notify" not in (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    later = {"REGULATOR_NOW": "2026-12-05T00:00:00Z"}
    assert tick(ws, env=later)["deadlines"]["outcome"] == {"written": 2}  # not an error: a choice
    (escalated,) = [e for e in ws.events("signals") if e["kind"] == "deadline-escalated"]
    assert escalated["notify"] == {"sent": False, "problem": "routing.yaml sets no notify"}
    (row,) = ws.json("obligations", env=later)
    assert row["notPaged"] == "routing.yaml sets no notify" and row["overdue"]
    shown = ws.run("obligation", "show", row["id"], env=later, check=True).stdout
    assert "deadline escalated to alice; NOT PAGED: routing.yaml sets no notify: page alice by hand" in shown
    room = ws.run("controlroom", "--once", env=later, check=True).stdout
    assert "⚠ 1 not paged" in room.splitlines()[0] and "(not paged, overdue)" in room
    assert ws.run("verify", env=later).returncode == 0
    assert "no record of its page" not in shown  # it says what its page did: nothing
    # paged by hand, then resolved: no longer counted nor marked (an operator's re-check); its
    # lifecycle keeps what happened
    ws.run("obligation", "resolve", row["id"], "--by", "alice", "--disposition", "no-action",
           "--rationale", "paged alice by phone", env=later, check=True)  # fmt: skip
    assert ws.json("controlroom", "--once", env=later)["counts"]["notPaged"] == 0
    assert "(not paged)" not in ws.run("obligations", "--all", env=later, check=True).stdout
    assert (
        "NOT PAGED: routing.yaml sets no notify" in ws.run("obligation", "show", row["id"], env=later).stdout
    )


def test_a_failing_notify_is_one_error_and_is_not_run_again(ws: Any) -> None:
    ws.decide(
        "regulator/policy/routing.yaml",
        (ws.root / "regulator" / "policy" / "routing.yaml").read_text() + "notify: [/nonexistent/notify]\n",
    )
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)  # opened now: due in 48 h
    later = {"REGULATOR_NOW": "2026-12-05T00:00:00Z"}
    done = tick(ws, env=later)["deadlines"]["outcome"]
    assert (
        done["written"] == 3  # overdue, escalated, and what its notify did
        and len(done["errors"]) == 1
        and "cannot run /nonexistent/notify" in done["errors"][0]
    )
    assert count(ws, "deadline-escalated") == 1  # the escalation is recorded whatever notify did
    assert tick(ws, env=later)["deadlines"]["outcome"] == {"written": 0}  # and notify is not run again


def test_a_notify_script_edited_in_the_checkout_is_not_run(ws: Any) -> None:
    """D-310: `notify` naming a script in the workspace runs it only as trunk has it."""
    ws.write("tools/page.sh", "#!/bin/sh\ncat > /dev/null\n")
    (ws.root / "tools" / "page.sh").chmod(0o755)
    ws.commit("the pager script, reviewed")
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing + "notify: [./tools/page.sh]\n")
    (ws.root / "tools" / "page.sh").write_text("#!/bin/sh\necho pwned > pwned.txt\n")
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    done = tick(ws, env={"REGULATOR_NOW": "2026-12-05T00:00:00Z"})["deadlines"]["outcome"]
    (error,) = done["errors"]
    assert "not run: ./tools/page.sh: tools/page.sh differs from trunk's" in error, error
    assert not (ws.root / "pwned.txt").exists()
    (row,) = ws.json("obligations", env={"REGULATOR_NOW": "2026-12-05T00:00:00Z"})
    assert row["notPaged"].startswith("not run: ./tools/page.sh: tools/page.sh differs from trunk's")
    assert count(ws, "deadline-escalated") == 1  # the escalation is recorded whatever notify did


def propose_routing(ws: Any, source: Any, *more: str) -> Any:
    """alice's proposal of routing.yaml with the content of `source`."""
    return ws.run(
        "identity", "propose", "--file", "regulator/policy/routing.yaml", "--content-from", str(source),
        "--rationale", "r", "--by", "alice", *more,
    )  # fmt: skip


def test_a_policy_with_a_bad_deadline_is_not_proposed(ws: Any) -> None:
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    source = ws.root.parent / "routing.yaml"
    source.write_text(routing.replace("blocking: 48h", "blocking: two days"))
    done = propose_routing(ws, source)
    assert done.returncode == 2 and "is not a duration" in one_line(done)
    source.write_text(routing + "notify: 'curl -d @- https://hooks.example/x'\n")
    done = propose_routing(ws, source, "--json")
    assert done.returncode == 2 and "notify" in one_line(done)  # a list (argv), never a shell line
    # escalated to no one: a name that is not a person of the policy (an operator's review)
    source.write_text(routing.replace("escalate:\n- alice", "escalate:\n- alice\n- nobody"))
    before = ws.digest()
    done = propose_routing(ws, source)
    assert done.returncode == 2 and ws.digest() == before
    assert "escalate names 'nobody', not a person of regulator/policy/interaction.yaml (alice)" in one_line(
        done
    )
    source.write_text(routing + "notify: [curl, -d, '@-', https://hooks.example/x]\n")
    done = propose_routing(ws, source, "--json")
    shown = ws.run("identity", "show", json.loads(done.stdout)["id"], check=True).stdout
    assert "! runs curl -d @- https://hooks.example/x on the host (notify in routing.yaml" in shown


BOMB = 'l0: &l0 ["a", "a", "a", "a", "a", "a", "a", "a", "a", "a"]\n' + "".join(
    f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]\n" for n in range(1, 9)
)


@pytest.mark.parametrize(
    ("added", "said"),
    [
        (
            BOMB,
            "routing.yaml: YAML regulator does not read (aliases repeat 1,234,567,880 values (at most 100,000): write the values out)",
        ),
        (
            "x: &a [*a]\n",
            ": an alias refers to a value that contains it); a policy that cannot be read is not put in force",
        ),
        (
            f"notify: [&b {'x' * 10_000}, {', '.join(['*b'] * 200)}]\n",
            "aliases repeat 2,000,000 characters of text (at most 1,048,576): write the values out",
        ),
        ("? 0x" + "f" * 4000 + "\n: 1\n", "a number of 4,002 characters (at most 64)"),
        ("x: 1" + ":0" * 100_000 + "\n", "a number of 200,001 characters (at most 64)"),
    ],
    ids=["nested-aliases", "itself", "one-long-value", "hex-key", "sexagesimal"],
)
def test_a_policy_whose_aliases_repeat_too_much_is_refused_at_once(ws: Any, added: str, said: str) -> None:
    """A kilobyte of nested YAML aliases is ten billion values to every reader that walks them (an
    adversarial review: it held serve's write lock for minutes), and an alias to a value containing
    it is a value without end; a hex key of 4,000 digits cannot be written as text (a traceback in
    serve's log) and a sexagesimal `1:0:0:…` costs quadratic time to build (a second review). All
    refused as YAML regulator does not read, exit 2, nothing written, whoever proposes (the door
    parses with the same function). Merge keys and modest aliases read as before
    (tests/test_frontmatter.py)."""
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    source = ws.root.parent / "routing.yaml"
    source.write_text(routing + added)
    before = ws.digest()
    done = propose_routing(ws, source)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert said in one_line(done)
    assert ws.digest() == before


def test_a_tick_is_a_host_operation(ws: Any) -> None:
    worktree = ws.lease("r1")
    done = ws.run("serve", "--once-tick", cwd=worktree)
    assert done.returncode == 3 and "host operation" in one_line(done)


def test_confined_commands_lose_their_whole_process_group_at_the_time_limit(tmp_path: Any) -> None:
    from engine.base import confine

    marker = tmp_path / "survived"
    child = tmp_path / "child.py"
    child.write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w').write('x')\n")
    parent = tmp_path / "parent.py"
    parent.write_text(
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\ntime.sleep(30)\n"
    )
    ran = confine.run([sys.executable, str(parent)], stdin=b"", timeout=1, cwd=tmp_path)
    assert ran.code is None and "killed after its 1 s time limit" in ran.problem
    import time

    time.sleep(3.5)
    assert not marker.exists()  # the grandchild went with its group
    ran = confine.run(
        [sys.executable, "-c", "import os, sys; print(sorted(os.environ))"],
        stdin=b"",
        timeout=10,
        cwd=tmp_path,
    )
    assert ran.code == 0 and set(eval(ran.stdout)) <= set(confine.ENVIRONMENT) | {
        "LC_CTYPE",
        "PYTHONDONTWRITEBYTECODE",
    }
    assert "REGULATOR_SIGNING_KEY" in os.environ  # the test's own environment holds more than that


@pytest.mark.parametrize("backend", ["files", "postgresql"])
def test_the_duties_write_once_from_a_checkpoint_and_on_postgresql(
    tmp_path: Any, request: Any, backend: Any
) -> None:
    """A duty knows what it wrote from the read model, restored from a checkpoint or folded from a
    PostgreSQL store's mirror: a second tick writes nothing, and every reader agrees."""
    url = None
    if backend == "postgresql":
        server = request.getfixturevalue("pg_server")
        url = server.url(server.database())
    ws = make_workspace(tmp_path, store=url)
    every = {"REGULATOR_CHECKPOINT_BYTES": "0"}  # a writer leaves a checkpoint whenever it folded
    off = {"REGULATOR_CHECKPOINT": "off"}
    ws.run(*report_args(expires_at="2026-12-01T00:00:00Z"), "--by", "alice", check=True, env=every)
    ws.run("signals", "route", check=True, env=every)
    later = {"REGULATOR_NOW": "2026-12-03T00:00:00Z"}
    first = tick(ws, env=every | later)
    assert first["evidence"]["outcome"]["written"] == 1 and first["deadlines"]["outcome"]["written"] == 4
    again = tick(ws, env=every | later)
    assert all(again[d]["outcome"]["written"] == 0 for d in ("evidence", "deadlines", "sensors"))
    for args in (["obligations", "--all", "--json"], ["signals", "--json"]):
        assert ws.run(*args, env=every | later).stdout == ws.run(*args, env=off | later).stdout
    shown = ws.json("obligation", "show", ws.json("obligations")[0]["id"], env=later)
    kinds = [e["kind"] for e in shown["history"]]
    assert kinds == ["routing", "evidence-expired", "overdue", "deadline-escalated"]
    assert shown["evidenceExpired"] and shown["overdue"]
    assert ws.run("verify", env=later).returncode == 0


def test_a_recovery_obligation_and_a_question_are_escalated_once_across_ticks(ws: Any, tmp_path: Any) -> None:
    """A failed run's recovery obligation opens in units.ndjson, a question's in signals.ndjson:
    past the deadline each gets one overdue and one deadline-escalated event, notify runs once for
    each, later ticks write nothing, and verify finds nothing (design §24)."""
    from tests.serving import Serving

    log = ws.root.parent / "notified.ndjson"
    with_notify(ws, log)
    serving = Serving(ws)
    try:
        failed = ws.run("unit", "run", "b1", "--", "false")
        assert failed.returncode == 1, failed.stderr
        asks = 'echo \'{"question": "Which version?"}\' | "$0" door call ask_human --json-input -'
        asked = ws.run("unit", "run", "r1", "--harness", "env", "--", "sh", "-c", asks, REGULATOR)
        assert asked.returncode == 0, asked.stderr
    finally:
        serving.close()
    kinds = {ws_kind_of(ws, o) for o in ws.json("obligations")}
    assert kinds == {"recovery", "question"}, ws.json("obligations")
    later = {"REGULATOR_NOW": iso(START + timedelta(days=15))}
    written = [tick(ws, env=later)["deadlines"]["outcome"]["written"] for _ in range(3)]
    assert written == [6, 0, 0]  # two overdue, two escalated, two pages
    for ob in ws.json("obligations", env=later):
        assert ob["overdue"], ob
        for kind in ("overdue", "deadline-escalated"):
            assert (
                sum(1 for e in ws.events("signals") if e["kind"] == kind and e["obligation"] == ob["id"]) == 1
            )
    notified = [json.loads(line)["event"]["obligation"] for line in log.read_text().splitlines()]
    assert sorted(notified) == sorted(o["id"] for o in ws.json("obligations", env=later))
    done = ws.run("verify", env=later)
    assert done.returncode == 0, done.stdout + done.stderr


def ws_kind_of(ws: Any, ob: dict) -> str:
    return ws.json("obligation", "show", ob["id"])["kind"]


def test_notify_runs_with_the_decide_lock_free(ws: Any) -> None:
    """A notify that takes its time (a webhook down, curl waiting 20 s) stalled every write of the
    fleet: the tick ran it inside the decide lock, one escalation after another (an operator's
    review: a person's resolve waited 18.8 s). The escalations are written under the lock; notify
    runs after, the lock free (the probe, run as notify, takes it without waiting). One escalation:
    a tick's notifies run at once (D-246), and two probes would find each other's hold."""
    probe, said = ws.root.parent / "probe.py", ws.root.parent / "said.txt"
    probe.write_text(PROBE)
    lock = ws.root / ".regulator" / "decide.lock"
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide(
        "regulator/policy/routing.yaml", routing + f"notify: [{sys.executable}, {probe}, {lock}, {said}]\n"
    )
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    done = tick(ws, env={"REGULATOR_NOW": "2026-12-05T00:00:00Z"})["deadlines"]["outcome"]
    assert done["written"] == 3 and "errors" not in done, done  # overdue, escalated, paged
    assert said.read_text().splitlines() == ["free"]


def overdue_with_a_slow_notify(ws: Any) -> Path:
    """u1 held by an obligation past its deadline at 2026-12-05, and a notify that writes its pid
    to the file returned, then sleeps ten minutes."""
    pid_file = ws.root.parent / "notify.pid"
    script = ws.root.parent / "slow-notify.sh"
    script.write_text(
        f"#!/bin/sh\necho $$ > {pid_file}.part && mv {pid_file}.part {pid_file}\nexec sleep 600\n"
    )
    script.chmod(0o755)
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing + f"notify: [{script}]\n")
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    return pid_file


def test_a_notify_running_when_serve_is_stopped_goes_with_it(ws: Any) -> None:
    """An adversarial review of D-240: `serve` stopped by SIGTERM while a notify ran left the
    notify (in a session of its own) running with nothing left to kill it at its time limit. What
    serve runs of a declared command is killed, its group with it, as serve exits."""
    import signal

    from tests.serving import Serving, wait_for

    pid_file = overdue_with_a_slow_notify(ws)
    serving = Serving(ws, env={"REGULATOR_NOW": "2026-12-05T00:00:00Z"})  # past the deadline: notify runs
    try:
        wait_for(pid_file.exists, "the notify started")
        notify = int(pid_file.read_text())
        serving.proc.send_signal(signal.SIGTERM)
        serving.proc.wait(timeout=60)
    finally:
        serving.close()

    wait_for(lambda: not alive(notify), "the notify killed with serve")
    # serve records what its notify did as it stops: not paged (D-323)
    (row,) = ws.json("obligations", env={"REGULATOR_NOW": "2026-12-05T00:00:00Z"})
    assert row["notPaged"].endswith("killed unfinished, as the process running it stopped"), row


def test_notifies_of_one_tick_run_at_once(ws: Any) -> None:
    """One after another, fifty escalations and a webhook that never answers held the tick for
    fifty times 30 s, and the lease expiry that runs in the next tick with it. A tick's notifies
    run at once (16 at a time): here each waits until the other has started, which one after
    another never happens (the first gives up, exit 1)."""
    folder = ws.root.parent / "started"
    folder.mkdir()
    script = ws.root.parent / "together.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"touch {folder}/$$\n"
        "i=0\n"
        f'while [ "$(ls {folder} | wc -l)" -lt 2 ]; do\n'
        "  i=$((i + 1)); [ $i -gt 200 ] && exit 1\n"
        "  sleep 0.05\n"
        "done\n"
    )
    script.chmod(0o755)
    routing = (ws.root / "regulator" / "policy" / "routing.yaml").read_text()
    ws.decide("regulator/policy/routing.yaml", routing + f"notify: [{script}]\n")
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run(*report_args(subject="second", affects=["u3"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    done = tick(ws, env={"REGULATOR_NOW": "2026-12-05T00:00:00Z"})["deadlines"]["outcome"]
    assert done == {"written": 6}, done  # two overdue, two escalated, two pages: both notifies exit 0
    assert len(list(folder.iterdir())) == 2


def test_a_once_tick_stopped_by_sigterm_leaves_no_notify_running(ws: Any) -> None:
    """An operator's review of D-245: cron's or systemd's SIGTERM to `serve --once-tick` ended it
    without its exit hooks, and the notify it ran stayed, past its time limit. SIGTERM now kills
    what it runs, and it exits 143."""
    import signal
    import subprocess

    from tests.helpers import REGULATOR
    from tests.serving import wait_for

    pid_file = overdue_with_a_slow_notify(ws)
    env = dict(ws.env, REGULATOR_NOW="2026-12-05T00:00:00Z")
    ticking = subprocess.Popen(
        [REGULATOR, "serve", "--once-tick"], cwd=ws.root, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(pid_file.exists, "the notify started")
        notify = int(pid_file.read_text())
        ticking.send_signal(signal.SIGTERM)
        _, err = ticking.communicate(timeout=60)
    finally:
        if ticking.poll() is None:
            os.killpg(ticking.pid, signal.SIGKILL)
    assert ticking.returncode == 143, err
    assert "Traceback" not in err

    wait_for(lambda: not alive(notify), "the notify killed with the tick")
    # the tick stopped before it recorded what its notify did: said, never read as a page that
    # went out (an operator's re-check of D-323)
    later = {"REGULATOR_NOW": "2026-12-05T00:00:00Z"}
    (row,) = ws.json("obligations", env=later)
    shown = ws.run("obligation", "show", row["id"], env=later).stdout
    assert row["notPaged"] is None and "no record of its page: its notify may still be running" in shown, (
        shown
    )
