"""A typed shape per event kind as the fold reads it: a msgspec Struct of the fields it needs,
decoded in C. What each writer appends is engine.commands.written (a TypedDict per kind, which
readers never import); tests/test_kinds.py proves every event a writer appends converts to its
written shape and every field the fold reads is one a writer writes.

The read shapes hold any line a store may hold: a line appended by hand is read, judged and, when
it is no event an engine writes, counted for nothing (engine.read.fold), never coerced.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from engine.read.model import OWED_TO
from engine.read.worldfold import LINES, OsvRef

# ---- as the fold reads them ------------------------------------------------------------------


class SignalsLine(msgspec.Struct):
    """What the fold reads of a line in signals.ndjson; the rest of the line is checked, not kept.
    Each default is what `dict.get` gave the fold before, so a missing field reads the same. Each
    field is Any: it holds whatever the line holds (the engine writes text; a line edited by hand
    to hold something else is named by `verify`, not coerced here)."""

    kind: Any = None
    id: Any = None
    subject: Any = ""
    expiresAt: Any = None  # noqa: N815 - the store's field name
    signal: Any = None
    obligations: Any = ()
    at: Any = None
    obligation: Any = None
    disposition: Any = None
    by: Any = None
    rationale: Any = None


class SignalLine(msgspec.Struct, tag_field="kind", tag="signal"):
    """The three kinds the signals log holds decode into typed shapes of their own fields only (a
    third less to build and free than SignalsLine). A line of any other kind, or one these refuse
    (a repeated "kind", a kind that is not text, a field of the wrong type), is read as SignalsLine
    instead; the fold counts a refused line of these kinds for nothing and `verify` names it: a
    well-chained line can be appended by anyone with the account's shell (design §15.0)."""

    kind: ClassVar[str] = "signal"
    id: str
    subject: str = ""
    expiresAt: str | None = None  # noqa: N815
    by: str | None = None  # a person-raised signal counts only as a person event does
    # design §24 (engine.read.worldfold): a sensor's report, a supersession, a prediction
    sensor: str | None = None
    osv: OsvRef | None = None
    supersedes: str | None = None
    prediction: dict[str, Any] | None = None
    stalled: str | None = None  # a sensor's stall signal: its feed's newest `modified` (D-321)


class RoutedObligation(msgspec.Struct):
    """One obligation a routing record opens, as the router writes it."""

    id: str
    severity: str
    blocks: bool
    unit: str | None = None
    owedTo: str = OWED_TO  # noqa: N815
    kind: str | None = None  # "question" for a question's obligation (design §22); else intelligence


class Seen(msgspec.Struct, gc=False):
    """What a fold reads of a host event's `seen` (design §22): the lengths of the two stores that
    hold host events, as a host writes them (built in C with no dict; one of any other shape is read
    whole, by the shape for any line, and judged there)."""

    signals: int | None = None
    units: int | None = None


class RoutingLine(msgspec.Struct, tag_field="kind", tag="routing"):
    kind: ClassVar[str] = "routing"
    signal: str
    obligations: list[RoutedObligation] = []
    at: str | None = None
    seen: Seen | None = None  # the other stores' byte lengths the router saw (design §22)


class DispositionLine(msgspec.Struct, tag_field="kind", tag="disposition"):
    kind: ClassVar[str] = "disposition"
    obligation: str
    disposition: str | None = None
    by: str | None = None
    rationale: str | None = None
    at: str | None = None


class UnitsLine(msgspec.Struct):
    """What the units fold reads of a line in units.ndjson: the rest (its hash, prev, signature,
    ...) is checked as JSON, not built. As with SignalsLine, each field is Any and each default is
    what `dict.get` gave the fold (UNSET where the fold tells a missing field from a null one), so
    any line reads as the whole event did; tests/test_store.py proves the two readings agree."""

    kind: Any = None
    unit: Any = None
    id: Any = None
    at: Any = None
    leaseHash: Any = None  # noqa: N815 - the store's field name
    worktree: Any = None
    type: Any = None
    profile: Any = None
    action: Any = None
    disposition: Any = None
    by: Any = None
    rationale: Any = msgspec.UNSET
    resolves: Any = ()
    opens: Any = None
    expiresAt: Any = None  # noqa: N815 - a dispatch's lease time (design §23)
    ttl: Any = None
    confined: Any = None
    runOn: Any = None  # noqa: N815 - the host running it (`unit run`, D-266)
    outcome: Any = None  # a result's
    summary: Any = None
    exitCode: Any = None  # noqa: N815
    durationS: Any = None  # noqa: N815
    seen: Any = None  # a dispatch's or close's: the other stores' byte lengths the host saw (design §22)


class HostUnitsLine(UnitsLine):
    """UnitsLine with `seen` as a host writes it: the shape most lines take (a `seen` of another
    shape is read by UnitsLine, whole)."""

    seen: Seen | None = None


# what the fold reads of each kind: (store, kind) -> its read shape (memory and identity are read
# whole, as dicts)
READ: dict[tuple[str, str], type[msgspec.Struct]] = {
    ("signals", "signal"): SignalLine,
    ("signals", "routing"): RoutingLine,
    ("signals", "disposition"): DispositionLine,
    **{("signals", line.kind): line for line in LINES},
    **{
        ("units", kind): UnitsLine
        for kind in ("dispatch", "close", "demote", "decision", "result", "lease-expired")
    },
}
