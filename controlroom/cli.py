"""The `regulator` command line (Typer). It must not import Textual: the control room imports it
only when it runs, so every other command starts fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from controlroom.text import emit_json, escape, out, table
from engine.errors import BadInput, RegulatorError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="regulator: durable memory and a control room for fleets of AI agent units.",
)
signals_app = typer.Typer(invoke_without_command=True, help="The regulatory log: list, report, route.")
obligation_app = typer.Typer(no_args_is_help=True, help="One obligation: show or resolve.")
unit_app = typer.Typer(no_args_is_help=True, help="Unit lifecycle: dispatch, close, decide, demote.")
app.add_typer(signals_app, name="signals")
app.add_typer(obligation_app, name="obligation")
app.add_typer(unit_app, name="unit")

# --root, --lease and --key are accepted anywhere on the line; main() lifts them out (SPEC §3).
GLOBAL = {"root": None, "lease": None, "key": None}

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (camelCase keys).")]


def workspace():
    """The workspace and the lease (if any) for this command, found as SPEC §3 orders it."""
    from engine.workspace import locate

    root = GLOBAL["root"]
    lease = GLOBAL["lease"]
    if GLOBAL["key"]:
        from engine.signing import use_key

        use_key(GLOBAL["key"])
    return locate(Path(root) if root else None, Path(lease) if lease else None)


def person_workspace(by: str | None):
    """The workspace for a person's action: --by under a lease is refused (exit 2, SPEC §15.2)."""
    from engine.actors import no_person_under_lease

    ws, lease = workspace()
    no_person_under_lease(lease, by)
    return ws


def host_workspace(unit_id: str | None = None):
    """The workspace for a host operation: refused under a lease (exit 3, SPEC §15.0), except a
    unit closing itself."""
    from engine.actors import host_only

    ws, lease = workspace()
    host_only(lease, unit_id)
    return ws


# ---- init / status / verify ---------------------------------------------------------------------


@app.command()
def init(
    owner: Annotated[str | None, typer.Option(help="The one person of the shipped policy.")] = None,
    owner_key: Annotated[
        Path | None,
        typer.Option("--owner-key", help="The owner's OpenSSH public key (default: git's ssh signing key)."),
    ] = None,
    trunk: Annotated[str, typer.Option(help="The trunk branch.")] = "main",
    clock_mode: Annotated[
        str, typer.Option("--clock", help="system, or pinned (REGULATOR_NOW honoured: tests, demos).")
    ] = "system",
) -> None:
    """Create the workspace skeleton here (or at --root): policy, identity, records, stores."""
    from engine.actors import host_only
    from engine.init import initialize
    from engine.workspace import find_lease, read_lease

    found = Path(GLOBAL["lease"]) if GLOBAL["lease"] else find_lease(Path.cwd())
    host_only(read_lease(found) if found else None)  # a unit does not make workspaces

    if GLOBAL["key"]:  # the key to sign the baseline commit with (the owner's private half)
        from engine.signing import use_key

        use_key(GLOBAL["key"])
    root = Path(GLOBAL["root"] or ".")
    ws = initialize(root, owner, trunk, owner_key, clock_mode)
    from engine import sshsig

    people = ws.authority().people
    ((name, keys),) = people.keys.items()
    out(f"initialized regulator workspace at {escape(ws.root)}")
    out(
        f"owner: {escape(name)} (act with --by {escape(name)}; key {sshsig.fingerprint(keys[0])}); "
        f"requireSignatures: true; clock: {clock_mode}"
    )
    from engine.init import baseline_commit

    committed = baseline_commit(ws)
    if committed == "signed":
        out(f"baseline committed as {escape(name)}'s decision, signed (identity verify reads it in a clone)")
    elif committed == "claimed":
        out(
            f"baseline committed as {escape(name)}'s decision, unsigned ('claimed': no private key for the "
            "owner's key was at hand; pass --key FILE to sign it)"
        )
    elif (ws.root / ".git").exists():
        sys.stderr.write(
            "regulator: warning: git did not commit the baseline; `identity verify` in a clone will "
            "find no decision for the governed files\n"
        )


