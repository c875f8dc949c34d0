"""What-if routing (design §20): the routing a signal would get, a replay under a proposed policy,
and routing tests as files. Everything here reads; nothing is ever appended or written."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import msgspec

from engine.base import clock
from engine.base.errors import BadInput, RegulatorError
from engine.base.text import escape
from engine.checkout.workspace import Workspace, check_unit_id
from engine.commands.router import RULE, pending, route_signal
from engine.commands.signals import FIELDS, validate_report
from engine.read.load import load
from engine.read.model import State
from identity.policy import PolicyError, RoutingPolicy, parse_policy

DRY_RUN_ID = "dry-run"  # the id a signal that was never reported is routed under
EXTRA = ("unit", "by", "routedAt")  # what a what-if signal may say beyond seed 000's fields
COMPARED = ("derivedSeverity", "floors", "outcome")
OUTCOMES = ("noted", "expired", "obligations")
CASE_KEYS = ("name", "signal", "expect")
EXPECT_KEYS = ("outcome", "derivedSeverity", "floors", "obligations")
DEFAULT_LAST = 1000


def read_policy_file(path: str | Path) -> RoutingPolicy:
    """A proposed routing.yaml from a file: exit 2 with one line when it cannot be used."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--policy {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise BadInput(f"--policy {path}: not valid UTF-8") from None
    try:
        parsed = parse_policy("routing.yaml", text)
    except PolicyError as exc:
        raise BadInput(f"--policy {path}: {exc}") from None
    assert isinstance(parsed, RoutingPolicy)
    return parsed


def _as_text(value: object) -> object:
    """YAML reads an unquoted time as a datetime: the fields want the ISO text."""
    if isinstance(value, datetime):
        try:
            return clock.iso(value if value.tzinfo else value.replace(tzinfo=UTC))
        except OverflowError:  # past the calendar's end in UTC: its own text, which parse_time refuses
            return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def what_if_signal(
    fields: dict, policy: RoutingPolicy, known_units: set[str], now: datetime | None = None
) -> tuple[dict, datetime]:
    """A signal as the router would see it, from seed 000's fields plus `unit` or `by` (who reports)
    and `routedAt` (default now); validated as `signals report` validates (exit 2)."""
    fields = {k: _as_text(v) for k, v in fields.items()}
    unknown = sorted(set(fields) - set(FIELDS) - set(EXTRA))
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS + EXTRA)}")
    routed_raw = fields.pop("routedAt", None)
    routed_at = clock.parse_time(routed_raw, "routedAt") if routed_raw is not None else now or clock.now()
    unit = fields.pop("unit", None)
    by = fields.pop("by", None)
    if unit is not None and by is not None:
        raise BadInput("a signal is reported by a unit or by a person: give `unit` or `by`, not both")
    if unit is not None:
        check_unit_id(unit)
        if unit not in known_units:
            raise BadInput(f"unit: {unit!r} has no contract under contracts/")
    if by is not None and (not isinstance(by, str) or not by.strip()):
        raise BadInput("by: expected a person's name")
    body = validate_report(fields, policy.severities, known_units, now=routed_at)
    return {**body, "id": DRY_RUN_ID, "unit": unit, "by": by}, routed_at


def dry_run(ws: Workspace, fields: dict, policy: RoutingPolicy | None = None) -> dict:
    """The routing record one signal would get now (or at its `routedAt`), written nowhere. The
    obligations carry no id: a signal never reported has none to derive them from."""
    policy = policy or ws.routing()
    state = load(ws, stores=())
    signal, routed_at = what_if_signal(fields, policy, set(state.contracts))
    record: dict = dict(route_signal(signal, policy, routed_at))
    record["obligations"] = [{**ob, "id": None} for ob in record["obligations"]]
    return record | {"signal": None, "dryRun": True}


# ---- the signals not yet routed, routed in memory --------------------------------------------------
class WouldHold(msgspec.Struct, frozen=True):
    """A blocking obligation the router would open on a unit for a signal not yet routed."""

    unit: str
    obligation: str
    severity: str
    signal: str
    subject: str


