"""The policy files (SPEC §13 shapes): routing, interaction, profiles. Parsed with safe_load only
(identity/yamlload.py: strict, a duplicate key is an error)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from identity import regular
from identity.yamlload import YamlError, safe_load_strict

GRANTS = ("resolve", "retract", "accept", "ack", "decide", "report")
FLOOR_FIELDS = ("subject", "observation", "rationale")  # never the claim (seed 000)


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
    """How much current memory one recording unit may hold (SPEC §16.1)."""

    max_current_per_unit: int = Field(default=25, alias="maxCurrentPerUnit", ge=1)


class RoutingPolicy(_Model):
    severities: tuple[str, ...]
    blocks_at_or_above: str = Field(alias="blocksAtOrAbove")
    floors: tuple[Floor, ...] = ()
    rules: dict[str, Rule]
    intake_debt_days: int = Field(default=14, alias="intakeDebtDays", ge=0)
    # SPEC §15.3: REGULATOR_NOW is honoured only under `pinned` (tests, the demo's build)
    clock: Literal["system", "pinned"] = "system"
    memory: MemoryPolicy = MemoryPolicy()

    @model_validator(mode="after")
    def _severities_known(self) -> RoutingPolicy:
        known = set(self.severities)
        named = [self.blocks_at_or_above, *(f.at_least for f in self.floors)]
        named += [r.at_or_above for r in self.rules.values()]
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
    keys: tuple[str, ...] = ()  # OpenSSH public keys that may sign this person's events (SPEC §15.1)
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
    # SPEC §15.1: a person event counts only when signed by one of the person's keys. A policy
    # without it (made before signatures) counts unsigned person events: "names unauthenticated".
    require_signatures: bool = Field(default=False, alias="requireSignatures")

    def may(self, person: str, grant: str) -> bool:
        entry = self.people.get(person)
        return entry is not None and grant in entry.grants

    def may_resolve(self, person: str, severity: str) -> bool:
        entry = self.people.get(person)
        return entry is not None and "resolve" in entry.grants and severity in entry.resolve


class Profile(_Model):
    tools: tuple[str, ...] = ()


class Profiles(_Model):
    profiles: dict[str, Profile]


POLICY_MODELS: dict[str, type[_Model]] = {
    "routing.yaml": RoutingPolicy,
    "interaction.yaml": InteractionPolicy,
    "profiles.yaml": Profiles,
}


@overload
def parse_policy(name: Literal["routing.yaml"], text: str) -> RoutingPolicy: ...
@overload
def parse_policy(name: Literal["interaction.yaml"], text: str) -> InteractionPolicy: ...
@overload
def parse_policy(name: Literal["profiles.yaml"], text: str) -> Profiles: ...
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


def load_policy(policy_dir: Path, name: str) -> _Model:
    path = policy_dir / name
    try:
        text = regular.read_text(path)
    except FileNotFoundError:
        raise PolicyError(f"{path}: missing; run `regulator init` or restore it") from None
    return parse_policy(name, text)
