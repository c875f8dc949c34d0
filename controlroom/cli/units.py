"""The unit lifecycle: dispatch, close, recovery decisions, demote (SPEC §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controlroom.cli.common import (
    JsonFlag,
    emit_json,
    escape,
    global_options,
    host_workspace,
    out,
    person_workspace,
)

unit_app = typer.Typer(no_args_is_help=True, help="Unit lifecycle: dispatch, close, decide, demote.")
app = typer.Typer()
app.add_typer(unit_app, name="unit")


@unit_app.command("dispatch")
@global_options
def unit_dispatch(
    unit_id: Annotated[str, typer.Argument(metavar="UNIT")],
    worktree: Annotated[Path | None, typer.Option(help="Write the lease file here.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Dispatch a todo unit under a new lease (vetoes first)."""
    from engine.checkout.workspace import LEASE_FILE
    from engine.commands.units import dispatch

    ws = host_workspace()
    event = dispatch(ws, unit_id, worktree)
    if as_json:  # the token only where no lease file holds it: the host hands it over itself
        lease_file = (ws.root / event["worktree"] / LEASE_FILE).resolve() if event["worktree"] else None
        emit_json(
            {
                "unit": event["unit"],
                "lease": None if event["worktree"] else event["lease"],
                "leaseFile": str(lease_file) if lease_file else None,  # what `regulator mcp --lease` takes
            }
        )
    elif event["worktree"]:
        out(f"dispatched {event['unit']} (lease file in {escape(event['worktree'])}, mode 0600)")
    else:
        out(f"dispatched {event['unit']} under lease {event['lease']} (no lease file: hand it to the unit)")


@unit_app.command("close")
@global_options
def unit_close(unit_id: Annotated[str, typer.Argument(metavar="UNIT")]) -> None:
    """Close an in-progress unit and release its lease (vetoes first)."""
    from engine.commands.units import close

    ws = host_workspace(unit_id)
    close(ws, unit_id)
    out(f"closed {unit_id}")


def _actions_epilog() -> str:
    """Each recovery action and what it does, one paragraph each (wrapped at words)."""
    from controlroom.meanings import RECOVERY

    return "\n\n".join(f"{name}: {meaning}." for name, meaning in RECOVERY.items())


@unit_app.command("decide", epilog=_actions_epilog())
@global_options
def unit_decide(
    unit_id: Annotated[str, typer.Argument(metavar="UNIT")],
    action: Annotated[
        str,
        typer.Option(
            help="One of: retry, repair, abort, remediate, replan, clarify, pause, escalate (what each "
            "does: below)."
        ),
    ] = "",
    by: Annotated[str | None, typer.Option()] = None,
    rationale: Annotated[str, typer.Option()] = "",
    as_json: JsonFlag = False,
) -> None:
    """Record a recovery decision; it disposes of the unit's open S3 obligations."""
    from engine.commands.units import decide

    ws = person_workspace(by)
    event = decide(ws, unit_id, action, by, rationale)
    if as_json:
        emit_json(
            {
                "id": event["id"],
                "resolves": event["resolves"],
                "opens": event["opens"]["id"] if event["opens"] else None,
            }
        )
        return
    out(
        f"{unit_id}: {action} recorded by {escape(event['by'])}; "
        f"{len(event['resolves'])} obligation(s) {event['disposition']}"
    )
    if event["opens"]:
        out(f"{unit_id} now waits on recovery-decision obligation {event['opens']['id']}")


@unit_app.command("demote")
@global_options
def unit_demote(
    unit_id: Annotated[str, typer.Argument(metavar="UNIT")],
    by: Annotated[str | None, typer.Option()] = None,
    rationale: Annotated[str, typer.Option()] = "",
) -> None:
    """Return an in-progress unit to todo and release its lease (the re-gate of seed 004)."""
    from engine.commands.units import demote

    ws = person_workspace(by)
    demote(ws, unit_id, by, rationale)
    out(f"demoted {unit_id} to todo")


# ---- entry point -----------------------------------------------------------------------------
