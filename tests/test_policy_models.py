"""The policy models (identity/policy.py) are msgspec Structs (D-170): parsing a policy imports no
pydantic, every bad key is one PolicyError line naming the file and the key's dotted path, and
good files parse to the values the commands read."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec.structs
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from identity.policy import (
    POLICY_MODELS,
    InteractionPolicy,
    MemoryPolicy,
    PolicyError,
    Profiles,
    RoutingPolicy,
    Sensor,
    SensorsPolicy,
    parse_policy,
)
from identity.shipped import HARNESS_TOOLS, policy_files
from tests import helpers

ROOT = Path(__file__).resolve().parent.parent
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBFz/svLpl8+rj0UKNlPYpcZUTmaGGRr0/jFJEe/N5qZ alice@test"
SENSORS = {
    "sensors": {
        "osv": {
            "kind": "osv",
            "every": "1h",
            "severity": "advisory",
            "feed": "feeds/osv",
            "staleAfter": "7d",
            "lockfiles": {"services/api/requirements.txt": ["u1"], "svc/uv.lock": ["u2", "u3"]},
        },
        "scan": {
            "kind": "command",
            "command": ["python3", "tools/scan.py"],
            "every": "15m",
            "timeout": "30s",
        },
    }
}


class _LeftOut:
    def __repr__(self) -> str:
        return "(left out)"


DELETE = _LeftOut()  # a key left out of the file


def good(name: str) -> dict[str, Any]:
    """A policy file of each kind as a mapping, every key given (what init ships and more)."""
    if name == "sensors.yaml":
        return copy.deepcopy(SENSORS)
    data: dict[str, Any] = yaml.safe_load(policy_files("alice", "alice@example.org", KEY)[name])
    if name == "routing.yaml":
        data |= {"notify": ["notify-send", "regulator"], "memory": {"maxCurrentPerUnit": 3}}
    elif name == "interaction.yaml":
        data["people"]["alice"]["retiredKeys"] = [KEY]
    elif name == "profiles.yaml":
        data["harnessTools"] = {"claude-code": {"read": ["Read", "Grep"], "shell": ["Bash"]}}
    return data


def parse(name: str, data: object) -> Any:
    return parse_policy(name, yaml.safe_dump(data, allow_unicode=True))


def where(name: str, data: object) -> tuple[str, str]:
    """(the dotted path, what is wrong) a bad file's PolicyError names."""
    with pytest.raises(PolicyError) as caught:
        parse(name, data)
    message = str(caught.value)
    assert "\n" not in message
    file, path, what = message.split(": ", 2)
    assert file == name
    return path, what


def with_value(data: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    data = copy.deepcopy(data)
    node: Any = data
    for step in path[:-1]:
        node = node[step]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


def test_parsing_a_policy_imports_no_pydantic() -> None:
    """What a command runs to read its policy: the models, the strict YAML loader, an error too."""
    texts = {**policy_files("alice", "alice@example.org", KEY), "sensors.yaml": yaml.safe_dump(SENSORS)}
    bad = texts["routing.yaml"] + "memory: {maxCurrentPerUnit: many}\n"
    code = (
        "import sys\n"
        "from identity.policy import PolicyError, parse_policy\n"
        f"for name, text in {texts!r}.items():\n"
        "    parse_policy(name, text)\n"
        "try:\n"
        f"    parse_policy('routing.yaml', {bad!r})\n"
        "except PolicyError as exc:\n"
        "    assert 'memory.maxCurrentPerUnit' in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('not refused')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'pydantic_core'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("owner, email, key, clock", [
    ("alice", "alice@example.org", KEY, "system"), ("bob", None, None, "pinned"), ("carol-2", "c@x", None, "system"),
])  # fmt: skip
def test_the_shipped_policies_parse(owner: str, email: str | None, key: str | None, clock: str) -> None:
    files = policy_files(owner, email, key, clock=clock)
    assert set(files) | {"sensors.yaml"} == set(POLICY_MODELS)
    parsed = {name: parse_policy(name, text) for name, text in files.items()}
    routing, people, profiles = parsed["routing.yaml"], parsed["interaction.yaml"], parsed["profiles.yaml"]
    assert isinstance(routing, RoutingPolicy) and routing.clock == clock and routing.escalate == (owner,)
    assert isinstance(people, InteractionPolicy) and people.require_signatures is True
    assert people.may(owner, "accept") and people.may_resolve(owner, "critical")
    assert not people.may("x", "ack")
    assert people.people[owner].keys == ((key,) if key else ())
    assert isinstance(profiles, Profiles) and profiles.harness_tools is None
    assert profiles.harness("claude-code") == {t: tuple(n) for t, n in HARNESS_TOOLS["claude-code"].items()}
    assert parse_policy("sensors.yaml", "sensors: {}\n") == SensorsPolicy()


