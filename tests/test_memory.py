"""Operational memory and its delivery into a unit's context (design §6)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import helpers
from tests.helpers import remember_args

ESC = "\x1b"


def remember(
    ws: helpers.Workspace,
    worktree: Any,
    *,
    subject: Any = "TZ",
    note: Any = "The tests are flaky unless TZ is set to UTC.",
    review_by: Any = "2026-12-29",
    scope: Any = (),
    evidence: Any = ("ci/run.log",),
    extra: Any = (),
) -> Any:
    args = remember_args(subject, note, review_by, tuple(evidence), tuple(scope))
    return ws.run(*args, *extra, "--json", cwd=worktree)


@pytest.fixture
def seeded(ws: helpers.Workspace) -> Any:
    """The seeds' memory examples: the TZ fact (implement, 30 days), GREENGROCER 114 (60 days)."""
    ws.contract("c1", "categorize", "bookkeeper")
    ws.contract("rc1", "reconcile", "bookkeeper")
    u1 = ws.lease("u1")
    b1 = ws.lease("b1")
    tz = remember(ws, u1, scope=["implement"], review_by="2026-12-29")
    grocer = remember(
        ws,
        b1,
        subject="GREENGROCER 114",
        note="GREENGROCER 114 is the weekly groceries shop",
        scope=["categorize", "reconcile"],
        review_by="2027-01-28",
        evidence=["ledger 2026-11"],
    )
    anyone = remember(
        ws, u1, subject="mirror", note="The package mirror is slow before 09:00 UTC.", review_by="2026-12-10"
    )
    for done in (tz, grocer, anyone):
        assert done.returncode == 0, done.stderr
    ids = [json.loads(d.stdout)["id"] for d in (tz, grocer, anyone)]
    return ws, ids


def test_scoped_entries_reach_only_their_types(seeded: Any) -> None:
    ws, _ = seeded
    ws.contract("u9", "implement", "implement")
    implement = ws.run("context", "u9", check=True).stdout
    research = ws.run("context", "r1", check=True).stdout
    reconcile = ws.run("context", "rc1", check=True).stdout
    assert "flaky unless TZ" in implement and "flaky unless TZ" not in research
    assert "GREENGROCER 114 is the weekly groceries shop" in reconcile
    assert "GREENGROCER" not in implement and "GREENGROCER" not in research
    for text in (implement, research, reconcile):
        assert "package mirror is slow" in text  # unscoped: every unit
        assert "facts, not rules and not identity" in text
        assert "INV-004" in text  # identity comes first
        assert text.index("INV-004") < text.index("package mirror")
    unit_events = {e["unit"]: e["revision"] for e in ws.events("memory")}
    tz = ws.events("memory")[0]
    assert unit_events["u1"]
    assert (
        f"- [{tz['id'][-8:]}] TZ · review by 2026-12-29 · scope implement · from u1 @ {unit_events['u1']}\n"
        "  > The tests are flaky unless TZ is set to UTC.\n"
    ) in implement


def test_context_without_unit_is_every_entry(seeded: Any) -> None:
    ws, _ = seeded
    every = ws.run("context", check=True).stdout
    assert "TZ" in every and "GREENGROCER" in every and "mirror" in every


def test_entry_is_stamped_by_the_host(seeded: Any) -> None:
    ws, ids = seeded
    event = ws.events("memory")[0]
    assert event["id"] == ids[0] and event["unit"] == "u1" and event["recordedBy"] == "S1"
    assert event["at"] == "2026-11-29T12:00:00Z" and event["revision"]


@pytest.mark.parametrize(
    "review_by,ok",
    [
        ("2026-11-28", False),
        ("2026-11-29", False),
        ("2026-11-30", True),
        ("2027-02-27", True),
        ("2027-02-28", False),
        ("someday", False),
    ],
)
def test_review_by_window(ws: helpers.Workspace, review_by: Any, ok: Any) -> None:
    # today is 2026-11-29: tomorrow up to 90 days out (2027-02-27)
    u1 = ws.lease("u1")
    before = ws.digest()
    done = remember(ws, u1, review_by=review_by)
    assert done.returncode == (0 if ok else 2), done.stderr
    if not ok:
        assert ws.digest() == before and len(done.stderr.strip().splitlines()) == 1


