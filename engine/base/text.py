"""Store text shown to a person or a unit: one escaping, used by every display (SPEC §13, §16.1).

`escape` turns text into one line that cannot act on a terminal or on the reader's eye, and that
`unescape` turns back into exactly the text it came from:

- the backslash itself is shown as `\\\\`, the newline as `\\n` and the tab as `\\t`;
- every other control character (C0, DEL, C1: ESC is `\\x1b`, `\\r` is `\\x0d`, NEL is `\\x85`)
  as `\\xNN`;
- the line and paragraph separators (U+2028, U+2029), the bidirectional overrides, embeddings,
  isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) and the zero-width
  characters (U+200B–U+200D, U+2060, U+FEFF) as `\\uNNNN`; and, beyond the SPEC's list, the
  soft hyphen, U+034F, U+180E, U+2061–U+2064, U+FFF9–U+FFFB as `\\uNNNN` and the tag characters
  (U+E0000–U+E007F) as `\\UNNNNNNNN`.

Markup (`[bold]`) is left as characters: no display here parses it. `escape_block` does the same
but keeps newlines, for multi-line prose. The CLI (controlroom/printing.py), the control room's rows,
details and dialogs, and `regulator context` all call these; nothing else escapes store text.
"""

from __future__ import annotations

import re

_INVISIBLE = "\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e"
_INVISIBLE += "\u2060\u2066\u2067\u2068\u2069\ufeff"
# beyond SPEC §16.1's list: other characters a person cannot see but a model reads (the soft
# hyphen, the combining grapheme joiner, the Mongolian vowel separator, the invisible operators,
# the interlinear annotation marks, and the tag characters that can spell hidden words)
_INVISIBLE += "\u00ad\u034f\u180e\u2061-\u2064\ufff9-\ufffb\U000e0000-\U000e007f"
# and the variation selectors (which can carry a hidden payload after any character) and the
# blank fillers that render as nothing
_INVISIBLE += "\u180b-\u180d\ufe00-\ufe0f\U000e0100-\U000e01ef\u115f\u1160\u3164\uffa0"
_CONTROL = "\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f"
# what escape changes; the newline and the tab are named, everything else by its code point
_ESCAPED = re.compile(f"[\\\\\\n\\t{_CONTROL}{_INVISIBLE}]")
_ESCAPED_IN_BLOCK = re.compile(f"[\\\\\\t{_CONTROL}{_INVISIBLE}]")
# what a reader must never receive raw (the backslash is harmless, only ambiguous)
_UNSAFE = re.compile(f"[\\n\\t{_CONTROL}{_INVISIBLE}]")
# JSON escapes C0 itself; these it would leave raw (DEL, C1, the invisible characters above)
_RAW_IN_JSON = re.compile(f"[\\x7f-\\x9f{_INVISIBLE}]")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\t": "\\t"}
_ESCAPE_SEQUENCE = re.compile(r"\\(?:\\|n|t|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def _one(match: re.Match) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def escape(text: object) -> str:
    """One line: every character above, and the backslash, shown escaped. Reversible."""
    value = "" if text is None else str(text)
    return _ESCAPED.sub(_one, value)


def escape_block(text: object) -> str:
    """Like escape, but keeps newlines (for multi-line prose). Reversible."""
    value = "" if text is None else str(text)
    return _ESCAPED_IN_BLOCK.sub(_one, value)


def _back(match: re.Match) -> str:
    code = match.group(1) or match.group(2) or match.group(3)
    if code is not None:
        return chr(int(code, 16))
    return {"\\\\": "\\", "\\n": "\n", "\\t": "\t"}[match.group()]


def unescape(text: str) -> str:
    """The text escape or escape_block was given: `unescape(escape(t)) == t` for every text t."""
    return _ESCAPE_SEQUENCE.sub(_back, text)


def needs_escape(text: str) -> bool:
    """True when the text holds a character that must not reach a reader raw (the backslash
    aside, which is harmless on its own)."""
    return _UNSAFE.search(text) is not None


def ensure_escaped(line: str) -> str:
    """A last guard for a line built from fields that were each escaped: such a line passes
    unchanged (escape is not idempotent: it doubles backslashes), and a line that still holds a
    raw control character, because a caller forgot a field, is escaped whole."""
    return escape(line) if needs_escape(line) else line


def escape_json(dumped: str) -> str:
    """JSON text (from json.dumps with ensure_ascii=False) with DEL, C1 and the invisible
    characters above written as \\uNNNN: the same JSON values, none of which acts on a terminal."""
    return _RAW_IN_JSON.sub(_json_escape, dumped)


def _json_escape(match: re.Match) -> str:
    """One character as JSON's \\uNNNN (a surrogate pair above U+FFFF)."""
    point = ord(match.group())
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"
