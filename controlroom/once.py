"""`controlroom --once`: route, lint, derive, print the state, exit 0 or 1 (design §10)."""

from __future__ import annotations

import msgspec

from controlroom.header import header_text, in_memory, known_counts, lint_unchecked
from controlroom.printing import table_lines
from controlroom.readmodel import Snapshot, keys, row, sensor_rows, snapshot
from controlroom.views import BY_VIEW, TITLES, VIEWS
from engine.base.leaving import keep
from engine.base.text import escape
from engine.checkout.workspace import Workspace
from engine.commands import verification
from engine.commands.obligations import deadlines_of, record
from engine.commands.proposals import proposal_json
from engine.commands.router import route_locked
from engine.read import checkpoint
from engine.read.deadlines import Deadlines
from engine.read.load import load
from engine.read.model import Obligation, ObligationKind, State, UnitState, UnitStatus
from engine.read.nextup import next_up
from engine.read.queries import STARTED, days_left, memory_status, unit_status
from engine.read.rules import decision_of
from engine.read.status import status
from engine.read.storeless import ABSENT, authentication, stores
from engine.read.vetoes import result_waits
from engine.trust.idhistory import HistoryVerdict
from registry.history import how_to_read
from registry.lint import LintResult
from widgets.columns import form

ABSENT_REASON = f"{ABSENT} (run --once on the host, or --once --registers-only for what git holds)"


def exit_reasons(snap: Snapshot, require_history: bool = False) -> list[str]:
    reasons = [] if snap.known else [ABSENT_REASON]
    state = snap.state
    for unit_id, holding in sorted(snap.holds.items()):
        unit = state.units.get(unit_id)
        started = _started(state, unit)
        if started is None:
            continue
        for ob in holding:
            if ob.kind == ObligationKind.INTELLIGENCE:
                what = f"signal {ob.source}: {state.signals.get(ob.source, {}).get('subject', '?')}"
            elif ob.kind == ObligationKind.RECHECK:
                what = (
                    f"recheck of signal {ob.source}: {state.signals.get(ob.source, {}).get('subject', '?')}"
                )
            else:
                what = f"recovery decision {ob.source}"
            reasons.append(f"{unit_id} is {started} and held by {ob.severity} obligation {ob.id} ({what})")
    reasons += _unrouted_reasons(snap)
    if snap.lint is not None:
        for issue in snap.lint.errors:
            reasons.append(f"lint error {issue.code}: {issue.message}")
    unchecked = lint_unchecked(snap)
    if require_history and unchecked is not None:
        reasons.append(
            f"lint unchecked: trunk history unavailable ({unchecked}); --require-history: {how_to_read(unchecked)}"
        )
    if snap.history is not None and not snap.history.available:
        why = snap.history.why
        reasons.append(f"identity verify: git history unavailable ({why}); {how_to_read(why)}")
    for check in snap.identity:
        if not check.ok:
            reasons.append(f"identity verify: {check.problem()}")
    for finding in snap.verify:
        reasons.append(f"verify: {finding}")
    return reasons


def _started(state: State, unit: UnitState | None) -> str | None:
    """How a started unit (in progress, or lost: its lease expired, design §23) is named in a reason
    --once fails for; None for a unit not started."""
    if unit is None:
        return None
    status = unit_status(state, unit)
    if status not in STARTED:
        return None
    if status == UnitStatus.LOST:
        return "lost (its lease expired while in progress)"
    waits = result_waits(state, unit)
    return f"in progress, {waits}," if waits else "in progress"


def _unrouted_reasons(snap: Snapshot) -> list[str]:
    """Signals this run did not route (read-only, a reader role, or appended after it routed) are
    judged as the router would route them now (design §16, §18): a would-be blocking obligation on
    an in-progress unit fails --once as an open one does; signals that cannot be judged fail it too."""
    if not snap.known:
        return []
    state = snap.state
    found = in_memory(snap)
    if found.problem is not None:
        return [f"{found.unrouted} signal(s) not yet routed could not be judged: {found.problem}"]
    reasons = []
    for hold in sorted(found.holds, key=lambda h: h.unit):
        started = _started(state, state.units.get(hold.unit))
        if started is None:
            continue
        reasons.append(
            f"{hold.unit} is {started} and would be held by {hold.severity} obligation {hold.obligation} "
            f"(signal {hold.signal}: {hold.subject}), not yet routed"
        )
    return reasons


