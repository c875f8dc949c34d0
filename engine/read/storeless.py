"""A checkout without the stores says so (design §16.2).

A `git clone` of a workspace (CI) holds the registers, the contracts and the committed governed
files, never `.regulator/`: there is no unit state, no obligation, no decision log. Readers there
say `stores: absent — unit state unknown` first, show every unit's status as `unknown` (never
`todo`), and read what the committed interaction policy says without claiming it is decided.
"""

from __future__ import annotations

from engine.checkout.workspace import Workspace
from engine.read.model import UNKNOWN_STATUS, State, UnitState
from engine.read.queries import unit_status
from identity import regular

ABSENT = "stores: absent — unit state unknown"
UNKNOWN = UNKNOWN_STATUS  # a unit's status where the stores are absent


def stores(ws: Workspace) -> str:
    """`"present"` or `"absent"` (the `stores` key of every reader's JSON)."""
    return "present" if ws.has_stores else "absent"


def status_of(known: bool, state: State, unit: UnitState) -> str:
    """A unit's status, or `unknown` where the stores are absent (`known` is ws.has_stores, asked
    once per command: a fleet's listing asks per unit)."""
    return unit_status(state, unit) if known else UNKNOWN


def authentication(ws: Workspace) -> str:
    """What `status` and `--once` report (design §15.1): with the stores, the decided policy's
    `signatures` or `names`; without them, what the committed interaction.yaml says, marked
    unverified (`identity verify` checks it against git history)."""
    if ws.has_stores:
        return ws.authority().authentication
    from engine.checkout.authority import INTERACTION, People

    try:
        text = regular.read_text(ws.tree / INTERACTION)
    except (OSError, UnicodeDecodeError):
        text = None
    return ("signatures" if People.parse(text).require_signatures else "names") + "-unverified"


def authentication_line(value: str) -> str | None:
    """The human line for an authentication value, or None when there is nothing to warn about."""
    if value == "names":
        return "names unauthenticated: this workspace counts unsigned person events (no requireSignatures)"
    if value == "signatures-unverified":
        return (
            "policy unverified: the committed interaction.yaml requires signatures, but without the stores "
            "nothing here proves it is the decided one (`regulator identity verify` checks git history)"
        )
    if value == "names-unverified":
        return (
            "names unauthenticated: the committed interaction.yaml does not require signatures "
            "(unverified: no stores here)"
        )
    return None
