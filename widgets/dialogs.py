"""Dialogs for the operator's writes. Nothing is written without the dialog's confirmation; the
dialog only collects the answer, the app makes the same engine call as the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from engine.base.text import ensure_escaped, escape, shown_line
from widgets.hanging import Hanging

Answer = dict[str, str]  # what a confirmed dialog gives the app: field name -> the text entered


class _Dialog(ModalScreen[Answer | None]):
    """A dialog's frame: its body scrolls, its buttons are docked at its foot (so at 80×24 they stay
    on screen whatever the body holds), it opens scrolled to its heading, and a notification shown
    while it is open appears at the top of the screen, never over its buttons."""

    DEFAULT_CSS = """
    _Dialog { align: center middle; }
    _Dialog > #frame { width: 95%; max-width: 132; height: auto; max-height: 100%; overflow-y: auto;
                       border: thick $accent; background: $surface; padding: 0 2; }
    _Dialog #frame > .buttons { dock: bottom; height: auto; background: $surface; padding-bottom: 1; }
    _Dialog Label { margin-top: 1; }
    _Dialog .heading { margin-top: 1; }
    _Dialog Horizontal { height: auto; margin-top: 1; }
    _Dialog Button { margin-right: 2; }
    _Dialog .why { color: $error; }
    _Dialog .meaning { color: $text-muted; }
    _Dialog .preview { height: auto; max-height: 14; border: round $panel-lighten-2; padding: 0 1; }
    _Dialog .note { color: $warning; margin-top: 1; }
    _Dialog .replay { height: auto; max-height: 16; margin-top: 1; }
    _Dialog .said { height: auto; max-height: 5; border: round $panel-lighten-2; padding: 0 1; }
    _Dialog ToastRack { dock: top; align: right top; margin-bottom: 0; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        # what the body holds past the dialog's edge (a preview at 80×24) is read by keys too:
        # nothing else in it takes the focus to scroll (an operator's re-check of D-284)
        Binding("pagedown", "page(1)", "scroll down", show=False),
        Binding("pageup", "page(-1)", "scroll up", show=False),
    ]
    CONFIRM = "OK"

    def compose(self) -> ComposeResult:
        with Vertical(id="frame"):
            yield from self.body()
            yield Horizontal(
                Button(self.CONFIRM, id="confirm", variant="primary"),
                Button("Cancel", id="cancel"),
                classes="buttons",
            )

    def body(self) -> ComposeResult:  # pragma: no cover - overridden
        raise NotImplementedError

    def on_mount(self) -> None:
        # a focused field further down would scroll the heading away: open at the top
        self.call_after_refresh(self.query_one("#frame").scroll_home, animate=False)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_page(self, direction: int) -> None:
        frame = self.query_one("#frame")
        if direction > 0:
            frame.scroll_page_down(animate=False)
        else:
            frame.scroll_page_up(animate=False)

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

    def refuse(self, why: str) -> None:
        """Say in the dialog why it cannot be confirmed yet."""
        self.query_one("#why", Static).update(Text(why))
        self._said = why

    def answered(self, why: str) -> None:
        """What `refuse(why)` asked for is given: it is said no more (an operator's review: "choose
        a disposition" stayed under the field once one was chosen)."""
        if getattr(self, "_said", "") == why:
            self.refuse("")


def _input(placeholder: str, id: str) -> Input:
    return Input(placeholder=placeholder, id=id)


def _heading(text: str) -> Static:
    return Static(Text(ensure_escaped(text), style="bold"), classes="heading")


def _choices(meanings: Mapping[str, str]) -> list[tuple[str, str]]:
    """Select options that explain themselves: `name — what it means`."""
    return [(f"{name} — {meaning.split(':')[0]}", name) for name, meaning in meanings.items()]


