"""The injectable clock: REGULATOR_NOW fixes "now" so demos, tests and CI are reproducible."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime

from engine.errors import BadInput


def fixed() -> bool:
    """True while REGULATOR_NOW is set: ids are then derived, not random."""
    return bool(os.environ.get("REGULATOR_NOW"))


def now() -> datetime:
    value = os.environ.get("REGULATOR_NOW")
    if value:
        return parse_time(value, "REGULATOR_NOW")
    return datetime.now(UTC).replace(microsecond=0)


def today() -> date:
    return now().date()


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str, field: str = "time") -> datetime:
    """Parse ISO-8601; a time without zone is taken as UTC, a bare date as its midnight UTC."""
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
    return moment.astimezone(UTC)


def parse_date(value: str, field: str = "date") -> date:
    try:
        return date.fromisoformat(value.strip())
    except (ValueError, AttributeError):
        raise BadInput(f"{field}: {value!r} is not a calendar date (YYYY-MM-DD)") from None
