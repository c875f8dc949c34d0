"""The regulatory log: list signals, report_intelligence, route (design §5)."""

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
    absent_exit,
    absent_listing,
    emit_json,
    escape,
    fields_from,
    global_options,
    in_flag_names,
    out,
    report_flags,
    report_problems,
    table,
    workspace,
)
from engine.base.errors import BadInput

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
    from engine.read.worldfold import signal_marks

    rows = signal_rows(state)
    if as_json:
        keys = (
            "id",
            "subject",
            "reportedSeverity",
            "derivedSeverity",
            "routed",
            "outcome",
            "reason",
            "obligations",
        )
        keys += (
            "sensor",
            "supersedes",
            "supersededBy",
            "evidenceExpired",
            "withdrawn",
            "cleared",
            "stallEnded",
        )  # type: ignore[assignment]
        emit_json(
            [
                {k: r[k] for k in keys} | ({"prediction": r["prediction"]} if r["prediction"] else {})
                for r in rows
            ]
        )
        absent_exit(ws)
        return
    absent_listing(ws, "signals")
    table(
        ["id", "reported", "derived", "outcome", "from", "subject"],
        [
            [
                r["id"],
                r["reportedSeverity"] or _cell(r["type"]),  # a question says so, as the room does
                r["derivedSeverity"] or "-",
                r["outcome"] or "unrouted",
                r["from"],
                # its marks, as the room's (the line read back only where one asks for it)
                f"{r['subject']}{signal_marks(state, r['id'], state.signals[r['id']] if r['prediction'] or r['supersedes'] else {})}",
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
    supersedes: Annotated[
        str | None, typer.Option(help="The id of an earlier signal this report re-asks or replaces.")
    ] = None,
    resolves_at: Annotated[
        str | None, typer.Option("--resolves-at", help="A prediction: when the claim can be judged.")
    ] = None,
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
        supersedes,
        resolves_at,
    )
    fields = fields_from(flags, json_input)
    ws, lease = workspace()
    actor = unit_or_person(lease, by, "report_intelligence")
    try:
        event = report_intelligence(ws, fields, actor)
    except BadInput as exc:  # given by flags: said with the flags' names
        if json_input is not None:
            raise
        raise in_flag_names(exc) from None
    if as_json:
        emit_json({"id": event["id"]})
    else:
        from engine.host.instance import running

        serving = running(ws)
        if serving is not None:
            out(f"reported signal {event['id']} (serve, pid {serving.get('pid')}, routes it within moments)")
        else:
            out(
                f"reported signal {event['id']} (not yet routed: no serve is running; `regulator signals route`)"
            )


@signals_app.command("resolve-prediction")
@global_options
def signals_resolve_prediction(
    signal_id: Annotated[str, typer.Argument(metavar="ID")],
    came_true: Annotated[str, typer.Option("--came-true", help="yes|no")] = "",
    by: Annotated[str | None, typer.Option()] = None,
    rationale: Annotated[str, typer.Option()] = "",
    as_json: JsonFlag = False,
) -> None:
    """Record whether a signal's prediction came true (signed; the resolve grant)."""
    from controlroom.cli.common import person_workspace
    from engine.commands.predictions import resolve_prediction

    ws = person_workspace(by)
    event = resolve_prediction(ws, signal_id, came_true, by, rationale)
    if as_json:
        emit_json({"signal": event["signal"], "cameTrue": event["cameTrue"], "id": event["id"]})
    else:
        said = "came true" if event["cameTrue"] else "did not come true"
        out(f"signal {event['signal']}: the prediction {said} (recorded by {escape(event['by'])})")


# `signals route`, with its what-if modes (design §20), lives in controlroom/cli/whatif.py
signals_app.command("route")(global_options(cli_whatif.signals_route))


# ---- obligations -------------------------------------------------------------------------------


def _cell(value: object) -> str:
    return value if isinstance(value, str) and value else "-"
