"""Policy files written before this round lack its new keys (design §26): each has a stated default
(no deadlines, no sensors, the shipped `harnessTools`), so an old workspace works unchanged. The
files under round2/ are what `regulator init` wrote in the second round, byte for byte."""

from __future__ import annotations

from pathlib import Path

import msgspec.structs
import pytest
import yaml

from identity.policy import parse_policy
from identity.shipped import policy_files
from tests.helpers import Workspace

ROUND2 = Path(__file__).parent / "round2"
EMPTY: tuple[object, ...] = (None, (), [], {})


@pytest.mark.parametrize("name", ["routing.yaml", "interaction.yaml", "profiles.yaml"])
def test_a_second_round_policy_file_parses_and_each_new_key_takes_its_default(name: str) -> None:
    text = (ROUND2 / name).read_text()
    given = set(yaml.safe_load(text))
    old = parse_policy(name, text)
    shipped = parse_policy(name, policy_files("alice", "alice@example.org")[name])
    for info in msgspec.structs.fields(type(old)):
        if info.encode_name in given:  # the key as the file spells it (atLeast, requireSignatures)
            continue
        value = getattr(old, info.name)
        # a key this round added: nothing (no deadlines, no sensors), or what init ships now
        assert value in EMPTY or value == getattr(shipped, info.name), (name, info.name, value)
    assert not getattr(old, "deadlines", None)
    assert not getattr(old, "sensors", None)


def test_a_workspace_with_second_round_policy_files_works_unchanged(ws: Workspace) -> None:
    for name in ("routing.yaml", "profiles.yaml"):  # decided as an old workspace had them
        ws.decide(f"regulator/policy/{name}", (ROUND2 / name).read_text())
    ws.commit("second-round policy files")
    for args in (("status",), ("signals", "route"), ("controlroom", "--once"), ("identity", "verify")):
        done = ws.run(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stdout, done.stderr)
