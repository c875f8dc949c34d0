"""Store text shown to a person or a unit: one escaping, used by every display (design §13, §16.1).

`escape` turns text into one line that cannot act on a terminal or on the reader's eye, and that
`unescape` turns back into exactly the text it came from:

- the backslash itself is shown as `\\\\`, the newline as `\\n` and the tab as `\\t`;
- every other control character (C0, DEL, C1: ESC is `\\x1b`, `\\r` is `\\x0d`, NEL is `\\x85`)
  as `\\xNN`;
- the line and paragraph separators (U+2028, U+2029), the bidirectional overrides, embeddings,
  isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) and the zero-width
  characters (U+200B–U+200D, U+2060, U+FEFF) as `\\uNNNN`; and, beyond the SPEC's list, the
  soft hyphen, U+034F, U+180E, U+2061–U+2064, U+FFF9–U+FFFB as `\\uNNNN` and the tag characters
  (U+E0000–U+E007F) as `\\UNNNNNNNN`, the variation selectors and the blank fillers;
- and every other code point of the categories Cc, Cf, Co, Cs and Cn as the running Python's
  unicodedata classifies them (format, private use, lone surrogates, unassigned: design §26), as
  `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN`;
- every space but U+0020 (no-break, em, ideographic, …) and the braille blank (U+2800), each drawn
  as nothing, as `\\uNNNN`; and in a one-line field, the spaces of a run past its sixteenth as
  `\\x20` (a wrapping display breaks a line at a run of spaces and drops the run: a run wider
  than the screen was a line break any field could hold).

Markup (`[bold]`) is left as characters: no display here parses it. `escape_block` does the same
but keeps newlines, for multi-line prose. The CLI (controlroom/printing.py), the control room's rows,
details and dialogs, and `regulator context` all call these; nothing else escapes store text.
"""

from __future__ import annotations

import re
import unicodedata