@app.command()
def status(as_json: JsonFlag = False) -> None:
    """Units, what holds them, and signals not yet routed. Reads only; never routes."""
    from engine.state import load
    from engine.status import status as derive

    ws, _ = workspace()
    state = load(ws)
    report_problems(state)
    data = derive(ws, state)
    if as_json:
        emit_json(data)
        return
    rows = [
        [
            u["id"],
            u["type"] or "?",
            u["status"],
            "?" if u["held"] is None else "held" if u["held"] else "",
            ", ".join(u["blockedBy"] + u["staleKnowledge"]),
        ]
        for u in data["units"]
    ]
    from engine.storeless import ABSENT, authentication_line

    if data["stores"] == "absent":
        out(ABSENT)
    warning = authentication_line(data["authentication"])
    if warning:
        out(warning)
    if data["clock"] == "pinned":
        out("clock pinned: REGULATOR_NOW is honoured here (tests and demos only)")
    table(["unit", "type", "status", "held", "by"], rows)
    if data["unrouted"] is None:
        out("unrouted signals: unknown (no stores here)")
        return
    out(f"{data['unrouted']} unrouted signal(s)")
    for s in data["unroutedSignals"]:
        out(f"  {s['id']}  {escape(s['subject'])}")


@app.command()
def verify(
    as_json: JsonFlag = False,
    dismiss: Annotated[
        str | None, typer.Option("--dismiss", metavar="STORE:LINE", help="Dismiss a named bad line (signed).")
    ] = None,
    by: Annotated[str | None, typer.Option(help="The person dismissing (needs the accept grant).")] = None,
    rationale: Annotated[str, typer.Option(help="Why the line is dismissed.")] = "",
) -> None:
    """Check every store's hash chain, every person event's signature and any checkpoint (exit 1)."""
    from engine import verification

    if dismiss is not None:
        ws = person_workspace(by)
        event = verification.dismiss(ws, dismiss, by, rationale)
        out(
            f"dismissed {event['store']}:{event['line']} by {escape(event['by'])}; it still counts for nothing"
        )
        return
    ws, _ = workspace()
    if not ws.has_stores:  # nothing verified is not "ok" (SPEC §16.2)
        from engine.storeless import ABSENT

        if as_json:
            emit_json({"ok": False, "stores": "absent", "findings": [], "limit": "no stores here"})
        else:
            out(ABSENT)
            out("verify: nothing to verify here: the stores live on the host (run it there)")
        raise typer.Exit(1)
    findings = verification.findings(ws)
    failing = [f for f in findings if f.dismissed is None]
    limit = (
        "verify cannot see a cut-off tail or a rewritten and re-hashed suffix without an anchor "
        "kept elsewhere"
    )
    if as_json:
        emit_json(
            {
                "ok": not failing,
                "findings": [
                    {"store": f.store, "line": f.line, "message": f.message, "dismissed": f.dismissed}
                    for f in findings
                ],
                "limit": limit,
            }
        )
    else:
        for f in findings:
            out(escape(str(f)))
        done = f"{len(failing)} problem(s)" if failing else "ok: every chain holds, every person event counts"
        if findings and not failing:
            done = f"ok: every chain holds; {len(findings)} bad line(s) dismissed (they count for nothing)"
        out("verify: " + done)
        out(f"note: {limit}")
    if failing:
        raise typer.Exit(1)


def absent_exit(ws) -> None:
    """A list read where the stores are absent is not an empty list: exit 1, saying so on stderr, so
    a consumer of the §13 JSON list cannot take "unknown" for "nothing" (SPEC §16.2)."""
    if not ws.has_stores:
        from engine.storeless import ABSENT

        sys.stderr.write(f"regulator: {ABSENT}\n")
        raise typer.Exit(1)


def report_problems(state) -> None:
    for problem in state.problems:
        sys.stderr.write(f"regulator: warning: {problem}\n")
    for problem in state.contract_problems:
        sys.stderr.write(f"regulator: warning: contract skipped: {escape(problem)}\n")


