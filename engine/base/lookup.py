"""Id lookup: the CLI accepts any unique prefix of an id, or a unique ending of six or more characters
(the room and `--once` show ids by their last characters)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from engine.base.errors import BadInput

T = TypeVar("T")

# where a person sees the ids of each kind the lookup names
LISTINGS = {
    "obligation": "regulator obligations --all",
    "signal": "regulator signals",
    "proposal": "regulator identity show",
    "memory entry": "regulator memory --all",
}


def check_prefix(prefix: object, what: str) -> str:
    """The shape of an id or prefix, checked before anything runs (routing included)."""
    if not isinstance(prefix, str) or not prefix or len(prefix) > 200 or not prefix.isalnum():
        raise BadInput(f"{what} id {prefix!r} is not an id (letters and digits); see the listing for ids")
    return prefix


def by_prefix(items: Mapping[str, T], prefix: str, what: str) -> T:
    return items[key_by_prefix(items, prefix, what)]


def key_by_prefix(items: Mapping[str, object], prefix: str, what: str) -> str:
    """The one id among `items` that `prefix` names (exit 2 for none, or more than one)."""
    check_prefix(prefix, what)
    if prefix in items:
        return prefix
    lowered = prefix.lower()
    matches = [key for key in items if key.lower().startswith(lowered)]
    if not matches and len(prefix) >= 6:  # the room and --once show ids by their last characters
        matches = [key for key in items if key.lower().endswith(lowered)]
    if not matches:
        listing = LISTINGS.get(what, "its listing")
        ending = [key for key in items if key.lower().endswith(lowered)] if len(prefix) < 6 else []
        if ending:  # an ending names an id from six characters on: say so, not "no such id"
            raise BadInput(
                f"no {what} id starts with {prefix!r}, and an id's ending names it only from 6 characters "
                f"on ({len(ending)} end with it): give more of the ending, or see `{listing}`"
            )
        raise BadInput(f"no {what} with an id starting (or ending) {prefix!r}; see the ids: `{listing}`")
    if len(matches) > 1:
        shown = ", ".join(sorted(matches)[:5])
        raise BadInput(f"{what} id prefix {prefix!r} is ambiguous ({shown}...); give more characters")
    return matches[0]