def once(ws: Workspace, person: str | None, read_only: bool = False) -> Snapshot:
    """--once's snapshot: routed first where this process may write, then read with every check.
    verify's re-derivation of what the host wrote may still be running (`Snapshot.settle`): the
    JSON's rows are built meanwhile (as_json_text), the reasons to fail judged after (exit_reasons)."""
    # a clone has nothing to route, and writes nothing; nor does a reader role (design §18): what
    # they leave unrouted is routed in memory and judged (exit_reasons)
    if read_only:
        why: str | None = "read-only"
    elif ws.url is None and not ws.has_stores:
        why = "no stores here"
    else:  # on PostgreSQL the mirror may not be here yet: the role decides
        why = ws.cannot_write()
    state = None
    # verify's passes over every line, begun while this process folds (the fold is one core's
    # work): used where they read what the fold folded (no store written since: a signal routed
    # here, a writer's line, a rewrite, and they are begun again after the fold). Begun once the
    # decide lock is ours, never while waiting for it
    begun = None
    if why is None:  # the router's fold of signals.ndjson is the snapshot's start: the log read once
        with ws.exclusive():
            begun = verification.begin(ws)
            state = load(ws, stores=("signals",))
            routed: int | None = len(route_locked(ws, state))
        checkpoint.flush()  # what that load offered, written as it stands, before the fold goes on
    else:
        routed = None
        begun = verification.begin(ws)
    # what `verify` re-derives, --once reports
    snap = snapshot(ws, person, host_events=True, start=state, later=True, begun=begun)
    snap.routed, snap.not_routed, snap.printed = routed, why, True
    return snap


def routed_text(snap: Snapshot) -> str:
    """Whether this run routed, in words (`--once` routes unless --read-only, in a clone, or as a
    store role that cannot write), and what is still unrouted, judged in memory."""
    if snap.routed is None:
        text = (
            f"not routed ({snap.not_routed or 'read-only'})" if snap.known else "not routed (no stores here)"
        )
    elif snap.routed == 0:
        text = "routed: nothing was unrouted"
    else:
        text = f"routed {snap.routed} signal(s) before reading"
    found = in_memory(snap) if snap.known else None
    if found is not None and found.unrouted:
        if found.problem is not None:
            text += f"; {found.unrouted} signal(s) not yet routed, not judged: {found.problem}"
        else:
            text += (
                f"; {found.unrouted} signal(s) not yet routed, judged as the router would route them "
                f"now: {len(found.holds)} blocking obligation(s) would open"
            )
    return text


def _memory_json(snap: Snapshot) -> list[dict[str, object]]:
    state = snap.state
    today = state.now.date()
    out = []
    for key, entry in state.memory.items():
        e = entry.event
        status = memory_status(entry, today)
        out.append(
            {
                "id": key,
                "unit": e.get("unit"),
                "subject": e["subject"],
                "status": status,
                "reviewBy": e["reviewBy"],
                # as `memory --json` says it: negative once expired (it was 0, for any day past)
                "daysLeft": days_left(entry, today),
                "scope": list(e.get("scope") or []),
                "at": e.get("at"),
            }
        )
    return out


def _signals_json(state: State) -> list[dict[str, object]]:
    """Each signal's row of --once --json: of `signal_rows`' fields, the ones shown here (outcome
    "unrouted" while it is), and its prediction where it makes one; built from the same read-back
    (`signals_routed`) without the rest (tests/test_perf_paths.py holds it to signal_rows)."""
    from engine.read.queries import signals_routed
    from engine.read.worldfold import prediction_json

    predicted = state.world.predicted
    out: list[dict[str, object]] = []
    append = out.append
    for signal_id, signal, routing in signals_routed(state):
        get = signal.get
        row: dict[str, object] = {
            "id": signal_id,
            "unit": get("unit"),
            "by": get("by"),
            "sensor": get("sensor"),
            "subject": get("subject"),
            "reportedSeverity": get("reportedSeverity"),
            "derivedSeverity": routing.get("derivedSeverity") if routing else None,
            "outcome": (routing.get("outcome") if routing else None) or "unrouted",
            "at": get("at"),
        }
        if signal_id in predicted:
            prediction = prediction_json(state, signal_id, signal)
            if prediction:
                row["prediction"] = prediction
        append(row)
    return out