class InMemory(msgspec.Struct):
    """The signals not yet routed, routed in memory as the router would route them now (design
    §16, §18): what a reader that does not route (--read-only, a store role that cannot write, a
    signal appended after this run routed) judges holds on. Written nowhere."""

    records: list[dict] = msgspec.field(default_factory=list)  # the routing records, in log order
    problem: str | None = None  # why they could not be routed in memory (the policy unreadable)
    unrouted: int = 0  # how many signals were not yet routed

    @property
    def holds(self) -> list[WouldHold]:
        """Each would-be blocking obligation on a unit, in log order."""
        return [
            WouldHold(ob["unit"], ob["id"], ob["severity"], record["signal"], str(record["subject"]))
            for record in self.records
            for ob in record["obligations"]
            if ob["blocks"] and ob["unit"]
        ]


def route_in_memory(ws: Workspace, state: State) -> InMemory:
    """The routing the router would append for every unrouted signal of `state`, at `state.now`,
    under the policy in force (engine.commands.router.pending, the router's own step). A policy that
    cannot be read is `problem`, never "nothing would hold"."""
    count = len(state.unrouted_ids)
    if not count:
        return InMemory()
    try:
        records: list[dict] = [dict(record) for record in pending(state, ws.routing(), state.now)]
    except RegulatorError as exc:
        return InMemory(problem=str(exc), unrouted=count)
    except (KeyError, ValueError) as exc:  # a policy the router itself could not route under
        return InMemory(problem=f"the routing policy cannot route them ({exc})", unrouted=count)
    subjects = {s_id: state.signals[s_id].get("subject") for s_id in state.unrouted_ids}
    for record in records:
        record["subject"] = subjects.get(record["signal"])
    return InMemory(records, None, count)


# ---- replay --------------------------------------------------------------------------------------
def summary(record: dict) -> dict:
    """What a routing decides, without when it was made or its derived ids' signal."""
    return {
        "derivedSeverity": record["derivedSeverity"],
        "floors": list(record["floors"]),
        "outcome": record["outcome"],
        "reason": record["reason"],
        "obligations": [
            {k: ob[k] for k in ("id", "unit", "severity", "blocks", "owedTo")} for ob in record["obligations"]
        ],
        "at": record["at"],
    }


def _decides(record: dict) -> tuple:
    """The parts of a routing an operator acts on (the reason's wording is not one of them)."""
    return (
        *(str(record[k]) for k in COMPARED),
        tuple((ob["unit"], ob["severity"], ob["blocks"], ob["owedTo"]) for ob in record["obligations"]),
    )


class Replay(msgspec.Struct):
    replayed: int  # signals replayed
    changes: list[dict] = msgspec.field(default_factory=list)  # [{"signal", "subject", "before", "after"}]


def replay(
    ws: Workspace, proposed: RoutingPolicy, last: int = DEFAULT_LAST, state: State | None = None
) -> Replay:
    """The last `last` signals routed under the policy in force and under `proposed`, each at its
    recorded routing time (a signal not yet routed: now, when the router would take it). A
    long-lived reader (the control room) passes the state it holds."""
    if last < 1:
        raise BadInput("--last: at least 1")
    current = ws.routing()
    state = state or load(ws, stores=("signals",))
    chosen = list(state.signals)[-last:]
    now = state.now
    result = Replay(len(chosen))
    for signal_id in chosen:
        signal = state.signals[signal_id]
        routing = state.routings.get(signal_id)
        at = clock.read_time(routing["at"], "routing at") if routing and routing.get("at") else now
        try:
            before = route_signal(signal, current, at)
            after = route_signal(signal, proposed, at)
        except (KeyError, ValueError) as exc:  # a signal whose severity a policy does not know
            raise BadInput(f"signal {signal_id}: cannot be routed under both policies ({exc})") from None
        if _decides(dict(before)) != _decides(dict(after)):
            result.changes.append(
                {
                    "signal": signal_id,
                    "subject": signal.get("subject"),
                    "before": summary(dict(before)),
                    "after": summary(dict(after)),
                }
            )
    return result