def test_good_files_parse_to_the_values_the_commands_read() -> None:
    routing = parse("routing.yaml", good("routing.yaml"))
    assert routing.severities == ("info", "advisory", "blocking", "critical")
    assert routing.blocks_at_or_above == "blocking" and routing.rank("blocking") == 2
    floor = routing.floors[0]
    assert (floor.name, floor.pattern, floor.at_least) == ("names-an-invariant", r"INV-\d{3}", "blocking")
    assert floor.fields == ("subject", "observation", "rationale")
    rule = routing.rules["intelligence-signal"]
    assert (rule.at_or_above, rule.owed_to) == ("advisory", "S3")
    assert routing.intake_debt_days == 14 and routing.memory == MemoryPolicy(max_current_per_unit=3)
    assert routing.deadline_seconds("blocking") == 48 * 3600 and routing.deadline_seconds("info") is None
    assert routing.notify == ("notify-send", "regulator") and routing.escalate == ("alice",)
    # the defaults of a key left out (a policy written before it)
    bare = {k: v for k, v in good("routing.yaml").items() if k in ("severities", "blocksAtOrAbove", "rules")}
    least = parse("routing.yaml", bare)
    assert (least.floors, least.intake_debt_days, least.clock, least.deadlines) == ((), 14, "system", {})
    assert (least.memory, least.escalate, least.notify) == (MemoryPolicy(), (), ())
    assert least.memory.max_current_per_unit == 25
    assert parse("routing.yaml", {**bare, "memory": {}}).memory.max_current_per_unit == 25

    alice = {"keys": [f"  {KEY}  "], "grants": ["ack"]}
    people = parse("interaction.yaml", {"people": {"alice": alice, "bob": {}}})
    assert people.people["alice"].keys == (KEY,)  # stripped, as before
    assert people.people["bob"].grants == () and people.people["bob"].retired_keys == ()
    assert people.require_signatures is False
    assert people.may("alice", "ack") and not people.may_resolve("alice", "info")
    assert parse("interaction.yaml", good("interaction.yaml")).people["alice"].retired_keys == (KEY,)

    sensors = parse("sensors.yaml", SENSORS).sensors
    osv, scan = sensors["osv"], sensors["scan"]
    assert isinstance(osv, Sensor) and (osv.kind, osv.stale_after, osv.feed) == ("osv", "7d", "feeds/osv")
    assert osv.lockfiles == {"services/api/requirements.txt": ("u1",), "svc/uv.lock": ("u2", "u3")}
    assert scan.command == ("python3", "tools/scan.py") and scan.severity == "advisory"
    assert (scan.every_seconds, scan.timeout_seconds) == (900, 30)
    least_sensor = parse("sensors.yaml", {"sensors": {"s": {"kind": "command", "command": ["x"]}}}).sensors[
        "s"
    ]
    assert (least_sensor.every_seconds, least_sensor.timeout_seconds, least_sensor.lockfiles) == (
        3600,
        60,
        {},
    )
    assert parse("sensors.yaml", {}).sensors == {}

    profiles = parse("profiles.yaml", good("profiles.yaml"))
    assert profiles.profiles["bookkeeper"].tools == ("read", "remember", "report_result")
    assert profiles.harness("claude-code") == {"read": ("Read", "Grep"), "shell": ("Bash",)}
    assert profiles.harness("other") == {}


