"""Each rule once (issue 30): the write accepts exactly what the fold counts, and the room's
refusals are the engine's rules' own words (engine.read.rules), never a copy in controlroom/."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from controlroom import actions, readmodel
from engine.base import clock
from engine.base.errors import RegulatorError
from engine.checkout.workspace import Workspace
from engine.commands.obligations import resolve
from engine.doors.api import UnitDoor
from engine.read import rules
from engine.read.load import load
from engine.read.model import ObligationStatus
from engine.trust import signing
from engine.trust.signing import person_event
from tests import helpers
from tests.helpers import NOW, alice_key, made_folder, make_key, make_workspace, report_args

ROOT = Path(__file__).resolve().parent.parent
INTERACTION = "regulator/policy/interaction.yaml"
SEVERITIES = ("advisory", "blocking", "critical")
# who may resolve what: the grant, the severities, a key (None: the person lists none)
PEOPLE: dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]] = {
    "alice": (("resolve", "accept", "decide", "report"), ("info", *SEVERITIES), "alice"),
    "bob": (("resolve",), ("blocking",), "bob"),
    "carol": (("resolve",), (), "carol"),
    "dave": (("decide",), ("blocking", "advisory"), "dave"),
    "erin": (("resolve",), ("blocking", "advisory"), None),
    "frank": (("resolve",), ("advisory",), None),
}
ACTORS = (*PEOPLE, "mallory")  # mallory is no person of the policy


@pytest.fixture(scope="module")
def keys() -> dict[str, Path]:
    folder = made_folder("regulator-rule-keys-")
    found = {name: make_key(folder, name) for name in ("bob", "carol", "dave")}
    return found | {"alice": alice_key()}


def _policy(keys: dict[str, Path], signatures: bool) -> str:
    lines = [f"requireSignatures: {'true' if signatures else 'false'}", "people:"]
    for name, (grants, resolvable, key) in PEOPLE.items():
        lines += [
            f"  {name}:",
            f"    grants: [{', '.join(grants)}]",
            f"    resolve: [{', '.join(resolvable)}]",
        ]
        if key is not None:
            lines.append(f"    keys: ['{Path(f'{keys[key]}.pub').read_text().strip()}']")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def templates(keys: dict[str, Path]) -> Iterator[dict[bool, Path]]:
    """Two workspaces (signatures required or not), each with an open obligation of every
    severity on u1, one obligation alice has resolved already, and u3's advisory recovery
    obligation (its failed result: opened in units.ndjson, which the fold reads after
    signals.ndjson); copied for every example."""
    made: dict[bool, Path] = {}
    base = Path(tempfile.mkdtemp(prefix="regulator-rule-templates-"))
    for signatures in (True, False):
        folder = base / str(signatures)
        folder.mkdir()
        ws = make_workspace(folder, fresh=True)
        ws.decide(INTERACTION, _policy(keys, signatures))
        for subject, severity in (*((s, s) for s in SEVERITIES), ("resolved", "blocking")):
            ws.run(
                *report_args(severity=severity, affects=["u1"], subject=subject), "--by", "alice", check=True
            )
        ws.run("signals", "route", check=True)
        signal = next(s["id"] for s in ws.json("signals") if s["subject"] == "resolved")
        closed = next(o["id"] for o in ws.json("obligations") if o["signal"] == signal)
        ws.run("obligation", "resolve", closed, "--by", "alice", "--disposition", "no-action",
               "--rationale", "done", check=True)  # fmt: skip
        lease = ws.lease("u3") / ".regulator-lease.json"
        with pytest.MonkeyPatch.context() as mp:
            for name, value in ws.env.items():
                mp.setenv(name, value)
            UnitDoor(lease).report_result({"outcome": "failed", "summary": "could not finish"})
        made[signatures] = ws.root
    yield made
    shutil.rmtree(base, ignore_errors=True)


def _closed_by(ws: Workspace, ob_id: str, person: str, line: int) -> bool:
    """Whether a fresh fold counts the disposition at signals.ndjson's `line`: the obligation is
    closed by it (by that person, that line the last of its history) and verify names no line."""
    state = load(ws, cached=False)
    ob = state.obligations[ob_id]
    offsets = ws.store("signals").read().starts
    ref = state.obligations[ob_id].history[-1]
    return (
        ob.status == ObligationStatus.RESOLVED
        and ob.by == person
        and ref >> 2 == offsets[line - 1]
        and not any(u.store == "signals" and u.offset == offsets[line - 1] for u in state.uncounted)
    )


def _written_or_appended(
    ws: Workspace,
    keys: dict[str, Path],
    mp: pytest.MonkeyPatch,
    person: str,
    write: Callable[[], object],
    store: str,
    event: Callable[[], dict[str, object]],
) -> bool:
    """Whether `write` (as `person`, with their key where they list one) wrote; where it refused,
    the event it would have written, appended past it (signed where the person lists a key: the
    key proves who, the rules say whether they may), as a unit sharing the account could."""
    key = PEOPLE.get(person, ((), (), None))[2]
    signing.use_key(keys[key] if key else None)
    mp.setenv("REGULATOR_SIGNING_KEY", str(keys[key] if key else "/nonexistent"))
    try:
        write()
        return True
    except RegulatorError:
        signer = signing.signer_for(ws, person) if key and person in PEOPLE else None
        ws.store(store).append(person_event(ws, signer, event()))
        return False
    finally:
        signing.use_key(None)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# a recovery obligation (advisory, opened in units.ndjson) and who may resolve advisory but not
# blocking, or blocking but not advisory: the full fold reads its disposition before it opens
@example(signatures=False, person="frank", target=3)
@example(signatures=True, person="bob", target=3)
@given(
    signatures=st.booleans(),
    person=st.sampled_from(ACTORS),
    # three open obligations routed from signals, u3's recovery (units.ndjson), one resolved already
    target=st.integers(min_value=0, max_value=4),
)
def test_the_write_accepts_exactly_what_the_fold_counts(
    templates: dict[bool, Path], keys: dict[str, Path], signatures: bool, person: str, target: int
) -> None:
    """For any person (granted or not, allowed the severity or not, with a key or without, or no
    person at all) and any obligation (of any severity, routed or opened by a unit's result, open
    or resolved): `obligation resolve`
    succeeds exactly when the fold counts the disposition it writes. Where the write refuses, the
    same event appended past it (as a unit sharing the account could) counts for nothing."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setenv("REGULATOR_NOW", NOW)
        root = Path(tmp) / "ws"
        shutil.copytree(templates[signatures], root, symlinks=True)
        ws = Workspace(root)
        ob_id = _targets(ws)[target]
        wrote = _written_or_appended(
            ws,
            keys,
            mp,
            person,
            lambda: resolve(ws, ob_id, person, "no-action", "property"),
            "signals",
            lambda: {
                "kind": "disposition",
                "obligation": ob_id,
                "unit": load(ws).obligations[ob_id].unit,
                "disposition": "no-action",
                "by": person,
                "rationale": "property",
                "at": clock.iso(clock.now()),
            },
        )
        line = len(ws.store("signals").read().events)
        assert wrote == _closed_by(ws, ob_id, person, line), (person, signatures, target)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(signatures=True, person="dave", unit="u1", action="retry")  # may decide, not resolve critical
