"""Transitional name: identity proposals and their decisions now live in engine.proposals ("decision"
elsewhere means a unit's recovery decision). Re-exported for code written against the old name."""

from __future__ import annotations

from engine.proposals import (
    FileCheck,
    commit,
    decide,
    decision_of,
    governed_path,
    propose,
    review,
    verify_identity,
)

__all__ = [
    "FileCheck",
    "commit",
    "decide",
    "decision_of",
    "governed_path",
    "propose",
    "review",
    "verify_identity",
]
