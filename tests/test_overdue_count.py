"""The room's header counts overdue obligations from an account its fold's worker keeps
(engine.read.deadlines.OverdueCount): after any appends, closes, moves of the clock
and changes of the deadlines, a count from it is what `Deadlines.overdue` says of every obligation,
or none at all (the header then counts them itself)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base import clock
from engine.read.deadlines import Deadlines, OverdueCount
from engine.read.model import Closing, Obligation, ObligationKind, ObligationStatus

START = datetime(2026, 11, 29, 12, tzinfo=UTC)
SEVERITIES = ["critical", "blocking", "advisory", "info"]


def opened_text(seconds: int, form: str) -> str:
    """An opening time: canonical (as the router writes it), or a form no router writes."""
    moment = START + timedelta(seconds=seconds)
    if form == "canonical":
        return clock.iso(moment)
    if form == "offset":
        return moment.isoformat()  # 2026-11-29T12:00:00+00:00
    if form == "twenty":  # 20 characters, not canonical
        return moment.strftime("%Y-%m-%dT%H:%M:%S+")
    return "not a time"


def obligation(n: int, severity: str, opened: str) -> Obligation:
    return Obligation(
        f"ob-{n}", "u1", ObligationKind.INTELLIGENCE, "s", severity, True, "S3", opened, "subject",
        None, ObligationStatus.OPEN, None, None, None, None, [0],
    )  # fmt: skip


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from(SEVERITIES),
            st.integers(0, 3 * 86400),
            st.sampled_from(["canonical"] * 6 + ["offset", "twenty", "garbage"]),
        ),
        st.tuples(st.just("close"), st.integers(0, 1000)),
        st.tuples(st.just("time"), st.integers(-3600, 2 * 86400)),
        st.tuples(st.just("deadlines"), st.dictionaries(st.sampled_from(SEVERITIES), st.integers(1, 86400))),
        st.just(("keep",)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps=steps, first=st.dictionaries(st.sampled_from(SEVERITIES), st.integers(1, 86400), min_size=1))
def test_a_count_from_the_kept_account_is_what_overdue_says_of_every_obligation(
    steps: Any, first: dict[str, int]
) -> None:
    obligations: dict[str, Obligation] = {}
    kept = OverdueCount()
    now, seconds, n, counted = START + timedelta(days=1), dict(first), 0, 0
    for step in steps:
        if step[0] == "add":
            obligations[f"ob-{n}"] = obligation(n, step[1], opened_text(step[2], step[3]))
            n += 1
        elif step[0] == "close" and obligations:
            ob = list(obligations.values())[step[1] % len(obligations)]
            if ob.status == ObligationStatus.OPEN:
                ob.close(Closing(ObligationStatus.RESOLVED, "no-action", "alice", "r", clock.iso(now), 1))
        elif step[0] == "time":
            now += timedelta(seconds=step[1])
        elif step[0] == "deadlines":
            seconds = step[1]
        judge = Deadlines(seconds, now)
        if step[0] == "keep":
            kept.keep(obligations, judge)
        expected = sum(1 for ob in obligations.values() if judge.overdue(ob))
        found = kept.count(obligations, judge)
        assert found in (None, expected)
        if step[0] == "keep":
            assert found == expected
            counted += 1
