"""The identity store's fold (engine.authority), in process: what a dismissal names."""

from __future__ import annotations

import pytest

from engine.authority import INTERACTION, fold
from identity.files import content_hash

# a policy that does not require signatures: an unsigned person event counts (SPEC §15.1 "names")
POLICY = "people:\n  alice:\n    grants: [accept]\n"


def _fold(*events: dict):
    baseline = {
        "kind": "decision",
        "decision": "baseline",
        "file": INTERACTION,
        "content": POLICY,
        "contentHash": content_hash(POLICY.encode()),
        "hash": "sha256:first",
    }
    return fold([baseline, *events], list(range(0, 100 * (len(events) + 1), 100)))


def test_a_dismissal_names_the_line_verify_names():
    dismissal = {"kind": "dismissal", "id": "d1", "by": "alice", "store": "signals", "line": 3}
    auth = _fold(dismissal)
    assert auth.dismissals == {("signals", 3): dismissal}
    assert auth.uncounted == []


@pytest.mark.parametrize(
    "store, line",
    [("signals", [3]), ({"store": "signals"}, 3), ("signals", "3"), (None, None)],
)
def test_a_dismissal_of_no_store_line_dismisses_nothing_and_breaks_no_read(store, line):
    # A unit sharing the host's account can append a well-chained line; with signatures not
    # required, an unsigned dismissal "by alice" counts. A list or a mapping where verify writes
    # text and a number made the fold raise TypeError (unhashable key): every command that reads
    # the identity store failed with a traceback.
    forged = {"kind": "dismissal", "id": "d1", "by": "alice", "store": store, "line": line}
    auth = _fold(forged)
    assert auth.dismissals == {}
