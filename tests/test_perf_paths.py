"""The third round's fast paths (design §25) answer what the slow paths they stand beside answer.

In-process (hypothesis), no timer: speed is measured in bench/, never asserted here.
- `line_hash` (the chain check's hash of a strictly decoded line) equals `event_hash` of the same
  line as the strict reader decodes it, whatever the line holds (floats, big integers, any text).
- `verify` names exactly what it named with `event_hash` on every line.
- `last_event` (every append's read of the chain's tail) finds in growing pieces what one read finds.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine.log.store import HASHING, canonical, event_hash, line_hash

# imported here, not in a test: that module's own @given tests run at import, refused inside a @given
from tests.hardening.test_bad_lines import append_raw, chained

# every text a JSON line can carry: any code point (lone surrogates too: json.dumps writes them
# escaped, and the strict reader refuses them), keys as well as values
TEXT = st.text(st.characters(codec=None), max_size=8)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e16, 1.5e-5, 1e22, 0.1, -0.0, 1e-7, 123456789.125, 5e-324]),
    TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=16,
)
EVENTS = st.dictionaries(
    st.one_of(TEXT, st.sampled_from(["hash", "prev", "kind", "at", "id"])), VALUES, max_size=8
)


def _lines(event: dict) -> list[bytes]:
    """The ways a line holding `event` may be written: canonically (as the engine writes), with
    Python's default separators and key order, and with every non-ASCII character escaped."""
    return [
        canonical(event),
        json.dumps(event).encode(),
        json.dumps(event, ensure_ascii=False).encode("utf-8", "surrogatepass"),
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS, st.one_of(st.none(), st.text("0123456789abcdef", min_size=64, max_size=64)))
def test_line_hash_is_event_hash(event: dict, claimed: str | None) -> None:
    if claimed is not None:
        event["hash"] = claimed
    for raw in _lines(event):
        try:
            strict = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            strict = None
        try:
            fast = HASHING.decode(raw)
        except msgspec.DecodeError:
            fast = None
        # the hashing reader takes exactly the lines the strict reader takes
        assert (strict is None) == (fast is None)
        if fast is None:
            continue
        before = list(fast.items())
        assert line_hash(fast) == event_hash(strict)
        assert dict(fast) == dict(before)  # the event holds what it held (its `hash` put back)


def test_line_hash_floats_and_sorting() -> None:
    """The cases where msgspec writes other bytes than json.dumps: floats with an exponent, and
    key order (code point order across the BMP and astral planes)."""
    for raw in [
        b'{"a":1e16,"hash":"x"}',
        b'{"a":1.5e-05}',
        b'{"a":[0.000015,1E+22]}',
        b'{"\\uffff":1,"\\ud83d\\ude00":2,"\\u00e9":3,"z":4}',
        b'{"a":{"hash":"inner"},"hash":"outer","prev":""}',
        b'{"b":123456789012345678901234567890}',
    ]:
        assert line_hash(HASHING.decode(raw)) == event_hash(msgspec.json.decode(raw))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(EVENTS, min_size=1, max_size=6), st.data())
def test_verify_names_what_the_full_check_names(tmp_path_factory: Any, events: list[dict], data: Any) -> None:
    """A store whose lines are chained as the engine chains them, some then edited (a value
    changed, a float rewritten, a line re-encoded): `verify` with the fast hash finds exactly
    what it finds hashing every line with `event_hash`."""
    import engine.log.store as store_module
    from engine.log.store import GENESIS, Store

    lines = []
    prev = GENESIS
    for event in events:
        event = {k: v for k, v in event.items() if k not in ("hash", "prev")} | {"prev": prev}
        event["hash"] = event_hash(event)
        prev = event["hash"]
        line = canonical(event)
        edit = data.draw(st.sampled_from(["none", "none", "value", "dumps", "float"]))
        if edit == "value":
            line = canonical(event | {"kind": data.draw(TEXT)})
        elif edit == "dumps":
            line = json.dumps(event).encode()
        elif edit == "float":
            line = canonical(event | {"x": data.draw(st.floats(allow_nan=False, allow_infinity=False))})
        lines.append(line.replace(b"\n", b"\\n"))
    root = tmp_path_factory.mktemp("store")
    path = root / "signals.ndjson"
    path.write_bytes(b"\n".join(lines) + b"\n")
    store = Store(path)
    fast = store_module.verify(store)
    original = store_module.line_hash
    store_module.line_hash = store_module.event_hash  # the full check: canonical on every line
    try:
        slow = store_module.verify(store)
    finally:
        store_module.line_hash = original
    assert fast == slow


