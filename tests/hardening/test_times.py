"""Times at the ends of the calendar (an adversarial review, D-335): every time the engine writes is
TIME_FORM, four-digit year and all; a time or date given before 1970 is bad input (exit 2, one line),
never a traceback from the arithmetic after it."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from engine.base import clock
from tests import helpers
from tests.helpers import one_line


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)))
def test_every_time_written_is_time_form(moment: datetime) -> None:
    text = clock.iso(moment)
    assert clock._TIME.fullmatch(text), text
    assert text == moment.strftime("%Y-%m-%dT%H:%M:%SZ").rjust(20, "0")
    if moment.year >= 1970:
        assert clock.parse_time(text) == moment.replace(microsecond=0)


def test_a_period_before_1970_is_bad_input_not_a_traceback(ws: helpers.Workspace) -> None:
    before = ws.digest()
    for args in (
        ["registry", "retro", "--since", "0001-01-01"],
        ["registry", "retro", "--since", "1969-12-31", "--until", "2026-11-01"],
    ):
        done = ws.run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert one_line(done).startswith(f"regulator: --since: '{args[3]}' is before 1970-01-01")
        assert "Traceback" not in done.stderr and done.stdout == ""
    assert ws.digest() == before


def test_a_now_at_the_calendars_end_is_bad_input_not_a_traceback(ws: helpers.Workspace) -> None:
    """REGULATOR_NOW in year 9999 made `controlroom --once`, `verify` and `obligations --overdue`
    overflow (an adversarial review): a time after 9998 is refused where it is read."""
    for args in (["controlroom", "--once"], ["verify"], ["obligations", "--overdue"]):
        done = ws.run(*args, env={"REGULATOR_NOW": "9999-12-31T23:59:59Z"})
        assert done.returncode == 2, (args, done.stderr)
        assert (
            one_line(done)
            == "regulator: REGULATOR_NOW: '9999-12-31T23:59:59Z' is after 9998-12-31: the calendar's end is too near to count from"
        )


def test_arithmetic_past_the_calendars_end_never_raises() -> None:
    """A lease taken near the end (a pinned clock) is refused, not an OverflowError; a deadline that
    falls past the end (a policy of a century, an obligation opened in 9998) is never due."""
    import pytest

    from engine.base.errors import BadInput
    from engine.commands.units import _lease_end
    from engine.read.deadlines import Deadlines
    from engine.read.model import Obligation, ObligationKind

    assert _lease_end(datetime(2026, 11, 29, 12, tzinfo=UTC), 86400) == "2026-11-30T12:00:00Z"
    for ttl in (86400, 400 * 86400):
        with pytest.raises(BadInput, match="the lease would end after 9998-12-31"):
            _lease_end(datetime(9998, 12, 31, 23, 59, 59, tzinfo=UTC), ttl)
    late = Obligation(
        "ob", "u1", ObligationKind.INTELLIGENCE, "s", "advisory", False, "S3", "9998-12-31T00:00:00Z", "s"
    )
    judge = Deadlines({"advisory": 36500 * 86400}, datetime(9998, 12, 31, 23, tzinfo=UTC))
    assert judge.due(late) is None and not judge.overdue(late)
