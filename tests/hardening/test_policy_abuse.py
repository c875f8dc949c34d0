"""A unit's policy proposals and the world's inputs, as an adversarial review used them (D-301): a
floor that backtracks, durations past the clock's range, loosenings that read as plain `pending`, a
feed a unit writes, and lockfiles or feeds nested to exhaust the reader."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.test_world_osv import DJANGO, declare, sensors_yaml, write_feed


def propose(ws: Any, relative: str, text: str) -> Any:
    source = ws.root.parent / "proposed.yaml"
    source.write_text(text)
    return ws.run(
        "identity", "propose", "--file", relative, "--content-from", str(source), "--rationale", "tidy",
        "--by", "alice", "--json",
    )  # fmt: skip


def shown(ws: Any, relative: str, text: str) -> str:
    done = propose(ws, relative, text)
    assert done.returncode == 0, done.stderr
    return str(ws.run("identity", "show", json.loads(done.stdout)["id"], check=True).stdout)


ROUTING = "regulator/policy/routing.yaml"
SENSORS = "regulator/policy/sensors.yaml"


def test_a_floor_that_backtracks_and_a_duration_past_a_century_are_refused(ws: Any) -> None:
    """The review's wedge: a floor `(\\w+\\s?)+:\\s*secret`, proposed as a tightening and accepted,
    held the router (and serve, and every writer behind the decide lock) without end on one report
    of 60 characters; `deadlines: {advisory: 3000000d}` made every reader of the deadlines fail and
    the escalation duty fail on every tick. Each is refused at propose: exit 2, nothing written."""
    text = (ws.root / ROUTING).read_text()

    def floor(pattern: str) -> str:
        return text.replace(
            "floors:\n", f"floors:\n- name: leak\n  pattern: {json.dumps(pattern)}\n  atLeast: critical\n", 1
        )

    before = ws.digest()
    for bad, said in (
        (floor(r"(\w+\s?)+:\s*secret"), "may take without end on a short text"),
        (text.replace("advisory: 14d", "advisory: 3000000d"), "'3000000d' is longer than a hundred years"),
        # the re-check's: alternatives inside an optional group under a bounded repeat; a possessive
        # outer repeat; a bound `regex` expands into gigabytes; 250 groups `regex` cannot compile;
        # a POSIX class that `regex` reads and `re` does not; 65 floors
        (floor(r"(?:(?:\w|\w\w)?){8,31}:secret"), "alternatives under a repeat"),
        (floor(r"(?:(?:\w+\s?)+:)*+x"), "a repeated part inside a repeated group"),
        (floor(r"secret:\s*x{4294967294}"), "a repeat bound over 1,000"),
        (floor("(?:" * 250 + "x*" + ")" * 250 + "secret"), "pattern does not compile"),
        (floor("INV-[[:digit:]]{3}"), "a set inside a set"),
        (
            text.replace("floors:\n", "floors:\n" + "- {name: f, pattern: x, atLeast: info}\n" * 65, 1),
            "floors",
        ),
    ):
        assert bad != text
        done = propose(ws, ROUTING, bad)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert ws.digest() == before


# what the shape check lets through and no engine searches in linear time: 2^32 ways to split a word
SPLITS = r"(?:\w|\w\w)" * 32 + ":secret"
ROUTE = """
import json, sys
from identity.policy import parse_policy
from engine.commands.router import derive_severity
floors = "".join("- {name: f%d, pattern: %s, atLeast: critical}\\n" % (i, json.dumps(sys.argv[1])) for i in range(64))
policy = parse_policy("routing.yaml", "severities: [info, advisory, blocking, critical]\\nblocksAtOrAbove: blocking\\n"
    "floors:\\n" + floors + "rules:\\n  intelligence-signal: {atOrAbove: advisory, owedTo: S3}\\n")
