"""design §19: records that can say what seed 003 says, findings against records, and RETRO."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import REGULATOR, clean_env, git, make_workspace

# ---- seed 003's MEM records, transcribed (one of each kind it declares: it declares no component) --

BRAIN_DOCUMENT = """---
id: MEM-OBJ-brain-document
label: Submitted brain document
kind: OBJ
sources: [src/brain/memory/writeback.ts, src/brain/memory/index.ts, src/compat/routes/memories/handler-effect.ts]
relates: [RT-OBJ-turn-state, RT-RTE-knowledge-handoff, MEM-OBJ-derived-memory]
external: [RT-OBJ-turn-state, RT-RTE-knowledge-handoff]
evidence:
  - direct: "src/brain/turn/capture-tools.ts, src/brain/slack/turn.ts, src/brain/memory/index.ts, src/brain/memory/writeback.ts"
  - supplied: "initial eligibility also supplied by R"
limitations:
  - "queued or done establishes accepted submission, not completed extraction."
  - facet: Evidence limits
    text: "Hosted extraction, embeddings and later memory provenance are uninspected."
---
Source-native identity: MemoryDocInput transformed to the document submitted by addMemorySingle.
"""

DERIVED_MEMORY = """---
id: MEM-OBJ-derived-memory
label: Hosted derived memory
kind: OBJ
sources: [src/memory/memories.ts, src/brain/memory/tree.ts, src/brain/memory/search-brain.ts]
relates: [MEM-OBJ-brain-document, RT-RTE-knowledge-handoff]
external: [RT-RTE-knowledge-handoff]
limitations:
  - facet: Evidence limits
    text: "Embedding representation and derivation algorithm are opaque provider parts."
---
BrainMemory / DerivedMemory returned by /v4/memories/list and documents-by-IDs.
"""

CHANNEL_CURATION = """---
id: MEM-RTE-channel-curation
label: Public channel curation and admission
kind: RTE
status:
  implementation: wired
  operation: uninspected
sources: [src/brain/slack/channel-observe.ts, src/brain/memory/index.ts]
relates: [MEM-OBJ-brain-document, RT-RTE-knowledge-handoff]
external: [RT-RTE-knowledge-handoff]
evidence:
  - direct: "bounded ranges of src/brain/slack/channel-observe.ts, including system prompt, SQL tables, spool and complete processing/run functions"
absences:
  - "No complete rollback of a partly submitted batch is implemented here."
limitations:
  - facet: Immediate return
    text: "callback completes, continues, retries or becomes stale; no user answer."
  - facet: Later read-back
    text: "hosted derived cluster memories reach ambient, semantic, tag and tree consumers."
  - facet: Delegated visibility
    text: "fast model receives up to 60 pending messages packed to 8,000 characters plus roster/guidance."
  - facet: Selection predicate
    text: "positively public channel, current org/schedule/generation; oldest pending messages."
  - facet: Invalidation or expiry
    text: "stale ownership/generation rejects work; failed admission retries the persisted batch."
  - facet: Activation or effect
    text: "durable derived knowledge can enter later model context; changed behavior and benefit unobserved."
  - facet: Evidence limits
    text: "HUMAN-only and no-chatter constraints are inference instructions, not verified provenance filters on output."
---
channel history → bot-labeled spool → bounded humanized prompt → fast-model clusters → hosted documents.
"""

MEMORY_WITHDRAWAL = """---
id: MEM-RTE-memory-withdrawal
label: Scoped forgetting and local invalidation
kind: RTE
status: {claim: n/a, implementation: wired, operation: uninspected}
sources: [src/brain/tools/forget-memories.ts, src/brain/memory/cleanup.ts, src/brain/turn/agent.impl.ts]
relates: [RT-RTE-approval-resume, RT-RTE-knowledge-handoff]
external: [RT-RTE-approval-resume, RT-RTE-knowledge-handoff]
evidence:
  - direct: "complete src/brain/tools/forget-memories.ts, src/compat/routes/v4/memories/forget-matching.ts, src/brain/memory/cleanup.ts"
  - direct: "D search for reset callers throughout src/ and web/"
