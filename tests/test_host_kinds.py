"""One list of host-event kinds (engine.log.events.HOST_KINDS, design §22): the kinds the fold and
`verify` judge as a host's are in it, the PostgreSQL trigger refuses exactly those from other
roles, and no kind a person or a unit writes is in it (those stay theirs to write)."""

from __future__ import annotations

import re

from engine.log.events import HOST_KINDS
from engine.log.pg import sql
from engine.read import fold
from engine.read.model import EventKind


def test_the_kinds_the_fold_judges_as_a_hosts_are_host_kinds() -> None:
    assert {EventKind.DISPATCH, EventKind.CLOSE} == fold._HOST_KINDS
    assert fold._HOST_KINDS <= HOST_KINDS and EventKind.ROUTING in HOST_KINDS  # routing: verify's


def test_the_trigger_refuses_exactly_the_host_kinds() -> None:
    (array,) = re.findall(r"kind = ANY \(ARRAY\[(.*?)\]::text\[\]\)", sql.CHECK_APPEND_SQL)
    assert {k.strip().strip("'") for k in array.split(",")} == HOST_KINDS
    assert sql.CHECK_APPEND_SQL in sql.SCHEMA_SQL and sql.CHECK_APPEND_SQL in sql.UPGRADE_SQL


def test_what_persons_and_units_write_is_not_a_host_event() -> None:
    theirs = {
        EventKind.SIGNAL,
        EventKind.DISPOSITION,
        EventKind.DISMISSAL,
        EventKind.DEMOTE,
        EventKind.DECISION,
        EventKind.MEMORY,
        EventKind.RETRACTION,
        EventKind.PROPOSAL,
    }
    assert not theirs & HOST_KINDS
