"""A unit's profile enforced on its harness's own tools (design §23): which tools Claude Code may run
for a unit, what `regulator hook EVENT` prints for Claude Code's hook events, and the files
`unit run --harness claude-code` writes (an MCP config and a settings file).

One rule decides a tool (`decide_tool`); the settings' static deny rules are derived from the same
grants (`deny_rules`), so the two layers agree: a hook that crashes or times out lets a tool run in
Claude Code, a deny rule does not. The hooks talk only to the door, and print exactly the shapes of
Claude Code's hook reference: nothing at all for a granted tool (never `allow`, which would skip
Claude Code's own permission rules).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

CLAUDE_CODE = "claude-code"
DOOR_SERVER = "regulator"  # the MCP server's name in the config: its tools are mcp__regulator__*
DOOR_TOOLS = f"mcp__{DOOR_SERVER}__"
RUN_CHECKS = "run_checks"  # the profile tool that grants the shell for the contract's checks only
SHELL = "shell"
CONTEXT_MAX = 9000  # characters of context SessionStart adds (design §23)
EVENTS = ("SessionStart", "PreToolUse", "Stop")


class Grants(msgspec.Struct, frozen=True):
    """What a unit may run in one harness, as the door says (its profile, the policy in force, its
    contract's checks): the harness tool names its profile grants, and the commands run_checks
    lets it run in the shell, each exactly."""

    profile: str
    granted: frozenset[str]  # harness tool names
    checks: tuple[str, ...]  # commands, matched exactly; only where the profile grants run_checks
    shell: tuple[str, ...]  # the harness's names of the shell (Bash)
    names: Mapping[str, str]  # harness tool name -> the abstract tool it maps to (for the reasons)

    def as_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "granted": sorted(self.granted),
            "checks": list(self.checks),
            "shell": list(self.shell),
            "names": dict(self.names),
        }

    @classmethod
    def from_json(cls, data: object) -> Grants:
        """What the door's `status` tool gives (`harness`), checked: ValueError when it is not."""
        if not isinstance(data, dict):
            raise ValueError("no harness grants in the door's answer")
        profile, granted, checks, shell, names = (
            data.get(k) for k in ("profile", "granted", "checks", "shell", "names")
        )
        texts = (granted, checks, shell)
        if not isinstance(profile, str) or not all(
            isinstance(t, list) and all(isinstance(x, str) for x in t) for t in texts
        ):
            raise ValueError("the door's harness grants are not lists of text")
        if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
            raise ValueError("the door's harness names are not text")
        return cls(profile, frozenset(granted or ()), tuple(checks or ()), tuple(shell or ()), names)


def grants_for(
    profile: str, tools: Iterable[str], mapping: Mapping[str, Iterable[str]], checks: Iterable[str]
) -> Grants:
    """A profile's grants in one harness: `tools` the profile's abstract tools, `mapping` the
    harness's names of each (profiles.yaml `harnessTools`, or the shipped default), `checks` the
    contract's. The shell's names are granted for the checks only when run_checks is granted and
    the shell itself is not."""
    tools = set(tools)
    names: dict[str, str] = {}
    for abstract, harness_names in mapping.items():
        for name in harness_names:
            names.setdefault(name, abstract)
    granted = frozenset(name for name, abstract in names.items() if abstract in tools)
    shell = tuple(mapping.get(SHELL, ()))
    listed = tuple(checks) if RUN_CHECKS in tools else ()
    return Grants(profile, granted, listed, shell, names)


def decide_tool(grants: Grants, tool_name: object, tool_input: object) -> str | None:
    """Why the unit may not run this tool (the deny reason), or None when its profile grants it.
    The door's own tools are always granted; the shell only for an exact listed check where the
    profile grants run_checks and not the shell; any tool regulator does not know is denied."""
    if not isinstance(tool_name, str) or not tool_name:
        return f"profile {grants.profile} does not grant a tool without a name"
    if tool_name.startswith(DOOR_TOOLS) or tool_name in grants.granted:
        return None
    if tool_name in grants.shell and grants.checks:
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if isinstance(command, str) and command in grants.checks:
            return None
        return (
            f"profile {grants.profile} grants {tool_name} only for the contract's checks, exactly: "
            + "; ".join(grants.checks)
        )
    abstract = grants.names.get(tool_name)
    if abstract is None:
        return f"profile {grants.profile} does not grant {tool_name} (a tool regulator does not know)"
    return f"profile {grants.profile} does not grant {abstract}"


def deny_rules(grants: Grants) -> list[str]:
    """The settings' static `permissions.deny` rules: every harness tool the profile does not grant
    (the hook decides the rest). The shell stays out of them while it is granted for checks: a deny
    rule would refuse the checks too."""
    shell_for_checks = set(grants.shell) if grants.checks else set()
    return sorted(
        name for name in grants.names if name not in grants.granted and name not in shell_for_checks
    )


# ---- the hooks' output (Claude Code's hook reference) ---------------------------------------------
def session_start_output(context: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


def deny_output(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def block_output(reason: str) -> dict[str, Any]:
    return {"decision": "block", "reason": reason}


def fit_context(text: str, limit: int = CONTEXT_MAX) -> str:
    """The unit's context cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    keep = limit - len(_left_out(len(text)))  # the longest note this text can need
    return text[:keep] + _left_out(len(text) - keep)


def _left_out(count: int) -> str:
    return f"\n[regulator: {count} characters left out; the door's context tool gives them all]"


# ---- the files `unit run --harness claude-code` writes ------------------------------------------
def mcp_config(regulator: str) -> dict[str, Any]:
    """The MCP config: one server, `regulator door stdio`. No token in it: the server reads the
    door's URL and the token from the environment `unit run` gives the agent (named here for the
    harness to pass on, never spelled)."""
    return {
        "mcpServers": {
            DOOR_SERVER: {
                "type": "stdio",
                "command": regulator,
                "args": ["door", "stdio"],
                "env": {
                    "REGULATOR_DOOR": "${REGULATOR_DOOR}",
                    "REGULATOR_DOOR_TOKEN": "${REGULATOR_DOOR_TOKEN}",
                },
            }
        }
    }


def settings(regulator: str, state_dir: str, grants: Grants) -> dict[str, Any]:
    """Claude Code's settings for the unit: the three hooks (`regulator hook EVENT`) and the static
    deny rules of its profile."""

    def hook(event: str) -> list[dict[str, Any]]:
        command = " ".join(shlex.quote(part) for part in (regulator, "hook", event, "--state", state_dir))
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if event == "PreToolUse":
            entry = {"matcher": "*", **entry}
        return [entry]

    return {"permissions": {"deny": deny_rules(grants)}, "hooks": {event: hook(event) for event in EVENTS}}


def file_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"