def _signals_json_shaped(state: State) -> list[dict[str, object]]:
    """`_signals_json`, each line decoded in the row's shape (engine.read.queries.
    signals_routed_shaped): the same rows wherever every line of signals.ndjson reads whole, which
    `verify` tells (`_signals_read_whole`); tests/test_perf_paths.py holds it to `_signals_json`."""
    from engine.read.queries import signals_routed_shaped
    from engine.read.worldfold import prediction_json

    predicted = state.world.predicted
    out: list[dict[str, object]] = []
    append = out.append
    for signal_id, signal, routing in signals_routed_shaped(state):
        if signal is None:
            unit = by = sensor = subject = reported = at = foretold = None
        else:
            unit, by, sensor, subject = signal.unit, signal.by, signal.sensor, signal.subject
            reported, at, foretold = signal.reportedSeverity, signal.at, signal.prediction
        row: dict[str, object] = {
            "id": signal_id,
            "unit": unit,
            "by": by,
            "sensor": sensor,
            "subject": subject,
            "reportedSeverity": reported,
            "derivedSeverity": routing.derivedSeverity if routing else None,
            "outcome": (routing.outcome if routing else None) or "unrouted",
            "at": at,
        }
        if signal_id in predicted:
            prediction = prediction_json(state, signal_id, {"prediction": foretold})
            if prediction:
                row["prediction"] = prediction
        append(row)
    return out


def _signals_read_whole(snap: Snapshot) -> bool:
    """Whether `verify` (settled) read every line of signals.ndjson whole and named none: the
    shaped signal rows are then the rows read whole (D-203)."""
    store = "signals.ndjson"
    return snap.named is not None and store not in snap.named and all(f.store != store for f in snap.verify)


def _would_route_json(snap: Snapshot) -> list[dict[str, object]]:
    """The routing each signal not yet routed would get now (routed in memory, written nowhere)."""
    if not snap.known:
        return []
    keys = ("signal", "subject", "derivedSeverity", "floors", "outcome", "reason")
    return [
        {k: record[k] for k in keys}
        | {
            "obligations": [
                {k: ob[k] for k in ("id", "unit", "severity", "blocks", "owedTo")}
                for ob in record["obligations"]
            ]
        }
        for record in in_memory(snap).records
    ]


def as_json_text(snap: Snapshot, require_history: bool = False) -> tuple[list[str], int]:
    """--once --json as printed, in pieces (joined, its text: `printing.emit_json_text` writes them
    in turn), and its exit code. The rows are built, and written out as JSON, while verify's last
    check may still run in its child; then it is waited for (`settle`), and the counts, verify's
    findings and the reasons follow (`printing.indented_pieces`: joined, the same text as the whole
    document written at once)."""
    from controlroom.printing import indented_pieces, laid_members

    rows = _rows(snap)
    early = laid_members(rows)
    snap.settle()
    if not _signals_read_whole(snap):  # a line the shape read that verify did not read whole (D-203)
        rows["signals"] = _signals_json(snap.state)
        early = laid_members(rows)
    document = _document(snap, rows, require_history)
    text = indented_pieces(document, rows, early)
    keep(rows, document)  # freed by the process's end, not here one row at a time (D-260)
    return text, 1 if document["exitCode"] else 0


def _obligation_json(state: State, ob: Obligation, deadlines: Deadlines | None) -> dict[str, object]:
    """An obligation's row: `obligations --json`'s record, then its subject and times, and its
    kind (a unit's question, a recovery, intelligence: as `obligations --json` says it, D-287)."""
    row = record(state, ob, deadlines)  # a fresh dict: these keys follow its own
    row["subject"], row["opened"], row["closed"], row["kind"] = (
        ob.subject,
        ob.opened_at,
        ob.closed_at,
        ob.kind,
    )
    return row


