"""Obligations: the open list, one obligation's history, its disposition (design §5.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from controlroom import printing
from controlroom.cli.common import (
    JsonFlag,
    absent_exit,
    absent_listing,
    emit_json,
    escape,
    global_options,
    out,
    person_workspace,
    report_problems,
    table,
    workspace,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from engine.read.deadlines import Deadlines
    from engine.read.model import Obligation, State

obligation_app = typer.Typer(no_args_is_help=True, help="One obligation: show or resolve.")
app = typer.Typer()
app.add_typer(obligation_app, name="obligation")


def obligation_rows(
    state: State, obs: Iterable[Obligation], deadlines: Deadlines | None = None
) -> list[dict]:
    """The §13 record of each, plus what the human listing shows. The engine's functions are
    imported once for the whole listing, not once a row (100,000 rows: 672 → 414 ms)."""
    from engine.commands.obligations import record
    from engine.read.queries import answer_of

    return [
        record(state, ob, deadlines)
        | {"kind": ob.kind, "subject": ob.subject, "openedAt": ob.opened_at, "answer": answer_of(ob)}
        for ob in obs
    ]


def obligation_row(state: State, ob: Obligation, deadlines: Deadlines | None = None) -> dict:
    """One obligation's row (obligation_rows)."""
    return obligation_rows(state, (ob,), deadlines)[0]


def marks_of(state: State, rows: list[dict]) -> list[str]:
    """What a listing appends to each row's subject (engine.read.queries.obligation_marks, the
    room's words), `overdue` with the time it fell due."""
    from engine.read.queries import obligation_marks

    return [
        "".join(
            f" ({m} since {row['dueAt']})" if m == "overdue" else f" ({m})"
            for m in obligation_marks(state, state.obligations[row["id"]], row["overdue"])
        )
        for row in rows
    ]


def marks(state: State, row: dict) -> str:
    """What a listing appends to one row's subject (marks_of)."""
    return marks_of(state, [row])[0]


