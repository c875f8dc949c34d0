"""What `regulator init` writes: the shipped policy (design §5.1, §7, §13) and a baseline identity."""

from __future__ import annotations

import yaml

INVARIANTS = """\
# Invariants

These hold for every unit, indefinitely. They change only by a proposal a named person accepts.

- INV-001: A unit acts only under its own lease; the host stamps the unit id, never the model.
- INV-002: Nothing in a store is ever edited in place or deleted; a retraction, a disposition or
  a decision is recorded as a later event.
- INV-003: A finding raises an obligation and never replans; a person decides what to do about it.
- INV-004: Memory never reaches an identity file: operational memory is advice, rendered into
  context, and cannot change regulator/identity/ or regulator/policy/.
"""

GLOSSARY = """\
# Glossary

- unit: one dispatched piece of agent work, with a contract, a budget, a route and a lease.
- signal: an intelligence message from a research unit (S4) or a person to S3.
- obligation: what a routed signal is owed to S3 about one unit; at blocking it holds the unit.
- disposition: a person's decision that ends an obligation (no-action, accepted-risk, rework,
  replan, research-requested).
- memory entry: a dated fact for later units; it expires on its review-by date.
- identity: these files, the invariants, the glossary and the boundaries (S5).
- finding: a register entry that invalidates plans; it pulls the work it names off Next-up.
- intake: a register entry for a raw idea, with one disposition.
- record: a register entry about regulator's own parts, with honest limitations.
- retro: a register entry of numbers generated from the stores and git for a period; people
  write its prose, never its numbers (lint recomputes them).
- tombstone: an entry withdrawn in place (resolved or rejected), never deleted.
- Next-up: the compiled work queue, derived from units, obligations and findings.
"""

BOUNDARIES = """\
# Boundaries

- Never edit vendor/: a vendored copy is changed upstream or replaced, not patched in place.
- Never edit regulator/identity/ or regulator/policy/ except through an accepted proposal.
- A research unit reads and reports; it does not write, edit or run a shell.
"""

IDENTITY_FILES = {
    "invariants.md": INVARIANTS,
    "glossary.md": GLOSSARY,
    "boundaries.md": BOUNDARIES,
}

ROUTING = {
    "severities": ["info", "advisory", "blocking", "critical"],
    "blocksAtOrAbove": "blocking",
    "floors": [
        {
            "name": "names-an-invariant",
            "pattern": r"INV-\d{3}",
            "fields": ["subject", "observation", "rationale"],
            "atLeast": "blocking",
        },
        {
            "name": "names-identity",
            "pattern": r"regulator/identity/",
            "fields": ["subject", "observation", "rationale"],
            "atLeast": "blocking",
        },
    ],
    "rules": {"intelligence-signal": {"atOrAbove": "advisory", "owedTo": "S3"}},
    "intakeDebtDays": 14,
    # design §24: an obligation open past its deadline is overdue and escalated (never resolved)
    "deadlines": {"critical": "4h", "blocking": "48h", "advisory": "14d"},
}

PROFILES = {
    "profiles": {
        "intelligence": {
            "tools": [
                "read",
                "run_checks",
                "report_intelligence",
                "report_result",
                "ask_human",
                "propose_policy_change",
            ]
        },
        "implement": {
            "tools": [
                "read",
                "write",
                "edit",
                "shell",
                "run_checks",
                "remember",
                "report_result",
                "ask_human",  # design §22: new workspaces ship it in intelligence and implement
                "propose_policy_change",
            ]
        },
        "bookkeeper": {"tools": ["read", "remember", "report_result"]},
    }
}


# the abstract tools of profiles.yaml as Claude Code names them (design §23): what `regulator hook
# PreToolUse` and the settings' deny rules use when a workspace's profiles.yaml has no `harnessTools`
HARNESS_TOOLS: dict[str, dict[str, list[str]]] = {
    "claude-code": {
        "read": ["Read", "Grep", "Glob", "LS"],
        "write": ["Write", "NotebookEdit"],
        "edit": ["Edit", "MultiEdit"],
        "shell": ["Bash"],
        "web": ["WebFetch", "WebSearch"],
    }
}


def interaction(owner: str, email: str | None, key: str | None = None) -> dict:
    person: dict = {
        "grants": ["resolve", "retract", "accept", "ack", "decide", "report"],
        "resolve": ["info", "advisory", "blocking", "critical"],
    }
    if email:
        person["emails"] = [email]
    if key:
        person["keys"] = [key]
    return {"requireSignatures": True, "people": {owner: person}}


def dump(data: dict, header: str) -> str:
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def policy_files(
    owner: str, email: str | None, key: str | None = None, clock: str = "system"
) -> dict[str, str]:
    return {
        "routing.yaml": dump(
            {**ROUTING, "escalate": [owner], "clock": clock},
            "# Routing policy (design §5.1, §24). Changed only by accepted proposal.\n",
        ),
        "interaction.yaml": dump(
            interaction(owner, email, key),
            "# Who may do what (design §7). Changed only by accepted proposal.\n",
        ),
        "profiles.yaml": dump(PROFILES, "# Tool profiles for units (design §13).\n"),
    }
