"""The unit lifecycle: dispatch, close, recovery decisions, demote (design §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controlroom import printing
from controlroom.cli.common import (
    JsonFlag,
    emit_json,
    escape,
    global_options,
    host_workspace,
    out,
    person_workspace,
    workspace,
)

unit_app = typer.Typer(
    no_args_is_help=True,
    help="Units: define (new, schema), run, and their lifecycle (dispatch, close, decide, demote).",
)
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
    from engine.commands.actors import host_only
    from engine.commands.units import close

    ws, lease = workspace()
    host_only(lease, unit_id)
    close(ws, unit_id, lease)
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
        f"{len(event['resolves'])} obligation(s) {event['disposition']}" + (":" if event["resolves"] else "")
    )
    if event["resolves"]:  # each named: a blocking finding disposed of is not a silent side effect
        from engine.read.load import load

        obligations = load(ws, stores=("signals", "units")).obligations
        for ob_id in event["resolves"]:
            ob = obligations.get(ob_id)
            what = f"{ob.severity}{', blocked the unit' if ob.blocks else ''}: {ob.subject}" if ob else "?"
            out(f"  {ob_id} {escape(what)}")
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


@unit_app.command("new")
@global_options
def unit_new(
    unit_id: Annotated[str, typer.Argument(metavar="ID")],
    unit_type: Annotated[str, typer.Option("--type", help="Free text: research, implement, ...")] = "",
    profile: Annotated[str, typer.Option(help="A profile of regulator/policy/profiles.yaml.")] = "",
    title: Annotated[str, typer.Option(help="One line people read.")] = "",
    contract: Annotated[str | None, typer.Option(help="The task, in words.")] = None,
    budget_wall: Annotated[
        str | None, typer.Option("--budget-wall", help="Wall-clock budget of a run: 30s, 15m, 2h, 1d.")
    ] = None,
) -> None:
    """Write a valid contracts/ID.json (docs/units.md); never over an existing one."""
    from engine.read.contracts import new_contract

    ws = host_workspace()
    path = new_contract(ws, unit_id, unit_type, profile, title, contract, budget_wall)
    out(
        f"wrote {escape(path.relative_to(ws.root).as_posix())}; commit it, then `regulator unit run {unit_id} -- CMD`"
    )


@unit_app.command("run")
@global_options
def unit_run(
    unit_id: Annotated[str, typer.Argument(metavar="UNIT")],
    command: Annotated[
        list[str] | None, typer.Argument(metavar="-- CMD ARGS…", help="The agent to run.")
    ] = None,
    worktree: Annotated[
        Path | None,
        typer.Option(help="Where the unit works (default .worktrees/UNIT, a git worktree at trunk)."),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(metavar="ACCOUNT", help="Run as this account: the unit is confined (needs root)."),
    ] = None,
    harness: Annotated[str, typer.Option(help="claude-code (MCP config, settings, hooks) or env.")] = "env",
    ttl: Annotated[
        str, typer.Option(metavar="DURATION|none", help="How long the lease lives past its last heartbeat.")
    ] = "15m",
    wait: Annotated[
        bool, typer.Option("--wait", help="When a hold vetoes the close, wait for its disposition.")
    ] = False,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", metavar="NAME", help="Pass this variable on too; repeat for more."),
    ] = None,
) -> None:
    """Run an agent as UNIT under `serve`: dispatch (vetoes first), a worktree, the lease, the
    allowlisted environment with the door's URL and token; then its result, and the close (exit 0),
    awaiting close (exit 3), or a recovery obligation for failed|blocked (exit 1)."""
    import sys

    from engine.host.unitrun import RunRequest, run

    ws = host_workspace()
    request = RunRequest(unit_id, list(command or []), worktree, user, harness, ttl, wait, list(env or []))

    def say(line: str) -> None:
        printing.say(f"regulator: {escape(line)}\n")
        sys.stderr.flush()

    code = run(ws, request, say)
    if code:
        raise typer.Exit(code)


@unit_app.command("schema")
def unit_schema() -> None:
    """Print the JSON Schema of contracts/<id>.json."""

    from engine.read.contracts import schema_text

    printing.write(schema_text())


# ---- entry point -----------------------------------------------------------------------------
