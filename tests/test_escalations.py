"""What an escalation keeps, whatever the order a reader folds the stores in (D-292, D-294): a
recovery obligation keeps the severities it escalated, through a decision folded before the
obligation it names and through a chain of escalations; and a policy decision placed before lines
a reader already judged makes that reader judge them again. Each fast path (a kept state advanced,
a checkpoint) is compared with a cold fold; each case failed on the code before D-294."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.base import ids
from engine.checkout.workspace import Workspace
from engine.commands.router import route
from engine.read.fold import StoreReplaced, advance
from engine.read.load import load
from engine.read.model import State
from engine.trust import signing
from engine.trust.signing import person_event
from tests.helpers import NOW, alice_key, make_workspace, report_args

WHEN = datetime(2026, 11, 29, 12, tzinfo=UTC)


def cold(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> State:
    with monkeypatch.context() as mp:
        mp.setenv("REGULATOR_CHECKPOINT", "off")
        return load(ws, WHEN, cached=False)


def signed(ws: Workspace, store: str, event: dict[str, Any]) -> dict[str, Any]:
    """alice's event, signed with her key and appended as a hand would (no write's rules asked)."""
    signing.use_key(alice_key())
    try:
        return ws.store(store).append(person_event(ws, signing.signer_for(ws, "alice"), event))
    finally:
        signing.use_key(None)


def pause(ws: Workspace, unit: str, resolves: list[str], decision_id: str | None = None) -> dict[str, Any]:
    """A pause decision on `unit` as `unit decide` writes it: its id (given, or made as the write
    makes it) and the recovery obligation that id derives."""
    event: dict[str, Any] = {"kind": "decision", "unit": unit, "action": "pause", "by": "alice",
                             "rationale": "r", "resolves": resolves, "disposition": "escalated", "at": NOW}  # fmt: skip
    event["id"] = decision_id or person_event(ws, None, dict(event))["id"]
    event["opens"] = {
        "id": ids.recovery_obligation_id(event["id"], unit),
        "severity": "blocking",
        "owedTo": "S3",
    }
    return event


def critical_on_u1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Workspace, str]:
    """A workspace with a critical signal on u1, reported and not routed (the test helpers' and the
    engine's view of it); its obligation's id."""
    made = make_workspace(tmp_path)
    made.run(*report_args(by="alice", severity="critical", affects=["u1"]), check=True)
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    ws = Workspace(made.root)
    return made, ws, ids.obligation_id(next(iter(load(ws).signals)), "u1")


def add_carol(made: Any, tmp_path: Path) -> Path:
    """carol, who may resolve advisory and blocking (not critical), with a key; her private key."""
    from tests.helpers import make_key

    key = make_key(tmp_path / "keys", "carol")
    policy = (made.root / "regulator/policy/interaction.yaml").read_text()
    public = Path(f"{key}.pub").read_text().strip()
    carol = f"  carol:\n    grants: [resolve]\n    resolve: [advisory, blocking]\n    keys: ['{public}']\n"
    made.decide("regulator/policy/interaction.yaml", policy.replace("people:\n", "people:\n" + carol, 1))
    return key


def carol_resolves(ws: Workspace, key: Path, obligation: str) -> None:
    """carol's signed disposition of `obligation`, appended as a hand would."""
    signing.use_key(key)
    try:
        event = {"kind": "disposition", "obligation": obligation, "unit": "u1", "disposition": "no-action",
                 "by": "carol", "rationale": "fine", "at": NOW}  # fmt: skip
        ws.store("signals").append(person_event(ws, signing.signer_for(ws, "carol"), event))
    finally:
        signing.use_key(None)


def test_an_escalation_folded_before_its_obligation_keeps_its_severity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adversarial review: a pause naming a critical obligation not yet routed was folded first by
    a kept state (the room, serve, a writer's load before it routes); its recovery obligation kept no
    severity once routing closed the critical one into it, and a person allowed only blocking
    resolved it there, where a cold fold refused."""
    _, ws, critical = critical_on_u1(tmp_path, monkeypatch)
    event = pause(ws, "u1", [critical])
    signed(ws, "units", event)
    kept = load(ws, WHEN, cached=False)
    recovery = event["opens"]["id"]
    assert kept.obligations[recovery].escalated == () and critical in kept.pending
    route(ws)
    advance(ws, kept)
    assert kept.obligations[recovery].escalated == ("critical",)
    assert cold(ws, monkeypatch).obligations[recovery].escalated == ("critical",)


def test_a_chain_of_escalations_keeps_every_severity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An adversarial review: a pause D2 naming the recovery obligation R3 of a later pause D3 (whose
    id its signer chose), D3 escalating the critical obligation into R3: R2, D2's, kept nothing of
    the critical, in every fold, and `verify` said every event counted."""
    _, ws, critical = critical_on_u1(tmp_path, monkeypatch)
    route(ws)
    r3 = ids.recovery_obligation_id("d3-chosen", "u1")
    second = pause(ws, "u1", [r3])
    r2 = second["opens"]["id"]
    signed(ws, "units", second)
    signed(ws, "units", pause(ws, "u1", [critical], "d3-chosen"))
    for state in (load(ws, WHEN), cold(ws, monkeypatch)):
        assert state.obligations[r3].status == "escalated" and state.obligations[r3].into == r2
        assert state.obligations[r2].escalated == ("blocking", "critical"), state.obligations[r2]


def test_a_policy_placed_before_judged_lines_has_them_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adversarial review: a signed accept whose `marks` point back over lines a checkpoint had
    judged (a narrowed `resolve:` for the person who had resolved a blocking obligation) left the
    checkpoint's verdict standing while a cold fold re-judged the line: u1 free on one path, held on
    the other. A reader folds again when a decision it has not folded places a policy before what
    it judged."""
    made = make_workspace(tmp_path)
    made.run(*report_args(by="alice", severity="blocking", affects=["u1"]), check=True)
    made.run("signals", "route", check=True)
    ob = made.json("obligations")[0]["id"]
    every = {"REGULATOR_CHECKPOINT_BYTES": "0"}  # a writer leaves a checkpoint whatever the size
    resolving = [
        "obligation",
        "resolve",
        ob,
        "--by",
        "alice",
        "--disposition",
        "no-action",
        "--rationale",
        "ok",
    ]
    made.run(*resolving, check=True)
    made.run(
        "unit",
        "decide",
        "u3",
        "--action",
        "retry",
        "--by",
        "alice",
        "--rationale",
        "r",
        env=every,
        check=True,
    )
    assert (made.root / ".regulator" / "readmodel.checkpoint").exists()  # left by that writer
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("REGULATOR_CHECKPOINT_BYTES", "0")
    ws = Workspace(made.root)
    kept = load(ws, WHEN, cached=False)
    assert kept.obligations[ob].status == "resolved"
    policy = (made.root / "regulator/policy/interaction.yaml").read_text()
    narrowed = policy.replace("    - blocking\n    - critical\n", "")
    assert narrowed != policy, policy
    source = made.root.parent / "narrow.yaml"
    source.write_text(narrowed)
    args = ["--file", "regulator/policy/interaction.yaml", "--content-from", str(source), "--rationale", "r"]
    proposal = json.loads(
        made.run("identity", "propose", *args, "--by", "alice", "--json", check=True).stdout
    )["id"]
    accepted = load(ws, WHEN).proposals[proposal]
    signed(
        ws,
        "identity",
        {
            "kind": "decision",
            "decision": "accepted",
            "proposal": proposal,
            "file": accepted["file"],
            "contentHash": accepted["contentHash"],
            "by": "alice",
            "rationale": "back to the start",
            "marks": {"signals": 0, "units": 0, "memory": 0},
            "at": NOW,
        },  # fmt: skip
    )
    again = cold(ws, monkeypatch)
    assert again.obligations[ob].status == "open"  # alice may no longer resolve blocking, from line 0
    with pytest.raises(StoreReplaced):  # the kept state is to be folded again (as the room and serve do)
        advance(ws, kept)
    assert load(ws, WHEN).obligations[ob].status == "open"  # from the checkpoint: judged again


def test_a_closing_judged_before_a_late_escalation_is_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adversarial review of D-294: carol (blocking, not critical) resolved a pause's recovery
    obligation before routing escalated a critical obligation into it. A kept state had judged her
    disposition when the recovery obligation escalated nothing, and kept it once it carried the
    critical one; a cold fold refused it. The kept state now folds again (D-295)."""
    made, ws, critical = critical_on_u1(tmp_path, monkeypatch)
    key = add_carol(made, tmp_path)
    event = pause(ws, "u1", [critical])
    recovery = event["opens"]["id"]
    signed(ws, "units", event)
    kept = load(ws, WHEN, cached=False)  # the pause folded, the critical obligation not yet routed
    carol_resolves(ws, key, recovery)
    advance(ws, kept)
    assert kept.obligations[recovery].status == "resolved"  # judged as it stood: it escalated nothing yet
    route(ws)
    with pytest.raises(StoreReplaced):  # a late escalation into what carol closed: judged again
        advance(ws, kept)
    for state in (load(ws, WHEN, cached=False), cold(ws, monkeypatch)):
        assert state.obligations[recovery].status == "open"
        assert state.obligations[recovery].escalated == ("critical",)


def test_a_closing_judged_before_a_chain_grew_is_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What D-295 left: carol (blocking only) resolved a pause's recovery obligation R2 while it
    escalated nothing; a later pause escalated the critical obligation into R3, which R2's pause had
    named. R2 then carried the critical one, and carol's closing stood in every fold. Her closing is
    judged again when R2 grows: it no longer counts, and R2 is open again (D-296)."""
    made, ws, critical = critical_on_u1(tmp_path, monkeypatch)
    route(ws)
    key = add_carol(made, tmp_path)
    r3 = ids.recovery_obligation_id("d3-chosen", "u1")
    second = pause(ws, "u1", [r3])
    r2 = second["opens"]["id"]
    signed(ws, "units", second)
    carol_resolves(ws, key, r2)
    assert load(ws, WHEN, cached=False).obligations[r2].status == "resolved"  # it escalated nothing then
    signed(ws, "units", pause(ws, "u1", [critical], "d3-chosen"))
    for state in (load(ws, WHEN, cached=False), cold(ws, monkeypatch)):
        assert (state.obligations[r2].status, state.obligations[r2].escalated) == (
            "open",
            ("blocking", "critical"),
        )
        assert any("may not resolve critical" in u.reason for u in state.uncounted if u.store == "signals")