_INVISIBLE = "\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e"
_INVISIBLE += "\u2060\u2066\u2067\u2068\u2069\ufeff"
# beyond design §16.1's list: other characters a person cannot see but a model reads (the soft
# hyphen, the combining grapheme joiner, the Mongolian vowel separator, the invisible operators,
# the interlinear annotation marks, and the tag characters that can spell hidden words)
_INVISIBLE += "\u00ad\u034f\u180e\u2061-\u2064\ufff9-\ufffb\U000e0000-\U000e007f"
# and the variation selectors (which can carry a hidden payload after any character) and the
# blank fillers that render as nothing
_INVISIBLE += "\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef\u115f\u1160\u3164\uffa0"
# and the braille blank, printable yet drawn as nothing (an adversarial review drew blank lines
# with it to push a proposal's real review off the screen)
_INVISIBLE += "\u2800"
# and the rest of Unicode's default-ignorable code points that Python calls printable (the Khmer
# inherent vowels: zero width, drawn as nothing; a second review joined runs of 16 spaces with them)
_INVISIBLE += "\u17b4\u17b5"
# design §26: every code point of the categories Cc, Cf, Co, Cs and Cn, as the running Python's
# unicodedata classifies them, is escaped too. `str.isprintable` is false for exactly those and the
# separators (Z*, the space aside): text that is printable and holds none of the characters above
# (nor a backslash) is returned as it is, in C; any other is escaped character by character.
_INVISIBLE_CLASS = re.compile(f"[{_INVISIBLE}]")
# what may stand in printable text and still be escaped: the backslash, the invisible list
_PRINTABLE_BUT_ESCAPED = re.compile(f"[\\\\{_INVISIBLE}]")
# the invisible characters `str.isprintable` passes (variation selectors, fillers, U+034F): looked
# up per character where text is escaped one character at a time
_PRINTABLE_HIDDEN = frozenset(
    c for c in map(chr, [*range(0x34F, 0x350), *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
                         *range(0xE0100, 0xE01F0), 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800,
                         0x17B4, 0x17B5])
    if c.isprintable() and _INVISIBLE_CLASS.match(c)
)  # fmt: skip
_NAMED = {"\\": "\\\\", "\n": "\\n", "\t": "\\t"}
_ESCAPE_SEQUENCE = re.compile(r"\\(?:\\|n|t|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def _code(char: str) -> str:
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def hidden(char: str) -> bool:
    """A character no reader may receive raw: a control, format, private-use, surrogate or
    unassigned code point (Cc, Cf, Co, Cs, Cn), one of the invisible characters above, or a space
    other than U+0020 (the no-break, em, ideographic… spaces: a run of them draws as blank as
    spaces do, below, and an adversarial review used them so). `str.isprintable` is false for
    exactly the categories C*, Zl, Zp and those spaces."""
    if char.isprintable():
        return char in _PRINTABLE_HIDDEN
    return True


# the spaces of a one-line field kept in one run: past these, each is shown as `\x20`. A display
# that wraps a line (the room's details and dialogs, a terminal) breaks it at a run of spaces and
# drops the run, so a run wider than the screen was a line break a unit could place in any field
# (an adversarial review faked a whole proposal review so); 16 keeps a pasted table's or a YAML
# diff line's indentation as it is.
RUN = 16
_LONG_RUN = re.compile(f" {{{RUN + 1},}}")


def _run_shown(match: re.Match[str]) -> str:
    return " " * RUN + "\\x20" * (len(match.group()) - RUN)


def _escaped(value: str, keep_newlines: bool) -> str:
    long_runs = not keep_newlines and " " * (RUN + 1) in value
    marked = not value.isascii() and _on_blank(value)  # a combining mark on a space: drawn as ~nothing
    if value.isprintable() and _PRINTABLE_BUT_ESCAPED.search(value) is None and not marked:
        return _LONG_RUN.sub(_run_shown, value) if long_runs else value
    out = []
    before = " "  # a mark at the very start has no base either
    for char in value:
        if char == "\n" and keep_newlines:
            out.append(char)
        elif char in _NAMED:
            out.append(_NAMED[char])
        elif hidden(char) or (marked and before in " \n" and unicodedata.combining(char)):
            out.append(_code(char))
        else:
            out.append(char)
        before = char
    shown = "".join(out)
    return _LONG_RUN.sub(_run_shown, shown) if long_runs else shown


_AFTER_BLANK = re.compile("(?:^|[ \n])([^\x00-\u02ff])")  # what could be a mark with no base


def _on_blank(value: str) -> bool:
    """Whether a combining mark stands on a space, a newline or nothing (a run of spaces each
    carrying one draws almost blank: an adversarial review); only non-ASCII text is looked at."""
    return any(unicodedata.combining(found.group(1)) for found in _AFTER_BLANK.finditer(value))


def escape(text: object) -> str:
    """One line: every character above, and the backslash, shown escaped. Reversible."""
    return _escaped("" if text is None else str(text), keep_newlines=False)


def escape_items(value: object, sep: str = ", ") -> str:
    """A store field that should be a list of text, on one line: each item escaped and joined; any
    other value (a line written by hand) escaped whole, never a TypeError."""
    if isinstance(value, list):
        return sep.join(escape(item) for item in value)
    return escape(value)


def escape_block(text: object) -> str:
    """Like escape, but keeps newlines (for multi-line prose). Reversible."""
    return _escaped("" if text is None else str(text), keep_newlines=True)


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
    if text.isprintable() and _INVISIBLE_CLASS.search(text) is None:
        return False
    return any(char in "\n\t" or hidden(char) for char in text)


def ensure_escaped(line: str) -> str:
    """A last guard for a line built from fields that were each escaped: such a line passes
    unchanged (escape is not idempotent: it doubles backslashes), and a line that still holds a
    raw control character, because a caller forgot a field, is escaped whole."""
    return escape(line) if needs_escape(line) else line


def shown_line(line: str) -> str:
    """A line of a file or a command as a reviewer reads it (a proposal's diff and its `!` lines):
    as it is, backslashes and all, where it holds no hidden character (else escaped whole, as
    `ensure_escaped`), and never a run of spaces past RUN (the rest as `\\x20`): a run wider than
    the screen drew a proposed file's one line as a fake diff (an adversarial review), and doubled
    backslashes misstated the command a sensor would run (an operator's day)."""
    line = ensure_escaped(line)
    return _LONG_RUN.sub(_run_shown, line) if " " * (RUN + 1) in line else line


def escape_json(dumped: str) -> str:
    """JSON text (from json.dumps with ensure_ascii=False) with every character `hidden` names
    (DEL, C1, format, private-use, surrogate, unassigned, the invisible list) written as \\uNNNN:
    the same JSON values, none of which acts on a terminal. JSON has escaped C0 already."""
    if dumped.isascii():  # known without a look at the text (CPython keeps it): DEL is all there is
        return dumped if "\x7f" not in dumped else dumped.replace("\x7f", "\\u007f")
    if dumped.isprintable() and _INVISIBLE_CLASS.search(dumped) is None:
        return dumped
    # only a character from DEL up can be escaped here: each is looked at, the ASCII runs between
    # them are copied as they are (what the one-character-at-a-time join wrote: tests/test_perf_paths.py)
    return _FROM_DEL.sub(_json_escaped, dumped)


_FROM_DEL = re.compile("[^\x00-\x7e]")


def _json_escaped(match: re.Match[str]) -> str:
    char = match.group()
    return _json_escape(char) if hidden(char) else char


def _json_escape(char: str) -> str:
    """One character as JSON's \\uNNNN (a surrogate pair above U+FFFF)."""
    point = ord(char)
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


_LAYOUT = re.compile(r"([\n\t\r])")  # what a program's output may lay itself out with


def terminal_safe(text: str) -> str:
    """A program's output as a terminal may show it (a confined unit's, relayed by `unit run`):
    newlines, tabs and carriage returns kept, every character `hidden` names (ESC and every other
    control, bidi, invisible) written as `\\xNN`/`\\uNNNN`, so that nothing in it moves the cursor,
    retitles the window, asks the terminal to answer into the host's input or reorders what a
    person reads. The backslash is kept as it is: this is shown, never read back."""
    if text.isprintable() and _INVISIBLE_CLASS.search(text) is None:
        return text
    parts = _LAYOUT.split(text)
    for index, part in enumerate(parts):
        if index % 2 or (part.isprintable() and _INVISIBLE_CLASS.search(part) is None):
            continue  # a layout character itself, or a run with nothing to escape
        parts[index] = "".join(_code(char) if hidden(char) else char for char in part)
    return "".join(parts)