def describe(record: dict) -> str:
    """One line: outcome, severity, floors, obligations and whether they block."""
    floors = ", ".join(record["floors"]) or "no floor"
    text = f"{record['outcome']}, {record['derivedSeverity']} ({floors})"
    if record["obligations"]:
        obs = ", ".join(
            f"{ob['unit'] or 'no unit'} {'blocks' if ob['blocks'] else 'does not block'}"
            for ob in record["obligations"]
        )
        text += f": {obs}"
    return text


def replay_lines(result: Replay, label: str) -> list[str]:
    """The replay as text (the CLI, and the control room's accept dialog); store text escaped."""
    lines = []
    for change in result.changes:
        lines.append(f"{change['signal']}  {escape(change['subject'])}")
        lines.append(f"  before: {escape(describe(change['before']))}")
        lines.append(f"  after:  {escape(describe(change['after']))}")
    lines.append(
        f"{len(result.changes)} of {result.replayed} signal(s) would route differently under "
        f"{escape(label)} (each at its recorded routing time; nothing written)"
    )
    return lines


def proposal_replay(ws: Workspace, content: str, state: State | None = None) -> list[str]:
    """What accepting a proposed routing.yaml would have changed for the last signals (design §20)."""
    try:
        proposed = parse_policy("routing.yaml", content)
        assert isinstance(proposed, RoutingPolicy)
        return replay_lines(replay(ws, proposed, DEFAULT_LAST, state), "the proposed policy")
    except (PolicyError, RegulatorError) as exc:
        return [f"replay unavailable: {escape(str(exc))}"]


# ---- routing tests as files ----------------------------------------------------------------------
class CaseResult(msgspec.Struct):
    name: str
    differences: list[str]
    record: dict

    @property
    def passed(self) -> bool:
        return not self.differences


class TestReport(msgspec.Struct):
    cases: list[CaseResult]
    unexercised_floors: list[str]
    unexercised_rules: list[str]
    unreached_outcomes: list[str]

    @property
    def failed(self) -> int:
        return sum(not c.passed for c in self.cases)


