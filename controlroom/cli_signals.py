"""The regulatory log: list signals, report_intelligence, route (SPEC §5)."""

from __future__ import annotations

from typing import Annotated

import typer

from controlroom import cli_whatif
from controlroom.cli_common import (
    JsonFlag,
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


def signal_rows(state) -> list[dict]:
    rows = []
    for signal_id, signal in state.signals.items():
        routing = state.routings.get(signal_id)
        rows.append(
            {
                "id": signal_id,
                "subject": signal.get("subject"),
                "reportedSeverity": signal.get("reportedSeverity"),
                "derivedSeverity": routing.get("derivedSeverity") if routing else None,
                "routed": routing is not None,
                "outcome": routing.get("outcome") if routing else None,
                "reason": routing.get("reason") if routing else None,
                "obligations": [o["id"] for o in routing.get("obligations", [])] if routing else [],
                "unit": signal.get("unit"),
                "by": signal.get("by"),
                "at": signal.get("at"),
            }
        )
    return rows


@signals_app.callback()
@global_options
def signals(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the signals with their routing outcome. Reads only."""
    if ctx.invoked_subcommand is not None:
        return
    from engine.load import load

    ws, _ = workspace()
    state = load(ws, stores=("signals",))
    report_problems(state)
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
                r["reportedSeverity"],
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
    subject: Annotated[str | None, typer.Option()] = None,
    claim: Annotated[str | None, typer.Option()] = None,
    observation: Annotated[str | None, typer.Option()] = None,
    evidence: Annotated[list[str] | None, typer.Option(help="Repeat for each reference.")] = None,
    confidence: Annotated[str | None, typer.Option(help="low|medium|high")] = None,
    severity: Annotated[str | None, typer.Option(help="info|advisory|blocking|critical")] = None,
    affects: Annotated[list[str] | None, typer.Option(help="A unit id; repeat for more.")] = None,
    observed_at: Annotated[str | None, typer.Option("--observed-at")] = None,
    expires_at: Annotated[str | None, typer.Option("--expires-at")] = None,
    rationale: Annotated[str | None, typer.Option()] = None,
    json_input: Annotated[str | None, typer.Option("--json-input", help="FILE or - (seed 000 keys)")] = None,
    by: Annotated[str | None, typer.Option(help="A person reporting (needs the report grant).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """report_intelligence: append a signal (S4 → S3). It opens nothing; routing does."""
    from engine.actors import unit_or_person
    from engine.signals import report_intelligence

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


# `signals route`, with its what-if modes (SPEC §20), lives in controlroom/cli_whatif.py
signals_app.command("route")(global_options(cli_whatif.signals_route))


# ---- obligations -------------------------------------------------------------------------------
