"""What time and the world bring in (design §24): the declared sensors (`sensors`, `sensors run`)
and the calibration of predictions (`calibration`). The timed duties run in `serve`'s tick
(`serve --once-tick` by hand)."""

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
    global_options,
    host_workspace,
    out,
    report_problems,
    table,
    workspace,
)

if TYPE_CHECKING:
    from engine.checkout.workspace import Workspace

app = typer.Typer()
sensors_app = typer.Typer(invoke_without_command=True, help="The declared sensors: list, run one now.")
app.add_typer(sensors_app, name="sensors")


def _edited(ws: Workspace) -> str:
    """Where sensors.yaml on disk is not the decided one, a note saying so ("" where it is): the
    decided sensors are the ones that run (an operator's review: a sensor added by hand was "no
    sensor 'sneaky'", and the listing showed the old set with no word of the edit)."""
    from engine.commands.proposals import file_check
    from identity.files import SENSORS_POLICY

    auth = ws.authority()
    if not auth.present or auth.unknown:
        return ""  # a clone reads the committed file; an unknown policy is said by every command
    check = file_check(ws, SENSORS_POLICY)  # as `identity verify` judges it
    if check is None or check.ok:
        return ""
    if not auth.ever_decided(SENSORS_POLICY):
        return (
            f"{SENSORS_POLICY} on disk was never decided: it declares no sensor until a person accepts "
            "a proposal of it (`regulator identity propose --file regulator/policy/sensors.yaml …`)"
        )
    return (
        f"{SENSORS_POLICY} on disk is not its decided content: the decided sensors are the ones listed "
        "and run (`regulator identity verify` names the edit; propose it to change them)"
    )


def _errors(errors: list[str]) -> None:
    for error in errors:
        printing.say(f"regulator: {escape(error)}\n")


@sensors_app.callback()
@global_options
def sensors(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the declared sensors with their last run, outcome and signals. Reads only."""
    if ctx.invoked_subcommand is not None:
        return
    from engine.commands.sensors import listing
    from engine.read.load import load

    ws, _ = workspace()
    state = load(ws, stores=("signals",))
    report_problems(state)
    if note := _edited(ws):
        printing.say(f"regulator: warning: {note}\n")
    rows = listing(ws, state)
    if as_json:
        emit_json(rows)
        absent_exit(ws)
        return
    if not rows:
        out(
            "no sensors declared (declare them in regulator/policy/sensors.yaml, by a proposal a person accepts)"
        )
        absent_exit(ws)
        return
    table(
        ["sensor", "kind", "every", "severity", "last run", "outcome", "raised", "next run"],
        [[r["name"], r["kind"], r["every"], r["severity"], *_run_cells(r)] for r in rows],
    )
    for r in rows:  # what went wrong, not only how often (an operator's review: "error (1 error(s))")
        if r["errors"]:
            more = r["errorCount"] - 1
            out(
                f"{escape(r['name'])}: {escape(r['errors'][0])}"
                + (f" (and {more} more: sensors --json)" if more > 0 else "")
            )
    absent_exit(ws)


def _run_cells(r: dict) -> list[str]:
    """last run, outcome, raised, next run; `unknown` where no run is known (no stores here)."""
    if r["runs"] is None:
        return ["unknown", "unknown", "unknown", "unknown"]
    return [
        r["lastRun"] or "never",
        (r["outcome"] or "-") + (f" ({r['errorCount']} error(s))" if r["errorCount"] else ""),
        f"{len(r['signals'])} last run, {r['raised']} in all",
        r["nextRun"] or "now",
    ]


@sensors_app.command("run")
@global_options
def sensors_run(name: Annotated[str, typer.Argument(metavar="NAME")], as_json: JsonFlag = False) -> None:
    """Run one sensor now (a host operation): its new signals, withdrawn advisories and the run
    are written; each problem is one line on stderr, and exit 1."""
    from engine.base.confine import stop_on_signals
    from engine.base.errors import BadInput
    from engine.commands.sensors import run

    ws = host_workspace()
    stop_on_signals()  # a SIGTERM or a closed terminal: the sensor's command goes too (D-247)
    note = _edited(ws)
    try:
        outcome = run(ws, name)
    except BadInput as exc:  # no such sensor: perhaps one added by hand, which declares nothing
        raise BadInput(f"{exc} ({note})" if note else str(exc)) from None
    if note:
        printing.say(f"regulator: warning: {note}\n")
    if as_json:
        emit_json(
            {"sensor": name, "written": outcome.written, "errors": outcome.errors, "note": outcome.note}
        )
    else:  # the run's record is always written, last: what it brought is the rest
        brought = f"{max(0, len(outcome.written) - 1)} new signal(s) or withdrawal(s)"
        said = f"; {outcome.note}" if outcome.note and outcome.note != "not due" else ""
        if outcome.errors:
            out(
                f"sensor {name}: {len(outcome.errors)} problem(s), each on stderr; wrote the run's record "
                f"and {brought}; what failed was skipped, never written in part{said}"
            )
        else:
            out(f"sensor {name}: wrote the run's record and {brought}{said}")
    _errors(outcome.errors)
    if outcome.errors:
        raise typer.Exit(1)


@app.command()
@global_options
def calibration(as_json: JsonFlag = False) -> None:
    """Per reporting source and confidence: how many predictions came true, did not, or await an
    outcome. Reads only."""
    from engine.commands.predictions import calibration as tallies
    from engine.read.load import load

    ws, _ = workspace()
    state = load(ws, stores=("signals",))
    report_problems(state)
    rows = [t.json() for t in tallies(state)]
    if as_json:
        emit_json(rows)
        absent_exit(ws)
        return
    absent_listing(ws, "predictions")
    if not rows:
        out(
            "no predictions yet (`signals report --resolves-at TIME`, or the door's report_intelligence with `prediction: {resolvesAt}`)"
        )
    else:
        table(
            ["source", "confidence", "came true", "did not", "awaiting", "pending", "rate"],
            [
                [
                    f"{r['sourceKind']} {r['source']}",
                    r["confidence"],
                    r["cameTrue"],
                    r["didNotComeTrue"],
                    r["awaiting"],
                    r["pending"],
                    "-" if r["rate"] is None else f"{r['rate']:.0%}",
                ]
                for r in rows
            ],
        )
    absent_exit(ws)