absences:
  - "source search found an exposed reset method/delegation, not a deployed HTTP/UI caller or remote wipe"
limitations:
  - facet: Evidence limits
    text: "actual preview membership is model/approval-protocol guidance, not a locally validated provenance relation."
---
Withdrawal and reset are not complete memory erasure.
"""

SERVICE_CURATION = """---
id: MEM-CLM-service-curation
label: Hosted extraction supersession and decay claims
kind: CLM
status:
  claim: claimed
  implementation: wired
  operation: uninspected
sources: [src/brain/memory/profile-config.ts, src/brain/slack/channel-observe.ts]
relates: [RT-RTE-knowledge-handoff]
external: [RT-RTE-knowledge-handoff]
evidence:
  - direct: "src/compat/routes/memories/handler-effect.ts, src/memory/client.ts, src/memory/memories.ts"
  - supplied: "remote internals and runs are unavailable"
limitations:
  - "Requested behavior is not reliable model/service compliance or measured benefit."
---
Implementation wiring concerns submitting guidance and filtering returned liveness fields.
"""

RETAINED_CONTEXT = """---
id: MEM-BAP-retained-context
label: Retained knowledge and style influence later models
kind: BAP
status: {claim: n/a, implementation: wired, operation: uninspected}
sources: [src/brain/turn/compute.ts, src/brain/prompt/build.ts, src/brain/turn/context-tools.ts, src/brain/auto-research/plan.ts]
relates: [RT-BAP-standing-instructions, RT-BAP-tool-policy, MEM-RTE-channel-curation]
external: [RT-BAP-standing-instructions, RT-BAP-tool-policy]
limitations:
  - facet: Activation or effect
    text: "natural-language knowledge/guidance interpreted by model, not access authorization, validated truth or demonstrated compliance."