class ResolveDialog(_Dialog):
    """Disposition and rationale for one obligation; each disposition says what it means."""

    CONFIRM = "Resolve"

    def __init__(
        self,
        obligation_id: str,
        summary: str,
        dispositions: Mapping[str, str],
        *,
        question: bool = False,
        notes: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self.obligation_id = obligation_id
        self.summary = escape(summary)  # store text: shown as characters, never acted on
        self.notes = [escape(note) for note in notes]  # the engine's words on what follows (unit ids in them)
        self.dispositions = dict(dispositions)
        self.question = question  # a unit's question: `answered` first and chosen, its rationale the answer
        if question:
            self.CONFIRM = "Answer"

    def body(self) -> ComposeResult:
        title = "Answer question" if self.question else "Resolve obligation"
        yield _heading(f"{title} {self.obligation_id}")
        yield Static(Text(self.summary))
        for note in self.notes:
            yield Static(Text(f"note: {note}"), classes="note")
        yield Label("Disposition")
        if self.question:
            first = next(iter(self.dispositions))
            yield Select(_choices(self.dispositions), id="disposition", value=first, allow_blank=False)
        else:
            yield Select(_choices(self.dispositions), id="disposition", prompt="choose a disposition")
        yield Static(
            Text("any disposition closes the obligation and releases what it holds"),
            id="meaning",
            classes="meaning",
        )
        if self.question:
            yield Label("Answer (the unit reads it in its context)")
            yield _input("your answer", "rationale")
        else:
            yield Label("Rationale")
            yield _input("why this disposition", "rationale")
        yield Static("", id="why", classes="why")

    def on_select_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self.answered("choose a disposition")
            self.query_one("#meaning", Static).update(
                Text(f"{event.value}: {self.dispositions[event.value]}")
            )

    def confirm(self) -> None:
        disposition = self.query_one("#disposition", Select).value
        rationale = self.query_one("#rationale", Input).value
        if disposition is Select.BLANK or not isinstance(disposition, str):
            self.refuse("choose a disposition")
            return
        if not rationale.strip():
            self.refuse("a rationale is required")
            return
        self.dismiss({"disposition": disposition, "rationale": rationale})


class OutcomeDialog(_Dialog):
    """Whether a signal's prediction came true, and why (design §24): recorded signed, once."""

    CONFIRM = "Record"

    def __init__(self, signal_id: str, summary: str, resolves_at: str) -> None:
        super().__init__()
        self.signal_id = signal_id
        self.summary = escape(summary)  # store text: shown as characters, never acted on
        self.resolves_at = escape(resolves_at)

    def body(self) -> ComposeResult:
        yield _heading(f"Record the outcome of signal {self.signal_id}'s prediction")
        yield Static(Text(self.summary))
        yield Static(
            Text(f"It resolves at {self.resolves_at}: that it did not come true can be recorded only then."),
            classes="note",
        )
        yield Label("Did it come true?")
        yield Select(
            [("yes — it came true (at any time)", "yes"), ("no — it did not", "no")],
            id="came-true",
            prompt="choose",
        )
        yield Label("Rationale")
        yield _input("what shows it", "rationale")
        yield Static("", id="why", classes="why")

    def confirm(self) -> None:
        answer = self.query_one("#came-true", Select).value
        rationale = self.query_one("#rationale", Input).value
        if answer is Select.BLANK or not isinstance(answer, str):
            self.refuse("say whether it came true")
            return
        if not rationale.strip():
            self.refuse("a rationale is required")
            return
        self.dismiss({"cameTrue": answer, "rationale": rationale})


class RetractDialog(_Dialog):
    """A reason, and the last characters of the id typed back: retraction is for good."""

    CONFIRM = "Retract"
    CONFIRM_CHARS = 4

    def __init__(self, entry_id: str, summary: str) -> None:
        super().__init__()
        self.entry_id = entry_id
        self.summary = escape(summary)  # store text: shown as characters, never acted on

    @property
    def expected(self) -> str:
        return self.entry_id[-self.CONFIRM_CHARS :]

    def body(self) -> ComposeResult:
        yield _heading(f"Retract memory entry {self.entry_id}")
        yield Static(Text(self.summary))
        yield Static(
            Text("Retracted for good: no unit receives it again; the entry stays in the log."),
            classes="note",
        )
        yield Label("Reason")
        yield _input("why this fact is wrong", "reason")
        yield Label(f"Type {self.expected!r} (the id's last {self.CONFIRM_CHARS} characters) to confirm")
        # the placeholder never shows the answer: it read as a field already filled in (an operator's review)
        yield _input(f"the id's last {self.CONFIRM_CHARS} characters", "typed")
        yield Static("", id="why", classes="why")

    def confirm(self) -> None:
        reason = self.query_one("#reason", Input).value
        typed = self.query_one("#typed", Input).value
        if not reason.strip():
            self.refuse("a reason is required")
            return
        if typed.strip().upper() != self.expected.upper():
            self.refuse(f"type {self.expected} to confirm")
            return
        self.dismiss({"reason": reason})


class DecideDialog(_Dialog):
    """A recovery decision on a unit: the action (each says what it means) and its rationale."""

    CONFIRM = "Record"

    def __init__(
        self,
        unit_id: str,
        actions: Mapping[str, str],
        preview: Callable[[str], list[str]] | None = None,
    ) -> None:
        super().__init__()
        self.unit_id = unit_id
        self.actions = dict(actions)
        self.preview = preview

    def body(self) -> ComposeResult:
        yield _heading(f"Recovery decision for unit {self.unit_id}")
        yield Label("Action")
        yield Select(_choices(self.actions), id="action", prompt="choose an action")
        # the field before the preview: a long preview at 80×24 pushed it off the dialog, out of the
        # Tab order's turn, and what was typed went nowhere (an operator's review)
        yield Label("Rationale")
        yield _input("why", "rationale")
        yield Static("", id="why", classes="why")
        yield Static(
            Text("choose an action to see what it means and changes"), id="preview", classes="preview"
        )

    def confirm(self) -> None:
        action = self.query_one("#action", Select).value
        rationale = self.query_one("#rationale", Input).value
        if action is Select.BLANK or not isinstance(action, str):
            self.refuse("choose an action")
            return
        if not rationale.strip():
            self.refuse("a rationale is required")
            return
        self.dismiss({"action": action, "rationale": rationale})

    def on_select_changed(self, event: Select.Changed) -> None:
        """What the chosen action means, which obligations it changes and what it opens, before
        anything is written."""
        value = event.value
        if not isinstance(value, str):
            return
        self.answered("choose an action")
        lines = [f"{value}: {self.actions[value]}", ""]
        lines += self.preview(value) if self.preview is not None else []
        self.query_one("#preview", Static).update(Text("\n".join(ensure_escaped(line) for line in lines)))


class ProposalDialog(_Dialog):
    """Accept or reject a proposal, with a rationale; accepting says it commits, and shows the diff.
    What the change does comes first, in the dialog's own words: the file and who proposed it, the
    commit warning and each `!` line (a key, a grant, a command the host would run), then the
    operator's rationale field (it has the focus, so what the operator types lands there), the diff
    and the replay. The proposer's own rationale, store text a unit may have written, comes last in
    a box of a few lines: it cannot
    push what accepting grants off the screen (an adversarial review drew a harmless review in it
    and buried the real one). The dialog opens at its heading: at 80×24 the warning, the `!` lines
    and the field are on screen."""

    AUTO_FOCUS = "#rationale"

    def __init__(
        self,
        proposal_id: str,
        verdict: str,
        summary: str,
        review: list[str] | None = None,
        replay: list[str] | None = None,
        subject: str = "",
    ) -> None:
        super().__init__()
        self.proposal_id = proposal_id
        self.subject = escape(subject)  # `FILE, proposed by unit r1`: names are store text too
        self.verdict = verdict
        self.CONFIRM = verdict.capitalize()
        self.summary = escape(summary)  # store text: shown as characters, never acted on
        lines = review or []
        count = next((i for i, line in enumerate(lines) if not line.startswith("! ")), len(lines))
        # review() gives plain text lines: each escaped whole (a diff line is the proposed file's own
        # text, and a run of spaces in it drew fake diff lines: an adversarial review)
        self.flags = [shown_line(line) for line in lines[:count]]  # what accepting grants
        self.review = lines[count:]  # the diff
        self.replay = [ensure_escaped(line) for line in replay or []]  # a routing policy's replay

    def body(self) -> ComposeResult:
        yield _heading(f"{self.verdict.capitalize()} proposal {self.proposal_id}")
        if self.subject:
            yield Static(Text(self.subject), id="subject")
        if self.verdict == "accept":
            yield Static(
                Text("Accepting writes the file and commits it to git, signed by you (Authorized-by)."),
                classes="note",
                id="commits",
            )
        else:
            yield Static(
                Text("Rejecting writes nothing to the file; the proposal is closed."), classes="note"
            )
        if self.flags:
            yield Static(Text("\n".join(self.flags)), classes="why", id="flags")
        yield Label("Your rationale")
        yield _input("why you accept or reject it", "rationale")
        yield Static("", id="why", classes="why")
        if self.review:
            with VerticalScroll(classes="preview", id="diff"):
                yield Static(Text("\n".join(shown_line(line) for line in self.review)))
        if self.replay:
            with VerticalScroll(id="replay", classes="replay"):
                yield Static(Text("\n".join(self.replay)))
        yield Label("Their rationale")
        with VerticalScroll(classes="said", id="said"):
            yield Static(Text(self.summary))

    def confirm(self) -> None:
        rationale = self.query_one("#rationale", Input).value
        if not rationale.strip():
            self.refuse("a rationale is required")
            return
        self.dismiss({"rationale": rationale})


class AckDialog(_Dialog):
    """Acknowledge a finding: the ack line is written into the entry and committed, signed. It says
    what an ack does not do: the units the finding affects stay held until it is resolved."""

    CONFIRM = "Acknowledge"

    def __init__(self, finding_id: str, summary: str, path: str, affects: list[str]) -> None:
        super().__init__()
        self.finding_id = finding_id
        self.summary = escape(summary)
        self.path = escape(path)
        self.affects = escape(", ".join(affects) or "nothing")

    def body(self) -> ComposeResult:
        yield _heading(f"Acknowledge finding {self.finding_id}")
        yield Static(Text(self.summary))
        yield Static(
            Text(f"Writes a dated ack line into {self.path} and commits it (Authorized-by: you, signed)."),
            classes="note",
            id="commits",
        )
        yield Static(
            Text(
                f"An ack does not release anything: what it affects ({self.affects}) stays held "
                "(stale-knowledge) until the finding is resolved (r on the finding). An acknowledged "
                "finding on an in-progress unit is a lint error (regate): demote the unit or resolve it."
            ),
            id="held",
        )
        yield Static("", id="why", classes="why")

    def confirm(self) -> None:
        self.dismiss({})


class ResolveFindingDialog(_Dialog):
    """Resolve a finding: `resolved: true` and the rationale are written into the entry and committed,
    signed (the same engine call as `registry resolve --commit`)."""

    CONFIRM = "Resolve"

    def __init__(self, finding_id: str, summary: str, path: str, affects: list[str]) -> None:
        super().__init__()
        self.finding_id = finding_id
        self.summary = escape(summary)
        self.path = escape(path)
        self.affects = escape(", ".join(affects) or "nothing")

    def body(self) -> ComposeResult:
        yield _heading(f"Resolve finding {self.finding_id}")
        yield Static(Text(self.summary))
        yield Static(
            Text(
                f"Writes resolved: true and your rationale into {self.path} and commits it "
                "(Authorized-by: you, signed). The finding becomes history: what it affects "
                f"({self.affects}) is no longer held by it."
            ),
            classes="note",
            id="commits",
        )
        yield Label("Rationale")
        yield _input("why it is resolved (what fixed it)", "rationale")
        yield Static("", id="why", classes="why")

    def confirm(self) -> None:
        rationale = self.query_one("#rationale", Input).value
        if not rationale.strip():
            self.refuse("a rationale is required")
            return
        self.dismiss({"rationale": rationale})


class DismissDialog(_Dialog):
    """Dismiss a line `verify` names (a bad store line): signed, appended to identity.ndjson; the
    line stays, and what it still does is the engine's word (`dismissal_leaves`, the same rule
    `verify --dismiss` says)."""

    CONFIRM = "Dismiss"

    def __init__(self, target: str, message: str, leaves: str) -> None:
        super().__init__()
        self.target = target
        self.message = escape(message)
        self.leaves = leaves

    def body(self) -> ComposeResult:
        yield _heading(f"Dismiss {self.target}")
        yield Static(Text(self.message))
        yield Static(
            Text(
                "Appends a dismissal signed by you: verify and --once list the line as dismissed and "
                "no longer fail on it. The line is not removed (the stores are append-only), and "
                f"{self.leaves}."
            ),
            classes="note",
            id="commits",
        )
        yield Label("Rationale")
        yield _input("why this line may be set aside", "rationale")
        yield Static("", id="why", classes="why")

    def confirm(self) -> None:
        rationale = self.query_one("#rationale", Input).value
        if not rationale.strip():
            self.refuse("a rationale is required")
            return
        self.dismiss({"rationale": rationale})


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
            yield Static(Hanging((ensure_escaped(line), None) for line in self.lines), id="text")

    def action_close(self) -> None:
        self.dismiss(None)
