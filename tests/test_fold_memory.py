"""The memory fold's inline check of an entry as `remember` writes it answers exactly what asking
`_memory_problem` of every line answers (D-65): the same entries kept, the same lines counted for
nothing, with the same reasons, in the same order. And person events are found as before."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.read.fold import UnitsLine, _fold_memory, _memory_problem
from engine.read.model import MemoryEntry, State
from engine.read.persons import PERSON_KINDS, person_refs

MISSING = object()
texts = st.sampled_from(["", "a", "fact", "é", "x y"])
odd = st.sampled_from([None, 5, 1.5, True, ["a"], {"a": 1}])
text_lists = st.lists(st.one_of(texts, texts, texts, odd), max_size=3)
fields = {
    "id": st.one_of(st.sampled_from(["m1", "m2", "m3", "m4", "m5"]), odd),
    "subject": st.one_of(texts, odd),
    "note": st.one_of(texts, odd),
    "reviewBy": st.one_of(
        st.sampled_from(["2026-12-01", "2027-01-28", "2026-02-30", "2026-1-01", "2026-12-01x", ""]), odd
    ),
    "scope": st.one_of(text_lists, odd, texts),
    "evidence": st.one_of(text_lists, odd, texts),
    "unit": st.one_of(st.sampled_from(["u1", "b1"]), odd),
    "at": st.one_of(st.sampled_from(["2026-11-29T12:00:00Z", ""]), odd),
}


@st.composite
def memory_line(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly entries as written (each field of its type), now and then a field of another type,
    absent, or a kind that is not memory."""
    event: dict[str, Any] = {"kind": draw(st.sampled_from(["memory"] * 8 + ["retraction", "note", 3]))}
    for name, strategy in fields.items():
        if draw(st.integers(0, 9)) == 0:
            continue  # absent
        if draw(st.integers(0, 5)) == 0:
            event[name] = draw(strategy)
        else:  # as remember writes it
            event[name] = draw(
                {
                    "id": st.sampled_from(["m1", "m2", "m3", "m4", "m5", "m6", "m7"]),
                    "subject": texts,
                    "note": texts,
                    "reviewBy": st.sampled_from(["2026-12-01", "2027-01-28", "2026-11-30"]),
                    "scope": st.lists(texts, max_size=2),
                    "evidence": st.lists(texts, max_size=2),
                    "unit": st.sampled_from([None, "u1"]),
                    "at": st.just("2026-11-29T12:00:00Z"),
                }[name]
            )
    if event["kind"] == "retraction":
        event["entry"] = 7  # malformed: the fold counts it for nothing without asking for a signature
    return event


def reference_fold(events: list[dict[str, Any]], memory: dict[str, MemoryEntry]) -> list[tuple[int, str]]:
    """The fold as it was: _memory_problem asked of every memory line."""
    uncounted = []
    for at, event in enumerate(events):
        kind = event.get("kind")
        if kind == "memory":
            problem = _memory_problem(event, memory)
            if problem is not None:
                uncounted.append((at, f"malformed: {problem}"))
                continue
            memory[event["id"]] = MemoryEntry(event)
        elif kind == "retraction":
            uncounted.append((at, "malformed: a retraction without an entry id"))
    return uncounted


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(memory_line(), max_size=12), st.lists(memory_line(), max_size=12))
def test_the_inline_check_answers_what_memory_problem_answers(first: Any, second: Any) -> None:
    state = State(now=datetime(2026, 11, 29, tzinfo=UTC))
    expected_memory: dict[str, MemoryEntry] = {}
    expected = []
    for part, offset in ((first, 0), (second, len(first))):  # two reads: the second meets the first's ids
        _fold_memory(state, part, [(offset + k) << 2 | 2 for k in range(len(part))])
        expected += [(offset + k, why) for k, why in reference_fold(part, expected_memory)]
    assert [(u.offset, u.reason) for u in state.uncounted] == expected
    assert {k: v.event for k, v in state.memory.items()} == {k: v.event for k, v in expected_memory.items()}
    assert all(state.memory[k].event is v.event for k, v in expected_memory.items())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["decision", "demote", "dispatch", "retraction", "memory"]), odd)))
def test_person_events_are_found_as_one_pass_found_them(kinds: Any) -> None:
    events = [{} if kind is MISSING else {"kind": kind} for kind in kinds]
    refs = [k << 2 | 1 for k in range(len(events))]
    for store in ("units", "memory"):
        wanted = PERSON_KINDS[store]
        # the units fold reads its lines as UnitsLine (engine.read.fold.SHAPES), memory's whole
        read = [UnitsLine(**e) for e in events] if store == "units" else events
        assert person_refs(store, read, refs) == [
            at for e, at in zip(events, refs, strict=True) if e.get("kind") in wanted
        ]