def read_cases(path: str | Path) -> list[dict]:
    """The YAML cases: a list of {name, signal, expect}; anything else is one line, exit 2."""
    from identity.yamlload import YamlError, safe_load_strict

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--test-file {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise BadInput(f"--test-file {path}: not valid UTF-8") from None
    try:
        data = safe_load_strict(text)
    except YamlError as exc:
        raise BadInput(f"--test-file {path}: not valid YAML ({exc})") from None
    if not isinstance(data, list) or not data:
        raise BadInput(f"--test-file {path}: expected a list of cases ({{name, signal, expect}})")
    names: set[str] = set()
    for i, case in enumerate(data, 1):
        where = f"--test-file {path}: case {i}"
        if not isinstance(case, dict):
            raise BadInput(f"{where}: expected a mapping with {', '.join(CASE_KEYS)}")
        unknown = sorted(str(k) for k in set(case) - set(CASE_KEYS))
        if unknown:
            raise BadInput(f"{where}: unknown key {unknown[0]!r}; a case has {', '.join(CASE_KEYS)}")
        name = case.get("name")
        if not isinstance(name, str) or not name.strip():
            raise BadInput(f"{where}: name: required text")
        if name in names:
            raise BadInput(f"{where}: name {name!r} is used twice")
        names.add(name)
        if not isinstance(case.get("signal"), dict):
            raise BadInput(f"{where} ({name}): signal: expected a mapping of §5.2 fields")
        _check_expect(case.get("expect"), f"{where} ({name})")
    return data


def _check_expect(expect: object, where: str) -> None:
    if not isinstance(expect, dict) or not expect:
        raise BadInput(f"{where}: expect: a mapping with one or more of {', '.join(EXPECT_KEYS)}")
    unknown = sorted(str(k) for k in set(expect) - set(EXPECT_KEYS))
    if unknown:
        raise BadInput(f"{where}: expect: unknown key {unknown[0]!r}; the keys are {', '.join(EXPECT_KEYS)}")
    if "outcome" in expect and expect["outcome"] not in OUTCOMES:
        raise BadInput(f"{where}: expect.outcome: one of {', '.join(OUTCOMES)}")
    if "derivedSeverity" in expect and not isinstance(expect["derivedSeverity"], str):
        raise BadInput(f"{where}: expect.derivedSeverity: a severity")
    floors = expect.get("floors", [])
    if not isinstance(floors, list) or not all(isinstance(f, str) for f in floors):
        raise BadInput(f"{where}: expect.floors: a list of floor names")
    obligations = expect.get("obligations", [])
    if not isinstance(obligations, list):
        raise BadInput(f"{where}: expect.obligations: a list of {{unit, blocks}}")
    for ob in obligations:
        if not isinstance(ob, dict) or "unit" not in ob or set(ob) - {"unit", "blocks"}:
            raise BadInput(f"{where}: expect.obligations: each is {{unit, blocks}} (unit null: no unit)")
        if ob["unit"] is not None and not isinstance(ob["unit"], str):
            raise BadInput(f"{where}: expect.obligations: unit is a unit id or null")
        if "blocks" in ob and not isinstance(ob["blocks"], bool):
            raise BadInput(f"{where}: expect.obligations: blocks is true or false")


def _obligations_text(obs: list[tuple[str | None, bool | None]]) -> str:
    parts = []
    for unit, blocks in obs:
        hold = "" if blocks is None else (" blocks" if blocks else " does not block")
        parts.append(f"{unit or 'no unit'}{hold}")
    return "[" + ", ".join(parts) + "]"


def differences(expect: dict, record: dict) -> list[str]:
    """What the routing did that the case did not expect, one line per field."""
    found: list[str] = []
    for key in ("outcome", "derivedSeverity"):
        if key in expect and expect[key] != record[key]:
            found.append(f"{key}: expected {expect[key]}, got {record[key]}")
    if "floors" in expect and sorted(expect["floors"]) != sorted(record["floors"]):
        found.append(
            f"floors: expected [{', '.join(sorted(expect['floors']))}], got [{', '.join(sorted(record['floors']))}]"
        )
    if "obligations" in expect:
        wanted = sorted(
            ((o["unit"], o.get("blocks")) for o in expect["obligations"]), key=lambda o: str(o[0])
        )
        got_all = sorted(((o["unit"], o["blocks"]) for o in record["obligations"]), key=lambda o: str(o[0]))
        # an expected obligation without `blocks` checks only its unit
        got = [
            (unit, blocks if i < len(wanted) and wanted[i][1] is not None else None)
            for i, (unit, blocks) in enumerate(got_all)
        ]
        if wanted != got:
            found.append(
                f"obligations: expected {_obligations_text(wanted)}, got {_obligations_text(got_all)}"
            )
    return found


def run_tests(ws: Workspace, path: str | Path, policy: RoutingPolicy | None = None) -> TestReport:
    """Route every case (at its routedAt) under `policy` (default the one in force); compare."""
    cases = read_cases(path)
    policy = policy or ws.routing()
    state = load(ws, stores=())
    known = set(state.contracts)
    results: list[CaseResult] = []
    seen_floors: set[str] = set()
    outcomes: set[str] = set()
    for i, case in enumerate(cases, 1):
        try:
            signal, routed_at = what_if_signal(case["signal"], policy, known)
        except RegulatorError as exc:
            raise BadInput(f"--test-file {path}: case {i} ({case['name']}): signal: {exc}") from None
        routed = route_signal(signal, policy, routed_at)
        record: dict = dict(routed)
        seen_floors.update(record["floors"])
        outcomes.add(record["outcome"])
        if record["obligations"]:
            outcomes.add("blocking" if record["obligations"][0]["blocks"] else "not blocking")
        results.append(CaseResult(case["name"], differences(case["expect"], record), record))
    floors = [f.name for f in policy.floors if f.name not in seen_floors]
    # the router applies one rule: intelligence-signal; any other rule is never used by a case
    rules = [name for name in policy.rules if name != RULE or not results]
    unreached = [o for o in (*OUTCOMES, "blocking", "not blocking") if o not in outcomes]
    return TestReport(results, floors, rules, unreached)