def _rows(snap: Snapshot) -> dict[str, object]:
    """The document's rows: what verify's findings do not change."""
    state = snap.state
    queue, excluded = next_up(snap.ws, state)
    deadlines = deadlines_of(snap.ws, state) if snap.ws.has_stores else None
    return {
        "status": status(snap.ws, state),
        "obligations": [_obligation_json(state, ob, deadlines) for ob in state.obligations.values()],
        "memory": _memory_json(snap),
        "signals": _signals_json_shaped(state),  # read whole instead if verify says so (as_json_text)
        "sensors": list(sensor_rows(snap).values()),
        "routed": snap.routed,
        "wouldRoute": _would_route_json(snap),
        "lint": snap.lint.as_json() if snap.lint else None,
        "nextUp": queue,
        "excluded": excluded,
        "identity": [{"file": c.file, "ok": c.ok} for c in snap.identity],
        "proposals": _proposals_json(snap),
    }


def _proposals_json(snap: Snapshot) -> list[dict[str, object]]:
    """Every proposal, as `identity show --json` lists it, a pending one with its marks (D-249)."""
    state = snap.state
    found = []
    for ident, proposal in state.proposals.items():
        decision = decision_of(state, ident)
        marks = None if decision else snap.marks.get(ident)
        found.append(proposal_json(proposal, decision, None if marks is None or marks < 0 else marks))
    return found


def _document(snap: Snapshot, rows: dict[str, object], require_history: bool) -> dict[str, object]:
    """The whole document around the rows, once verify's findings are in (`settle`)."""
    state = snap.state
    reasons = exit_reasons(snap, require_history)
    return {
        "stores": stores(snap.ws),
        "workspace": str(snap.ws.root),
        "now": state.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "authentication": authentication(snap.ws),
        "clock": snap.ws.authority().clock,
        "serve": serve_of(snap) if snap.known else None,
        "counts": known_counts(snap),
        **rows,
        "verify": [{"store": f.store, "line": f.line, "message": f.message} for f in snap.verify],
        "problems": [str(p) for p in state.problems],  # the first ones; counts.badLines has them all
        "exitReasons": reasons,
        "exitCode": 1 if reasons else 0,
    }


def serve_of(snap: Snapshot) -> dict[str, object]:
    """serve's state (engine.host.instance.serve_state: serve.json and its /healthz), asked once a
    run: the text and the JSON say the same."""
    if snap.serve is None:
        from engine.base.errors import RegulatorError
        from engine.host.instance import serve_state

        try:
            snap.serve = serve_state(snap.ws)
        except (RegulatorError, OSError) as exc:
            snap.serve = {"running": None, "error": str(exc)}
    return snap.serve


def as_text(snap: Snapshot, reasons: list[str]) -> str:
    lines = [] if snap.known else [ABSENT]
    lines += [f"regulator · {snap.ws.root.name} · {header_text(snap, live='once')}", routed_text(snap)]
    if snap.known:  # the host's state, as the live room's status line shows it (design §22)
        from engine.host.instance import describe

        lines.append(escape(describe(serve_of(snap))))
    unchecked = lint_unchecked(snap)
    if unchecked is not None:  # never shown as ✓: said, with why (design §26)
        lines.append(
            f"lint unchecked: trunk history unavailable ({escape(unchecked)}); its history checks did not run"
        )
    lines.append("")
    for view in VIEWS:
        view_keys = keys(view, snap)
        lines.append(f"== {TITLES[view]} ({len(view_keys)})")
        titles = [c.title for c in BY_VIEW[view].columns]
        # each row's own id whole, however long (an operator's review: `research-left-p…`)
        # printed whole: a cell's whole form (every mark), a pipe having no width to fit (D-324)
        printed = [[form(c, None) for c in row(view, snap, key)] for key in view_keys[:200]]
        lines += table_lines(titles, printed, whole=(0,))
        if len(view_keys) > 200:
            lines.append(f"... {len(view_keys) - 200} more")
        lines.append("")
    if reasons:
        lines.append("exit 1:")
        lines += [f"- {escape(r)}" for r in reasons]
    elif unchecked is not None:
        lines.append(
            "exit 0: nothing holds in-progress work; identity and stores verify; lint's history checks did "
            "not run (--require-history makes that exit 1)"
        )
    else:
        lines.append("exit 0: nothing holds in-progress work; lint, identity and stores verify")
    return "\n".join(lines) + "\n"


