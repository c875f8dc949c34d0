"""The regulatory log: list signals, report_intelligence, route (SPEC §5)."""

from __future__ import annotations

from typing import Annotated

import typer

from controlroom.cli import whatif as cli_whatif
from controlroom.cli.common import (
    Affects,
    Claim,
    Confidence,
    Evidence,
    ExpiresAt,
    JsonFlag,
    Observation,
    ObservedAt,
    Rationale,
    Severity,
    Subject,
    emit_json,
    fields_from,
    global_options,
    out,
    report_flags,
    report_problems,
    table,
    workspace,
)

signals_app = typer.Typer(invoke_without_command=True, help="The regulatory log: list, report, route.")
app = typer.Typer()
app.add_typer(signals_app, name="signals")


@signals_app.callback()
@global_options
def signals(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the signals with their routing outcome. Reads only."""
    if ctx.invoked_subcommand is not None:
        return
    from engine.read.load import load

    ws, _ = workspace()
    state = load(ws, stores=("signals",))
    report_problems(state)
    from engine.read.queries import signal_rows

    rows = signal_rows(state)
    if as_json:
        emit_json(
            [
                {
                    k: r[k]
                    for k in (
                        "id",
                        "subject",
                        "reportedSeverity",
                        "derivedSeverity",
                        "routed",
                        "outcome",
                        "reason",
                        "obligations",
                    )
                }
                for r in rows
            ]
        )
        return
    table(
        ["id", "reported", "derived", "outcome", "from", "subject"],
        [
            [
                r["id"],
                r["reportedSeverity"] or "-",
                r["derivedSeverity"] or "-",
                r["outcome"] or "unrouted",
                r["unit"] or r["by"] or "?",
                r["subject"],
            ]
            for r in rows
        ],
    )


@signals_app.command("report")
@global_options
def signals_report(
    subject: Subject = None,
    claim: Claim = None,
    observation: Observation = None,
    evidence: Evidence = None,
    confidence: Confidence = None,
    severity: Severity = None,
    affects: Affects = None,
    observed_at: ObservedAt = None,
    expires_at: ExpiresAt = None,
    rationale: Rationale = None,
    json_input: Annotated[str | None, typer.Option("--json-input", help="FILE or - (seed 000 keys)")] = None,
    by: Annotated[str | None, typer.Option(help="A person reporting (needs the report grant).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """report_intelligence: append a signal (S4 → S3). It opens nothing; routing does."""
    from engine.commands.actors import unit_or_person
    from engine.commands.signals import report_intelligence

    flags = report_flags(
        subject,
        claim,
        observation,
        evidence,
        confidence,
        severity,
        affects,
        observed_at,
        expires_at,
        rationale,
    )
    fields = fields_from(flags, json_input)
    ws, lease = workspace()
    actor = unit_or_person(lease, by)
    event = report_intelligence(ws, fields, actor)
    if as_json:
        emit_json({"id": event["id"]})
    else:
        out(f"reported signal {event['id']} (not yet routed; `regulator signals route`)")


# `signals route`, with its what-if modes (SPEC §20), lives in controlroom/cli/whatif.py
signals_app.command("route")(global_options(cli_whatif.signals_route))


# ---- obligations -------------------------------------------------------------------------------
