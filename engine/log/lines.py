"""How deep a store line may nest, one rule for every reader and the writer (D-204)."""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

import msgspec

# msgspec and json count a reader's own call depth toward Python's recursion limit (1,000), so
# without a cap a line nested about 980 levels deep was read by one reader and refused by another
# (the appender chained past it, verify did not; found by an adversarial review of D-203). An event
# line nests a few levels
MAX_DEPTH = 500
TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels: not an event line"
DEEP_BYTES = 2 * MAX_DEPTH  # a line no longer than this cannot nest deeper (each level opens and closes)
# a JSON string, or an unterminated one to the end of the line: each quote starts one match at
# most, so a line of 1 MiB is stripped in linear time (a closing quote that had to be found from
# every quote of `\"\"\"…` cost hours: the adversarial review of D-204)
_TEXT = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256  # a bracket's step in depth, by byte
for _open in b"[{":
    _STEP[_open] = 1
for _close in b"]}":
    _STEP[_close] = -1


def too_deep(raw: bytes) -> bool:
    """Whether a line nests deeper than MAX_DEPTH (brackets inside text aside). Free for a line of
    at most DEEP_BYTES, two counts in C for one with at most MAX_DEPTH brackets; a line with more
    has its text taken out and its depth summed, in C (tens of ms for 1 MiB)."""
    if len(raw) <= DEEP_BYTES or raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    brackets = _TEXT.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


def whole(raw: bytes) -> Any:
    """A store line read whole (strict JSON, msgspec), as every reader reads one: a line nested
    deeper than MAX_DEPTH is refused (ValueError) wherever it is read."""
    if len(raw) > DEEP_BYTES and too_deep(raw):
        raise ValueError(TOO_DEEP)
    return msgspec.json.decode(raw)
