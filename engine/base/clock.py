"""The clock is the host's (design §15.3): REGULATOR_NOW fixes "now" only in a workspace whose
routing policy in force says `clock: pinned` (tests, the demo's build); elsewhere it is ignored
with a one-line warning, so a unit cannot move time by setting a variable.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from datetime import UTC, date, datetime, timedelta

from engine.base.errors import BadInput
from identity.durations import MAX_DURATION_S  # one cap for the policies and the command line

_pinned = False  # set by configure() when a workspace is opened
_warned = False


def configure(pinned: bool) -> None:
    """Follow the workspace just opened: honour REGULATOR_NOW only if its clock is pinned."""
    global _pinned
    _pinned = pinned


def pinned() -> bool:
    return _pinned


def fixed() -> bool:
    """True while a pinned clock is in use: ids are then derived, not random (never lease tokens)."""
    return _pinned and bool(os.environ.get("REGULATOR_NOW"))


def now() -> datetime:
    value = os.environ.get("REGULATOR_NOW")
    if value:
        if _pinned:
            return parse_time(value, "REGULATOR_NOW")
        _warn_ignored()
    return datetime.now(UTC).replace(microsecond=0)


def _warn_ignored() -> None:
    global _warned
    if not _warned:
        _warned = True
        # a warning whose reader left (`2>&1 | …` closed) changes nothing the command does (D-332)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(
                "regulator: warning: REGULATOR_NOW ignored: this workspace's clock is the system's "
                "(routing.yaml `clock: pinned` is set only by `init --clock pinned` or a decision)\n"
            )
            sys.stderr.flush()


def today() -> date:
    return now().date()


@functools.lru_cache(maxsize=256)  # the router writes one time for every record of a run
def iso(moment: datetime) -> str:
    """TIME_FORM, its year in four digits (strftime's %Y writes year 1 as `1`: an adversarial review)."""
    m = moment.astimezone(UTC)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}Z"


LAST_YEAR = 9998  # the last year a time or date given may name (_in_range)
DATE_FORM = "YYYY-MM-DD"
TIME_FORM = "YYYY-MM-DDTHH:MM:SSZ"
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def parse_time(value: object, field: str = "time") -> datetime:
    """A time given to regulator (a flag, a JSON field, an MCP argument, REGULATOR_NOW): exactly
    YYYY-MM-DDTHH:MM:SSZ, a real moment in UTC; every other form is bad input (design §26). The one
    parser of input times: `20261221T000000Z`, `+00:00`, a week date or a bare date are refused."""
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        shown = repr(value) if isinstance(value, str) else "not text"
        raise BadInput(f"{field}: {shown} is not a time {TIME_FORM} (e.g. 2026-11-29T12:00:00Z)")
    try:
        moment = datetime.fromisoformat(value[:-1]).replace(tzinfo=UTC)
    except ValueError:
        raise BadInput(f"{field}: {value!r} is not a real moment ({TIME_FORM})") from None
    _in_range(field, value, moment.year)
    return moment


def parse_date(value: object, field: str = "date") -> date:
    """A date given to regulator: exactly YYYY-MM-DD, a real calendar day; every other form (a
    basic `20261221`, a week date `2026-W52-1`, spaces around it) is bad input (design §26)."""
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        shown = repr(value) if isinstance(value, str) else "not text"
        raise BadInput(f"{field}: {shown} is not a calendar date {DATE_FORM}")
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise BadInput(f"{field}: {value!r} is not a calendar date ({DATE_FORM})") from None
    _in_range(field, value, day.year)
    return day


def later(moment: datetime, seconds: float) -> datetime | None:
    """`seconds` after `moment`, or None past the calendar's end (a time in a line no host wrote, a
    deadline of centuries): what a deadline, a lease's end and a sensor's next run count from (D-335)."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return None


def _in_range(field: str, value: str, year: int) -> None:
    """A time or date is from 1970 to 9998: before 1970 is no moment a host's clock or a git commit
    says, and the arithmetic after one near either end of the calendar overflowed (`registry retro
    --since 0001-01-01`, REGULATOR_NOW=9999-12-31T23:59:59Z: tracebacks; adversarial reviews, D-335)."""
    if year < 1970:
        raise BadInput(f"{field}: {value!r} is before 1970-01-01: no host's clock says so")
    if year > LAST_YEAR:
        raise BadInput(
            f"{field}: {value!r} is after {LAST_YEAR}-12-31: the calendar's end is too near to count from"
        )


def read_time(value: str, field: str = "time") -> datetime:
    """A time as a line already in a store holds it (written by the engine in TIME_FORM; a line
    no engine wrote may hold any ISO-8601 form): read leniently, a zone-less time as UTC. Input is
    never read with this: parse_time is the contract."""
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{field}: expected an ISO-8601 time such as 2026-11-29T12:00:00Z")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(f"{field}: {value!r} is not an ISO-8601 time (e.g. 2026-11-29T12:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first representable moment
        raise BadInput(f"{field}: {value!r} is outside the representable years 0001-9999") from None


def moment(value: object) -> datetime | None:
    """A stored `at` as a time, or None when it is none: a list is no time (nor hashable)."""
    return _moment(value) if isinstance(value, str) else None


@functools.lru_cache(maxsize=4096)
def _moment(value: str) -> datetime | None:
    try:
        return read_time(value)
    except BadInput:
        return None


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: object, field: str = "duration") -> int:
    """A duration as regulator writes them everywhere (design §23): `<n>s|m|h|d`, n a whole number
    above 0 (`30s`, `15m`, `2h`, `14d`); its length in seconds. Anything else is BadInput naming
    `field`: no spaces, no signs, no fractions, no bare numbers (seconds or minutes?)."""
    text = value if isinstance(value, str) else None
    if text is not None and 2 <= len(text) <= 12 and text[-1] in _DURATION_UNITS:
        digits = text[:-1]
        if digits.isascii() and digits.isdigit() and digits[0] != "0":
            seconds = int(digits) * _DURATION_UNITS[text[-1]]
            if seconds <= MAX_DURATION_S:
                return seconds
    raise BadInput(f"{field}: {value!r} is not a duration such as 30s, 15m, 2h or 14d")


def format_duration(seconds: int) -> str:
    """The largest unit that divides a duration whole (900 → `15m`): what parse_duration reads."""
    for unit in ("d", "h", "m"):
        size = _DURATION_UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
