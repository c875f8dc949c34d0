"""Dialogs for the operator's writes. Nothing is written without the dialog's confirmation; the
dialog only collects the answer, the app makes the same engine call as the CLI.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from engine.text import ensure_escaped, escape

Answer = dict[str, str]  # what a confirmed dialog gives the app: field name -> the text entered


class _Dialog(ModalScreen[Answer | None]):
    DEFAULT_CSS = """
    _Dialog { align: center middle; }
    _Dialog > Vertical { width: 76; height: auto; max-height: 100%; overflow-y: auto; border: thick $accent;
                         background: $surface; padding: 1 2; }
    _Dialog Label { margin-top: 1; }
    _Dialog Horizontal { height: auto; margin-top: 1; }
    _Dialog Button { margin-right: 2; }
    _Dialog .why { color: $error; }
    _Dialog .preview { height: auto; max-height: 14; border: round $panel-lighten-2; padding: 0 1; }
    _Dialog .note { color: $warning; margin-top: 1; }
    _Dialog .replay { height: auto; max-height: 16; margin-top: 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        elif event.button.id == "confirm":
            self.confirm()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in a one-line field submits the dialog (its checks still apply)."""
        event.stop()
        self.confirm()

    def confirm(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def buttons(self, label: str) -> Horizontal:
        return Horizontal(Button(label, id="confirm", variant="primary"), Button("Cancel", id="cancel"))


def _input(placeholder: str, id: str) -> Input:
    return Input(placeholder=placeholder, id=id)


class ResolveDialog(_Dialog):
    """Disposition and rationale for one obligation."""

    def __init__(self, obligation_id: str, summary: str, dispositions: tuple[str, ...]) -> None:
        super().__init__()
        self.obligation_id = obligation_id
        self.summary = escape(summary)  # store text: shown as characters, never acted on
        self.dispositions = dispositions

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Resolve obligation {self.obligation_id}", style="bold"))
            yield Static(Text(self.summary))
            yield Label("Disposition")
            yield Select([(d, d) for d in self.dispositions], id="disposition", prompt="choose a disposition")
            yield Label("Rationale")
            yield _input("why this disposition", "rationale")
            yield Static("", id="why", classes="why")
            yield self.buttons("Resolve")

    def confirm(self) -> None:
        disposition = self.query_one("#disposition", Select).value
        rationale = self.query_one("#rationale", Input).value
        if disposition is Select.BLANK or not isinstance(disposition, str):
            self.query_one("#why", Static).update("choose a disposition")
            return
        if not rationale.strip():
            self.query_one("#why", Static).update("a rationale is required")
            return
        self.dismiss({"disposition": disposition, "rationale": rationale})


class OutcomeDialog(_Dialog):
    """Whether a signal's prediction came true, and why (SPEC §24): recorded signed, once."""

    def __init__(self, signal_id: str, summary: str, resolves_at: str) -> None:
        super().__init__()
        self.signal_id = signal_id
        self.summary = escape(summary)  # store text: shown as characters, never acted on
        self.resolves_at = escape(resolves_at)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Record the outcome of signal {self.signal_id}'s prediction", style="bold"))
            yield Static(Text(self.summary))
            yield Static(Text(f"It resolves at {self.resolves_at}."), classes="note")
            yield Label("Did it come true?")
            yield Select(
                [("yes: it came true", "yes"), ("no: it did not", "no")], id="came-true", prompt="choose"
            )
            yield Label("Rationale")
            yield _input("what shows it", "rationale")
            yield Static("", id="why", classes="why")
            yield self.buttons("Record")

    def confirm(self) -> None:
        answer = self.query_one("#came-true", Select).value
        rationale = self.query_one("#rationale", Input).value
        if answer is Select.BLANK or not isinstance(answer, str):
            self.query_one("#why", Static).update("say whether it came true")
            return
        if not rationale.strip():
            self.query_one("#why", Static).update("a rationale is required")
            return
        self.dismiss({"cameTrue": answer, "rationale": rationale})


class RetractDialog(_Dialog):
    """A reason, and the first characters of the id typed back: retraction is for good."""

    CONFIRM_CHARS = 4

    def __init__(self, entry_id: str, summary: str) -> None:
        super().__init__()
        self.entry_id = entry_id
        self.summary = escape(summary)  # store text: shown as characters, never acted on

    @property
    def expected(self) -> str:
        return self.entry_id[-self.CONFIRM_CHARS :]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Retract memory entry {self.entry_id}", style="bold"))
            yield Static(Text(self.summary))
            yield Label("Reason")
            yield _input("why this fact is wrong", "reason")
            yield Label(f"Type {self.expected!r} (the id's last {self.CONFIRM_CHARS} characters) to confirm")
            yield _input(self.expected, "typed")
            yield Static("", id="why", classes="why")
            yield self.buttons("Retract")

    def confirm(self) -> None:
        reason = self.query_one("#reason", Input).value
        typed = self.query_one("#typed", Input).value
        if not reason.strip():
            self.query_one("#why", Static).update("a reason is required")
            return
        if typed.strip().upper() != self.expected.upper():
            self.query_one("#why", Static).update(f"type {self.expected} to confirm")
            return
        self.dismiss({"reason": reason})


class DecideDialog(_Dialog):
    """A recovery decision on a unit: the action and its rationale."""

    def __init__(
        self, unit_id: str, actions: tuple[str, ...], preview: Callable[[str], list[str]] | None = None
    ) -> None:
        super().__init__()
        self.unit_id = unit_id
        self.actions = actions
        self.preview = preview

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Recovery decision for unit {self.unit_id}", style="bold"))
            yield Label("Action")
            yield Select([(a, a) for a in self.actions], id="action", prompt="choose an action")
            yield Static(Text("choose an action to see what it changes"), id="preview", classes="preview")
            yield Label("Rationale")
            yield _input("why", "rationale")
            yield Static("", id="why", classes="why")
            yield self.buttons("Record")

    def confirm(self) -> None:
        action = self.query_one("#action", Select).value
        rationale = self.query_one("#rationale", Input).value
        if action is Select.BLANK or not isinstance(action, str):
            self.query_one("#why", Static).update("choose an action")
            return
        if not rationale.strip():
            self.query_one("#why", Static).update("a rationale is required")
            return
        self.dismiss({"action": action, "rationale": rationale})

    def on_select_changed(self, event: Select.Changed) -> None:
        """Which obligations the chosen action changes and what it opens, before anything is written."""
        value = event.value
        if self.preview is None or not isinstance(value, str):
            return
        text = "\n".join(ensure_escaped(line) for line in self.preview(value))
        self.query_one("#preview", Static).update(Text(text))


class ProposalDialog(_Dialog):
    """Accept or reject a proposal, with a rationale; accepting says it commits, and shows the diff.
    The rationale comes before the diff and has the focus, so what the operator types lands there
    and the commit warning stays on screen at 80×24."""

    AUTO_FOCUS = "#rationale"

    def __init__(
        self,
        proposal_id: str,
        verdict: str,
        summary: str,
        review: list[str] | None = None,
        replay: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.proposal_id = proposal_id
        self.verdict = verdict
        self.summary = escape(summary)  # store text: shown as characters, never acted on
        self.review = review or []
        self.replay = [ensure_escaped(line) for line in replay or []]  # a routing policy's replay

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"{self.verdict.capitalize()} proposal {self.proposal_id}", style="bold"))
            yield Static(Text(self.summary))
            if self.verdict == "accept":
                yield Static(
                    Text("Accepting writes the file and commits it to git, signed by you (Authorized-by)."),
                    classes="note",
                    id="commits",
                )
            yield Label("Rationale")
            yield _input("why", "rationale")
            yield Static("", id="why", classes="why")
            if self.review:
                with VerticalScroll(classes="preview", id="diff"):
                    yield Static(Text("\n".join(ensure_escaped(line) for line in self.review)))
            if self.replay:
                with VerticalScroll(id="replay", classes="replay"):
                    yield Static(Text("\n".join(self.replay)))
            yield self.buttons(self.verdict.capitalize())

    def confirm(self) -> None:
        rationale = self.query_one("#rationale", Input).value
        if not rationale.strip():
            self.query_one("#why", Static).update("a rationale is required")
            return
        self.dismiss({"rationale": rationale})


class AckDialog(_Dialog):
    """Acknowledge a finding: the ack line is written into the entry and committed, signed."""

    def __init__(self, finding_id: str, summary: str, path: str) -> None:
        super().__init__()
        self.finding_id = finding_id
        self.summary = escape(summary)
        self.path = escape(path)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Acknowledge finding {self.finding_id}", style="bold"))
            yield Static(Text(self.summary))
            yield Static(
                Text(
                    f"Writes a dated ack line into {self.path} and commits it (Authorized-by: you, signed)."
                ),
                classes="note",
                id="commits",
            )
            yield Static("", id="why", classes="why")
            yield self.buttons("Acknowledge")

    def confirm(self) -> None:
        self.dismiss({})


class TextScreen(ModalScreen[None]):
    """A scrollable page of plain text: the lifecycle of a row, or the keys of a view."""

    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll { width: 90%; height: 85%; border: thick $accent; background: $surface;
                                  padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,enter,question_mark", "close", "close")]

    def __init__(self, title: str, lines: list[str]) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(ensure_escaped(self.title_text), style="bold"))
            yield Static(Text("\n".join(ensure_escaped(line) for line in self.lines)))

    def action_close(self) -> None:
        self.dismiss(None)