def test_the_models_are_frozen_structs_with_the_file_s_key_names() -> None:
    routing = parse("routing.yaml", good("routing.yaml"))
    key = "clock"
    with pytest.raises(AttributeError):
        setattr(routing, key, "pinned")
    assert routing == parse("routing.yaml", good("routing.yaml"))
    names = {f.name: f.encode_name for f in msgspec.structs.fields(RoutingPolicy)}
    assert names["blocks_at_or_above"] == "blocksAtOrAbove" and names["intake_debt_days"] == "intakeDebtDays"
    # built from Python by attribute names, keywords only
    assert MemoryPolicy(max_current_per_unit=7).max_current_per_unit == 7


# (file, the key's path, a bad value (DELETE: left out), the dotted path named, words of what is wrong)
# fmt: off
BAD: list[tuple[str, tuple[str | int, ...], object, str, str]] = [
    ("routing.yaml", ("severities",), "info", "severities", "expected a list, got a string"),
    ("routing.yaml", ("severities", 1), 5, "severities.1", "expected a string, got an integer"),
    ("routing.yaml", ("severities",), DELETE, "severities", "required"),
    ("routing.yaml", ("blocksAtOrAbove",), "nope", "(top)", "severity 'nope' is not in severities"),
    ("routing.yaml", ("floors", 0, "pattern"), "INV-(", "floors.0.pattern", "does not compile"),
    ("routing.yaml", ("floors", 1, "fields"), ["claim"], "floors.1.fields", "not 'claim'"),
    ("routing.yaml", ("floors", 0, "atLeast"), DELETE, "floors.0.atLeast", "required"),
    ("routing.yaml", ("floors", 0, "at_least"), "blocking", "floors.0.at_least", "unknown key"),
    ("routing.yaml", ("floors", 0), "INV", "floors.0", "expected a mapping, got a string"),
    ("routing.yaml", ("rules", "intelligence-signal", "owedTo"), 3, "rules.intelligence-signal.owedTo", "string"),
    ("routing.yaml", ("rules", "intelligence-signal"), DELETE, "(top)", "intelligence-signal rule"),
    ("routing.yaml", ("rules", 7), {"atOrAbove": "info", "owedTo": "S3"}, "rules.7", "key is not text"),
    ("routing.yaml", ("intakeDebtDays",), -1, "intakeDebtDays", ">= 0"),
    ("routing.yaml", ("intakeDebtDays",), "14", "intakeDebtDays", "expected an integer, got a string"),
    ("routing.yaml", ("intakeDebtDays",), 1.5, "intakeDebtDays", "expected an integer, got a number"),
    ("routing.yaml", ("intake_debt_days",), 14, "intake_debt_days", "unknown key"),
    ("routing.yaml", ("clock",), "wall", "clock", "'wall' is none of system, pinned"),
    ("routing.yaml", ("memory", "maxCurrentPerUnit"), 0, "memory.maxCurrentPerUnit", ">= 1"),
    ("routing.yaml", ("memory", "maxCurrentPerUnit"), "many", "memory.maxCurrentPerUnit", "integer"),
    ("routing.yaml", ("memory", "maxCurrent"), 5, "memory.maxCurrent", "unknown key"),
    ("routing.yaml", ("deadlines", "blocking"), "two days", "deadlines", "blocking: 'two days' is not a duration"),
    ("routing.yaml", ("deadlines", "urgent"), "4h", "(top)", "severity 'urgent' is not in severities"),
    ("routing.yaml", ("escalate",), "alice", "escalate", "expected a list"),
    ("routing.yaml", ("notify",), "curl -d @- https://hooks.example/x", "notify", "expected a list"),
    ("routing.yaml", ("notify",), [" "], "notify", "notify needs a program"),
    ("routing.yaml", ("extra",), 1, "extra", "unknown key"),
    ("routing.yaml", ("notify",), {"/tmp/evil.sh"}, "notify", "a set (!!set) where a list is expected"),
    ("routing.yaml", ("intakeDebtDays",), 10**18, "intakeDebtDays", "<= 36500"),
    ("routing.yaml", ("memory", "maxCurrentPerUnit"), 10**7, "memory.maxCurrentPerUnit", "<= 1000000"),
    ("routing.yaml", ("floors", 0, "pattern"), "a{99999999999999999999}", "floors.0.pattern", "too large"),
    ("routing.yaml", ("floors", 0, "pattern"), "(" * 3000 + ")" * 3000, "floors.0.pattern", "too deeply nested"),
    # an adversarial review: a unit proposed a floor that backtracks without end on 60 characters
    ("routing.yaml", ("floors", 0, "pattern"), r"(\w+\s?)+:\s*secret", "floors.0.pattern", "a repeated part inside a repeated group"),
    ("routing.yaml", ("floors", 0, "pattern"), "(a|aa)+$", "floors.0.pattern", "alternatives under a repeat"),
    # ... and durations past a hundred years, which overflowed every reader of the deadlines
    ("routing.yaml", ("deadlines", "advisory"), "3000000d", "deadlines", "longer than a hundred years"),
    ("sensors.yaml", ("sensors", "scan", "every"), "3000000d", "sensors.scan.every", "longer than a hundred years"),
    ("interaction.yaml", ("people",), DELETE, "people", "required"),
    ("interaction.yaml", ("people", "alice", "keys"), ["rsa AAAA alice"], "people.alice.keys", "not an OpenSSH public key"),
    ("interaction.yaml", ("people", "alice", "keys"), KEY, "people.alice.keys", "expected a list, got a string"),
    ("interaction.yaml", ("people", "alice", "retiredKeys"), ["x"], "people.alice.retiredKeys", "OpenSSH"),
    ("interaction.yaml", ("people", "alice", "grants"), ["root"], "people.alice.grants", "unknown grant 'root'"),
    ("interaction.yaml", ("people", "alice", "emails", 0), None, "people.alice.emails.0", "got nothing (null)"),
    ("interaction.yaml", ("people", "alice", "nickname"), "al", "people.alice.nickname", "unknown key"),
    ("interaction.yaml", ("people", 1), {}, "people.1", "key is not text"),
    ("interaction.yaml", ("requireSignatures",), "yes", "requireSignatures", "expected a boolean"),
    ("interaction.yaml", ("requireSignatures",), 1, "requireSignatures", "expected a boolean"),
    ("profiles.yaml", ("profiles", "implement", "tools"), "read", "profiles.implement.tools", "expected a list"),
    ("profiles.yaml", ("profiles", "implement", "tool"), ["read"], "profiles.implement.tool", "unknown key"),
    ("profiles.yaml", ("harnessTools", "claude-code", "read", 1), 3, "harnessTools.claude-code.read.1", "string"),
    ("profiles.yaml", ("harnessTools",), ["Read"], "harnessTools", "expected a mapping or nothing (null)"),
    ("sensors.yaml", ("sensors", "scan", "every"), "often", "sensors.scan.every", "not a duration"),
    ("sensors.yaml", ("sensors", "scan", "timeout"), "0s", "sensors.scan.timeout", "not a duration"),
    ("sensors.yaml", ("sensors", "osv", "staleAfter"), "soon", "sensors.osv.staleAfter", "not a duration"),
    ("sensors.yaml", ("sensors", "osv", "lockfiles"), {"Gemfile.lock": []}, "sensors.osv.lockfiles", "none of the lockfiles"),
    ("sensors.yaml", ("sensors", "osv", "lockfiles"), {"../x/uv.lock": []}, "sensors.osv.lockfiles", "inside it"),
    ("sensors.yaml", ("sensors", "osv", "lockfiles", "svc/uv.lock", 0), 1, "sensors.osv.lockfiles.svc/uv.lock.0", "string"),
    ("sensors.yaml", ("sensors", "osv", "feed"), DELETE, "sensors.osv", "an osv sensor needs feed"),
    ("sensors.yaml", ("sensors", "scan", "kind"), "cron", "sensors.scan.kind", "'cron' is none of command, osv"),
    ("sensors.yaml", ("sensors", "scan", "kind"), DELETE, "sensors.scan.kind", "required"),
    ("sensors.yaml", ("sensors", "scan", "command"), [], "sensors.scan", "command needs a program"),
    ("sensors.yaml", ("sensors", "scan", "command"), {"/tmp/evil.sh"}, "sensors.scan.command", "a set (!!set)"),
    ("sensors.yaml", ("sensors", "scan", "feed"), "f", "sensors.scan", "a command sensor takes command and timeout"),
    ("sensors.yaml", ("sensors", "Scan"), {"kind": "command", "command": ["x"]}, "sensors", "'Scan' is not a sensor name"),
]
# fmt: on


