"""Unit lifecycle: dispatch under a lease, close, recovery decisions, demotion (design §4).

Every transition runs in the exclusive section and routes first, so a veto sees every signal.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from datetime import datetime
from pathlib import Path

import msgspec

from engine.base import clock, ids
from engine.base.errors import BadInput, RegulatorError
from engine.base.limits import check_text
from engine.checkout.workspace import LEASE_FILE, Lease, Workspace, check_unit_id
from engine.commands.actors import check_lease, check_person, lease_hash, require_grant
from engine.commands.deciding import deciding
from engine.commands.written import CloseEvent, DemoteEvent, DispatchEvent, RecoveryDecisionEvent
from engine.read.contracts import contract_path, no_contract, read_contract
from engine.read.model import BLOCKING, OWED_TO, RECOVERY_ACTIONS, EventKind, State, UnitState
from engine.read.rules import Denied, deciding_unit, demoting, recovery
from engine.read.vetoes import close_veto, dispatch_veto
from engine.trust.signing import person_event
from identity import regular


def _known(ws: Workspace, unit_id: str) -> None:
    """Bad input is refused before anything runs, routing included: nothing is written. An invalid
    contract is named in one line (engine.read.contracts.read_contract)."""
    check_unit_id(unit_id)
    read_contract(ws, unit_id)


def _unit(state: State, unit_id: str) -> UnitState:
    check_unit_id(unit_id)
    if unit_id not in state.contracts:
        raise no_contract(unit_id, state.contracts)
    return state.unit(unit_id)


class LeaseTerms(msgspec.Struct, frozen=True):
    """How `unit run` leases a unit (design §23); a plain `unit dispatch` takes none of them: its
    lease never expires, its unit is not known to be confined and its lease file is in the worktree."""

    ttl: int | None = None  # seconds; None: the lease never expires
    confined: bool = False  # the child runs as another account (`--user`)
    lease_dir: Path | None = None  # the lease file's folder, outside the worktree
    owner: tuple[int, int] | None = None  # (uid, gid) the lease file is given to (`--user`)
    run_on: str | None = None  # the host whose `unit run` runs it (engine.checkout.runs.host_id)


def dispatch(
    ws: Workspace, unit_id: str, worktree: Path | None = None, terms: LeaseTerms | None = None
) -> dict:
    terms = terms or LeaseTerms()
    _known(ws, unit_id)
    if worktree is not None:
        worktree = worktree.resolve()
        if not worktree.is_dir():
            raise BadInput(f"--worktree {worktree} is not a folder; create it first")
    with deciding(ws, lambda state: dispatch_veto(ws, state, _unit(state, unit_id))) as turn:
        contract = turn.state.contracts[unit_id]
        # always random, even under a pinned clock; the log keeps only its hash (design §15.2)
        token = secrets.token_urlsafe(32)
        now = clock.now()
        at = clock.iso(now)
        event: DispatchEvent = {
            "kind": EventKind.DISPATCH.value,
            "unit": unit_id,
            "leaseHash": lease_hash(token),
            # the grants of the lease come from here, not from the contract file as it is later
            "type": contract.type,
            "profile": contract.profile,
            "contractHash": _contract_hash(ws, unit_id),
            "worktree": _relative(ws, worktree),
            "revision": ws.revision(worktree),
            "seen": seen(ws, turn.state),
            "at": at,
        }
        if terms.ttl is not None:
            event["expiresAt"] = _lease_end(now, terms.ttl)
            event["ttl"] = terms.ttl
        if terms.lease_dir is not None:
            event["confined"] = terms.confined
        if terms.run_on is not None:
            event["runOn"] = terms.run_on
        lease_file = None
        folder = terms.lease_dir or worktree
        if folder is not None:  # written first: a dispatch whose lease cannot be handed over is none
            lease: dict = {"unit": unit_id, "lease": token, "workspace": str(ws.root), "leasedAt": at}
            if "expiresAt" in event:
                lease["expiresAt"] = event["expiresAt"]
            if terms.lease_dir is not None and worktree is not None:
                lease["worktree"] = str(worktree)
            lease_file = _write_lease(folder, lease, terms.owner)
        try:
            written = ws.store("units").append(event)
        except BaseException:
            if lease_file is not None:
                lease_file.unlink(missing_ok=True)
            raise
        return written | {"lease": token, "leaseFile": str(lease_file) if lease_file else None}


def _contract_hash(ws: Workspace, unit_id: str) -> str | None:
    try:
        return "sha256:" + hashlib.sha256(regular.read_bytes(contract_path(ws, unit_id))).hexdigest()
    except OSError:
        return None


def _write_lease(folder: Path, lease: dict, owner: tuple[int, int] | None = None) -> Path:
    """The lease file, mode 0600 (given to `owner` when named), replaced whole (a temporary file
    renamed over it)."""
    target = folder / LEASE_FILE
    temporary = folder / f".{LEASE_FILE}.{secrets.token_hex(8)}"  # unguessable, and made here alone
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if owner is not None:
                os.fchown(handle.fileno(), *owner)
            handle.write(json.dumps(lease, indent=2) + "\n")
        os.replace(temporary, target)
    except OSError as exc:
        try:
            temporary.unlink()
        except OSError:
            pass
        raise BadInput(
            f"--worktree {folder}: cannot write the lease file ({exc.strerror}); nothing dispatched"
        ) from None
    return target


def _relative(ws: Workspace, worktree: Path | None) -> str | None:
    """Worktrees inside the workspace are recorded relative to it, so the log moves with it."""
    if worktree is None:
        return None
    try:
        return worktree.relative_to(ws.root).as_posix()
    except ValueError:
        return str(worktree)


def close(ws: Workspace, unit_id: str, lease: Lease | None = None) -> dict:
    """Close the unit (vetoes first). Under a lease (a unit closing itself: engine.commands.actors
    .host_only), only while that lease is the unit's current one (exit 3)."""
    _known(ws, unit_id)

    def rule(state: State) -> Denied | None:
        if lease is not None:
            check_lease(ws, state, lease)
        return close_veto(ws, state, _unit(state, unit_id))

    with deciding(ws, rule) as turn:
        unit = _unit(turn.state, unit_id)
        event: CloseEvent = {
            "kind": EventKind.CLOSE.value,
            "unit": unit_id,
            "leaseHash": unit.lease,
            "seen": seen(ws, turn.state),
            "at": clock.iso(clock.now()),
        }
        written = ws.store("units").append(event)
        _remove_lease_file(ws, unit)
        return written


