"""`regulator signals route`: the router by hand, and its what-if modes (design §5.3, §20)."""

from __future__ import annotations

from typing import Annotated

import typer

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
    emit_json,
    escape,
    fields_from,
    in_flag_names,
    out,
    report_flags,
    workspace,
)
from engine.base.errors import BadInput


def signals_route(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the routing a signal would get; write nothing.")
    ] = False,
    policy: Annotated[
        str | None, typer.Option("--policy", metavar="FILE", help="A proposed routing.yaml to route under.")
    ] = None,
    last: Annotated[
        int | None, typer.Option("--last", metavar="N", help="Replay the last N signals (default 1000).")
    ] = None,
    test_file: Annotated[
        str | None, typer.Option("--test-file", metavar="FILE", help="YAML routing test cases (CI).")
    ] = None,
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
    unit: Annotated[str | None, typer.Option(help="The reporting unit (dry run).")] = None,
    by: Annotated[str | None, typer.Option(help="The reporting person (dry run).")] = None,
    json_input: Annotated[
        str | None, typer.Option("--json-input", help="FILE or - (seed 000 keys, unit|by, routedAt)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the router by hand: one routing record per signal not yet routed. With --dry-run (a
    signal's flags or --json-input; or --policy FILE alone to replay the last N signals) or
    --test-file, nothing is written."""
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
    ) | {"unit": unit, "by": by}
    given = any(v is not None for v in flags.values()) or json_input is not None
    if test_file is not None:
        if given:
            raise BadInput("--test-file reads its signals from the file: give no signal flags with it")
        run_test_file(test_file, policy, as_json)
        return
    if not dry_run:
        if given or policy is not None or last is not None:
            raise BadInput(
                "--policy, --last and a signal's fields need --dry-run (or --test-file): "
                "routing itself always uses the policy in force"
            )
        route_now(as_json)
        return
    if given:
        if last is not None:
            raise BadInput("--last replays past signals: give it with --policy FILE and no signal")
        try:
            show_dry_run(fields_from(flags, json_input), policy, as_json)
        except BadInput as exc:  # a signal given by flags: said with the flags' names
            if json_input is not None:
                raise
            raise in_flag_names(exc) from None
    elif policy is not None:
        show_replay(policy, 1000 if last is None else last, as_json)
    else:
        raise BadInput("--dry-run needs a signal (its flags or --json-input FILE) or --policy FILE to replay")


def route_now(as_json: bool) -> None:
    from engine.commands.router import route

    ws, _ = workspace()
    records = route(ws)
    if as_json:
        emit_json(
            [
                {k: r[k] for k in ("signal", "derivedSeverity", "outcome", "reason")}
                | {"obligations": [o["id"] for o in r["obligations"]]}
                for r in records
            ]
        )
        return
    for r in records:
        out(f"{r['signal']}: {r['outcome']} — {escape(r['reason'])}")
    out(f"routed {len(records)} signal(s)")


def show_dry_run(fields: dict, policy_file: str | None, as_json: bool) -> None:
    from engine.commands import whatif

    ws, lease = workspace()
    if lease is not None and fields.get("unit") is None and fields.get("by") is None:
        fields = {**fields, "unit": lease.unit}  # as `signals report` would stamp it
    proposed = whatif.read_policy_file(policy_file) if policy_file else None
    record = whatif.dry_run(ws, fields, proposed)
    if as_json:
        keys = ("derivedSeverity", "reportedSeverity", "floors", "outcome", "reason", "obligations", "at")
        emit_json({k: record[k] for k in keys} | {"dryRun": True})
        return
    under = f"under {escape(policy_file)}" if policy_file else "under the policy in force"
    out(f"dry run ({under}, at {record['at']}): nothing written")
    floors = ", ".join(record["floors"]) or "none"
    out(f"floors matched: {floors}")
    out(f"severity: reported {record['reportedSeverity']}, derived {record['derivedSeverity']}")
    out(f"outcome: {record['outcome']} — {escape(record['reason'])}")
    for ob in record["obligations"]:
        hold = "blocks its dispatch and close" if ob["blocks"] else "does not block"
        out(
            f"  would open: obligation on {escape(ob['unit'] or '(no unit)')}, {ob['severity']}, "
            f"owed to {ob['owedTo']}: {hold}"
        )


def show_replay(policy_file: str, last: int, as_json: bool) -> None:
    from engine.commands import whatif

    proposed = whatif.read_policy_file(policy_file)
    ws, _ = workspace()
    if not ws.has_stores:  # unknown, not "nothing would change" (design §16.2)
        from engine.read.storeless import ABSENT

        out(ABSENT)
        out("replay: the signals live in the stores, which a clone does not have (run it on the host)")
        absent_exit(ws)
    result = whatif.replay(ws, proposed, last)
    if as_json:
        emit_json([{k: c[k] for k in ("signal", "before", "after")} for c in result.changes])
        return
    for line in whatif.replay_lines(result, policy_file):
        out(line)


def run_test_file(path: str, policy_file: str | None, as_json: bool) -> None:
    from engine.commands import whatif

    proposed = whatif.read_policy_file(policy_file) if policy_file else None
    ws, _ = workspace(git_only=True)
    report = whatif.run_tests(ws, path, proposed)
    if as_json:
        emit_json(
            {
                "cases": [
                    {"name": c.name, "passed": c.passed, "differences": c.differences} for c in report.cases
                ],
                "passed": len(report.cases) - report.failed,
                "failed": report.failed,
                "unexercisedFloors": report.unexercised_floors,
                "unexercisedRules": report.unexercised_rules,
                "unreachedOutcomes": report.unreached_outcomes,
            }
        )
    else:
        for c in report.cases:
            out(f"{'pass' if c.passed else 'FAIL'}  {escape(c.name)}")
            for difference in c.differences:
                out(f"      {escape(difference)}")
        if report.unexercised_floors:
            out(f"floors no case exercised: {escape(', '.join(report.unexercised_floors))}")
        if report.unexercised_rules:
            out(f"rules no case exercised: {escape(', '.join(report.unexercised_rules))}")
        if report.unreached_outcomes:
            out(f"outcomes no case reached: {', '.join(report.unreached_outcomes)}")
        out(f"{len(report.cases) - report.failed} passed, {report.failed} failed")
    if report.failed:
        raise typer.Exit(1)
