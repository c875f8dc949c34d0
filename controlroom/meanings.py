"""What each choice an operator makes means, in words (dialogs, `--help`, `?`): dispositions, recovery
actions, and the header's abbreviations. `short: longer` — the part before the colon names it in a list."""

from __future__ import annotations

from engine.read.model import PERSON_DISPOSITIONS, RECOVERY_ACTIONS

DISPOSITIONS = {
    "no-action": "nothing to do: the signal was wrong, already handled, or does not concern this "
    "unit; the obligation closes and releases what it held",
    "accepted-risk": "the risk is real and accepted: the unit goes on unchanged and the rationale "
    "says why; the obligation closes and releases what it held",
    "rework": "the unit's work must change to address it: the obligation closes (releasing what it "
    "held) and is recorded as rework owed",
    "replan": "the plan changes around it (re-scoped or re-ordered work): the obligation closes "
    "and releases what it held",
    "research-requested": "more must be found out first: research is asked for; the obligation "
    "closes and releases what it held",
    "answered": "a unit's question is answered (questions only): the rationale is the answer, which "
    "the unit reads in its context; the obligation closes and releases what it held",
}

RECOVERY = {
    "retry": "run the same contract again, unchanged (a passing failure): the unit returns to todo "
    "and its open S3 obligations become rework",
    "repair": "fix what broke first (its contract, worktree or environment), then run it: the same "
    "change as retry (todo; S3 obligations become rework); the name tells the desk a fix is due "
    "before the next dispatch",
    "abort": "stop the unit for good: it is aborted and its open S3 obligations become rejected",
    "remediate": "undo or contain what the unit did before anything else: the unit waits on a new "
    "blocking recovery-decision obligation; its open S3 obligations are escalated into it",
    "replan": "the plan must change before the unit goes on: the unit waits on a new blocking "
    "recovery-decision obligation; its open S3 obligations are escalated into it",
    "clarify": "a question must be answered by a person first: the unit waits on a new blocking "
    "recovery-decision obligation; its open S3 obligations are escalated into it",
    "pause": "hold the unit, for no fault of its own, until someone says go: it waits on a new "
    "blocking recovery-decision obligation; its open S3 obligations are escalated into it",
    "escalate": "someone with more authority must decide: the unit waits on a new blocking "
    "recovery-decision obligation; its open S3 obligations are escalated into it",
}

# every choice the engine accepts is explained, and nothing else is
assert tuple(DISPOSITIONS) == tuple(PERSON_DISPOSITIONS)
assert tuple(RECOVERY) == tuple(RECOVERY_ACTIONS)