@pytest.mark.parametrize(
    "name, path, value, named, words", BAD, ids=[f"{b[0]}:{b[3]}:{b[2]!r}"[:60] for b in BAD]
)
def test_each_bad_key_is_one_line_naming_it(
    name: str, path: tuple[str | int, ...], value: object, named: str, words: str
) -> None:
    path_named, what = where(name, with_value(good(name), path, value))
    assert path_named == named and words in what, what


def leaves(node: object, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], object]]:
    """Every value of a good file with its path, the mappings and lists too."""
    if path:
        yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaves(value, (*path, index))


INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # YAML regulator reads (D-258)
WRONG: dict[type, st.SearchStrategy[object]] = {  # a value of another type than the one given
    str: st.one_of(INT64, st.booleans(), st.lists(st.text(max_size=3), max_size=2), st.just({"a": "b"})),
    int: st.one_of(
        st.text(max_size=3), st.booleans(), st.floats(allow_nan=False), st.lists(INT64, max_size=2)
    ),
    bool: st.one_of(st.sampled_from(["true", "yes", "1", "on"]), INT64, st.lists(st.booleans(), max_size=1)),
    list: st.one_of(st.text(max_size=3), INT64, st.booleans(), st.just({"a": "b"})),
    dict: st.one_of(st.text(max_size=3), INT64, st.lists(st.text(max_size=3), max_size=2)),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(POLICY_MODELS)), st.data())