@example(signatures=True, person="dave", unit="u3", action="abort")  # an advisory recovery: allowed
@given(
    signatures=st.booleans(),
    person=st.sampled_from(ACTORS),
    unit=st.sampled_from(("u1", "u3")),
    action=st.sampled_from(("retry", "abort", "repair")),
)
def test_a_decision_is_written_exactly_where_the_fold_disposes_of_all_it_names(
    templates: dict[bool, Path], keys: dict[str, Path], signatures: bool, person: str, unit: str, action: str
) -> None:
    """An operator's review: a `decide` grant released a critical hold its holder was refused to
    resolve. For any person and either unit (u1: an advisory, a blocking and a critical obligation
    open; u3: its advisory recovery), `unit decide` succeeds exactly when the fold closes every
    obligation its event names; where the write refuses, the same event appended past it (signed)
    leaves open each obligation its signer may not resolve."""
    from engine.commands.units import decide

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setenv("REGULATOR_NOW", NOW)
        root = Path(tmp) / "ws"
        shutil.copytree(templates[signatures], root, symlinks=True)
        ws = Workspace(root)
        named = [ob.id for ob in rules.recovery(load(ws), unit, action).disposes]
        wrote = _written_or_appended(
            ws,
            keys,
            mp,
            person,
            lambda: decide(ws, unit, action, person, "property"),
            "units",
            lambda: {
                "kind": "decision",
                "unit": unit,
                "action": action,
                "by": person,
                "rationale": "property",
                "resolves": named,
                "disposition": rules.disposition_of(action).value,
                "opens": None,
                "at": clock.iso(clock.now()),
            },
        )
        state = load(ws, cached=False)
        last = ws.store("units").read().starts[-1]
        closed = [ob_id for ob_id in named if state.obligations[ob_id].status != ObligationStatus.OPEN]
        assert named and wrote == (closed == named), (person, signatures, unit, action, closed)
        if wrote:  # and only by a person who may resolve every severity it disposes of
            assert {state.obligations[ob_id].severity for ob_id in named} <= set(PEOPLE[person][1])
        # what it could not dispose of stays open, and verify says so at its line
        for ob_id in set(named) - set(closed):
            assert any(
                u.store == "units" and u.offset == last and ob_id in u.reason for u in state.uncounted
            ) or (
                person not in PEOPLE
                or "decide" not in PEOPLE[person][0]
                or (signatures and PEOPLE[person][2] is None)
            )