def test_line_hash_matches_sha256_of_canonical_body() -> None:
    event = {"kind": "signal", "prev": "", "subject": "é \u202e\x7f", "n": 3, "hash": "h"}
    body = {k: v for k, v in event.items() if k != "hash"}
    assert line_hash(dict(event)) == hashlib.sha256(canonical(body)).hexdigest()


# ---- output: --json's encoder and its escaping -------------------------------------------------

OUTPUT_KEYS = st.one_of(TEXT, st.integers(-5, 5), st.booleans(), st.none())
OUTPUT = st.recursive(
    st.one_of(SCALARS, st.sampled_from([float("inf"), float("-inf"), float("nan")])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(OUTPUT_KEYS, inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(OUTPUT)
def test_dumps_indented_is_json_dumps(data: Any) -> None:
    from controlroom.printing import dumps_indented

    assert dumps_indented(data) == json.dumps(data, ensure_ascii=False, indent=2)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(TEXT, OUTPUT, max_size=6), st.data())
def test_a_document_whose_rows_were_written_early_is_json_dumps(document: dict, data: Any) -> None:
    """--once --json writes its rows while verify's child runs, the rest after
    (controlroom.once.as_json_text): the same text as the whole document written at once."""
    from controlroom.printing import indented_pieces, laid_members

    keys = list(document)
    start = data.draw(st.integers(0, len(keys)))
    end = data.draw(st.integers(start, len(keys)))
    members = {k: document[k] for k in keys[start:end]}
    expected = json.dumps(document, ensure_ascii=False, indent=2)
    assert "".join(indented_pieces(document, members, laid_members(members))) == expected
    assert "".join(indented_pieces(document, members, None)) == expected  # what json could not write early


def _escape_json_one_by_one(dumped: str) -> str:
    """escape_json as it was: every character looked at."""
    from engine.base.text import _json_escape, hidden

    if (
        dumped.isprintable()
        and __import__("engine.base.text", fromlist=["x"])._INVISIBLE_CLASS.search(dumped) is None
    ):
        return dumped
    return "".join(_json_escape(char) if char >= "\x7f" and hidden(char) else char for char in dumped)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        OUTPUT, TEXT, st.text(st.characters(codec=None), max_size=40), st.text('a\n\x7f\\"', max_size=12)
    )
)
@example("a\x7f\nb")  # ASCII with DEL: the branch that never looks at a character
@example({"k": ["\x7f", "plain"]})
def test_escape_json_is_the_per_character_escape(data: Any) -> None:
    from engine.base.text import escape_json

    for dumped in (
        (data if isinstance(data, str) else ""),
        json.dumps(data, ensure_ascii=False, indent=2),
        json.dumps(data, ensure_ascii=False),
    ):
        assert escape_json(dumped) == _escape_json_one_by_one(dumped)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(st.characters(codec=None), max_size=12) | st.text('a\n\x7f\\"', max_size=6), max_size=5)
)
@example(["{\n", "\x7f", ",\n", "\u200b\u00a0", "\n}"])
def test_json_written_in_pieces_is_the_whole_text_written(pieces: list[str]) -> None:
    """--once --json writes its document in the pieces it is joined from (printing.indented_pieces),
    each escaped in turn: byte for byte what the joined text escaped and written at once gives, to a
    stream with no file of its own (a capture) and straight to a file (`printing._write_bytes`)."""
    import contextlib
    import io
    import sys
    import tempfile

    from controlroom.printing import emit_json_text
    from engine.base.text import escape_json

    expected = escape_json("".join(pieces)) + "\n"
    whole, parts = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(whole):
        emit_json_text("".join(pieces))
    with contextlib.redirect_stdout(parts):
        emit_json_text(pieces)
    assert parts.getvalue() == whole.getvalue() == expected
    with (
        tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as file,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(sys, "__stdout__", file)  # the interpreter's own: its bytes go straight to the file
        with contextlib.redirect_stdout(file):
            print("before", end="")  # what the stream buffered is written first
            emit_json_text(pieces)
            print("after", end="")
        file.flush()
        file.seek(0)
        assert file.read() == "before" + expected + "after"


OUTCOMES = ["noted", "noted", "noted", "obligations", "unrouted", "unrouted"]


def _signals_of_every_row(ws: Any) -> None:
    """Signals of each kind a row shows: a prediction with an outcome and one without, a plain
    signal, one routed to an obligation, one unrouted."""
    from tests.test_predictions import outcome, report

    predicted = report(ws, by="alice")
    report(ws, by="alice", resolves="2026-12-20T00:00:00Z", subject="another")
    report(ws, by="alice", resolves=None, subject="plain")
    report(ws, by="alice", resolves=None, subject="holds", reportedSeverity="blocking", affectedUnits=["u1"])
    ws.run("signals", "route", check=True)
    assert outcome(ws, predicted, "yes").returncode == 0
    report(ws, by="alice", resolves=None, subject="unrouted")


def test_once_signal_rows_are_signal_rows_selected(ws: Any, monkeypatch: Any) -> None:
    """--once --json builds its signal rows from the read-back itself (controlroom.once._signals_json):
    exactly the fields of `signal_rows` it shows, as it selected them before, for a prediction (with
    and without an outcome), a plain signal, an unrouted one and one that does not read back whole."""
    from controlroom.once import _signals_json
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.read.load import load
    from engine.read.queries import signal_rows
    from tests.test_predictions import LATER

    _signals_of_every_row(ws)
    event = {"kind": "signal", "id": "sx1", "subject": "hand", "reportedSeverity": "info", "unit": None,
             "by": None, "at": "2026-11-29T12:00:00Z", "pad": float("inf")}  # fmt: skip
    append_raw(ws, "signals", chained(ws, "signals", event).replace("Infinity", "1e999"))
    monkeypatch.setenv("REGULATOR_NOW", LATER["REGULATOR_NOW"])
    state = load(EngineWorkspace(ws.root))
    keys = ("id", "unit", "by", "sensor", "subject", "reportedSeverity", "derivedSeverity", "outcome", "at")
    expected = [
        {k: r[k] for k in keys}
        | {"outcome": r["outcome"] or "unrouted"}
        | ({"prediction": r["prediction"]} if r["prediction"] else {})
        for r in signal_rows(state)
    ]
    assert len(expected) == 6 and sum("prediction" in r for r in expected) == 2
    assert [r["outcome"] for r in expected] == OUTCOMES, [r["outcome"] for r in expected]
    assert json.dumps(_signals_json(state)) == json.dumps(expected)  # the same keys, in the same order


ROW_KEYS = st.sampled_from(
    ["unit", "by", "sensor", "subject", "reportedSeverity", "at", "prediction", "derivedSeverity", "outcome"]
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.one_of(ROW_KEYS, TEXT), VALUES, max_size=8), ROW_KEYS, VALUES)
def test_a_line_read_in_a_rows_shape_is_the_line_read_whole(event: dict, again: str, value: Any) -> None:
    """The shaped read-back of signal rows (engine.read.queries.signals_routed_shaped): every line
    the whole read takes as an object gives each field the whole read gives it (a key written twice
    as well: the last counts); a line it takes as no object, or refuses, gives no row. The other
    way round is the exception it is kept for: a shape takes a line with a number out of range or
    a byte that is no UTF-8 in a field it skips (the whole read refuses it), which verify names
    (test_once_shows_the_line_read_whole_where_verify_names_one)."""
    from engine.read.queries import _ROUTING_ROW, _SIGNAL_ROW, RoutingRow, SignalRow

    twice = json.dumps(event, ensure_ascii=False)[:-1]
    twice += ("," if event else "") + json.dumps(again) + ":" + json.dumps(value, ensure_ascii=False) + "}"
    for raw in [*_lines(event), twice.encode("utf-8", "surrogatepass"), b"[1]", b'"x"', b"{"]:
        try:
            whole = msgspec.json.decode(raw)
        except (ValueError, RecursionError):
            whole = None
        for decoder, shape in ((_SIGNAL_ROW, SignalRow), (_ROUTING_ROW, RoutingRow)):
            try:
                row = decoder.decode(raw)
            except (ValueError, RecursionError):
                row = None
            if type(whole) is not dict:
                assert row is None or whole is None  # only what the whole read refuses may read as a row
                continue
            assert row is not None
            for name in shape.__struct_fields__:  # json.dumps: True is not 1, nor 1 1.0
                assert json.dumps(getattr(row, name)) == json.dumps(whole.get(name)), name


