"""Ids: sortable and unique without coordination (ULID-like), or derived where sameness matters.

Obligation ids are derived from (signal, unit) so that a second router's work is a duplicate to
drop, not a conflict. While REGULATOR_NOW is set, new ids derive from the event and its position
in the chain, so a demo is reproducible byte for byte.
"""

from __future__ import annotations

import hashlib
import os

from engine.base import clock

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _encode(number: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_CROCKFORD[number & 31])
        number >>= 5
    return "".join(reversed(chars))


def new_id(seed: str) -> str:
    """A 26-character ULID-like id: 48 bits of milliseconds, then 80 bits of randomness.

    `seed` names the event and its position; it is used only while the clock is fixed.
    """
    millis = int(clock.now().timestamp() * 1000)
    if clock.fixed():
        tail = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:10], "big")
    else:
        tail = int.from_bytes(os.urandom(10), "big")
    return _encode(millis, 10) + _encode(tail, 16)


def obligation_id(signal_id: str, unit_id: str | None) -> str:
    digest = hashlib.sha256(f"obligation\0{signal_id}\0{unit_id or ''}".encode()).hexdigest()
    return digest[:20]


def recovery_obligation_id(decision_id: str, unit_id: str) -> str:
    digest = hashlib.sha256(f"recovery\0{decision_id}\0{unit_id}".encode()).hexdigest()
    return digest[:20]


def result_id(lease_hash: str) -> str:
    """A result's id: one result per lease, so the same lease names the same result."""
    return "R" + hashlib.sha256(f"result\0{lease_hash}".encode()).hexdigest()[:25]


def expiry_id(lease_hash: str) -> str:
    """A lease-expired event's id: two hosts (or one duty run twice) name the same expiry."""
    return "X" + hashlib.sha256(f"lease-expired\0{lease_hash}".encode()).hexdigest()[:25]


def derived_id(kind: str, *parts: str) -> str:
    """The id of a host event a timed duty writes (design §24): derived from what it is about, so a
    duty run twice, by two hosts or after a restart, names the same event and writes it once."""
    digest = hashlib.sha256("\0".join((kind, *parts)).encode()).digest()
    return _encode(int.from_bytes(digest[:16], "big"), 26)


def recheck_obligation_id(signal_id: str) -> str:
    """The one recheck obligation a signal whose evidence expired opens (design §24)."""
    digest = hashlib.sha256(f"recheck\0{signal_id}".encode()).hexdigest()
    return digest[:20]


def question_obligation_id(signal_id: str) -> str:
    """The one obligation a question (a signal of type question, design §22) opens, owed to S3."""
    digest = hashlib.sha256(f"question\0{signal_id}".encode()).hexdigest()
    return digest[:20]