def _targets(ws: Workspace) -> list[str]:
    """The template's obligations: advisory, blocking and critical open, u3's recovery, then the
    resolved one."""
    obligations = load(ws).obligations.values()
    still = {ob.subject: ob.id for ob in obligations if ob.status == ObligationStatus.OPEN}
    recovery = next(ob.id for ob in obligations if ob.unit == "u3")
    done = [ob.id for ob in obligations if ob.status != ObligationStatus.OPEN]
    return [still["advisory"], still["blocking"], still["critical"], recovery, *done]


# ---- the room says what the engine's rules say -------------------------------------------------

RULE_TEXTS = (
    "may not resolve",
    "lacks the",
    "is not a person in interaction",
    "already retracted",
    "already acknowledged",
    "history needs no ack",
    "a recovery decision needs",
    "the unit is {",  # the f-string a copy would spell (a history line may say "the unit is lost")
    "already {",
    "did not hold the accept grant",
    "makes no prediction",
)
VETO_TEXTS = ("vetoed: held by", "stale-knowledge from unresolved finding", "it waits on recovery decision")


def test_no_refusal_text_of_a_rule_is_written_in_the_control_room() -> None:
    """The words of every rule are engine.read.rules' and engine.read.vetoes': the control room
    (its app, actions, views, previews) asks them and holds no copy."""
    for path in sorted((ROOT / "controlroom").glob("*.py")) + sorted((ROOT / "widgets").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for phrase in RULE_TEXTS + VETO_TEXTS:
            assert phrase not in text, f"{path.relative_to(ROOT)} spells a rule's refusal: {phrase!r}"
    rules_text = (ROOT / "engine/read/rules.py").read_text(encoding="utf-8")
    for phrase in RULE_TEXTS:
        assert re.search(re.escape(phrase), rules_text), phrase
    vetoes_text = (ROOT / "engine/read/vetoes.py").read_text(encoding="utf-8")
    for phrase in VETO_TEXTS:
        assert phrase in vetoes_text, phrase


def test_the_rooms_refusals_are_the_rules_answers(ws: helpers.Workspace) -> None:
    """bob may resolve blocking only: the room shows resolve disabled on an advisory obligation
    with the words `obligation resolve` refuses with (the rule's short form), and enabled on a
    blocking one; an unknown person is refused as the rule says."""
    bob = Path(f"{alice_key()}.pub").read_text().strip()
    policy = _policy(
        {"alice": alice_key(), "bob": alice_key(), "carol": alice_key(), "dave": alice_key()}, True
    )
    ws.decide(INTERACTION, policy.replace(Path(f"{alice_key()}.pub").read_text().strip(), bob))
    for severity in ("advisory", "blocking"):
        ws.run(*report_args(severity=severity, affects=["u1"], subject=severity), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REGULATOR_NOW", NOW)
        engine_ws = Workspace(ws.root)
        snap = readmodel.snapshot(engine_ws, "bob", with_checks=False)
        people = engine_ws.people()
        by_severity = {ob.severity: ob for ob in snap.state.obligations.values()}
        action = actions.BY_NAME["resolve"]
        advisory = rules.resolving(people, "bob", by_severity["advisory"])
        assert advisory is not None
        assert actions.why_not(action, snap, by_severity["advisory"].id) == advisory.short
        assert actions.why_not(action, snap, by_severity["blocking"].id) is None
        done = ws.run("obligation", "resolve", by_severity["advisory"].id, "--by", "bob",
                      "--disposition", "no-action", "--rationale", "r")  # fmt: skip
        assert done.returncode == 3 and done.stderr.strip() == f"regulator: {advisory.full}"
        snap.person = "mallory"
        assert (
            actions.why_not(action, snap, by_severity["blocking"].id)
            == "mallory is not a person in interaction.yaml"
        )


def test_what_a_dismissal_leaves_is_each_findings_reading_never_its_words() -> None:
    """What a dismissed line still does is asked of what each finding says readers do with it
    (`Finding.reading`, set where the finding is made), never of the words of its message, which
    carry text from the stores (D-209, D-214)."""
    from engine.commands.verification import Finding, dismissal_leaves
    from engine.log.store import AS_IT_STANDS, BROKEN, SKIPPED, TAKEN

    def leaves(store: str, *found: tuple[str, str]) -> str:
        return dismissal_leaves(
            store, [Finding(f"{store}.ndjson", 3, message, reading) for message, reading in found]
        )

    nothing, kept = "it still counts for nothing", "readers still take it as it stands"
    assert leaves("memory", ("bad JSON; readers skip it", SKIPPED)) == nothing
    # words a store put in a message change nothing: it is the reading that says
    assert leaves("signals", ("for x; readers skip it; it counts for nothing", AS_IT_STANDS)).startswith(kept)
    assert leaves("signals", ("says a/b; readers obey it", SKIPPED)) == nothing
    assert leaves("signals", ("skipped", SKIPPED), ("the fold reads it", TAKEN)).startswith(kept)
    assert leaves("memory", ("stamped in the future", AS_IT_STANDS), ("x", SKIPPED)) == nothing
    assert leaves("memory", ("edited", BROKEN)).startswith(kept)
    assert leaves("identity", ("edited", BROKEN)) == f"{nothing} (the policy's fold leaves it out)"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("abcdef"), unique=True),
    st.lists(st.fixed_dictionaries({"proposal": st.sampled_from("abcdefgh")}), max_size=12),
)
def test_undecided_is_every_proposal_decision_in_finds_nothing_for(
    ids: list[str], decisions: list[dict]
) -> None:
    """The room's one pass (rules.undecided) answers what the rule asks of each proposal alone."""
    proposals = {ident: {"id": ident} for ident in ids}
    assert rules.undecided(proposals, decisions) == [
        i for i in ids if rules.decision_in(decisions, i) is None
    ]
