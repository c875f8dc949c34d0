"""Predictions that resolve (SPEC §24): a report may carry `prediction: {resolvesAt}`; once that
time passes the signal awaits an outcome, which a person records (signed); calibration counts,
per reporting source and confidence, how many came true, how many did not and how many await.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_text
from engine.base.lookup import check_prefix, key_by_prefix
from engine.checkout.workspace import Workspace
from engine.commands.actors import check_person, require_grant
from engine.commands.signals import CONFIDENCE
from engine.read.load import load
from engine.read.model import EventKind, State
from engine.read.worldfold import AWAITING, CAME_TRUE, DID_NOT, outcome, reporter, resolves_at, status
from engine.trust.signing import person_event, signer_for

ANSWERS = {"yes": True, "no": False}


def _check(state: State, signal_id: str, came_true: bool, now: datetime) -> None:
    signal = state.signals[signal_id]
    due = resolves_at(signal)
    if due is None:
        raise BadInput(f"signal {signal_id} makes no prediction (report_intelligence's `prediction`)")
    earlier = outcome(state, signal_id)
    if earlier is not None:
        said = "came true" if earlier.get("cameTrue") else "did not come true"
        raise Refused(
            f"signal {signal_id}'s prediction already {said}: recorded by {earlier.get('by')} at {earlier.get('at')}"
        )
    if not came_true and due > now:
        raise Refused(
            f"signal {signal_id}'s prediction resolves at {clock.iso(due)}: that it did not come true "
            "can be recorded only then (that it came true, at any time)"
        )


def resolve_prediction(ws: Workspace, prefix: str, came_true: str, by: str | None, rationale: str) -> dict:
    """`regulator signals resolve-prediction ID --came-true yes|no --by P --rationale R`: a signed
    person event; the person needs the `resolve` grant."""
    check_prefix(prefix, "signal")
    person = check_person(by)
    if came_true not in ANSWERS:
        raise BadInput(f"--came-true {came_true!r}: yes or no")
    answer = ANSWERS[came_true]
    rationale = check_text("--rationale", rationale, kind="rationale")
    require_grant(ws, person, "resolve", "record a prediction's outcome")
    state = load(ws, stores=("signals",))
    _check(state, key_by_prefix(state.signals.refs, prefix, "signal"), answer, state.now)  # before any key
    signer = signer_for(ws, person)  # before the lock: a passphrase is never asked under it
    with ws.exclusive():
        state = load(ws, stores=("signals",))
        signal_id = key_by_prefix(state.signals.refs, prefix, "signal")
        _check(state, signal_id, answer, state.now)
        event = {
            "kind": EventKind.PREDICTION_OUTCOME,
            "signal": signal_id,
            "cameTrue": answer,
            "by": person,
            "rationale": rationale,
            "at": clock.iso(clock.now()),
        }
        return ws.store("signals").append(person_event(ws, signer, event))


# ---- calibration ------------------------------------------------------------------------------


@dataclass
class Tally:
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
