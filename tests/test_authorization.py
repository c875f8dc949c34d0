"""Who may report and resolve (design §5.2, §5.4): refusals exit 3 and write nothing."""

from __future__ import annotations

from typing import Any

from tests import helpers
from tests.helpers import report_args


def test_implement_lease_cannot_report(ws: helpers.Workspace) -> None:
    u1 = ws.lease("u1")
    before = ws.digest()
    done = ws.run(*report_args(), cwd=u1)
    assert done.returncode == 3
    assert "report_intelligence" in done.stderr
    assert ws.digest() == before


def test_research_type_is_required_even_with_the_grant(ws: helpers.Workspace) -> None:
    # a unit whose profile grants the tool but whose type is not research (seed 000's gap, closed)
    ws.contract("x1", "implement", "intelligence")
    x1 = ws.lease("x1")
    before = ws.digest()
    done = ws.run(*report_args(), cwd=x1)
    assert done.returncode == 3 and "research" in done.stderr
    assert ws.digest() == before


def test_stale_or_edited_lease_is_refused(ws: helpers.Workspace) -> None:
    r1 = ws.lease("r1")
    ws.run("unit", "close", "r1", check=True)
    (r1 / ".regulator-lease.json").write_text(
        f'{{"unit": "r1", "lease": "01FORGED", "workspace": "{ws.root}", "leasedAt": "x"}}'
    )
    before = ws.digest()
    done = ws.run(*report_args(), cwd=r1)
    assert done.returncode == 3 and "not the unit's current lease" in done.stderr
    assert ws.digest() == before


def test_lease_and_by_together_or_neither_is_bad_input(ws: helpers.Workspace) -> None:
    r1 = ws.lease("r1")
    before = ws.digest()
    assert ws.run(*report_args(), "--by", "alice", cwd=r1).returncode == 2
    assert ws.run(*report_args()).returncode == 2
    assert ws.digest() == before


def test_person_without_report_grant_is_refused(ws: helpers.Workspace) -> None:
    before = ws.digest()
    done = ws.run(*report_args(), "--by", "mallory")
    assert done.returncode == 3 and "mallory" in done.stderr
    assert ws.digest() == before


def open_obligation(ws: helpers.Workspace, severity: Any = "blocking") -> Any:
    ws.run(*report_args(severity=severity, affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    return ws.json("obligations")[0]["id"]


def test_unknown_person_cannot_resolve(ws: helpers.Workspace) -> None:
    ob = open_obligation(ws)
    before = ws.digest()
    done = ws.run(
        "obligation", "resolve", ob, "--by", "mallory", "--disposition", "no-action", "--rationale", "x"
    )
    assert done.returncode == 3 and "mallory" in done.stderr
    assert ws.digest() == before


def test_empty_rationale_is_bad_input(ws: helpers.Workspace) -> None:
    ob = open_obligation(ws)
    before = ws.digest()
    done = ws.run(
        "obligation", "resolve", ob, "--by", "alice", "--disposition", "no-action", "--rationale", "  "
    )
    assert done.returncode == 2 and "rationale" in done.stderr
    assert ws.digest() == before


def test_resolving_twice_is_refused_naming_who(ws: helpers.Workspace) -> None:
    ob = open_obligation(ws)
    ws.run(
        "obligation",
        "resolve",
        ob,
        "--by",
        "alice",
        "--disposition",
        "no-action",
        "--rationale",
        "fine",
        check=True,
    )
    before = ws.digest()
    done = ws.run(
        "obligation", "resolve", ob, "--by", "alice", "--disposition", "rework", "--rationale", "again"
    )
    assert done.returncode == 3
    assert "already resolved" in done.stderr and "alice" in done.stderr
    assert ws.digest() == before


def test_a_short_ending_is_said_to_need_six_characters_and_where_the_ids_are(ws: helpers.Workspace) -> None:
    """The room shows ids by their last characters; an ending names an id from six characters on.
    A shorter one is refused as before (exit 2, nothing written), saying why and where the ids are,
    not "no obligation" for an id that does end with it."""
    ob = open_obligation(ws)
    before = ws.digest()
    resolve = ("--by", "alice", "--disposition", "no-action", "--rationale", "x")
    done = ws.run("obligation", "resolve", ob[-4:], *resolve)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"regulator: no obligation id starts with {ob[-4:]!r}, and an id's ending names it only from 6 "
        "characters on (1 end with it): give more of the ending, or see `regulator obligations --all`\n"
    )
    done = ws.run("obligation", "resolve", "zzzz", *resolve)
    assert done.stderr == (
        "regulator: no obligation with an id starting (or ending) 'zzzz'; see the ids: "
        "`regulator obligations --all`\n"
    )
    assert ws.digest() == before
    ws.run("obligation", "resolve", ob[-6:], *resolve, check=True)  # six characters name it
    assert ws.json("obligations", "--all")[0]["status"] == "resolved"


def test_unknown_disposition_and_unknown_id_are_bad_input(ws: helpers.Workspace) -> None:
    ob = open_obligation(ws)
    before = ws.digest()
    assert (
        ws.run(
            "obligation", "resolve", ob, "--by", "alice", "--disposition", "rejected", "--rationale", "x"
        ).returncode
        == 2
    )
    assert (
        ws.run(
            "obligation", "resolve", "zzzz", "--by", "alice", "--disposition", "no-action", "--rationale", "x"
        ).returncode
        == 2
    )
    assert (
        ws.run(
            "obligation",
            "resolve",
            "../etc",
            "--by",
            "alice",
            "--disposition",
            "no-action",
            "--rationale",
            "x",
        ).returncode
        == 2
    )
    assert ws.digest() == before
