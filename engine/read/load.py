"""One load of the read model: restore the checkpoint, fold what the stores gained since, attach
the contracts, and (a writer's load) offer the result for the next checkpoint.

    load(ws) -> checkpoint.restore -> fold.advance -> contracts -> checkpoint.offer -> State

Each step is called from here once and returns here; none calls back into another.
"""

from __future__ import annotations

from datetime import datetime

from engine.base import clock
from engine.base.errors import Refused
from engine.checkout.workspace import Workspace, configure_clock
from engine.read import checkpoint
from engine.read.contracts import Contract, contracts_of, load_contracts, prefetch, prefetch_threshold
from engine.read.fold import ORDER, StoreReplaced, advance
from engine.read.model import State, UnitState


def load(
    ws: Workspace,
    now: datetime | None = None,
    stores: tuple[str, ...] = ORDER,
    *,
    cached: bool = True,
    final: bool = True,
    start: State | None = None,
) -> State:
    """The read model now: from the checkpoint when it holds and the stores asked for are large
    enough to be worth it (engine.read.checkpoint), then whatever the stores gained since. With no
    checkpoint and a large log, a second process reads the contract files while this one folds
    (engine.read.contracts.Prefetch). A writer's load (inside the decide lock) offers its state for a
    new checkpoint, written once the command is done; a reader's never does. `final=False` leaves a
    last line without its newline to be read whole later (a writer's load before its lock).
    `start`: a state this process folded moments ago (--once's router's, design §25), brought up to
    now instead of a checkpoint or the first byte."""
    configure_clock(ws)  # the clock follows the workspace read (REGULATOR_NOW only where pinned)
    if ws.git_only:  # a command that reads only git opens no store (D-87)
        stores = ()
    now = now or clock.now()
    state = start
    if state is not None:  # its contracts are attached again below, their problems named again
        state.now = now
        state.contract_problems = []
    size = sum(ws.store(name).size() for name in stores)
    if state is None and cached and size >= checkpoint.threshold():
        state = checkpoint.restore(ws, now)
    state = state or State(now=now)
    cold = prefetch_threshold()
    helper = prefetch(ws) if cold is not None and size >= cold and not state.contract_files.seen else None
    files = None
    try:
        state = _fold(ws, state, stores, now, final)
        files = helper.files() if helper is not None else None
    finally:
        if helper is not None:
            helper.close()
    if files is not None:
        state.contract_files = files
        contracts = contracts_of(files.seen, state.contract_problems)
    else:
        contracts = load_contracts(ws, state.contract_problems, state.contract_files)
    attach_contracts(state, contracts)
    if ws.deciding():
        checkpoint.offer(ws, state)
    return state


def _fold(ws: Workspace, state: State, stores: tuple[str, ...], now: datetime, final: bool = True) -> State:
    """advance(), from the first byte again when what was folded must be judged again: a line that
    no host wrote bears on it (engine.read.fold.Refold), or a store was cut shorter."""
    for _ in range(2):
        try:
            advance(ws, state, stores=stores, final=final)
            return state
        except StoreReplaced:
            state = State(now=now)
    try:
        advance(ws, state, stores=stores, final=final)
    except StoreReplaced as exc:
        raise Refused(f"{exc}.ndjson changed while it was read; run the command again") from None
    return state


def attach_contracts(state: State, contracts: dict[str, Contract]) -> None:
    """Give every unit its contract (a unit with events but no contract file keeps None)."""
    state.contracts = contracts
    for unit_id, unit in state.units.items():
        unit.contract = contracts.get(unit_id)
    for unit_id, contract in contracts.items():
        if unit_id not in state.units:
            state.units[unit_id] = UnitState(id=unit_id, contract=contract)