class RegistersOnly(msgspec.Struct):
    """What `--once --registers-only` found: printed as text or as its JSON."""

    stores: str  # "present" or "absent"
    lint: LintResult
    differing: list[str]  # the generated views that differ
    identity: HistoryVerdict
    reasons: list[str]

    @property
    def exit_code(self) -> int:
        return 1 if self.reasons else 0

    def as_json(self) -> dict[str, object]:
        return {
            "stores": self.stores,
            "registersOnly": True,
            "lint": self.lint.as_json(),
            "views": {"differ": self.differing},
            "identity": self.identity.as_json(),
            "exitReasons": self.reasons,
            "exitCode": self.exit_code,
        }


def registers_only(ws: Workspace, trunk: str | None = None) -> RegistersOnly:
    """`--once --registers-only` (design §16.2): what git holds, checked as CI would: `registry lint
    --require-history [--trunk T]`, `registry views --check` and `identity verify --require-history`
    by git history. Nothing is routed or written. Unit state is used where the stores are files on
    this disk (the re-gate check), and reported unknown elsewhere: a clone, or stores on PostgreSQL,
    which this check never reaches (D-87); exit 0 when the three pass. `trunk`: the branch a CI job
    names, as lint's --trunk (D-227): the views are rendered from that walk too."""
    from engine.commands.registers import lint, stale_view, views
    from engine.read.load import load
    from engine.trust.idhistory import verify_history

    state = load(ws)
    result = lint(ws, state, trunk, require_history=True)
    differing = views(ws, state, check=True)
    verdict = verify_history(ws)
    reasons = [f"lint error {i.code}: {i.message}" for i in result.errors]
    reasons += [f"views: {stale_view(name)}" for name in differing]
    if not verdict.available:
        reasons.append(
            f"identity verify: git history unavailable ({verdict.why}); {how_to_read(verdict.why)}"
        )
    reasons += [f"identity verify: {c.problem()}" for c in verdict.files if not c.ok]
    return RegistersOnly(stores(ws), result, differing, verdict, reasons)


def registers_only_text(found: RegistersOnly) -> str:
    lines = [ABSENT] if found.stores == "absent" else []
    lines.append("registers only: lint, views and identity as git holds them")
    lint = found.lint
    lines.append(
        f"lint: {len(lint.of('error'))} error(s), {len(lint.of('warning'))} warning(s), "
        f"{len(lint.of('notice'))} notice(s); history {'checked' if lint.history_checked else 'NOT checked'}"
    )
    for level in ("error", "warning"):
        lines += [f"  {level}: {i.code}: {escape(i.message)}" for i in lint.of(level)]
    differ = found.differing
    lines.append("views: " + ("up to date" if not differ else f"{', '.join(differ)} differ"))
    identity = found.identity
    if not identity.available:
        lines.append(f"identity (git history): unavailable ({escape(identity.why)})")
    else:
        files = identity.files
        bad = [f for f in files if not f.ok]
        how = sorted({str(f.how) for f in files if f.ok})
        lines.append(
            "identity (git history): "
            + (f"ok, {len(files)} file(s) as decided ({', '.join(how)})" if not bad
               else f"{len(bad)} file(s) match no decision that counts")
        )  # fmt: skip
    if found.reasons:
        lines.append("exit 1:")
        lines += [f"- {escape(r)}" for r in found.reasons]
    else:
        lines.append("exit 0: lint, views and identity by git history pass (unit state is not checked here)")
    return "\n".join(lines) + "\n"
