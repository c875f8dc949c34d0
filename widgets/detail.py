"""The detail pane: a row's lifecycle and the actions open to the operator, as plain text."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.base.text import ensure_escaped


class DetailPane(VerticalScroll):
    DEFAULT_CSS = """
    DetailPane { width: 42%; border-left: solid $panel-lighten-2; padding: 0 1; }
    DetailPane > Static { width: 100%; }
    """

    def compose(self) -> ComposeResult:
        self._text = Static(Text(""), id="detail-text")
        yield self._text

    def show(self, lines: list[str], actions: list[tuple[str, str, str | None]]) -> None:
        """Lines of history, then each action: (key, label, why-not or None when allowed)."""
        text = Text("\n".join(ensure_escaped(line) for line in lines), no_wrap=False)
        if actions:
            text.append("\n\nactions\n", style="bold")
            for key, label, why_not in actions:
                if why_not is None:
                    text.append(f"  {key} {label}\n")
                else:
                    text.append(f"  {key} {label}: disabled, {ensure_escaped(why_not)}\n", style="dim")
        self._text.update(text)
