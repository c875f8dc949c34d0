"""The policy files (design §13 shapes): routing, interaction, profiles. Parsed with safe_load only
(identity/yamlload.py: strict, a duplicate key is an error)."""

from __future__ import annotations

import re
from typing import Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from identity.yamlload import YamlError, safe_load_strict

GRANTS = ("resolve", "retract", "accept", "ack", "decide", "report")
FLOOR_FIELDS = ("subject", "observation", "rationale")  # never the claim (seed 000)
DURATION = re.compile(r"([1-9][0-9]{0,6})([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # a sensor's name
# the lockfile formats an osv sensor reads (design §24), by file name
LOCKFILE_FORMATS = ("requirements*.txt", "poetry.lock", "uv.lock", "package-lock.json")


def duration_seconds(text: str) -> int:
    """`<n>s|m|h|d` (30s, 15m, 2h, 14d) in seconds; ValueError for anything else (design §23)."""
    found = DURATION.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"{text!r} is not a duration (<n>s, <n>m, <n>h or <n>d, e.g. 48h)")
    return int(found.group(1)) * _SECONDS[found.group(2)]


def lockfile_format(path: str) -> str | None:
    """Which lockfile format a path's file name is (requirements, poetry, uv, npm), or None."""
    import fnmatch

    name = path.rsplit("/", 1)[-1]
    for kind, pattern in zip(("requirements", "poetry", "uv", "npm"), LOCKFILE_FORMATS, strict=True):
        if fnmatch.fnmatchcase(name, pattern):
            return kind
    return None