def test_a_value_of_the_wrong_type_anywhere_is_named_by_its_path(name: str, draw: st.DataObject) -> None:
    """Any key of a good file given a value of another type: the error names exactly that key."""
    data = good(name)
    path, value = draw.draw(st.sampled_from(list(leaves(data))))
    bad = draw.draw(WRONG[type(value)])
    named, what = where(name, with_value(data, path, bad))
    assert named == ".".join(map(str, path)), (bad, what)


SEVERITY = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
# up to a hundred years each (identity.durations: longer is refused, BAD above)
DURATIONS = st.sampled_from("smhd").flatmap(
    lambda unit: st.builds(
        "{}{}".format,
        st.integers(1, min(9_999_999, 100 * 365 * 86400 // {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit])),
        st.just(unit),
    )
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(SEVERITY, min_size=1, max_size=6, unique=True),
    st.data(),
    st.integers(0, 10_000),
    st.integers(1, 10_000),
    st.sampled_from(["system", "pinned"]),
)
def test_a_good_routing_policy_parses_to_what_it_says(
    severities: list[str], draw: st.DataObject, days: int, most: int, clock: str
) -> None:
    pick = st.sampled_from(severities)
    deadlines = draw.draw(st.dictionaries(pick, DURATIONS))
    data: dict[str, Any] = {
        "severities": severities,
        "blocksAtOrAbove": draw.draw(pick),
        "floors": [{"name": "f", "pattern": r"INV-\d+", "atLeast": draw.draw(pick)}],
        "rules": {"intelligence-signal": {"atOrAbove": draw.draw(pick), "owedTo": "S3"}},
        "intakeDebtDays": days,
        "clock": clock,
        "memory": {"maxCurrentPerUnit": most},
        "deadlines": deadlines,
        "escalate": ["alice"],
    }
    routing = parse("routing.yaml", data)
    assert routing.severities == tuple(severities) and routing.blocks_at_or_above == data["blocksAtOrAbove"]
    assert (
        routing.floors[0].at_least == data["floors"][0]["atLeast"]
        and routing.floors[0].fields[0] == "subject"
    )
    assert (
        routing.rules["intelligence-signal"].at_or_above == data["rules"]["intelligence-signal"]["atOrAbove"]
    )
    assert (routing.intake_debt_days, routing.clock, routing.memory.max_current_per_unit) == (
        days,
        clock,
        most,
    )
    assert routing.deadlines == deadlines and routing.notify == ()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    for severity, text in deadlines.items():
        assert routing.deadline_seconds(severity) == int(text[:-1]) * units[text[-1]]
    assert [routing.rank(s) for s in severities] == list(range(len(severities)))


def test_accept_reads_the_content_again_and_puts_nothing_unreadable_in_force(
    ws: helpers.Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proposal made under an older parser (here: one that took anything) whose content today's
    parser refuses is refused at accept (exit 2, nothing written): put in force, an unreadable
    interaction.yaml would refuse every later proposal, its own fix included."""
    from engine.base.errors import BadInput
    from engine.checkout.workspace import Workspace
    from engine.commands import proposals
    from engine.commands.actors import Actor

    engine_ws = Workspace(ws.root)
    path = "regulator/policy/interaction.yaml"
    text = (ws.root / path).read_text().replace("  alice:\n", "  alice:\n    retired_keys: []\n", 1)
    assert "retired_keys" in text
    with monkeypatch.context() as older:
        older.setattr(proposals, "parse_policy", lambda name, text: None)
        made = proposals.propose(engine_ws, path, text.encode(), "an older spelling", Actor(person="alice"))
    before = ws.digest(), (ws.root / path).read_text(), ws.git("rev-parse", "HEAD")
    with pytest.raises(BadInput, match=r"people\.alice\.retired_keys: .*not put in force"):
        proposals.decide(engine_ws, made["id"], "alice", "ok", "accepted")
    assert (ws.digest(), (ws.root / path).read_text(), ws.git("rev-parse", "HEAD")) == before
    done = ws.run("identity", "accept", made["id"], "--by", "alice", "--rationale", "ok")
    assert done.returncode == 2 and "not put in force" in helpers.one_line(done)
    # the workspace still decides: the proposal is rejected as ever
    assert ws.run("identity", "reject", made["id"], "--by", "alice", "--rationale", "no").returncode == 0


def test_a_clones_policy_that_is_not_utf8_is_one_line_exit_2(ws: helpers.Workspace, tmp_path: Path) -> None:
    """In a clone the committed file is all there is: a byte that is not UTF-8 is bad input."""
    clone = helpers.clone(ws, tmp_path / "clone")
    with (clone / "regulator/policy/routing.yaml").open("ab") as handle:
        handle.write(b"\xff")
    done = ws.run("signals", "route", "--dry-run", *helpers.report_args()[2:], cwd=clone)
    assert done.returncode == 2, done.stderr
    assert "routing.yaml: not valid UTF-8" in helpers.one_line(done)


def test_a_long_key_is_named_cut_and_a_set_is_found_by_its_path() -> None:
    """A fourth adversarial review: the set check built a dotted path for every value, so a long key
    over values the loader's aliases repeat cost the square of the text under serve's write lock,
    and the refusal echoed the 150 KB key. The path is written for the set found only, and a key is
    named cut at 300 characters."""
    key = "k" * 150_000
    with pytest.raises(PolicyError) as refused:
        parse_policy("routing.yaml", f"? {key}\n: 1\n")
    said = str(refused.value)
    assert said.startswith("routing.yaml: kkk") and len(said) < 400 and "…" in said, said[:400]
    with pytest.raises(
        PolicyError, match=r"^routing.yaml: notify\.1: a set \(!!set\) where a list is expected$"
    ):
        parse_policy("routing.yaml", "notify: [a, !!set {b, c}]\n")
