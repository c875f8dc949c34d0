"""Lines wrapped at the width they are drawn at, each wrapped line indented under its label
(`  claim: …` continues under the claim, a timestamped line under its event), cut by terminal cells.
The text is plain: a Rich renderable of segments, never parsed as markup."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style

LABEL = re.compile(r"(\s*)(?:- )?[A-Za-z][\w .'/()≤-]{0,30}: ")  # `  claim: `, `  - evidence: `
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T[\d:.]+Z ")  # an event's time: the rest hangs under its words
KEYED = re.compile(r"\s*\S(?:\S| (?! ))*\s{2,}(?=\S)")  # `  up/down j/k  move …`: under the text
LEAD = re.compile(r"(\s*)(?:- )?")


def indent_of(line: str) -> int:
    """Where a wrapped line of `line` starts: under the text after its label, its timestamp, or
    its own indentation (plus two)."""
    for pattern in (STAMP, LABEL, KEYED):
        found = pattern.match(line)
        if found:
            return cell_len(found.group(0))
    lead = LEAD.match(line)
    if lead is None or not lead.group(0):
        return 0  # prose wraps to its own margin
    if lead.group(0).endswith("- "):
        return cell_len(lead.group(0))  # an item: under its text
    return cell_len(lead.group(0)) + 2


def hang(line: str, cells: int) -> list[str]:
    """`line` wrapped at `cells` columns: at a space where one is near, else by cells; every
    wrapped line indented by `indent_of(line)` (at most half the width)."""
    if cells <= 0 or cell_len(line) <= cells:
        return [line]
    indent = min(indent_of(line), cells // 2)
    out: list[str] = []
    rest, room = line, cells
    while rest:
        if cell_len(rest) <= room:
            out.append(rest)
            break
        chunk = chop_cells(rest, room)[0]
        space = chunk.rfind(" ")
        if space > room // 3 and len(chunk) < len(rest):
            piece, rest = rest[:space], rest[space + 1 :]
        else:
            piece, rest = chunk, rest[len(chunk) :]
        out.append(piece.rstrip(" "))
        rest = rest.lstrip(" ")
        room = cells - indent
    return out[:1] + [" " * indent + piece for piece in out[1:]]


class Hanging:
    """A renderable of (text, style) lines, each wrapped by `hang` at the width it is drawn at."""

    def __init__(self, lines: Iterable[tuple[str, Style | None]]) -> None:
        self.lines = list(lines)

    def __str__(self) -> str:
        """The lines as they are, unwrapped (what tests and a copy read)."""
        return "\n".join(text for text, _ in self.lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        cells = options.max_width
        for text, style in self.lines:
            for piece in hang(text, cells):
                yield Segment(piece, style)
                yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        longest = max((cell_len(text) for text, _ in self.lines), default=1)
        return Measurement(min(longest, 1), min(longest, options.max_width))
