"""The room's one pass over the obligations (engine.read.openpass, D-333) says what the three
separate passes it replaced said: the header's open, blocking, stale and overdue counts, the
obligations view's keys and the units its unit column is measured by."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base import clock
from engine.read.deadlines import Deadlines
from engine.read.model import Closing, Obligation, ObligationKind, ObligationStatus
from engine.read.openpass import open_pass
from engine.read.queries import is_stale

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
SEVERITIES = ["critical", "blocking", "advisory", "info", "odd"]


def opened_text(seconds: int, form: str) -> str:
    moment = NOW - timedelta(seconds=seconds)
    if form == "canonical":
        return clock.iso(moment)
    if form == "offset":
        return moment.isoformat()
    if form == "twenty":  # 20 characters ending in Z, not canonical: compared as text all the same
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + "Z"
    return "not a time"


OBLIGATIONS = st.lists(
    st.tuples(
        st.sampled_from(SEVERITIES),
        st.booleans(),  # blocks
        st.one_of(st.none(), st.sampled_from(["u1", "u22", "unité-3", "", "ｗｉｄｅ"])),  # unit
        st.one_of(st.none(), st.integers(-86400, 86400)),  # expires, seconds from now
        st.integers(-3600, 3 * 86400),  # opened, seconds before now
        st.sampled_from(["canonical"] * 5 + ["offset", "twenty", "garbage"]),
        st.sampled_from([None, ObligationStatus.RESOLVED, ObligationStatus.ESCALATED]),  # closed?
    ),
    max_size=40,
)


def built(specs: list[Any]) -> dict[str, Obligation]:
    obligations: dict[str, Obligation] = {}
    for n, (severity, blocks, unit, expires, opened, form, closed) in enumerate(specs):
        ob = Obligation(
            f"ob-{n}", unit, ObligationKind.INTELLIGENCE, "s", severity, blocks, "S3", opened_text(opened, form),
            "subject", None if expires is None else NOW + timedelta(seconds=expires),
        )  # fmt: skip
        if closed is not None:
            ob.close(Closing(closed, "no-action", "alice", "r", clock.iso(NOW), 1))
        obligations[ob.id] = ob
    return obligations


class _State:
    now = NOW


@settings(max_examples=400, deadline=None)
@given(
    specs=OBLIGATIONS,
    seconds=st.dictionaries(st.sampled_from(SEVERITIES), st.integers(1, 2 * 86400)),
    kept=st.one_of(st.none(), st.integers(0, 50)),
)
def test_one_pass_is_the_three_passes(specs: list[Any], seconds: dict[str, int], kept: int | None) -> None:
    obligations = built(specs)
    judge = Deadlines(seconds, NOW)
    found = open_pass(obligations, NOW, judge, kept)
    state: Any = _State()
    open_ = [ob for ob in obligations.values() if ob.status == ObligationStatus.OPEN]
    assert found.keys == [k for k, ob in obligations.items() if ob.status == ObligationStatus.OPEN]
    assert found.blocking == sum(1 for ob in open_ if ob.blocks)
    assert found.stale == sum(1 for ob in open_ if is_stale(state, ob))
    assert found.overdue == (
        sum(1 for ob in obligations.values() if judge.overdue(ob)) if kept is None else kept
    )
    assert found.units == {ob.unit for ob in obligations.values()}


def test_an_obligation_opened_at_a_time_no_router_writes_is_judged_by_its_deadline() -> None:
    """A form the text comparison cannot order is asked of Deadlines.overdue (here: late, and not)."""
    obligations = built(
        [
            ("blocking", True, "u1", None, 7200, "offset", None),
            ("blocking", True, "u1", None, 60, "offset", None),
        ]
    )
    found = open_pass(obligations, NOW, Deadlines({"blocking": 3600}, NOW), None)
    assert (found.keys, found.blocking, found.overdue) == (["ob-0", "ob-1"], 2, 1)
