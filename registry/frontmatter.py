"""A fast reader for the common shape of register frontmatter, with YAML as the fallback.

Lint reads every entry of a register that may hold ten thousand of them; PyYAML's constructor
costs a quarter of a millisecond per entry. Most frontmatter is flat `key: value` lines with
quoted or plain strings, booleans, dates and flow or block lists of strings. This reader accepts
exactly that subset and answers None for anything else (tags, anchors, nesting, numbers, a key
given twice, a block list whose items are not all indented alike, a character YAML treats as a line
break or refuses, a Unicode space Python would strip and YAML keeps, any doubt), so the caller
falls back to the strict loader: the result is always what `yaml.safe_load` would give, and a head
it would refuse is never answered here.
"""

from __future__ import annotations

import functools
import re
from datetime import date

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: (.*))?$")
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_ ./()=+'-]*(?::[A-Za-z0-9_./()=+'-]+)*")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_BOOLS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULLS = ("null", "Null", "NULL", "~")
# anything but newline and printable characters: YAML refuses C0/C1 controls, reads \r, \x85,
# U+2028 and U+2029 as line breaks, and a tab has rules of its own; all of it is YAML's job
ODD = "[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
# the same class for text that is all ASCII (its other ranges are not): compiling ODD's ranges costs
# ~3 ms of every command's start, so it is compiled only for a head that is not all ASCII
_ODD_ASCII = re.compile("[^\n\x20-\x7e]")


@functools.cache
def _odd() -> re.Pattern[str]:
    return re.compile(ODD)


def odd(head: str) -> bool:
    """Whether `head` holds a character the ODD class names (tests/test_frontmatter.py: the same
    answer as ODD's search, for any text)."""
    if head.isascii():
        return _ODD_ASCII.search(head) is not None
    return _odd().search(head) is not None


# the spaces Python's str.strip and str.split take for whitespace and YAML does not (YAML's
# whitespace is the space and the tab): `resolved: true` + U+00A0 is the text "true\u00a0" to
# YAML, and must never be read as True here (design §26). Any of them in a head: YAML's job.
UNICODE_SPACES = "\xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
_SPACE = re.compile(f"[{UNICODE_SPACES}]")
_KEY_MAX = 200  # YAML allows a simple key 1024 characters at most; long ones are YAML's job


class _Unsure(Exception):
    """Not in the subset: let YAML decide."""


def _scalar(text: str, flow: bool = False) -> object:
    text = text.strip()
    if not text:
        return None
    first = text[0]
    if first == '"':
        if len(text) < 2 or text[-1] != '"' or "\\" in text or '"' in text[1:-1]:
            raise _Unsure
        return text[1:-1]
    if first == "'":
        if len(text) < 2 or text[-1] != "'":
            raise _Unsure
        inner = text[1:-1]
        if "'" in inner.replace("''", ""):
            raise _Unsure
        return inner.replace("''", "'")
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _NULLS:
        return None
    if _DATE.fullmatch(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise _Unsure from None
    if " #" in text or text.endswith(":") or (flow and ("," in text or "]" in text)):
        raise _Unsure
    if not _PLAIN.fullmatch(text) or "  " in text or text != text.strip():
        raise _Unsure
    return text


def _flow_list(text: str) -> list:
    inner = text.strip()[1:-1].strip()
    if not inner:
        return []
    if "[" in inner or "{" in inner or "]" in inner:
        raise _Unsure
    items = []
    for raw in inner.split(","):
        piece = raw.strip()
        if not piece:
            raise _Unsure
        if piece[0] in "\"'" and (len(piece) < 2 or piece[-1] != piece[0]):
            raise _Unsure  # a comma inside quotes: YAML's job
        items.append(_scalar(piece, flow=True))
    return items


def parse(head: str) -> dict | None:
    """The mapping safe_load would return for `head`, or None when not sure it would."""
    try:
        return _parse(head)
    except _Unsure:
        return None


def _parse(head: str) -> dict:
    if odd(head) or _SPACE.search(head):
        raise _Unsure
    data: dict = {}
    lines = head.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            if line.strip() and not line.startswith("#"):
                raise _Unsure
            continue
        if line[0] in " \t-":
            raise _Unsure
        match = _KEY.fullmatch(line)
        if not match:
            raise _Unsure
        key, value = match.group(1), match.group(2)
        if key in _BOOLS or key in _NULLS or key in data or len(key) > _KEY_MAX:
            raise _Unsure  # a key given twice is an error for the strict loader to name
        value = (value or "").rstrip()
        if value.startswith("["):
            if not value.endswith("]"):
                raise _Unsure
            data[key] = _flow_list(value)
        elif value and value[0] in "{&*!|>%@`?":
            raise _Unsure
        elif value:
            data[key] = _scalar(value)
        else:
            items = []
            # every item indented as the first one is: `- a` then `  - b` is one scalar "a - b"
            # to YAML, and `  - a` then `- b` is an error
            prefix = next((p for p in ("- ", "  - ") if i < len(lines) and lines[i].startswith(p)), None)
            while prefix is not None and i < len(lines) and lines[i].startswith(prefix):
                item = lines[i][len(prefix) :]
                if item.lstrip().startswith(("[", "-", "{")) or ": " in item:
                    raise _Unsure
                items.append(_scalar(item))
                i += 1
            if i < len(lines) and lines[i][:1] in (" ", "\t") and lines[i].strip():
                raise _Unsure  # a nested mapping, a continuation or another indentation: YAML's job
            data[key] = items if items else None
    if not data:
        raise _Unsure  # an empty head is None to YAML, not {}
    return data
