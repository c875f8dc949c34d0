"""The detail pane: a row's lifecycle and the actions open to the operator, as plain text."""

from __future__ import annotations

from rich.style import Style
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.base.text import ensure_escaped
from widgets.hanging import Hanging

BOLD, DIM = Style(bold=True), Style(dim=True)


class DetailPane(VerticalScroll):
    DEFAULT_CSS = """
    DetailPane { width: 42%; border-left: solid $panel-lighten-2; padding: 0 1; }
    DetailPane > Static { width: 100%; }
    """

    def compose(self) -> ComposeResult:
        self._text = Static(Hanging([]), id="detail-text")
        yield self._text

    @property
    def text(self) -> str:
        """What the pane holds, as plain lines (unwrapped)."""
        return str(self._text.content)

    def show(self, lines: list[str], actions: list[tuple[str, str, str | None]]) -> None:
        """Lines of history (wrapped under their labels), then each action: (key, label, why-not
        or None when allowed)."""
        rows: list[tuple[str, Style | None]] = [(ensure_escaped(line), None) for line in lines]
        if actions:
            rows += [("", None), ("actions", BOLD)]
            for key, label, why_not in actions:
                if why_not is None:
                    rows.append((f"  {key} {label}", None))
                else:
                    rows.append((f"  {key} {label}: disabled, {ensure_escaped(why_not)}", DIM))
        self._text.update(Hanging(rows))
