"""Operational memory and what a unit receives: memory, remember, retract, context (design §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from controlroom import printing
from controlroom.cli.common import (
    JsonFlag,
    absent_exit,
    absent_listing,
    emit_json,
    escape,
    fields_from,
    global_options,
    out,
    person_workspace,
    report_contracts,
    report_problems,
    table,
    workspace,
)
from engine.base.errors import BadInput

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import date

    from engine.read.model import MemoryEntry

memory_app = typer.Typer(invoke_without_command=True, help="Operational memory: list, remember, retract.")
app = typer.Typer()
app.add_typer(memory_app, name="memory")


def memory_rows(entries: Iterable[MemoryEntry], today: date) -> list[dict]:
    """Each entry's row. The engine's functions are imported once for the whole listing, not once
    a row (as obligation_rows)."""
    from engine.read.queries import days_left, memory_status

    return [
        {
            "id": (e := entry.event)["id"],
            "subject": e["subject"],
            "note": e["note"],
            "scope": e.get("scope") or [],
            "reviewBy": e["reviewBy"],
            "status": memory_status(entry, today),
            "unit": e.get("unit"),
            "revision": e.get("revision"),
            "daysLeft": days_left(entry, today),
            "retraction": entry.retraction,
        }
        for entry in entries
    ]


@memory_app.callback()
@global_options
def memory(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Add expired and retracted entries.")] = False,
    no_evidence_check: Annotated[
        bool, typer.Option("--no-evidence-check", help="Skip the git check of cited files (all unchecked).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """List current memory entries (with --all, expired and retracted ones too), each with whether
    the files it cites changed since it was recorded (design §20). Reads only."""
    if ctx.invoked_subcommand is not None:
        return
    from engine.base.leaving import keep
    from engine.read import freshness
    from engine.read.load import load
    from engine.read.model import MemoryStatus

    ws, _ = workspace()
    state = load(ws, stores=("memory",))
    report_problems(state)
    today = state.now.date()
    rows = memory_rows(state.memory.values(), today)
    keep(state, rows)  # left to the process's end, not freed object by object (D-330)
    if not all_:
        rows = [r for r in rows if r["status"] == MemoryStatus.CURRENT]
    fresh = {} if no_evidence_check else freshness.check(ws.root, [state.memory[r["id"]].event for r in rows])
    for r in rows:
        r.update(
            fresh.get(r["id"], freshness.OFF).as_json(), evidence=state.memory[r["id"]].event["evidence"]
        )
    if as_json:
        keys: tuple[str, ...] = ("id", "subject", "note", "scope", "reviewBy", "status", "unit", "revision")
        keys += ("evidence", "evidenceStatus", "changedPaths")
        emit_json([{k: r[k] for k in keys} for r in rows])
        absent_exit(ws)
        return
    absent_listing(ws, "memory")
    table(
        ["id", "status", "review-by", "left", "unit", "scope", "evidence", "subject: note"],
        [
            [
                r["id"],
                r["status"],
                r["reviewBy"],
                f"{r['daysLeft']}d",
                r["unit"] or "?",
                ",".join(r["scope"]) or "every unit",  # as the room and the lifecycle say it
                freshness.label(r["evidenceStatus"], r["changedPaths"]),
                f"{r['subject']}: {r['note']}",
            ]
            for r in rows
        ],
    )


@memory_app.command("remember")
@global_options
def memory_remember(
    subject: Annotated[str | None, typer.Option()] = None,
    note: Annotated[str | None, typer.Option()] = None,
    evidence: Annotated[list[str] | None, typer.Option(help="Repeat for each reference.")] = None,
    review_by: Annotated[str | None, typer.Option("--review-by", help="YYYY-MM-DD, 1 to 90 days out")] = None,
    scope: Annotated[list[str] | None, typer.Option(help="A unit type; repeat for more.")] = None,
    json_input: Annotated[str | None, typer.Option("--json-input", help="FILE or -")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Record a dated fact for later units (from a lease whose profile grants remember)."""
    from engine.commands.memory import remember

    flags = {"subject": subject, "note": note, "evidence": evidence, "reviewBy": review_by, "scope": scope}
    fields = fields_from(flags, json_input)
    ws, lease = workspace()
    event = remember(ws, fields, lease)
    if as_json:
        emit_json({"id": event["id"]})
    else:
        out(f"remembered {event['id']} (review by {event['reviewBy']})")


@memory_app.command("retract")
@global_options
def memory_retract(
    entry_id: Annotated[str, typer.Argument(metavar="ID")],
    by: Annotated[str | None, typer.Option()] = None,
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            "--rationale",
            help="Why it is retracted (`--rationale`, as every other person action names it, is the same).",
        ),
    ] = "",
) -> None:
    """Retract a memory entry: a later event; nothing is deleted."""
    from engine.commands.memory import retract

    ws = person_workspace(by)
    event = retract(ws, entry_id, by, reason)
    out(f"retracted {event['entry']} by {escape(event['by'])}")


@app.command()
@global_options
def context(
    unit: Annotated[str | None, typer.Argument(metavar="[UNIT]")] = None,
    budget: Annotated[int, typer.Option(help="Characters for the memory section.", min=0)] = 6000,
    as_json: JsonFlag = False,
) -> None:
    """Print exactly what a unit receives at start: identity, then current memory (fenced, escaped)."""
    from engine.checkout.workspace import check_unit_id
    from engine.read.delivery import build_context, render_json, render_text
    from engine.read.load import load

    ws, lease = workspace()
    state = load(ws)
    if unit is None and lease is not None:
        unit = lease.unit
    if unit is not None:
        check_unit_id(unit)
        if unit not in state.contracts:
            from engine.read.contracts import read_contract

            read_contract(ws, unit)  # names a missing or invalid contract in one line (exit 2)
            raise BadInput(f"unit {unit!r} has no contract under contracts/")
    report_contracts(state)
    ctx = build_context(ws, state, unit, budget)
    if as_json:
        emit_json(render_json(ctx))
    else:
        printing.write(render_text(ctx))
    absent_exit(ws)  # a clone: the memory a unit would receive is unknown, not empty (design §16.2)