def test_shaped_signal_rows_are_the_rows_read_whole(ws: Any, monkeypatch: Any) -> None:
    """--once --json's signal rows read in their shape (controlroom.once._signals_json_shaped) are
    the rows read whole, for a prediction with and without an outcome, a plain signal, one routed
    to an obligation and one unrouted."""
    from controlroom.once import _signals_json, _signals_json_shaped
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.read.load import load
    from tests.test_predictions import LATER

    _signals_of_every_row(ws)
    monkeypatch.setenv("REGULATOR_NOW", LATER["REGULATOR_NOW"])
    state = load(EngineWorkspace(ws.root))
    whole = _signals_json(state)
    assert [r["outcome"] for r in whole] == ["noted", "noted", "noted", "obligations", "unrouted"]
    assert sum("prediction" in r for r in whole) == 2
    assert json.dumps(_signals_json_shaped(state)) == json.dumps(whole)


def test_once_shows_the_line_read_whole_where_verify_names_one(ws: Any) -> None:
    """A signal line with a number out of range in a field the shapes skip (D-184) reads as a row
    in the rows' shape, but not whole: verify names it, and `controlroom --once --json` then shows
    the rows read whole (D-203): that signal's fields empty, as before the shaped read."""
    from tests.test_predictions import report

    report(ws, by="alice", resolves=None, subject="plain")
    event = {"kind": "signal", "id": "sx1", "subject": "hand", "reportedSeverity": "info", "unit": None,
             "by": None, "at": "2026-11-29T12:00:00Z", "pad": float("inf")}  # fmt: skip
    append_raw(ws, "signals", chained(ws, "signals", event).replace("Infinity", "1e999"))
    done = ws.run("controlroom", "--once", "--json")
    assert done.returncode == 1, done.stderr  # verify names the line
    document = json.loads(done.stdout)
    rows = {r["id"]: r for r in document["signals"]}
    assert rows["sx1"]["subject"] is None and rows["sx1"]["reportedSeverity"] is None, rows["sx1"]
    assert any(r["subject"] == "plain" for r in rows.values())
    assert any(f["store"] == "signals.ndjson" for f in document["verify"]), document["verify"]
    # dismissed by a person, the line is still one no reader reads whole: still shown as such
    line = next(f["line"] for f in document["verify"] if f["store"] == "signals.ndjson")
    ws.run("verify", "--dismiss", f"signals:{line}", "--by", "alice", "--rationale", "seen", check=True)
    document = json.loads(ws.run("controlroom", "--once", "--json").stdout)
    assert not any(f["store"] == "signals.ndjson" for f in document["verify"]), document["verify"]
    assert {r["id"]: r for r in document["signals"]}["sx1"]["subject"] is None