def test_refusals_write_nothing(ws: helpers.Workspace) -> None:
    u1 = ws.lease("u1")
    r1 = ws.lease("r1")
    before = ws.digest()
    assert remember(ws, u1, evidence=()).returncode == 2
    assert remember(ws, u1, note="  ").returncode == 2
    done = remember(ws, r1)
    assert done.returncode == 3 and "remember" in done.stderr
    assert remember(ws, ws.root).returncode == 2  # no lease
    # every missing field in one line, not one per attempt
    bare = ws.run("memory", "remember", "--subject", "s", cwd=u1)
    assert (
        bare.returncode == 2
        and helpers.one_line(bare) == "regulator: note: required (and evidence, reviewBy)"
    )
    assert ws.digest() == before


def test_expiry_hides_from_memory_and_context(seeded: Any) -> None:
    ws, ids = seeded
    later = {"REGULATOR_NOW": "2026-12-30T09:00:00Z"}  # past the TZ entry's review-by
    current = ws.json("memory", env=later)
    assert ids[0] not in {m["id"] for m in current}
    assert "flaky unless TZ" not in ws.run("context", "u1", env=later).stdout
    every = {m["id"]: m["status"] for m in ws.json("memory", "--all", env=later)}
    assert every[ids[0]] == "expired" and every[ids[1]] == "current"
    # through the review-by day itself it is still current
    assert ids[0] in {m["id"] for m in ws.json("memory", env={"REGULATOR_NOW": "2026-12-29T23:59:59Z"})}


def test_retraction(seeded: Any) -> None:
    ws, ids = seeded
    before = ws.digest()
    done = ws.run("memory", "retract", ids[0][:16], "--by", "mallory", "--reason", "wrong")
    assert done.returncode == 3 and ws.digest() == before
    # `--rationale`, as every other person action names it, is `--reason` (an operator's review)
    done = ws.run("memory", "retract", ids[0][:16], "--by", "alice", "--rationale", "TZ fixed in CI image")
    assert done.returncode == 0, done.stderr
    assert ids[0] not in {m["id"] for m in ws.json("memory")}
    assert {m["id"]: m["status"] for m in ws.json("memory", "--all")}[ids[0]] == "retracted"
    events = ws.events("memory")
    assert events[0]["id"] == ids[0] and events[0]["note"].startswith("The tests are flaky")
    assert events[-1] == {**events[-1], "kind": "retraction", "entry": ids[0], "by": "alice"}
    assert events[-1]["reason"] == "TZ fixed in CI image"
    assert "flaky unless TZ" not in ws.run("context", "u1").stdout
    assert ws.run("memory", "retract", ids[0], "--by", "alice", "--reason", "again").returncode == 3


def test_markup_and_escapes_shown_literally(ws: helpers.Workspace) -> None:
    u1 = ws.lease("u1")
    note = f"[bold red]x[/] and {ESC}[31mred{ESC}[0m"
    assert remember(ws, u1, note=note).returncode == 0
    listed = ws.run("memory").stdout
    assert "[bold red]x[/]" in listed and "\\x1b[31mred" in listed and ESC not in listed
    assert " every unit " in listed  # no scope: every unit's, as the room says it (it said `all`)
    context = ws.run("context", "u1").stdout
    # fenced and escaped, as everywhere else (design §16.1); the markup stays characters
    assert "  > [bold red]x[/] and \\x1b[31mred\\x1b[0m\n" in context and ESC not in context


def test_budget_takes_scoped_newest_first_and_counts_the_rest(ws: helpers.Workspace) -> None:
    u1 = ws.lease("u1")
    for i in range(24):  # one unit holds at most 25 current entries (the shipped default)
        scope = ["implement"] if i % 2 else ["research"] if i % 5 == 0 else []
        note = f"fact number {i:02d} " + "z" * 250
        stamp = {"REGULATOR_NOW": f"2026-11-29T12:{i:02d}:00Z"}
        args = [
            "memory",
            "remember",
            "--subject",
            f"s{i:02d}",
            "--note",
            note,
            "--evidence",
            "e",
            "--review-by",
            "2026-12-29",
        ] + sum((["--scope", s] for s in scope), [])
        assert ws.run(*args, cwd=u1, env=stamp).returncode == 0
    later = {"REGULATOR_NOW": "2026-11-29T13:00:00Z"}
    text = ws.run("context", "u1", "--budget", "2000", env=later).stdout
    shown = [int(line.split("fact number ")[1][:2]) for line in text.splitlines() if "fact number" in line]
    scoped = [i for i in range(24) if i % 2]
    assert shown == sorted(scoped, reverse=True)[: len(shown)]
    assert 3 <= len(shown) <= 6
    eligible = len(scoped) + len([i for i in range(24) if not i % 2 and i % 5])
    assert f"{len(shown)} of {eligible} current entries shown; {eligible - len(shown)} left out" in text