derived, applied = derive_severity({"reportedSeverity": "info", "subject": "a" * 70, "observation": "a" * 60000}, policy)
print(derived, len(applied))
"""


def test_a_floor_no_shape_check_sees_is_cut_and_applies() -> None:
    """The re-check's wedge: `(?:\\w|\\w\\w)` written out 32 times passed both shape checks and
    ran under plain `re` (hours on 70 characters); 100 floors cut at 50 ms each held one signal
    for 6 s. Alternatives count in `bounded`, so it is searched under the time limit, and a
    signal's timed searches share 0.2 s: 64 such floors (the most a policy holds) route one
    signal, each applied (fail closed), in a fresh process bounded by its own timeout."""
    from identity.policy import backtracks, bounded

    assert backtracks(SPLITS) is None and not bounded(SPLITS)
    done = subprocess.run([sys.executable, "-c", ROUTE, SPLITS], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "info 0\n"), done.stderr  # answered: no `:secret`
    slow = ".*a" * 9 + ".*b"  # polynomial: no shape check refuses it, and `regex` takes its time
    assert backtracks(slow) is None and not bounded(slow)
    done = subprocess.run([sys.executable, "-c", ROUTE, slow], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "critical 64\n"), done.stderr  # cut, so applied


def test_the_routers_time_limit_applies_a_floor_it_cannot_decide() -> None:
    """The net under the shape check: a search past its time limit counts as a match (a floor only
    raises a severity: fail closed), in a fresh process bounded by its own timeout."""
    code = "from engine.commands.router import _searcher; print(bool(_searcher(r'(.*a){25}b')[0]('a' * 100)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr


def test_routing_and_sensor_proposals_that_hold_or_sense_less_are_marked(ws: Any) -> None:
    """Each read as a plain `pending`: the intelligence rule's atOrAbove raised (every blocking
    signal `noted`, nothing held), a deadline or the escalation taken away; a sensor removed, its
    severity lowered, its feed moved, a unit it served dropped, or it run less often."""
    text = (ws.root / ROUTING).read_text() + "notify: [/bin/true]\n"
    ws.decide(ROUTING, text)
    loose = text.replace("atOrAbove: advisory", "atOrAbove: critical").replace("  blocking: 48h\n", "")
    loose = loose.replace("escalate:\n- alice\n", "escalate: []\n").replace("notify: [/bin/true]\n", "")
    assert "48h" not in loose and "escalate: []" in loose and "notify" not in loose
    review = shown(ws, ROUTING, loose)
    assert (
        "! rule intelligence-signal: atOrAbove advisory -> critical (fewer signals open an obligation"
        in review
    )
    assert "! deadline for blocking: 48h -> none (later or no escalation" in review
    assert "! escalate: alice -> no one" in review
    assert "! removes notify: escalations notify no one" in review  # the re-check's
    # an operator's review: a deadline cut to 20 s escalated every older obligation at the next tick
    # and ran notify for each, with no word at review; so does a deadline where there was none
    sooner = text.replace("  blocking: 48h\n", "  blocking: 20s\n").replace("  advisory: 14d\n", "")
    review = shown(ws, ROUTING, sooner)
    assert (
        "! deadline for blocking: 48h -> 20s (sooner: each open blocking obligation older than 20s is "
        "escalated at serve's next tick, notify run for each; proposed by" in review
    ), review
    assert "! deadline for advisory: 14d -> none (later or no escalation" in review
    ws.decide(ROUTING, sooner)
    review = shown(ws, ROUTING, text)
    assert (
        "! deadline for advisory: none -> 14d (sooner: each open advisory obligation older than 14d" in review
    )
    assert "deadline for blocking" in review  # 20s -> 48h: later
    scan = "  scan:\n    kind: command\n    command: [/bin/true]\n    timeout: 60s\n"
    declare(ws, scan)
    old = sensors_yaml(scan)
    assert (
        "severity: advisory" in old
        and "feed: feeds/osv" in old
        and "every: 1h" in old
        and "staleAfter: 7d" in old
    )
    less = old.replace("severity: advisory", "severity: info").replace("feed: feeds/osv", "feed: feeds/other")
    less = (
        less.replace("every: 1h", "every: 30d")
        .replace("[u1, u3]", "[u1]")
        .replace("    staleAfter: 7d\n", "")
    )
    review = shown(ws, SENSORS, less.replace("timeout: 60s", "timeout: 1s"))
    assert "! lowers sensor osv's severity: advisory -> info" in review
    assert "! moves sensor osv's feed: feeds/osv -> feeds/other" in review
    assert "! sensor osv runs less often: every 1h -> 30d" in review
    assert "! sensor osv: services/api/requirements.txt no longer serves u3" in review
    assert (
        "! sensor osv's staleAfter: 7d -> none (a stalled feed said later or never" in review
    )  # the re-check's
    assert "! sensor scan's timeout: 60s -> 1s" in review  # the re-check's
    assert "! removes sensor osv" in shown(ws, SENSORS, "sensors: {}\n")
    # lower and higher as the routing policy in force orders its severities (RoutingPolicy.rank),
    # never a list of the shipped ones written again (the reread): `urgent` above critical
    assert text.startswith("# Routing policy") and "- critical\nblocksAtOrAbove" in text
    ws.decide(
        ROUTING, text.replace("- critical\nblocksAtOrAbove", "- critical\n- urgent\nblocksAtOrAbove", 1)
    )
    higher = old.replace("severity: advisory", "severity: urgent")
    assert "! lowers sensor osv's severity" not in shown(ws, SENSORS, higher)
    ws.decide(SENSORS, higher)
    assert "! lowers sensor osv's severity: urgent -> critical" in shown(
        ws, SENSORS, higher.replace("urgent", "critical")
    )


def test_a_feed_where_a_unit_writes_is_never_read(ws: Any) -> None:
    """The review's hold evasion: a feed in a unit's own worktree let the unit write the advisories
    (holds on other units, or an alias at `info` that kept the world's critical record from being
    raised). `.worktrees/` is refused at propose; any worktree a dispatch recorded, at the run."""
    done = propose(ws, SENSORS, sensors_yaml().replace("feed: feeds/osv", "feed: .worktrees/x1/feed"))
    assert done.returncode == 2 and "a feed is never in .regulator/, .git/ or .worktrees/" in done.stderr
    declare(ws)
    write_feed(ws.root / "feeds" / "osv", [DJANGO])
    ws.run("unit", "dispatch", "u1", "--worktree", str(ws.root / "feeds"), check=True)
    ran = ws.run("sensors", "run", "osv")
    assert (
        ran.returncode == 1 and "feed feeds/osv leads into unit u1's worktree feeds: not read" in ran.stderr
    )
    assert not [e for e in ws.events("signals") if e["kind"] == "signal"]
    assert ws.json("sensors")[0]["outcome"] == "error"  # said as failing, never as clean
    # the re-check's: dispatched again elsewhere, the unit's first worktree is still one it wrote
    (ws.root / "wt" / "u1b").mkdir(parents=True)
    ws.run("unit", "demote", "u1", "--by", "alice", "--rationale", "elsewhere", check=True)
    ws.run("unit", "dispatch", "u1", "--worktree", str(ws.root / "wt" / "u1b"), check=True)
    ran = ws.run("sensors", "run", "osv")
    assert ran.returncode == 1 and "leads into unit u1's worktree feeds: not read" in ran.stderr, ran.stderr
    assert not [e for e in ws.events("signals") if e["kind"] == "signal"]


def test_a_lockfile_or_a_feed_nested_to_exhaust_the_reader_is_one_error(ws: Any) -> None:
    """A poetry.lock nested 5,000 deep on trunk raised RecursionError out of the whole sensor: a
    traceback, no run recorded, every display saying it had never run, and no other lockfile
    matched. Now that lockfile is one error; a feed's folders past 64 levels are one error too;
    the rest is matched and the run recorded."""
    declare(ws)
    ws.write("tools/poetry.lock", "x = " + "[" * 5000 + "]" * 5000 + "\n")
    ws.commit("a lockfile nested deep")
    write_feed(ws.root / "feeds" / "osv", [DJANGO])
    deep = ws.root / "feeds" / "osv"
    for _ in range(80):
        deep = deep / "a"
    write_feed(deep, [DJANGO | {"id": "GHSA-deep"}])
    ran = ws.run("sensors", "run", "osv")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "lockfile tools/poetry.lock on trunk: not read: nested too deeply" in ran.stderr
    assert "a folder nested deeper than 64 levels: not read" in ran.stderr
    raised = [e["subject"] for e in ws.events("signals") if e["kind"] == "signal"]
    assert raised == ["Django 3.2.0: GHSA-w24h-v9qh-8gxj"]  # the requirements file still matched
    assert ws.json("sensors")[0]["outcome"] == "error"


INTERACTION = "regulator/policy/interaction.yaml"


def test_a_persons_emails_or_resolve_and_a_looser_intake_or_memory_are_marked(ws: Any) -> None:
    """An adversarial review's unmarked loosenings: a unit's address added to a person's `emails`
    (lint's Authorized-by then trusts the unit's commits as that person's), which severities a
    person may resolve, a longer `intakeDebtDays` and a larger `memory.maxCurrentPerUnit`."""
    import yaml

    policy = yaml.safe_load((ws.root / INTERACTION).read_text())
    alice = policy["people"]["alice"]
    alice["emails"] = [*(alice.get("emails") or []), "r6-unit@fleet.invalid"]
    assert "critical" in alice["resolve"]
    alice["resolve"] = [s for s in alice["resolve"] if s != "critical"]
    review = shown(ws, INTERACTION, yaml.safe_dump(policy, sort_keys=False))
    assert "! changes alice's emails: " in review and "r6-unit@fleet.invalid'] (a commit by any" in review
    assert "! changes what alice may resolve: ['advisory', 'blocking', 'critical', 'info'] -> " in review

    text = (ws.root / ROUTING).read_text()
    assert "intakeDebtDays: 14\n" in text and "maxCurrentPerUnit" not in text
    looser = text.replace("intakeDebtDays: 14\n", "intakeDebtDays: 3650\nmemory: {maxCurrentPerUnit: 1000}\n")
    review = shown(ws, ROUTING, looser)
    assert "! intakeDebtDays: 14 -> 3650 (a new intake entry waits longer" in review
    assert "! memory.maxCurrentPerUnit: 25 -> 1000 (each unit may hold more memory" in review
    tighter = shown(ws, ROUTING, text.replace("intakeDebtDays: 14\n", "intakeDebtDays: 7\n"))
    assert "! intake" not in tighter and "! memory" not in tighter


def test_a_command_that_could_never_run_is_refused_at_review(ws: Any) -> None:
    """D-310: `python3 -m X` (in any form) and the top named as a program are never run; a
    proposal holding one is refused when proposed, not accepted to fail at every run."""
    for argv in ('["python3", "-m", "tools.scan"]', '["python3", "-um", "tools.scan"]', '["python3", "."]'):
        sensors = f"sensors:\n  scan:\n    kind: command\n    command: {argv}\n    every: 1h\n    severity: advisory\n"
        done = propose(ws, SENSORS, sensors)
        assert done.returncode == 2, done.stderr
        assert (
            "Python would read the workspace's top as a whole" in done.stderr and done.stderr.count("\n") == 1
        )
    routing = (ws.root / ROUTING).read_text() + "notify: [python3, -mtools.page]\n"
    done = propose(ws, ROUTING, routing)
    assert (
        done.returncode == 2
        and "proposed routing.yaml: notify -mtools.page: Python would read" in done.stderr
    )
    assert not [e for e in ws.events("identity") if e.get("kind") == "proposal"]