def _argv(value: tuple[str, ...], what: str) -> tuple[str, ...]:
    """A command as its argument vector (run without a shell): not empty, no empty program, no NUL."""
    if not value or not value[0].strip():
        raise ValueError(f"{what} needs a program: a list such as [notify-send, regulator]")
    for arg in value:
        if "\0" in arg:
            raise ValueError(f"{what}: an argument holds a NUL byte")
    return value


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Floor(_Model):
    name: str
    pattern: str
    fields: tuple[str, ...] = FLOOR_FIELDS
    at_least: str = Field(alias="atLeast")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern does not compile: {exc}") from None
        return value

    @field_validator("fields")
    @classmethod
    def _known_fields(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in FLOOR_FIELDS:
                raise ValueError(f"floors test only {', '.join(FLOOR_FIELDS)}; not {name!r}")
        return value


class Rule(_Model):
    at_or_above: str = Field(alias="atOrAbove")
    owed_to: str = Field(alias="owedTo")


class MemoryPolicy(_Model):
    """How much current memory one recording unit may hold (design §16.1)."""

    max_current_per_unit: int = Field(default=25, alias="maxCurrentPerUnit", ge=1)


class RoutingPolicy(_Model):
    severities: tuple[str, ...]
    blocks_at_or_above: str = Field(alias="blocksAtOrAbove")
    floors: tuple[Floor, ...] = ()
    rules: dict[str, Rule]
    intake_debt_days: int = Field(default=14, alias="intakeDebtDays", ge=0)
    # design §15.3: REGULATOR_NOW is honoured only under `pinned` (tests, the demo's build)
    clock: Literal["system", "pinned"] = "system"
    memory: MemoryPolicy = MemoryPolicy()
    # design §24: how long an obligation of each severity may stay open before it is overdue and
    # escalated; who it is escalated to; the command run once per escalation (no shell). A policy
    # written before these keys has none: nothing is ever overdue, no one is notified.
    deadlines: dict[str, str] = {}
    escalate: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()

    @field_validator("deadlines")
    @classmethod
    def _durations(cls, value: dict[str, str]) -> dict[str, str]:
        for severity, text in value.items():
            try:
                duration_seconds(text)
            except ValueError as exc:
                raise ValueError(f"{severity}: {exc}") from None
        return value

    @field_validator("notify")
    @classmethod
    def _notify_argv(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _argv(value, "notify") if value else value

    def deadline_seconds(self, severity: str) -> int | None:
        """How long an obligation of this severity may stay open, or None: no deadline."""
        text = self.deadlines.get(severity)
        return duration_seconds(text) if text is not None else None

    @model_validator(mode="after")
    def _severities_known(self) -> RoutingPolicy:
        known = set(self.severities)
        named = [self.blocks_at_or_above, *(f.at_least for f in self.floors)]
        named += [r.at_or_above for r in self.rules.values()]
        named += list(self.deadlines)
        for severity in named:
            if severity not in known:
                raise ValueError(f"severity {severity!r} is not in severities")
        if "intelligence-signal" not in self.rules:
            raise ValueError("rules needs an intelligence-signal rule")
        return self

    def rank(self, severity: str) -> int:
        return self.severities.index(severity)


# an OpenSSH public key line: type, base64 blob, optional comment (fully checked when it is used)
SSH_KEY = re.compile(r"(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+={0,2}( .*)?")


class Person(_Model):
    grants: tuple[str, ...] = ()
    resolve: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # OpenSSH public keys that may sign this person's events (design §15.1)
    retired_keys: tuple[str, ...] = Field(default=(), alias="retiredKeys")  # verify old events only

    @field_validator("keys", "retired_keys")
    @classmethod
    def _openssh_keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            if not isinstance(key, str) or not SSH_KEY.fullmatch(key.strip()):
                raise ValueError(
                    f"{str(key)[:40]!r} is not an OpenSSH public key line (e.g. `ssh-ed25519 AAAA… alice@laptop`)"
                )
        return tuple(k.strip() for k in value)

    @field_validator("grants")
    @classmethod
    def _known_grants(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for grant in value:
            if grant not in GRANTS:
                raise ValueError(f"unknown grant {grant!r} (known: {', '.join(GRANTS)})")
        return value


class InteractionPolicy(_Model):
    people: dict[str, Person]
    # design §15.1: a person event counts only when signed by one of the person's keys. A policy
    # without it (made before signatures) counts unsigned person events: "names unauthenticated".
    require_signatures: bool = Field(default=False, alias="requireSignatures")

    def may(self, person: str, grant: str) -> bool:
        entry = self.people.get(person)
        return entry is not None and grant in entry.grants

    def may_resolve(self, person: str, severity: str) -> bool:
        entry = self.people.get(person)
        return entry is not None and "resolve" in entry.grants and severity in entry.resolve


class Sensor(_Model):
    """One declared sensor (design §24): a command printing report_intelligence lines, or an OSV feed
    matched against lockfiles read from trunk."""

    kind: Literal["command", "osv"]
    every: str = "1h"
    severity: str = "advisory"
    command: tuple[str, ...] = ()  # kind: command
    timeout: str = "60s"  # kind: command
    feed: str | None = None  # kind: osv: a folder or a zip of OSV JSON files
    lockfiles: dict[str, tuple[str, ...]] = {}  # kind: osv: path on trunk -> the units it serves
    stale_after: str | None = Field(default=None, alias="staleAfter")  # kind: osv

    @field_validator("every", "timeout", "stale_after")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_seconds(value)
        return value

    @field_validator("lockfiles")
    @classmethod
    def _lockfiles(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for path in value:
            parts = path.split("/")
            if any(ord(c) < 32 or c == "\x7f" for c in path):
                raise ValueError(f"{path!r}: a control character in a path")
            if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise ValueError(f"{path!r}: a path relative to the workspace, inside it")
            if lockfile_format(path) is None:
                raise ValueError(f"{path!r} is none of the lockfiles read: {', '.join(LOCKFILE_FORMATS)}")
        return value

    @model_validator(mode="after")
    def _shape(self) -> Sensor:
        if self.kind == "command":
            _argv(self.command, "command")
            if self.feed is not None or self.lockfiles or self.stale_after is not None:
                raise ValueError(
                    "a command sensor takes command and timeout, not feed, lockfiles or staleAfter"
                )
        else:
            if not self.feed:
                raise ValueError("an osv sensor needs feed: a folder or a zip of OSV JSON files")
            if not self.lockfiles:
                raise ValueError("an osv sensor needs lockfiles: {path: [units]}")
            if self.command:
                raise ValueError("an osv sensor takes feed and lockfiles, not command")
        return self

    @property
    def every_seconds(self) -> int:
        return duration_seconds(self.every)

    @property
    def timeout_seconds(self) -> int:
        return duration_seconds(self.timeout)


class SensorsPolicy(_Model):
    """regulator/policy/sensors.yaml (governed where it exists): none declared by default."""

    sensors: dict[str, Sensor] = {}

    @field_validator("sensors")
    @classmethod
    def _names(cls, value: dict[str, Sensor]) -> dict[str, Sensor]:
        for name in value:
            if not NAME.fullmatch(str(name)):
                raise ValueError(f"{name!r} is not a sensor name (lowercase letters, digits and '-')")
        return value


class Profile(_Model):
    tools: tuple[str, ...] = ()


HarnessTools = dict[str, dict[str, tuple[str, ...]]]  # harness -> abstract tool -> the harness's names


class Profiles(_Model):
    profiles: dict[str, Profile]
    # design §23: the abstract tools a profile grants, as each harness names them; a file without it
    # (every workspace before this round) uses the shipped mapping (identity.shipped.HARNESS_TOOLS)
    harness_tools: HarnessTools | None = Field(default=None, alias="harnessTools")

    def harness(self, name: str) -> dict[str, tuple[str, ...]]:
        """The mapping for one harness (`claude-code`): the file's, else the shipped default."""
        from identity.shipped import HARNESS_TOOLS

        mapping = (self.harness_tools or {}).get(name)
        if mapping is None:
            mapping = {tool: tuple(names) for tool, names in HARNESS_TOOLS.get(name, {}).items()}
        return mapping


POLICY_MODELS: dict[str, type[_Model]] = {
    "routing.yaml": RoutingPolicy,
    "interaction.yaml": InteractionPolicy,
    "profiles.yaml": Profiles,
    "sensors.yaml": SensorsPolicy,
}


@overload
def parse_policy(name: Literal["routing.yaml"], text: str) -> RoutingPolicy: ...
@overload
def parse_policy(name: Literal["interaction.yaml"], text: str) -> InteractionPolicy: ...
@overload
def parse_policy(name: Literal["profiles.yaml"], text: str) -> Profiles: ...
@overload
def parse_policy(name: Literal["sensors.yaml"], text: str) -> SensorsPolicy: ...
@overload
def parse_policy(name: str, text: str) -> _Model: ...
def parse_policy(name: str, text: str) -> _Model:
    """Parse one policy file's text; PolicyError names the file and what is wrong."""
    model = POLICY_MODELS[name]
    try:
        data = safe_load_strict(text)
    except YamlError as exc:  # a duplicate key is refused too: never the last one wins
        raise PolicyError(f"{name}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{name}: expected a mapping at the top")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top)"
        raise PolicyError(f"{name}: {where}: {err['msg']}") from None
