"""ask_human (design §22): a unit's question to a person, and the answers it gets back.

A question is a signal of type `question` in signals.ndjson, stamped from the lease as a report is.
The router opens one advisory obligation of kind question on the asking unit, owed to S3, with a
deterministic id (engine.commands.router.route_question); a person answers it with the signed disposition
`answered`, whose rationale is the answer. Nothing here routes or resolves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.base import clock
from engine.base.errors import BadInput
from engine.base.limits import check_list, check_text
from engine.checkout.workspace import Lease, Workspace
from engine.commands.actors import leased
from engine.commands.router import QUESTION
from engine.commands.written import QuestionEvent
from engine.read.model import EventKind, State

FIELDS = ("question", "options")
GRANT = "ask_human"
SUBJECT_CHARS = 200  # the question's first line, cut to this, is the signal's subject


def validate_question(fields: dict[str, Any]) -> dict[str, Any]:
    """The question's fields checked (exit 2 on the first problem)."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}")
    if fields.get("question") is None:
        raise BadInput("question: required")
    question = check_text("question", fields["question"])
    options = fields.get("options")
    options = [] if options is None else check_list("options", options, kind="subject")
    if len(set(options)) != len(options):
        raise BadInput("options: an option is given twice")
    return {"question": question, "options": options}


def subject_of(question: str) -> str:
    first = question.strip().split("\n", 1)[0].strip()
    return first if len(first) <= SUBJECT_CHARS else first[: SUBJECT_CHARS - 1] + "…"


def unit_question(
    ws: Workspace, fields: dict[str, Any], lease: Lease, state: State, revision: Callable[[], str | None]
) -> QuestionEvent:
    """The question signal a leased unit asks, ready to append (a new id): validated (exit 2),
    then authorized (exit 3) on `state`: the lease is current and its profile grants ask_human."""
    body = validate_question(fields)
    unit_type, _ = leased(ws, state, lease, GRANT)
    return {
        "kind": EventKind.SIGNAL.value,
        "type": QUESTION,
        "subject": subject_of(body["question"]),
        "question": body["question"],
        "options": body["options"],
        "unit": lease.unit,
        "by": None,
        "revision": revision(),
        "source": "S4" if unit_type == "research" else "S1",  # who asks: intelligence, or operations
        "destination": "S3",
        "at": clock.iso(clock.now()),
    }