@app.command()
@global_options
def obligations(
    all_: Annotated[bool, typer.Option("--all", help="Include resolved and escalated ones.")] = False,
    stale: Annotated[bool, typer.Option("--stale", help="Only those whose signal expired.")] = False,
    overdue: Annotated[
        bool, typer.Option("--overdue", help="Only those open past their deadline (routing.yaml deadlines).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """List open obligations (all with --all). Reads only; never routes."""
    from engine.base.leaving import keep
    from engine.commands.obligations import deadlines_of
    from engine.read.load import load
    from engine.read.model import ObligationStatus
    from engine.read.queries import unrouted_count

    ws, _ = workspace()
    state = load(ws, stores=("signals", "units"))
    report_problems(state)
    deadlines = deadlines_of(ws, state) if ws.has_stores else None
    open_ = ObligationStatus.OPEN
    rows = obligation_rows(
        state, (ob for ob in state.obligations.values() if all_ or ob.status == open_), deadlines
    )
    keep(state, rows)  # left to the process's end, not freed object by object (D-330)
    waiting = unrouted_count(state)
    if waiting:  # an operator's review: an empty table while signals that would block waited
        printing.say(
            f"regulator: note: {waiting} signal(s) not yet routed: their obligations open when they are "
            "routed (`regulator serve` does it within moments, `regulator signals route` by hand; "
            "`regulator status` lists them)\n"
        )
    if stale:
        rows = [r for r in rows if r["stale"]]
    if overdue:
        rows = [r for r in rows if r["overdue"]]
    if as_json:  # the §13 list; where the stores are absent it is empty, and says so (exit 1)
        keys = (
            "id",
            "unit",
            "signal",
            "severity",
            "blocks",
            "owedTo",
            "status",
            "disposition",
            "stale",
            "evidenceExpired",
            "overdue",
            "dueAt",
            "advisoryWithdrawn",  # its advisory withdrawn, or affecting no pin now (D-312)
            "advisoryCleared",
            "stallEnded",  # its sensor's feed, stalled, moving again (D-321)
            "notPaged",  # its escalation's page did not go out: why (D-315)
            "kind",  # what it is about, as the table says it (D-250)
            "subject",
            "openedAt",
            "answer",  # a question's answer, null until a person gives it (as the door's, D-277)
        )
        emit_json([{k: r[k] for k in keys} for r in rows])
        absent_exit(ws)
        return
    absent_listing(ws, "obligations")
    from engine.read.queries import age

    table(
        ["id", "unit", "severity", "blocks", "owed", "age", "status", "subject"],
        [
            [
                r["id"],
                r["unit"] or "(no unit)",
                r["severity"],
                "yes" if r["blocks"] else "no",
                r["owedTo"],
                age(state, r["openedAt"]),
                r["status"],
                r["subject"] + said,
            ]
            for r, said in zip(rows, marks_of(state, rows), strict=True)
        ],
    )


@obligation_app.command("show")
@global_options
def obligation_show(
    obligation_id: Annotated[str, typer.Argument(metavar="ID")], as_json: JsonFlag = False
) -> None:
    """The signal an obligation came from and everything that happened to it since."""
    from engine.base.text import escape_items
    from engine.commands.obligations import deadlines_of, find
    from engine.read.load import load
    from engine.read.model import UNREADABLE, ObligationKind
    from engine.read.queries import history
    from engine.read.worldfold import reporter

    ws, _ = workspace()
    state = load(ws, stores=("signals", "units"))
    ob = find(state, obligation_id)
    about = ob.kind in (ObligationKind.INTELLIGENCE, ObligationKind.QUESTION, ObligationKind.RECHECK)
    signal = state.signals.get(ob.source) if about else None
    events = history(state, ob)
    row = obligation_row(state, ob, deadlines_of(ws, state))
    later = state.world.superseded.get(ob.source, []) if about else []
    if as_json:
        emit_json(row | {"signalEvent": signal, "history": events, "supersededBy": later})
        return
    out(
        f"obligation {ob.id}  unit {escape(ob.unit or '(no unit)')}  severity {escape(ob.severity)}"
        f"{', blocks' if ob.blocks else ''}  owed to {ob.owed_to}  {ob.status}{marks(state, row)}"
    )
    if not about:  # a recovery obligation (or another the host opens): no signal says what it is about
        out(f"{ob.kind}: {escape(ob.subject)}")
    fields: dict[str, Any] = signal or {}
    get = fields.get
    if ob.kind == ObligationKind.RECHECK and signal:
        out(
            f"recheck: the evidence of signal {escape(get('id'))} expired; ask {escape(reporter(signal))} again"
        )
    if signal and get("kind") == UNREADABLE:  # counted, but its line does not read back whole (D-184)
        out(f"signal {escape(ob.source)}: its line does not read back whole (`regulator verify` names it)")
    elif signal and get("type") == "question":  # a unit's question (ask_human, design §22)
        out(f"question {escape(get('id'))} from {escape(get('unit'))} at {escape(get('at'))}")
        for line in str(get("question", "")).split("\n"):
            out(f"  ? {escape(line)}")
        if get("options"):
            out(f"  options: {escape_items(get('options'), '; ')}")
    elif signal:
        # every field as the raw store value it is: one of another type (a line written by hand) is
        # shown escaped, never a KeyError or TypeError
        out(f"signal {escape(get('id'))} from {escape(reporter(signal))} at {escape(get('at'))}")
        out(f"  subject: {escape(get('subject'))}")
        out(f"  claim: {escape(get('claim'))}")
        out(f"  observation: {escape(get('observation'))}")
        out(f"  evidence: {escape_items(get('evidence'))}")
        out(
            f"  confidence {escape(get('confidence'))}, reported {escape(get('reportedSeverity'))}"
            f", expires {escape(get('expiresAt') or 'never')}"
        )
        if get("supersedes"):
            out(f"  supersedes signal {escape(get('supersedes'))}")
    for newer in later:
        found = state.signals.get(newer, {})
        out(f"superseded by signal {newer} from {escape(reporter(found))}: {escape(found.get('subject'))}")
    cleared = state.world.cleared.get(ob.source) if about else None
    if cleared is not None:  # D-308: judged again and affecting no pin; a person still dispositions it
        run, osv = state.source.event(cleared), fields.get("osv")
        out(
            f"advisory no longer affects the pin: sensor {escape(run.get('sensor'))}'s run at "
            f"{escape(run.get('at'))} found none in "
            f"{escape(osv.get('lockfile') if isinstance(osv, dict) else '?')} on trunk"
        )
    resumed = state.world.resumed.get(ob.source) if about else None
    if resumed is not None:  # D-321: the stall is over; a person still dispositions it
        run = state.source.event(resumed)
        out(
            f"the feed moves again: sensor {escape(run.get('sensor'))}'s run at {escape(run.get('at'))} "
            "found its newest record within staleAfter"
        )
    out("history:")
    for event in events:
        out("  " + describe_event(event))
    from engine.read.worldfold import UNRECORDED_PAGE, page_unrecorded

    if page_unrecorded(state, ob):
        out(UNRECORDED_PAGE)


def describe_event(event: dict) -> str:
    from engine.base.text import escape_items
    from engine.read.model import EventKind

    # every field as the raw store value it is (a line written by hand may lack one, or hold
    # another type): escaped, never a KeyError or TypeError
    kind = event.get("kind")
    get = event.get
    at = escape(get("at", "?"))
    if "uncounted" in event:
        return (
            f"{at} {escape(kind)} by {escape(get('by'))}: counts for nothing ({escape(event['uncounted'])})"
        )
    if kind == EventKind.ROUTING:
        floors = escape_items(get("floors") or []) or "no floor"
        reported = get("reportedSeverity")
        said = f"reported {escape(reported)}, " if reported is not None else "no severity reported, "
        return (
            f"{at} routed: {said}derived {escape(get('derivedSeverity'))} ({floors}); {escape(get('reason'))}"
        )
    if kind == EventKind.DISPOSITION:
        return f"{at} {escape(get('disposition'))} by {escape(get('by'))}: {escape(get('rationale'))}"
    if kind == EventKind.DECISION:
        return (
            f"{at} recovery decision {escape(get('action'))} by {escape(get('by'))}"
            f" ({escape(get('disposition'))}): {escape(get('rationale'))}"
        )
    from engine.read.worldfold import event_line

    return event_line(event) or f"{at} {escape(kind)}"


def _dispositions_epilog() -> str:
    """Each disposition and what it means, one paragraph each (wrapped at words)."""
    from controlroom.meanings import DISPOSITIONS

    return "\n\n".join(f"{name}: {meaning}." for name, meaning in DISPOSITIONS.items())


@obligation_app.command("resolve", epilog=_dispositions_epilog())
@global_options
def obligation_resolve(
    obligation_id: Annotated[str, typer.Argument(metavar="ID")],
    by: Annotated[str | None, typer.Option()] = None,
    disposition: Annotated[
        str,
        typer.Option(
            help="One of: no-action, accepted-risk, rework, replan, research-requested, answered "
            "(questions only: the rationale is the answer); what each means: below."
        ),
    ] = "",
    rationale: Annotated[str, typer.Option()] = "",
    as_json: JsonFlag = False,
) -> None:
    """Disposition an open obligation (the interaction policy decides who may)."""
    from engine.commands.obligations import resolve

    ws = person_workspace(by)

    def note(line: str) -> None:
        printing.say(f"regulator: note: {escape(line)}\n")

    event = resolve(ws, obligation_id, by, disposition, rationale, say=note)
    if as_json:
        emit_json({"obligation": event["obligation"], "disposition": event["disposition"]})
    else:
        out(f"obligation {event['obligation']} resolved: {event['disposition']} by {escape(event['by'])}")


# ---- units --------------------------------------------------------------------------------------