def _lease_end(now: datetime, ttl: int) -> str:
    """When a lease of `ttl` seconds taken now ends: a time any reader reads back (exit 2 past 9998,
    where a pinned clock near the calendar's end overflowed: an adversarial review, D-335)."""
    end = clock.later(now, ttl)
    if end is None or end.year > clock.LAST_YEAR:
        raise BadInput(f"--ttl {ttl}s: the lease would end after {clock.LAST_YEAR}-12-31")
    return clock.iso(end)


def seen(ws: Workspace, state: State, store: str = "units") -> dict[str, int]:
    """What a host event in `store` was decided on (design §22: every host event records it): how far
    the host folded every other store, inside the decide lock. The fold judges a dispatch or close
    at exactly this; the other host events record it for the reader (D-169)."""
    return ws.marks(but=store, folded={name: cursor.offset for name, cursor in state.cursors.items()})


LEASE_BYTES = 64 << 10  # a lease file is a few hundred bytes


def _remove_lease_file(ws: Workspace, unit: UnitState) -> None:
    """The lease is released in the log; the file, now stale, is removed as a courtesy: whatever
    the unit left there (its worktree is its own: a link, a FIFO, a sparse file of a terabyte) is
    read no further than a lease's size, and changes nothing of the close already recorded."""
    if unit.worktree:
        path = ws.root / unit.worktree / LEASE_FILE
        try:
            token = json.loads(regular.read_text(path, limit=LEASE_BYTES)).get("lease")
            if isinstance(token, str) and lease_hash(token) == unit.lease:
                path.unlink()
        except (OSError, ValueError, AttributeError, RecursionError, RegulatorError):
            pass


def decide(ws: Workspace, unit_id: str, action: str, by: str | None, rationale: str) -> dict:
    """A recovery decision (§4.4): it disposes of the unit's open S3 obligations in one event
    (engine.read.rules.recovery says which, and what it opens)."""
    _known(ws, unit_id)
    person = check_person(by, action=action, rationale=rationale)
    if action not in RECOVERY_ACTIONS:
        choices = ", ".join(RECOVERY_ACTIONS)
        raise BadInput(
            f"--action: required (one of {choices})"
            if action == ""
            else f"--action {action!r} is not one of {choices}"
        )
    rationale = check_text("--rationale", rationale, kind="rationale")
    require_grant(ws, person, "decide", "record a recovery decision")

    def rule(state: State) -> Denied | None:
        return deciding_unit(ws.people(), person, state, _unit(state, unit_id))

    with deciding(ws, rule, person=person) as turn:
        effect = recovery(turn.state, unit_id, action)
        event: RecoveryDecisionEvent = {
            "kind": EventKind.DECISION.value,
            "unit": unit_id,
            "action": action,
            "by": person,
            "rationale": rationale,
            "resolves": [ob.id for ob in effect.disposes],
            "disposition": effect.disposition.value,
            "opens": None,
            "at": clock.iso(clock.now()),
        }
        made = person_event(ws, None, event)  # its id names the obligation it opens
        if effect.opens:
            made["opens"] = {
                "id": ids.recovery_obligation_id(made["id"], unit_id),
                "severity": BLOCKING,
                "owedTo": OWED_TO,
            }
        written = ws.store("units").append(turn.signed(made))
        if effect.releases_lease:
            _remove_lease_file(ws, _unit(turn.state, unit_id))
        return written


def demote(ws: Workspace, unit_id: str, by: str | None, rationale: str) -> dict:
    """The re-gate of seed 004: an in-progress unit back to todo, its lease released."""
    _known(ws, unit_id)
    person = check_person(by, rationale=rationale)
    rationale = check_text("--rationale", rationale, kind="rationale")
    require_grant(ws, person, "decide", "demote a unit")

    def rule(state: State) -> Denied | None:
        return demoting(ws.people(), person, state, _unit(state, unit_id))

    with deciding(ws, rule, person=person) as turn:
        unit = _unit(turn.state, unit_id)
        event: DemoteEvent = {
            "kind": EventKind.DEMOTE.value,
            "unit": unit_id,
            "leaseHash": unit.lease,
            "by": person,
            "rationale": rationale,
            "at": clock.iso(clock.now()),
        }
        written = ws.store("units").append(turn.signed(event))
        _remove_lease_file(ws, unit)
        return written
