"""Predictions that resolve (design §24): a report may carry `prediction: {resolvesAt}`; once that
time passes the signal awaits an outcome, which a person records (signed); calibration counts,
per reporting source and confidence, how many came true, how many did not and how many await.
"""

from __future__ import annotations

from typing import Any

import msgspec

from engine.base import clock
from engine.base.errors import BadInput
from engine.base.limits import check_text
from engine.base.lookup import check_prefix, key_by_prefix
from engine.checkout.workspace import Workspace
from engine.commands.actors import check_person
from engine.commands.deciding import deciding
from engine.commands.signals import CONFIDENCE
from engine.commands.written import PredictionOutcomeEvent
from engine.read.model import EventKind, State
from engine.read.rules import Denied, lacks, recording_outcome
from engine.read.worldfold import AWAITING, CAME_TRUE, DID_NOT, reporter, status

ANSWERS = {"yes": True, "no": False}


def resolve_prediction(
    ws: Workspace, prefix: str, came_true: str, by: str | None, rationale: str
) -> dict[str, Any]:
    """`regulator signals resolve-prediction ID --came-true yes|no --by P --rationale R`: a signed
    person event, as engine.read.rules.recording_outcome allows it."""
    check_prefix(prefix, "signal")
    person = check_person(by, came_true=came_true, rationale=rationale)
    if came_true not in ANSWERS:
        raise BadInput(
            "--came-true: required (yes or no)"
            if came_true == ""
            else f"--came-true {came_true!r}: yes or no"
        )
    answer = ANSWERS[came_true]
    rationale = check_text("--rationale", rationale, kind="rationale")

    def rule(state: State) -> Denied | None:  # the grant before the signal is looked up, as ever
        people = ws.people()
        return lacks(people, person, "resolve", "record a prediction's outcome") or recording_outcome(
            people, person, state, key_by_prefix(state.signals.refs, prefix, "signal"), answer
        )

    with deciding(ws, rule, stores=("signals",), person=person, route=False) as turn:
        event: PredictionOutcomeEvent = {
            "kind": EventKind.PREDICTION_OUTCOME.value,
            "signal": key_by_prefix(turn.state.signals.refs, prefix, "signal"),
            "cameTrue": answer,
            "by": person,
            "rationale": rationale,
            "at": clock.iso(clock.now()),
        }
        return ws.store("signals").append(turn.signed(event))


# ---- calibration ------------------------------------------------------------------------------


class Tally(msgspec.Struct):
    """One source's predictions at one confidence level."""

    source: str  # "unit r1", "sensor osv-pypi", "person alice"
    confidence: str
    came_true: int = 0
    did_not: int = 0
    awaiting: int = 0
    pending: int = 0

    def json(self) -> dict[str, Any]:
        kind, _, name = self.source.partition(" ")
        judged = self.came_true + self.did_not
        return {
            "source": name,
            "sourceKind": kind,
            "confidence": self.confidence,
            "cameTrue": self.came_true,
            "didNotComeTrue": self.did_not,
            "awaiting": self.awaiting,
            "pending": self.pending,
            "rate": round(self.came_true / judged, 3) if judged else None,
        }


def calibration(state: State) -> list[Tally]:
    """Per reporting source (unit, sensor or person) and confidence level, in that order."""
    tallies: dict[tuple[str, str], Tally] = {}
    for signal_id in state.world.predicted:
        signal = state.signals[signal_id]
        source = reporter(signal)
        confidence = signal.get("confidence")
        confidence = confidence if confidence in CONFIDENCE else "?"
        tally = tallies.setdefault((source, confidence), Tally(source, confidence))
        found = status(state, signal_id, signal)
        if found == CAME_TRUE:
            tally.came_true += 1
        elif found == DID_NOT:
            tally.did_not += 1
        elif found == AWAITING:
            tally.awaiting += 1
        else:
            tally.pending += 1
    order = {c: i for i, c in enumerate(CONFIDENCE)}
    return sorted(tallies.values(), key=lambda t: (t.source, order.get(t.confidence, 9)))
