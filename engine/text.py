"""Store text shown to a person: control characters (ESC among them) escaped, never interpreted."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: object) -> str:
    """One line: control characters become \\xNN and newlines \\n. Markup is left as characters."""
    value = "" if text is None else str(text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value).replace("\n", "\\n")


def escape_block(text: object) -> str:
    """Like escape, but keeps newlines (for multi-line prose)."""
    return "\n".join(escape(line) for line in str(text or "").split("\n"))