def _routed_signals(ws: Any) -> list[str]:
    """Three signals reported by alice (one blocking, holding u1) and routed: `prepared`'s steps."""
    from tests.helpers import report_args

    for subject, severity in (("one", "blocking"), ("two", "info"), ("three", "critical")):
        ws.run(*report_args(subject=subject, severity=severity, affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    return [e["id"] for e in ws.events("signals") if e["kind"] == "signal"]


# what a writer with the account's shell appends to signals.ndjson after the host routed: copies of
# real lines, the same with a field changed, signals under new ids (a few, so that one id is opened
# by several lines: unsigned in alice's name, which counts for nothing, or anonymous, which counts;
# one the router cannot decode), routing records for them or for none, and garbage
FORGERIES = st.lists(
    st.tuples(
        st.sampled_from(["routing copy", "routing outcome", "routing none", "routing int", "routing new",
                         "routing float", "signal copy", "signal unsigned", "signal anonymous", "signal 1e999",
                         "signal float", "garbage"]),
        st.integers(0, 2),
    ),
    max_size=8,
)  # fmt: skip


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(FORGERIES, st.booleans())
def test_routings_judged_beside_the_fold_are_the_routings_judged_after_it(
    tmp_path_factory: Any, forgeries: list[tuple[str, int]], early: bool
) -> None:
    """`verify` routes every routing record again beside its fold (`engine.commands.rerouting.routing_pass`) and judges
    them on the fold's account after it (`judge_routings`): it names exactly what `routings`, run
    after the fold, names: for copies of real lines, records for no signal, signals opened twice
    or from a line the router cannot decode, numbers with a fraction where text or a boolean
    belongs, and when the pass read fewer lines than the fold. --once's one child (`_both`, D-260)
    routes them on the chain check's decode of each line and names the same, and its chains and
    times are `_chains_and_lines`'s."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.commands import rerouting
    from engine.commands.rerouting import judge_routings, routing_pass
    from engine.commands.verification import _both, _chains_and_lines, _dismissed_lines
    from engine.read.load import load
    from tests.helpers import prepared

    def both() -> Any:  # as the child answers: through JSON
        return json.loads(json.dumps(_both(engine_ws, engine_ws.authority(), {})))

    ws, ids = prepared(tmp_path_factory.mktemp("routings"), _routed_signals)
    engine_ws = EngineWorkspace(ws.root)
    before = routing_pass(engine_ws, engine_ws.authority()) if early else None
    one_child = both() if early else None
    events = ws.events("signals")
    signal = {k: v for k, v in events[0].items() if k not in ("prev", "hash")}
    routings = [e for e in events if e["kind"] == "routing"]
    for what, k in forgeries:
        new = f"01NEWSIGNAL{k:015d}"
        base = {key: v for key, v in routings[k].items() if key not in ("prev", "hash")}
        if what == "routing outcome":
            base |= {"outcome": "noted", "obligations": []}
        elif what == "routing none":
            base |= {"signal": "01NOSUCHSIGNALXXXXXXXXXXXX"}
        elif what == "routing int":
            base |= {"signal": 7}
        elif what == "routing new":
            base |= {"signal": new}
        elif what == "routing float":
            base |= {
                "derivedSeverity": 1e16,
                "obligations": [dict(o, blocks=1.0) for o in base["obligations"]],
            }
        elif what == "signal float":
            base = {key: v for key, v in signal.items() if key != "sig"} | {
                "id": new,
                "by": None,
                "subject": 2.5,
            }
        elif what == "signal copy":
            base = signal | {"id": ids[k]}
        elif what == "signal unsigned":
            base = {key: v for key, v in signal.items() if key != "sig"} | {"id": new}
        elif what in ("signal anonymous", "signal 1e999"):
            base = {key: v for key, v in signal.items() if key != "sig"} | {"id": new, "by": None}
        if what == "garbage":
            append_raw(ws, "signals", "{not json\n")
        elif what == "signal 1e999":
            append_raw(
                ws,
                "signals",
                chained(ws, "signals", base | {"pad": float("inf")}).replace("Infinity", "1e999"),
            )
        else:
            append_raw(ws, "signals", chained(ws, "signals", base))
    fresh = load(engine_ws, cached=False)
    pass_ = before if before is not None else routing_pass(engine_ws, engine_ws.authority())
    judged = rerouting.routings(engine_ws, fresh)
    assert judge_routings(engine_ws, fresh, pass_) == judged
    answer = one_child if one_child is not None else both()
    assert judge_routings(engine_ws, fresh, answer["early"]) == judged
    if one_child is None:  # read as the stores stand: what a pass of its own reads
        assert answer["checked"] == [
            [[f.store, f.line, f.message, f.reading] for f in part]
            for part in _chains_and_lines(engine_ws, {}, _dismissed_lines(engine_ws.authority()), True)
        ]


def _derive_one_floor_at_a_time(signal: dict, policy: Any) -> tuple[str, list[str]]:
    """engine.commands.router.derive_severity as it was written before its floors were compiled
    once per policy: each floor's pattern searched in each of its fields (absent: "")."""
    import re

    severity = signal["reportedSeverity"]
    applied: list[str] = []
    for floor in policy.floors:
        if any(re.compile(floor.pattern).search(signal.get(name) or "") for name in floor.fields):
            applied.append(floor.name)
            if policy.rank(floor.at_least) > policy.rank(severity):
                severity = floor.at_least
    return severity, applied


_FLOOR_POLICY = """severities: [info, advisory, blocking, critical]
blocksAtOrAbove: blocking
floors:
- {name: names-an-invariant, pattern: 'INV-\\d{3}', atLeast: blocking}
- {name: empty-rationale, pattern: '^$', fields: [rationale], atLeast: advisory}
- {name: crosses, pattern: 'x', fields: [rationale, subject], atLeast: critical}
- {name: lower, pattern: 'INV', fields: [observation], atLeast: info}
rules:
  intelligence-signal: {atOrAbove: advisory, owedTo: S3}
escalate: [alice]
clock: pinned
"""


_FLOOR_PATTERNS = [r"INV-\d{3}", "regulator/identity/", "^$", r"(critical|blocking)\b", r"[A-Z]{2}-\d"]


@given(st.sampled_from(_FLOOR_PATTERNS), st.text(st.sampled_from("INV-0123 xé\ncriticalbkgAZ/"), max_size=40))
def test_a_floors_search_by_re_is_the_time_limited_search(pattern: str, text: str) -> None:
    """D-301's fast path: a floor whose search is bounded (identity.policy.bounded) is searched with
    `re` as it is; every other one with the `regex` module under a time limit. On the bounded ones
    both find the same: the choice of engine never changes a derived severity."""
    import regex

    from engine.commands.router import _searcher
    from identity.policy import bounded

    assert bounded(pattern)
    slow = regex.compile(pattern, regex.V0).search(text, timeout=5)
    assert bool(_searcher(pattern)[0](text)) == bool(slow)


@given(
    st.fixed_dictionaries(
        {"reportedSeverity": st.sampled_from(["info", "advisory", "blocking", "critical"])},
        optional={
            name: st.one_of(st.none(), st.text(st.sampled_from("INV-0123 x\u00e9"), max_size=10))
            for name in ("subject", "observation", "rationale", "claim")
        },
    )
)
def test_derive_severity_is_each_floor_searched_in_turn(signal: dict) -> None:
    """The router's floors, compiled once per policy, raise a severity exactly as each floor's
    pattern searched in each of its fields does: a floor whose pattern matches "" applies to an
    absent field, one field of several matching is enough, a lower floor raises nothing."""
    from engine.commands.router import derive_severity
    from identity.policy import parse_policy

    policy = parse_policy("routing.yaml", _FLOOR_POLICY)
    assert derive_severity(signal, policy) == _derive_one_floor_at_a_time(signal, policy)


@given(
    st.fixed_dictionaries(
        {
            "id": st.text(max_size=4),
            "reportedSeverity": st.sampled_from(["info", "advisory", "blocking", "critical", "x"]),
        },
        optional={
            **{
                name: st.one_of(
                    st.none(), st.integers(0, 2), st.text(st.sampled_from("INV-0123 x\u00e9"), max_size=10)
                )
                for name in ("subject", "observation", "rationale", "claim", "unit", "question")
            },
            "type": st.sampled_from([None, "question", "finding"]),
            "expiresAt": st.sampled_from([None, "", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "soon"]),
            "affectedUnits": st.one_of(
                st.none(), st.lists(st.sampled_from(["u1", "u2"]), max_size=2), st.just([1])
            ),
        },
    )
)
def test_routing_without_reasons_decides_what_the_router_writes(signal: dict) -> None:
    """verify re-routes every routing record with `reasons=False`: the record it compares is the
    router's own, every field but the words of `reason` (a question, a line with fields of the
    wrong type, one below the rule, one expired, one that opens obligations)."""
    from datetime import UTC, datetime

    from engine.commands.router import route_signal
    from identity.policy import parse_policy

    policy = parse_policy("routing.yaml", _FLOOR_POLICY)
    now = datetime(2026, 6, 1, tzinfo=UTC)
    written, compared = route_signal(signal, policy, now), route_signal(signal, policy, now, reasons=False)
    assert compared["reason"] == "" and written["reason"]
    assert {**compared, "reason": written["reason"]} == written


def _host_lines_one_by_one(store: str, events: list[dict], system: bool, now: Any, late: str) -> list[Any]:
    """engine.commands.verification._HostLines's feed as it was written before its fast paths:
    `_times` asked of every line, every memory entry's dates parsed; a line's time judged against
    the last event's (text `hash`) where the line chains to it (D-335)."""
    from engine.base import clock
    from engine.base.errors import BadInput
    from engine.commands.memory import MAX_REVIEW_DAYS
    from engine.commands.verification import Finding, _times
    from engine.log.store import line_hash

    found: list[Any] = []
    last: tuple[object, object, Any] = (None, None, None)  # the last event's hash, at, and itself
    for number, event in enumerate(events, start=1):
        at = event.get("at")
        if isinstance(at, str) and system:
            before = last[1] if event.get("prev") == last[0] else None
            if before is not None and line_hash(last[2]) != last[0]:
                before = None  # a line whose content is not what its hash says dates nothing
            found.extend(_times(f"{store}.ndjson", number, at, before, now, late))
        if isinstance(event.get("hash"), str):
            last = (event["hash"], at, event)
        if store == "memory" and event.get("kind") == "memory":
            moment = clock.moment(at)
            try:
                review = clock.parse_date(str(event.get("reviewBy")), "reviewBy")
            except BadInput:
                review = None
            if moment is not None and review is not None and (review - moment.date()).days > MAX_REVIEW_DAYS:
                found.append(
                    Finding(
                        f"{store}.ndjson",
                        number,
                        f"review-by {review} is more than {MAX_REVIEW_DAYS} days after it was recorded",
                    )
                )
    return found


_DAYS = st.sampled_from(
    ["2026-11-29", "2026-09-01", "2026-02-28", "2026-12-31", "2030-01-01", "0001-01-01", "9999-12-31"]
)
_TIMES = st.one_of(
    st.builds(lambda d, t: f"{d}T{t}Z", _DAYS, st.sampled_from(["12:00:00", "00:00:00", "23:59:59", "99:00:00"])),
    st.sampled_from(["2026-11-29T12:00:00+00:00", "2026-11-29T13:00:00+01:00", "2026-11-29 12:00:00Z", "2026-02-30T00:00:00Z",
                     "2026-11-29T12:00:00.5Z", "garbage", "", "2026-11-29T12:00Z"]),
    st.none(),
    st.integers(),
)  # fmt: skip
_REVIEWS = st.one_of(
    _DAYS,
    st.sampled_from(
        ["2027-02-26", "2027-02-27", "2027-02-28", "2026-13-01", "2026-1-011", "20261221", "2026-02-30"]
    ),
    st.none(),
    st.integers(),
)


@settings(max_examples=400)
@example(  # reviewed 121 days after, and a line an hour before the one before it
    "memory",
    [{"kind": "memory", "at": "2026-09-01T12:00:00Z", "reviewBy": "2026-12-31", "hash": "true"},
     {"kind": "memory", "at": "2026-09-01T11:00:00Z", "reviewBy": "2026-09-02", "prev": "last"}],
    True,
)  # fmt: skip
@given(
    st.sampled_from(["memory", "signals"]),
    st.lists(
        st.fixed_dictionaries(
            {"kind": st.sampled_from(["memory", "memory", "retraction"])},
            optional={
                "at": _TIMES,
                "reviewBy": _REVIEWS,
                # its own (true) hash, a hash its content does not give, or none that is text
                "hash": st.sampled_from(["true", "h1", 3]),
                "prev": st.sampled_from(["last", "h1", "", None]),  # "last": the line before's hash
            },
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_the_line_judge_says_what_it_said_asking_of_every_line(
    store: str, events: list[dict], system: bool
) -> None:
    """verify's judge of every line's time and review-by (`_HostLines`) skips `_times` for a
    canonical time in order and not ahead, and parses no date for a canonical review-by within
    its limit: it names exactly what asking of every line names."""
    from engine.commands.verification import _HostLines
    from engine.log.store import line_hash

    before: object = None
    for event in events:  # chained as an appender chains them, where asked
        if event.get("prev") == "last":
            event["prev"] = before
        if event.get("hash") == "true":
            event["hash"] = line_hash({k: v for k, v in event.items() if k != "hash"})
        if isinstance(event.get("hash"), str):
            before = event["hash"]
    judge = _HostLines(system)
    feed = judge.store(store)
    for number, event in enumerate(events, start=1):
        feed(number, 0, 0, event)
    assert judge.found == _host_lines_one_by_one(store, events, system, judge.now, judge.late)


TAIL_LINES = st.one_of(
    st.builds(lambda h, n: json.dumps({"hash": h, "n": n}).encode(), st.text(max_size=6), st.integers()),
    st.builds(lambda n: json.dumps({"n": n}).encode(), st.integers()),  # an object with no hash
    st.builds(lambda h: b"  " + json.dumps({"hash": h}).encode(), st.text(max_size=3)),  # indented
    st.sampled_from([b"", b"{", b'{"hash": 1}', b"[1]", b"garbage", b'{"hash": "x"', b"\xff{"]),
    st.binary(max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(TAIL_LINES, max_size=12),
    newline=st.booleans(),
    cut=st.integers(0, 64),
    first=st.sampled_from([1, 2, 3, 7, 16, 64]),
)
def test_the_chains_tail_read_in_small_pieces_is_the_tail_read_in_one(
    tmp_path_factory: Any, lines: list[bytes], newline: bool, cut: int, first: int
) -> None:
    """`last_event` reads a store's tail in pieces that grow from its first (16 KiB: the last line
    is nearly always in it) to _READ_CHUNK: whatever the first piece, it finds the line one read of
    the whole tail finds, lines cut by a piece's edge, garbage and a file that ends mid-line included."""
    from engine.log.store import _READ_CHUNK, last_event

    data = b"\n".join(lines) + (b"\n" if newline else b"")
    path = tmp_path_factory.mktemp("tail") / "store.ndjson"
    path.write_bytes(data)
    end = max(0, len(data) - cut)
    with open(path, "rb", buffering=0) as handle:
        whole = last_event(handle, end, first=_READ_CHUNK)
        assert last_event(handle, end, first=first) == whole


def test_a_tail_past_a_line_too_long_to_be_one_is_found_in_small_pieces(tmp_path: Any) -> None:
    """A line longer than MAX_LINE after the last event is stepped over in growing pieces as in one."""
    from engine.log.store import _READ_CHUNK, MAX_LINE, last_event

    path = tmp_path / "store.ndjson"
    path.write_bytes(b'{"hash": "a"}\n{"hash": "b"}\n' + b"x" * (MAX_LINE + 10) + b"\n")
    with open(path, "rb", buffering=0) as handle:
        size = path.stat().st_size
        assert last_event(handle, size) == last_event(handle, size, first=_READ_CHUNK) == {"hash": "b"}
        assert last_event(handle, size, first=5) == {"hash": "b"}


_RAW_LINES = st.one_of(
    st.builds(lambda v: json.dumps(v).encode(), st.dictionaries(st.text(max_size=5), OUTPUT, max_size=4)),
    # a lone surrogate written raw is no UTF-8: its bytes (surrogatepass) are a line a reader must refuse too
    st.builds(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"), st.dictionaries(st.text(max_size=5), OUTPUT, max_size=4)),
    st.sampled_from([b'{"a":NaN,"hash":"h"}', b'{"a":"\\ud800","at":"x"}', b'{"a":1e400}', b'{"a":1,"a":2}',
                     b'\xef\xbb\xbf{"a":1}', '{"a":1}'.encode("utf-16"), b'{"a":1', b"[1]", b"", b"\xff{}"]),
    st.binary(max_size=20),
)  # fmt: skip


@given(_RAW_LINES)
def test_a_line_parsed_in_c_first_is_the_line_the_lenient_reader_parses(raw: bytes) -> None:
    """engine.log.store._parse (the chain's tail, a person event's time before) decodes in C where
    the strict reader takes the line, else as json.loads does: the same dict, or None, either way."""
    from engine.log.lines import too_deep
    from engine.log.store import _parse

    try:
        expected = json.loads(raw) if not too_deep(raw) else None
    except (ValueError, RecursionError):
        expected = None
    expected = expected if isinstance(expected, dict) else None
    assert repr(_parse(raw)) == repr(expected)