---
Consumer: later main-agent turn; research planning also receives company/profile context.
"""

SEED_003 = {
    "MEM-OBJ-brain-document": BRAIN_DOCUMENT,
    "MEM-OBJ-derived-memory": DERIVED_MEMORY,
    "MEM-RTE-channel-curation": CHANNEL_CURATION,
    "MEM-RTE-memory-withdrawal": MEMORY_WITHDRAWAL,
    "MEM-CLM-service-curation": SERVICE_CURATION,
    "MEM-BAP-retained-context": RETAINED_CONTEXT,
}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    ws = make_workspace(tmp_path_factory.mktemp("seed003"))
    for ident, text in SEED_003.items():
        ws.write(f"records/{ident}.md", text)
    ws.commit("seed 003's MEM records")
    return ws


def test_seed_003_records_lint_clean_and_list_as_written(seeded: Any) -> None:
    ws = seeded
    done = ws.run("registry", "lint", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0, report["errors"]
    assert [i for i in report["errors"] + report["warnings"] if i["entry"].startswith("MEM-")] == []
    rows = {r["id"]: r for r in ws.json("registry", "records")}
    assert set(SEED_003) <= set(rows)
    assert all(rows[i]["invalid"] is None for i in SEED_003)
    # the axes as written: none for an object, no claim for a route, n/a kept
    assert rows["MEM-OBJ-brain-document"]["status"] == {}
    assert rows["MEM-RTE-channel-curation"]["status"] == {
        "implementation": "wired",
        "operation": "uninspected",
    }
    assert rows["MEM-RTE-memory-withdrawal"]["status"]["claim"] == "n/a"
    assert rows["MEM-CLM-service-curation"]["status"] == {
        "claim": "claimed",
        "implementation": "wired",
        "operation": "uninspected",
    }
    assert rows["MEM-BAP-retained-context"]["kind"] == "BAP"
    facets = [f["facet"] for f in rows["MEM-RTE-channel-curation"]["limitations"]]
    assert facets == [
        "Immediate return",
        "Later read-back",
        "Delegated visibility",
        "Selection predicate",
        "Invalidation or expiry",
        "Activation or effect",
        "Evidence limits",
    ]
    brain = rows["MEM-OBJ-brain-document"]
    assert brain["limitations"][0].startswith("queued or done")  # a plain string stays allowed
    assert brain["evidence"][1] == {"supplied": "initial eligibility also supplied by R"}
    assert brain["external"] == ["RT-OBJ-turn-state", "RT-RTE-knowledge-handoff"]
    assert "RT-RTE-knowledge-handoff" in brain["relates"]
    assert rows["MEM-RTE-memory-withdrawal"]["absences"][0].startswith("source search found")
    text = ws.run("registry", "records").stdout
    assert "MEM-RTE-channel-curation  [RTE]  implementation wired · operation uninspected" in text
    assert "  - limitation: Selection predicate: positively public channel" in text
    assert "  - evidence: supplied: initial eligibility also supplied by R" in text
    assert "  - absence: source search found an exposed reset method" in text


def test_a_reference_outside_the_workspace_is_bad_unless_declared_external(
    seeded: Any, tmp_path: Path
) -> None:
    ws = seeded
    path = ws.root / "records" / "MEM-OBJ-derived-memory.md"
    before = path.read_text()
    try:
        path.write_text(before.replace("external: [RT-RTE-knowledge-handoff]\n", ""))
        report = json.loads(ws.run("registry", "lint", "--json").stdout)
        assert [(i["code"], i["entry"]) for i in report["errors"]] == [("bad-ref", "MEM-OBJ-derived-memory")]
        assert "RT-RTE-knowledge-handoff" in report["errors"][0]["message"]
    finally:
        path.write_text(before)


@pytest.mark.parametrize(
    ("ident", "front", "why"),
    [
        (
            "X-RTE-route",
            "kind: RTE\nstatus: {claim: claimed, implementation: wired, operation: uninspected}",
            "status.claim: a route carries no claim status",
        ),
        ("X-CLM-claim", "kind: CLM\nstatus: {claim: claimed, implementation: wired}", "status.operation"),
        (
            "X-OBJ-thing",
            "kind: OBJ\nlimitations:\n  - {facet: Mood, text: grumpy}",
            "facet 'Mood' is not one of",
        ),
        ("X-OBJ-other", "kind: OBJ\nevidence:\n  - {seen: it}", "field evidence"),
        ("X-CMP-part", "kind: CMP\nstatus: {operation: maybe}", "status.operation: expected one of"),
    ],
)
def test_an_invalid_record_is_listed_invalid_and_records_exits_1(
    seeded: Any, ident: Any, front: Any, why: Any
) -> None:
    ws = seeded
    path = ws.write(f"records/{ident}.md", f"---\nid: {ident}\nlabel: x\n{front}\n---\n")
    try:
        done = ws.run("registry", "records", "--json")
        assert done.returncode == 1
        rows = {r["id"]: r for r in json.loads(done.stdout)}
        assert rows[ident]["invalid"].startswith("schema: ") and why in rows[ident]["invalid"]
        assert rows["MEM-RTE-channel-curation"]["invalid"] is None  # the valid ones are still listed
    finally:
        path.unlink()


def test_a_component_or_object_needs_no_status(seeded: Any) -> None:
    ws = seeded
    path = ws.write("records/X-CMP-bare.md", "---\nid: X-CMP-bare\nlabel: a part\nkind: CMP\n---\n")
    try:
        rows = {r["id"]: r for r in ws.json("registry", "records")}
        assert rows["X-CMP-bare"]["status"] == {} and rows["X-CMP-bare"]["invalid"] is None
    finally:
        path.unlink()


# ---- a finding against a record ------------------------------------------------------------------

FINDING = """---
id: F-lint-misses-edits
date: "2026-11-28"
title: "Lint misses an edit to affects made in a merge"
affects: [REG-CMP-register-lint]
ack: ""
resolved: false
---
Filed against the register mechanism, in the register.
"""


def test_a_finding_against_a_record_shows_on_it_and_an_ack_forbids_observed(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    record = ws.root / "records" / "REG-CMP-register-lint.md"
    record.write_text(record.read_text().replace("operation: uninspected", "operation: observed"))
    ws.write("findings/F-lint-misses-edits.md", FINDING)
    ws.commit("a finding against the register mechanism")

    report = json.loads(ws.run("registry", "lint", "--json").stdout)
    assert report["errors"] == []  # unacknowledged: a notice, the record's claim stands
    assert ("awaits-ack", "F-lint-misses-edits") in [(i["code"], i["entry"]) for i in report["notices"]]
    rows = {r["id"]: r for r in ws.json("registry", "records")}
    assert rows["REG-CMP-register-lint"]["openFindings"] == [
        {
            "id": "F-lint-misses-edits",
            "title": "Lint misses an edit to affects made in a merge",
            "acknowledged": False,
        }
    ]
    assert rows["REG-OBJ-memory-store"]["openFindings"] == []

    ws.run("registry", "ack", "F-lint-misses-edits", "--by", "alice", "--commit", check=True)
    done = ws.run("registry", "lint", "--json")
    assert done.returncode == 1
    errors = json.loads(done.stdout)["errors"]
    assert [(i["code"], i["entry"]) for i in errors] == [("observed-under-finding", "REG-CMP-register-lint")]
    assert "operation: observed" in errors[0]["message"] and "F-lint-misses-edits" in errors[0]["message"]
    text = ws.run("registry", "records").stdout
    assert "  ! open finding F-lint-misses-edits (acknowledged): Lint misses an edit" in text
    # the control room's Identity view shows it on the record's row, and an invalid record as such
    broken = ws.write("records/REG-RTE-broken.md", "---\nid: REG-RTE-broken\nlabel: x\nkind: RTE\n---\n")
    once = ws.run("controlroom", "--once", "--as", "alice").stdout.splitlines()
    line = next(x for x in once if x.split()[:2] == ["record", "REG-CMP-register-lint"])
    assert "⚑ F-lint-misses-edits" in line
    line = next(x for x in once if x.split()[:2] == ["record", "REG-RTE-broken"])
    assert "INVALID" in line and "schema: field status" in line
    broken.unlink()

    # lowering the claim clears it; a finding naming no record or unit is a bad reference
    record.write_text(record.read_text().replace("operation: observed", "operation: uninspected"))
    ws.write(
        "findings/F-nowhere.md",
        FINDING.replace("F-lint-misses-edits", "F-nowhere").replace(
            "REG-CMP-register-lint", "REG-CMP-nothing"
        ),
    )
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert [(i["code"], i["entry"]) for i in errors] == [("bad-ref", "F-nowhere")]


# ---- RETRO ---------------------------------------------------------------------------------------

T0 = "2026-11-29T12:00:00Z"  # the demo is built at T0
T1 = "2026-11-29T18:00:00Z"  # a disposition and a retraction
T2 = "2026-11-30T06:00:00Z"  # the retro is written


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("retro") / "demo"
    env = clean_env(REGULATOR_NOW=T0)
    done = subprocess.run(
        [REGULATOR, "demo", "--dir", str(root), "--clock", "pinned"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return root


def run(root: Any, now: Any, *args: Any) -> Any:
    env = clean_env(REGULATOR_NOW=now, REGULATOR_SIGNING_KEY=str(root / ".demo-keys" / "alice"))
    return subprocess.run([REGULATOR, *args], cwd=root, env=env, capture_output=True, text=True)


def events(root: Any, name: Any) -> Any:
    lines = (root / ".regulator" / f"{name}.ndjson").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_retro_numbers_match_the_stores_and_an_edit_fails_lint(demo: Any, tmp_path: Path) -> None:
    root = demo
    obligations = json.loads(run(root, T1, "obligations", "--json").stdout)
    held = next(ob for ob in obligations if ob["unit"] == "u1" and ob["blocks"])
    done = run(
        root,
        T1,
        "obligation",
        "resolve",
        held["id"],
        "--by",
        "alice",
        "--disposition",
        "rework",
        "--rationale",
        "u1 reworks the fix against upstream",
    )
    assert done.returncode == 0, done.stderr
    memory = json.loads(run(root, T1, "memory", "--json").stdout)
    mirror = next(m for m in memory if m["subject"] == "package mirror")
    assert (
        run(root, T1, "memory", "retract", mirror["id"], "--by", "alice", "--reason", "fixed").returncode == 0
    )
    lint_before = json.loads(run(root, T2, "registry", "lint", "--json").stdout)

    done = run(root, T2, "registry", "retro", "--since", "2026-11-01", "--json")
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    path = root / written["path"]
    assert written["path"] == "retro/R-2026-11-30-since-2026-11-01.md" and path.exists()
    assert (written["since"], written["until"]) == ("2026-11-01", T2)
    numbers = {name: n["value"] for name, n in written["numbers"].items()}
    assert all(n["query"] for n in written["numbers"].values())

    # the same numbers, counted here from the stores' own lines
    routed = [o for e in events(root, "signals") if e["kind"] == "routing" for o in e["obligations"]]
    dispositions = [e for e in events(root, "signals") if e["kind"] == "disposition"]
    mem = events(root, "memory")
    assert numbers["obligationsOpened"] == len(routed) == 3
    assert numbers["obligationsResolved"] == len(dispositions) == 1
    assert numbers["obligationsByDisposition"] == {"rework": 1}
    assert numbers["medianHoursToDisposition"] == 6.0  # T0 to T1
    blocking_units = {o["unit"] for o in routed if o["blocks"]}
    assert numbers["unitsHeld"] == len(blocking_units) == 2
    assert numbers["hoursHeld"] == {"u1": 6.0, "u3": 18.0}  # u3 still held at until: counted up to it
    assert numbers["memoryRecorded"] == sum(e["kind"] == "memory" for e in mem) == 3
    assert numbers["memoryRetracted"] == sum(e["kind"] == "retraction" for e in mem) == 1
    assert numbers["memoryExpired"] == 0  # every review-by lies after until
    assert numbers["lintErrors"] == len(lint_before["errors"]) == 0
    assert numbers["tombstones"] == 1  # I-renew-memory, rejected on trunk in the period

    text = path.read_text()
    assert text.startswith("---\nid: R-2026-11-30-since-2026-11-01\n")
    again = run(root, T2, "registry", "retro", "--since", "2026-11-01")  # entries are never rewritten
    assert again.returncode == 2 and "exists" in again.stderr and path.read_text() == text
    assert run(root, T2, "registry", "lint").returncode == 0  # as generated: lint agrees

    # an edited number: lint names the field and the recomputed value
    edited = text.replace("  unitsHeld:\n    value: 2\n", "  unitsHeld:\n    value: 1\n")
    assert edited != text
    path.write_text(edited)
    done = run(root, T2, "registry", "lint", "--json")
    assert done.returncode == 1
    errors = [i for i in json.loads(done.stdout)["errors"] if i["code"] == "retro-edited"]
    assert len(errors) == 1 and errors[0]["entry"] == "R-2026-11-30-since-2026-11-01"
    assert "numbers.unitsHeld says 1, recomputed value 2" in errors[0]["message"]
    # later events do not move a past period's numbers
    path.write_text(text)
    other = next(ob for ob in obligations if ob["unit"] == "u3" and ob["blocks"])
    later = "2026-12-01T00:00:00Z"
    done = run(
        root,
        later,
        "obligation",
        "resolve",
        other["id"],
        "--by",
        "alice",
        "--disposition",
        "no-action",
        "--rationale",
        "u3 does not use the helper",
    )
    assert done.returncode == 0, done.stderr
    assert run(root, later, "registry", "lint").returncode == 0

    # the control room's Registers view lists it
    once = run(root, later, "controlroom", "--once", "--as", "alice").stdout
    line = next(x for x in once.splitlines() if x.split()[:2] == ["retro", "R-2026-11-30-since-2026-11-01"])
    assert "obligations 3 opened / 1 resolved · 2 unit(s) held" in line

    # a clone has no stores: the numbers cannot be checked there, and it says so
    git(root, "add", "-A")
    git(root, "commit", "-qm", "retro")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    done = run(clone, T2, "registry", "lint", "--json")
    warnings = [i for i in json.loads(done.stdout)["warnings"] if i["code"] == "retro-unchecked"]
    assert [w["entry"] for w in warnings] == ["R-2026-11-30-since-2026-11-01"]
    done = run(clone, T2, "registry", "retro", "--since", "2026-11-02")
    assert done.returncode == 3 and "stores are absent" in done.stderr
    assert [p.name for p in (clone / "retro").iterdir()] == [path.name]  # nothing written


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--since", "2026-12-01"], "--since 2026-12-01 is not before until"),
        (["--since", "2026-11-01", "--until", "2026-12-31"], "in the future"),
        (["--since", "November"], "not a calendar date"),
        (["--since", "2026-11-01", "--title", "!!!"], "--title"),
    ],
)
def test_retro_bad_input_writes_nothing(demo: Any, args: Any, why: Any) -> None:
    before = sorted(p.name for p in (demo / "retro").glob("*")) if (demo / "retro").exists() else []
    done = run(demo, T2, "registry", "retro", *args)
    assert done.returncode == 2 and why in done.stderr and "Traceback" not in done.stderr
    after = sorted(p.name for p in (demo / "retro").glob("*")) if (demo / "retro").exists() else []
    assert after == before


def test_retro_counts_lint_errors_at_the_last_trunk_commit_before_until(tmp_path: Path) -> None:
    """An acknowledged finding committed at T1 against in-progress u1 is a re-gate error from T1 on:
    a retro ending at T1 does not count it, one ending at T2 does."""
    root = tmp_path / "demo"
    env = clean_env(REGULATOR_NOW=T0)
    done = subprocess.run(
        [REGULATOR, "demo", "--dir", str(root), "--clock", "pinned"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    (root / "findings" / "F-u1-wrong-base.md").write_text(
        '---\nid: F-u1-wrong-base\ndate: "2026-11-29"\ntitle: "u1 builds on the wrong base"\n'
        'affects: [u1]\nack: "2026-11-29 alice"\nresolved: false\n---\nFound at review.\n'
    )
    assert run(root, T1, "registry", "views").returncode == 0
    git(root, "add", "-A")
    # authored as alice is in the demo's policy: git's identity as given where the demo ran (its
    # environment before its configuration, as git has it: D-147, D-237); lint authorizes a
    # person's commit only from an email the policy lists
    as_alice = clean_env(GIT_AUTHOR_DATE=T1, GIT_COMMITTER_DATE=T1)
    git(
        root,
        "-c",
        "gpg.format=ssh",
        "-c",
        f"user.signingkey={root / '.demo-keys' / 'alice'}",
        "commit",
        "-S",  # arriving acknowledged on trunk: signed by alice, whose policy requires it (design §26)
        "-qm",
        "a finding against u1\n\nAuthorized-by: alice",
        env=as_alice,
    )
    lint = json.loads(run(root, T2, "registry", "lint", "--json").stdout)
    assert [(i["code"], i["entry"]) for i in lint["errors"]] == [("regate", "F-u1-wrong-base")]

    before = json.loads(
        run(root, T2, "registry", "retro", "--since", "2026-11-01", "--until", T1, "--json").stdout
    )
    after = json.loads(
        run(root, T2, "registry", "retro", "--since", "2026-11-01", "--title", "to T2", "--json").stdout
    )
    assert before["numbers"]["lintErrors"]["value"] == 0
    assert after["numbers"]["lintErrors"]["value"] == len(lint["errors"]) == 1


def test_a_retro_title_is_written_as_text_never_as_structure(ws: helpers.Workspace) -> None:
    """A --title holding a line break, an escape sequence and a bidi override (a unit may run the
    command) is written escaped: one heading line, no raw control character in the register."""
    title = "# Evil\x1b[31m red\u202e rtl\n## two"
    done = ws.run("registry", "retro", "--since", "2026-11-01", "--title", title)
    assert done.returncode == 0, done.stderr
    (entry,) = (ws.root / "retro").glob("R-*.md")
    text = entry.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\u202e" not in text and "\n## two" not in text
    assert "# # Evil\\x1b[31m red\\u202e rtl\\n## two\n" in text