# ---- signals ----------------------------------------------------------------------------------


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
def signals(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the signals with their routing outcome. Reads only."""
    if ctx.invoked_subcommand is not None:
        return
    from engine.state import load

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


def read_json_input(source: str) -> dict:
    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise BadInput(f"--json-input {source}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--json-input {source}: not valid UTF-8") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"--json-input {source}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"--json-input {source}: expected one JSON object")
    return data


def fields_from(flags: dict, json_input: str | None) -> dict:
    """The given field flags, or the one JSON object of --json-input: never both (exit 2)."""
    given = {k: v for k, v in flags.items() if v is not None}
    if json_input is None:
        return given
    if given:
        raise BadInput("--json-input and field flags mixed; give one or the other")
    return read_json_input(json_input)


@signals_app.command("report")
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

    flags = {
        "subject": subject,
        "claim": claim,
        "observation": observation,
        "evidence": evidence,
        "confidence": confidence,
        "reportedSeverity": severity,
        "affectedUnits": affects,
        "observedAt": observed_at,
        "expiresAt": expires_at,
        "rationale": rationale,
    }
    fields = fields_from(flags, json_input)
    ws, lease = workspace()
    actor = unit_or_person(lease, by)
    event = report_intelligence(ws, fields, actor)
    if as_json:
        emit_json({"id": event["id"]})
    else:
        out(f"reported signal {event['id']} (not yet routed; `regulator signals route`)")


# `signals route` (with its what-if flags, SPEC §20) lives in controlroom/cli_whatif.py


# ---- obligations -------------------------------------------------------------------------------


def obligation_row(state, ob) -> dict:
    """The §13 record, plus what the human listing shows."""
    from engine.obligations import record

    return record(state, ob) | {"kind": ob.kind, "subject": ob.subject, "openedAt": ob.opened_at}


def age(state, at: str) -> str:
    from engine import clock

    seconds = max(0, int((state.now - clock.parse_time(at)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@app.command()
def obligations(
    all_: Annotated[bool, typer.Option("--all", help="Include resolved and escalated ones.")] = False,
    stale: Annotated[bool, typer.Option("--stale", help="Only those whose signal expired.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """List open obligations (all with --all). Reads only; never routes."""
    from engine.state import load
    from engine.storeless import ABSENT

    ws, _ = workspace()
    state = load(ws, stores=("signals", "units"))
    report_problems(state)
    rows = [obligation_row(state, ob) for ob in state.obligations.values() if all_ or ob.status == "open"]
    if stale:
        rows = [r for r in rows if r["stale"]]
    if as_json:  # the §13 list; where the stores are absent it is empty, and says so (exit 1)
        keys = ("id", "unit", "signal", "severity", "blocks", "owedTo", "status", "disposition", "stale")
        emit_json([{k: r[k] for k in keys} for r in rows])
        absent_exit(ws)
        return
    if not ws.has_stores:
        out(ABSENT)
        out("obligations: unknown (they live in the stores, which a clone does not have)")
        absent_exit(ws)
    table(
        ["id", "unit", "severity", "blocks", "owed", "age", "status", "subject"],
        [
            [
                r["id"],
                r["unit"] or "(none)",
                r["severity"],
                "yes" if r["blocks"] else "no",
                r["owedTo"],
                age(state, r["openedAt"]),
                r["status"],
                r["subject"] + (" (stale)" if r["stale"] else ""),
            ]
            for r in rows
        ],
    )


@obligation_app.command("show")
def obligation_show(
    obligation_id: Annotated[str, typer.Argument(metavar="ID")], as_json: JsonFlag = False
) -> None:
    """The signal an obligation came from and everything that happened to it since."""
    from engine.obligations import find
    from engine.state import history, load

    ws, _ = workspace()
    state = load(ws, stores=("signals", "units"))
    ob = find(state, obligation_id)
    signal = state.signals.get(ob.source) if ob.kind == "intelligence" else None
    events = history(state, ob)
    if as_json:
        emit_json(obligation_row(state, ob) | {"signalEvent": signal, "history": events})
        return
    out(
        f"obligation {ob.id}  unit {escape(ob.unit or '(none)')}  {ob.severity}"
        f"{' blocking' if ob.blocks else ''}  owed to {ob.owed_to}  {ob.status}"
    )
    if signal:
        out(f"signal {signal['id']} from {escape(signal.get('unit') or signal.get('by'))} at {signal['at']}")
        out(f"  subject: {escape(signal['subject'])}")
        out(f"  claim: {escape(signal['claim'])}")
        out(f"  observation: {escape(signal['observation'])}")
        out(f"  evidence: {escape(', '.join(signal['evidence']))}")
        out(
            f"  confidence {signal['confidence']}, reported {signal['reportedSeverity']}"
            f", expires {signal.get('expiresAt') or 'never'}"
        )
    out("history:")
    for event in events:
        out("  " + describe_event(event))


def describe_event(event: dict) -> str:
    kind = event.get("kind")
    at = event.get("at", "?")
    if "uncounted" in event:
        return f"{at} {escape(kind)} by {escape(event.get('by'))}: counts for nothing ({event['uncounted']})"
    if kind == "routing":
        floors = ", ".join(event.get("floors") or []) or "no floor"
        return (
            f"{at} routed: reported {event['reportedSeverity']}, derived {event['derivedSeverity']}"
            f" ({floors}); {escape(event['reason'])}"
        )
    if kind == "disposition":
        return f"{at} {event['disposition']} by {escape(event['by'])}: {escape(event['rationale'])}"
    if kind == "decision":
        return (
            f"{at} recovery decision {event['action']} by {escape(event['by'])}"
            f" ({event['disposition']}): {escape(event['rationale'])}"
        )
    return f"{at} {escape(kind)}"


@obligation_app.command("resolve")
def obligation_resolve(
    obligation_id: Annotated[str, typer.Argument(metavar="ID")],
    by: Annotated[str | None, typer.Option()] = None,
    disposition: Annotated[
        str, typer.Option(help="no-action|accepted-risk|rework|replan|research-requested")
    ] = "",
    rationale: Annotated[str, typer.Option()] = "",
    as_json: JsonFlag = False,
) -> None:
    """Disposition an open obligation (the interaction policy decides who may)."""
    from engine.obligations import resolve

    ws = person_workspace(by)
    event = resolve(ws, obligation_id, by, disposition, rationale)
    if as_json:
        emit_json({"obligation": event["obligation"], "disposition": event["disposition"]})
    else:
        out(f"obligation {event['obligation']} resolved: {event['disposition']} by {escape(event['by'])}")


# ---- units --------------------------------------------------------------------------------------


@unit_app.command("dispatch")
def unit_dispatch(
    unit_id: Annotated[str, typer.Argument(metavar="UNIT")],
    worktree: Annotated[Path | None, typer.Option(help="Write the lease file here.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Dispatch a todo unit under a new lease (vetoes first)."""
    from engine.units import dispatch

    ws = host_workspace()
    event = dispatch(ws, unit_id, worktree)
    if as_json:  # the token only where no lease file holds it: the host hands it over itself
        emit_json({"unit": event["unit"], "lease": None if event["worktree"] else event["lease"]})
    elif event["worktree"]:
        out(f"dispatched {event['unit']} (lease file in {escape(event['worktree'])}, mode 0600)")
    else:
        out(f"dispatched {event['unit']} under lease {event['lease']} (no lease file: hand it to the unit)")


@unit_app.command("close")
def unit_close(unit_id: Annotated[str, typer.Argument(metavar="UNIT")]) -> None:
    """Close an in-progress unit and release its lease (vetoes first)."""
    from engine.units import close

    ws = host_workspace(unit_id)
    close(ws, unit_id)
    out(f"closed {unit_id}")


@unit_app.command("decide")
def unit_decide(
    unit_id: Annotated[str, typer.Argument(metavar="UNIT")],
    action: Annotated[
        str, typer.Option(help="retry|repair|abort|remediate|replan|clarify|pause|escalate")
    ] = "",
    by: Annotated[str | None, typer.Option()] = None,
    rationale: Annotated[str, typer.Option()] = "",
    as_json: JsonFlag = False,
) -> None:
    """Record a recovery decision; it disposes of the unit's open S3 obligations."""
    from engine.units import decide

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
def unit_demote(
    unit_id: Annotated[str, typer.Argument(metavar="UNIT")],
    by: Annotated[str | None, typer.Option()] = None,
    rationale: Annotated[str, typer.Option()] = "",
) -> None:
    """Return an in-progress unit to todo and release its lease (the re-gate of seed 004)."""
    from engine.units import demote

    ws = person_workspace(by)
    demote(ws, unit_id, by, rationale)
    out(f"demoted {unit_id} to todo")


# ---- entry point -----------------------------------------------------------------------------


def lift_globals(argv: list[str]) -> list[str]:
    """Take --root/--lease from anywhere on the line, so every command accepts them."""
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        name = next((n for n in GLOBAL if arg == f"--{n}" or arg.startswith(f"--{n}=")), None)
        if name is None:
            rest.append(arg)
            i += 1
            continue
        if "=" in arg:
            GLOBAL[name] = arg.split("=", 1)[1]
            i += 1
        else:
            if i + 1 >= len(argv):
                raise BadInput(f"--{name} needs a value")
            GLOBAL[name] = argv[i + 1]
            i += 2
    return rest


def flush_checkpoint() -> None:
    """A writer's load may have offered its state for a checkpoint: write it now, after the
    command and outside its lock (engine.checkpoint). Nothing to do if the engine never loaded."""
    module = sys.modules.get("engine.checkpoint")
    if module is not None:
        module.flush()


def bool_flags_without_pydantic() -> None:
    """Typer 0.29 coerces every parameter through a pydantic TypeAdapter built on first use, and
    builds one for the implicit --help flag of every command run even when it is absent: importing
    pydantic for that costs a read-only command like `status` about a third of its cold start. A
    flag's value is True, False or None and needs no coercion; every other parameter keeps Typer's
    own. (Typer is pinned below 0.30; tests/test_layering.py fails if `status` imports pydantic.)"""
    try:
        from typer._coercion import PassThroughRuntimeParam
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - another Typer: its own coercion, only slower
        return
    original = _TyperParameter.get_runtime_param
    if getattr(original, "lean", False):
        return

    def get_runtime_param(self):
        descriptor = getattr(self, "type_descriptor", None)
        if self._runtime_param is None and descriptor is not None and descriptor.annotation is bool:
            self._runtime_param = PassThroughRuntimeParam(
                annotation=bool, parameter_info=descriptor.parameter_info
            )
        return original(self)

    get_runtime_param.lean = True
    _TyperParameter.get_runtime_param = get_runtime_param


def main(argv: list[str] | None = None) -> int:
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
    from typer.exceptions import Abort, Exit
    from typer.main import get_command

    bool_flags_without_pydantic()
    args = list(sys.argv[1:] if argv is None else argv)
    GLOBAL.update(root=None, lease=None, key=None)
    try:
        args = lift_globals(args)
        command = get_command(app)
        try:
            code = command.main(args, prog_name="regulator", standalone_mode=False)
        finally:
            flush_checkpoint()
        if isinstance(code, int):
            return code  # typer.Exit inside a command comes back as a return value
    except RegulatorError as exc:
        sys.stderr.write(f"regulator: {escape(str(exc))}\n")
        return exc.exit_code
    except Exit as exc:
        return exc.exit_code
    except NoArgsIsHelpError as exc:
        exc.show()
        return exc.exit_code
    except ClickException as exc:
        sys.stderr.write(f"regulator: {exc.format_message()} (see `regulator --help`)\n")
        return exc.exit_code
    except Abort:
        sys.stderr.write("regulator: aborted\n")
        return 130
    except BrokenPipeError:
        return 0
    return 0


def run() -> None:
    sys.exit(main())


def _register_commands() -> None:
    """Commands that live in their own modules add themselves to `app` on import."""
    from controlroom import cli_more, cli_registry, cli_room, cli_whatif  # noqa: F401


_register_commands()
