"""Durations as the policies and the command line write them (design §23): `<n>s|m|h|d`, at most a
hundred years; one parser, so that a policy cannot hold a length the clock's arithmetic overflows."""

from __future__ import annotations

import re

DURATION = re.compile(r"([1-9][0-9]{0,6})([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION_S = 100 * 365 * 86400  # a hundred years: beyond it a duration is a typo, not a plan


def duration_seconds(text: str) -> int:
    """`<n>s|m|h|d` (30s, 15m, 2h, 14d) in seconds; ValueError for anything else, and for a length
    over a hundred years (an adversarial review: `deadlines: {advisory: 3000000d}` was accepted,
    and every reader of the deadlines then failed on a date before year 1; `every: 3000000d` ran a
    sensor on every tick)."""
    found = DURATION.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"{text!r} is not a duration (<n>s, <n>m, <n>h or <n>d with n from 1, e.g. 48h)")
    seconds = int(found.group(1)) * _SECONDS[found.group(2)]
    if seconds > MAX_DURATION_S:
        raise ValueError(f"{text!r} is longer than a hundred years (36500d)")
    return seconds
