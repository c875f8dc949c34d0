"""The governed files: where they live and how their content is hashed."""

from __future__ import annotations

import hashlib
from pathlib import Path

from identity import regular

IDENTITY_DIR = "regulator/identity"
POLICY_DIR = "regulator/policy"
IDENTITY_NAMES = ("invariants.md", "glossary.md", "boundaries.md")
POLICY_NAMES = ("routing.yaml", "interaction.yaml", "profiles.yaml")
# where the stores are (design §18): governed where it exists; a workspace on files has none
STORE_POLICY = f"{POLICY_DIR}/store.yaml"
# the declared sensors (design §24): governed where it exists; a workspace without one has none
SENSORS_POLICY = f"{POLICY_DIR}/sensors.yaml"
# governed files a workspace may lack: absent and never decided is fine, present without a
# decision is a hand edit like any other
OPTIONAL = (STORE_POLICY, SENSORS_POLICY)
GOVERNED = (
    tuple(f"{IDENTITY_DIR}/{n}" for n in IDENTITY_NAMES)
    + tuple(f"{POLICY_DIR}/{n}" for n in POLICY_NAMES)
    + OPTIONAL
)


def content_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_hash(path: Path) -> str | None:
    try:
        return content_hash(regular.read_bytes(path))
    except FileNotFoundError:
        return None
