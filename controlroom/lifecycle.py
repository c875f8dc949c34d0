"""The whole history of a row, in order: signal → routed → opened → dispositioned; memory recorded →
expired or retracted; unit dispatched → held → closed. Plain lines; store text escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from controlroom.readmodel import (
    Snapshot,
    contract_of,
    deadlines,
    evidence,
    keys,
    lint_of,
    plain,
    sectioned,
    sensor_rows,
    short_id,
)
from controlroom.views import Key
from engine.base.text import ensure_escaped, escape, escape_block, escape_items, shown_line
from engine.commands.proposals import review
from engine.read import freshness
from engine.read.ladder import registers_of
from engine.read.model import UNREADABLE, EventKind, MemoryStatus, ObligationKind, ObligationStatus
from engine.read.nextup import next_up
from engine.read.queries import days_left, history, is_stale, memory_status, unit_status
from engine.read.rules import decision_of, recovery
from engine.read.vetoes import AWAITING_CLOSE, AWAITING_DECISION, READY_TO_CLOSE, result_waits
from engine.read.worldfold import UNRECORDED_PAGE, event_line, page_unrecorded, reporter


def lifecycle(view: str, snap: Snapshot, key: Key | None) -> list[str]:
    if key is None:
        return ["(nothing selected)"]
    try:
        # a last guard: whatever a branch below forgot, a store field never reaches the terminal
        # as a control sequence (a line of escaped fields passes unchanged: escape doubles the
        # backslash, so it is not applied twice)
        return [ensure_escaped(line) for line in _lifecycle(view, snap, key)]
    except KeyError:
        if key in keys(view, snap, show_all=True):  # still there: a field its line lacks
            return [_NOT_WRITTEN]
        return ["(gone: the row changed under the cursor)"]
    except (TypeError, AttributeError, ValueError):  # a field of a type no writer gives it
        return [_NOT_WRITTEN]


SHOWN_EXCLUDED = 20  # units an empty Next-up's detail names, each with why it is out
_NOT_WRITTEN = "(a line behind this row is not one regulator wrote: `regulator verify` names it)"


def _signal_lines(snap: Snapshot, signal_id: str) -> list[str]:
    """A signal and its routing, every field read as the raw store value it is: one of another type
    (a line written by hand) is shown escaped, and one that does not read back whole says so."""
    s = snap.state.signals.get(signal_id)
    if s is None:
        return [f"signal {signal_id} (not in the log)"]
    if s.get("kind") == UNREADABLE:
        return [f"signal {escape(signal_id)}: its line does not read back whole (edited, or a number out of range; `regulator verify` names it)"]  # fmt: skip
    who = reporter(s)
    get = s.get
    if get("type") == "question":  # a unit's question (ask_human, design §22)
        return [
            f"{escape(get('at'))} question {signal_id} from {escape(who)}",
            *(f"  ? {escape(line)}" for line in str(get("question", "")).split("\n")),
            *([f"  options: {escape_items(get('options'), '; ')}"] if get("options") else []),
        ]
    lines = [
        f"{escape(get('at'))} signal {signal_id} from {escape(who)}",
        f"  subject: {escape(get('subject'))}",
        f"  claim: {escape(get('claim'))}",
        f"  observation: {escape(get('observation'))}",
        f"  evidence: {escape_items(get('evidence'), '; ')}",
        f"  confidence {escape(get('confidence'))} · reported {escape(get('reportedSeverity'))} · affects "
        f"{escape_items(get('affectedUnits') or []) or '(none)'}",
        f"  observed {escape(get('observedAt'))} · expires {escape(get('expiresAt') or 'never')}",
    ]
    world = snap.state.world
    if isinstance(get("supersedes"), str):
        older = snap.state.signals.get(s["supersedes"], {})
        lines.append(f"  supersedes signal {escape(s['supersedes'])}: {escape(older.get('subject'))}")
    for newer in world.superseded.get(signal_id, []):
        found = snap.state.signals.get(newer, {})
        lines.append(
            f"  superseded by signal {newer} from {escape(reporter(found))}: {escape(found.get('subject'))}"
        )
    prediction = get("prediction")
    if signal_id in world.predicted and isinstance(prediction, dict):
        lines.append(f"  a prediction: resolves at {escape(prediction.get('resolvesAt'))}")
    routing = snap.state.routings.get(signal_id)
    if routing is None:
        lines.append("  not yet routed")
    else:
        floors = escape_items(routing.get("floors") or []) or "no floor"
        lines.append(
            f"{escape(routing.get('at'))} routed: reported {escape(routing.get('reportedSeverity'))}, derived "
            f"{escape(routing.get('derivedSeverity'))} ({floors}); outcome {escape(routing.get('outcome'))}"
        )
        lines.append(f"  {escape(routing.get('reason'))}")
    return lines


def _uncounted(events: Iterable[Mapping[str, object]]) -> Iterator[str]:
    """Person events that count for nothing, shown for what they are (design §15.1)."""
    for event in events:
        if "uncounted" in event:
            yield (
                f"{event.get('at')} {escape(event.get('kind'))} by {escape(event.get('by'))}: "
                f"COUNTS FOR NOTHING ({event['uncounted']})"
            )


def _lifecycle(view: str, snap: Snapshot, key: Key) -> Iterator[str]:
    state = snap.state
    if view == "obligations":
        ob = state.obligations[plain(key)]
        yield f"obligation {ob.id} — lifecycle"
        if ob.kind in (ObligationKind.INTELLIGENCE, ObligationKind.QUESTION):
            yield from _signal_lines(snap, ob.source)
        elif ob.kind == ObligationKind.RECOVERY:
            result = history(state, ob)[0]
            yield (
                f"{result['at']} result {escape(result.get('outcome'))} of {ob.unit} "
                f"(by {escape(result.get('by'))}): {escape(result.get('summary'))}"
            )
            yield "  a person records a recovery decision: `regulator unit decide`"
        elif ob.kind == ObligationKind.RECHECK:
            yield f"recheck: the evidence behind signal {ob.source} expired while obligations it opened were open"
            yield from _signal_lines(snap, ob.source)
        else:
            decision = history(state, ob)[0]
            yield (
                f"{decision['at']} recovery decision {decision['action']} on {ob.unit} by "
                f"{escape(decision['by'])}: {escape(decision['rationale'])}"
            )
        hold = "holds its dispatch and close" if ob.blocks else "holds nothing"
        yield f"{ob.opened_at} opened on {ob.unit or '(no unit)'}, owed to {ob.owed_to}, {ob.severity}: {hold}"
        if is_stale(state, ob):
            yield "  stale: the signal behind it has expired; it stays open until dispositioned"
        for event in history(state, ob):
            line = event_line(event) if "uncounted" not in event else None
            if line is not None:
                yield line
        if deadlines(snap).overdue(ob):
            yield f"  overdue since {deadlines(snap).due(ob)}: it stays open until a person dispositions it"
        if page_unrecorded(state, ob):
            yield UNRECORDED_PAGE
        if ob.status != ObligationStatus.OPEN:
            verb = ob.status if ob.status == ObligationStatus.ESCALATED else ob.disposition
            yield f"{ob.closed_at} {verb} by {escape(ob.by)}: {escape(ob.rationale)}"
        else:
            yield "  open: awaiting a disposition"
        yield from _uncounted(history(state, ob))
        return
    if view == "units":
        unit_id = plain(key)
        unit = state.units[unit_id]
        c = contract_of(unit)
        yield f"unit {unit_id} — {escape(c.title)}"
        yield f"  type {c.type} · profile {c.profile} · priority {c.priority} · now {unit_status(state, unit) if snap.known else 'unknown (no stores here)'}"
        if c.contract:
            yield f"  contract: {escape(c.contract)}"
        events = history(state, unit)
        for event in events:
            kind = event["kind"]
            if "uncounted" in event:
                continue
            if kind == EventKind.DISPATCH:
                where = (
                    f"lease file in {escape(event['worktree'])}" if event.get("worktree") else "no lease file"
                )
                if "confined" in event:  # `unit run`: the lease beside the worktree, gone at the run's end
                    where = f"in {escape(event.get('worktree'))}; its lease file in the run's own folder, removed when the run ends"
                if "leaseHash" not in event:
                    where = "a first-round lease, not honoured"
                yield f"{event['at']} dispatched as {event.get('type')}/{event.get('profile')} ({where})"
                if event.get("expiresAt"):
                    yield f"  lease expires {escape(event['expiresAt'])} unless heartbeats extend it"
                if "confined" in event:
                    yield (
                        "  runs confined (its own account)"
                        if event["confined"] is True
                        else "  runs UNCONFINED"
                    )
            elif kind == EventKind.RESULT:
                code = event.get("exitCode")
                yield (
                    f"{event['at']} result {escape(event.get('outcome'))} by {escape(event.get('by'))}"
                    + (f" (exit code {escape(code)})" if code is not None else "")
                    + f": {escape(event.get('summary'))}"
                )
                yield (
                    "  its lease no longer expires: a result is recorded ("
                    + (
                        "once nothing holds it, `regulator unit close` or a waiting `unit run --wait` closes it)"
                        if event.get("outcome") == "done"
                        else "a person records a recovery decision)"
                    )
                )
            elif kind == EventKind.LEASE_EXPIRED:
                yield f"{event['at']} lease expired (its time was {escape(event.get('expiredAt'))}); the unit is lost"
            elif kind == EventKind.CLOSE:
                yield f"{event['at']} closed; lease released"
            elif kind == EventKind.DEMOTE:
                yield f"{event['at']} demoted to todo by {escape(event['by'])}: {escape(event['rationale'])}"
            elif kind == EventKind.DECISION:
                yield (
                    f"{event['at']} recovery decision {event['action']} by {escape(event['by'])}: "
                    f"{escape(event['rationale'])}"
                )
        yield from _uncounted(events)
        for ob in snap.holds.get(unit_id, []):
            yield f"held by {ob.severity} obligation {ob.id}: {escape(ob.subject)}"
        held = snap.holds.get(unit_id, [])
        waits = result_waits(state, unit, held, bool(snap.stale.get(unit_id))) if snap.known else None
        if waits == AWAITING_CLOSE:
            yield "awaiting close: its result is recorded; a hold vetoes the close until it is dispositioned"
        elif waits == READY_TO_CLOSE:
            yield f"ready to close: its result is done and nothing holds it: `regulator unit close {escape(unit_id)}`"
        elif waits == AWAITING_DECISION:
            yield "awaiting decision: its result is not done; a person records a recovery decision (d)"
        for finding_id in snap.stale.get(unit_id, []):
            yield f"stale-knowledge: unresolved finding {finding_id}"
        return
    if view == "memory":
        entry_id = plain(key)
        entry = state.memory[entry_id]
        e = entry.event
        today = state.now.date()
        yield f"memory entry {entry_id}"
        yield (
            f"{e['at']} recorded by unit {escape(e.get('unit'))} at revision "
            f"{escape((e.get('revision') or 'unknown')[:12])} (S1)"
        )
        yield f"  subject: {escape(e['subject'])}"
        yield f"  note: {escape(e['note'])}"
        yield f"  evidence: {escape('; '.join(e.get('evidence') or []))}"
        fresh = evidence(snap, entry_id)
        if fresh.status == freshness.CHANGED:
            yield f"  evidence changed since {escape((e.get('revision') or '')[:12])}: {escape(', '.join(fresh.changed_paths))}"
        else:
            yield f"  evidence {fresh.status}{': ' + fresh.why if fresh.why else ' at HEAD'}"
        yield f"  scope: {escape(', '.join(e.get('scope') or []) or 'every unit')} · review by {e['reviewBy']}"
        status = memory_status(entry, today)
        if entry.retraction:
            r = entry.retraction
            yield f"{r['at']} retracted by {escape(r['by'])}: {escape(r['reason'])}"
        elif status == MemoryStatus.EXPIRED:
            yield f"expired after {e['reviewBy']}: no unit receives it"
        else:
            yield f"current: {days_left(entry, today)} day(s) left"
        return
    if view == "signals":
        signal_id = plain(key)
        yield from _signal_lines(snap, signal_id)
        routing = state.routings.get(signal_id)
        for opened in (routing or {}).get("obligations", []):
            found = state.obligations.get(opened["id"])
            if found is None:
                continue
            yield f"{found.opened_at} opened obligation {found.id} on {found.unit or '(no unit)'}, {found.severity}"
            if found.status == ObligationStatus.OPEN:
                yield "  open: awaiting a disposition"
            else:
                verb = found.status if found.status == ObligationStatus.ESCALATED else found.disposition
                yield f"{found.closed_at} {verb} by {escape(found.by)}: {escape(found.rationale)}"
        world = state.world
        for ref in (
            world.expired.get(signal_id),
            world.withdrawn.get(signal_id),
            world.outcomes.get(signal_id),
        ):
            line = event_line(state.source.event(ref)) if ref is not None else None
            if line is not None:
                yield line
        if signal_id in world.cleared:  # D-308
            run = state.source.event(world.cleared[signal_id])
            yield f"{run.get('at')} sensor {escape(run.get('sensor'))} found its advisory no longer affects the pin"
        if signal_id in world.resumed:  # D-321
            run = state.source.event(world.resumed[signal_id])
            yield f"{run.get('at')} sensor {escape(run.get('sensor'))} found its feed moving again"
        if signal_id in world.predicted and signal_id not in world.outcomes:
            from engine.read.worldfold import AWAITING
            from engine.read.worldfold import status as prediction_status

            waiting = prediction_status(state, signal_id, state.signals[signal_id]) == AWAITING
            yield (
                "  the prediction awaits its outcome (o records it)"
                if waiting
                else "  the prediction is pending"
            )
        return
    if view == "sensors":
        name = plain(key)
        r = sensor_rows(snap)[name]
        yield f"sensor {name}: {r['kind']}, every {r['every']}, severity {r['severity']}"
        if r["runs"] is None:
            yield "  its runs are unknown here: no stores (the host's room shows them)"
            return
        yield f"  {r['runs']} run(s), {r['raised']} signal(s) raised in all; next run {r['nextRun'] or 'now'}"
        runs = state.world.runs.get(name, [])
        for event in state.source.events(runs[-20:]):
            said = (
                f"{event.get('at')} run: {event.get('outcome')}, {len(event.get('signals') or [])} signal(s)"
            )
            if event.get("withdrawn"):
                said += f", {len(event['withdrawn'])} withdrawn"
            if event.get("cleared"):
                said += f", {len(event['cleared'])} cleared (no pin affected, or the feed moving again)"
            yield said
            for error in event.get("errors") or []:
                yield f"    error: {escape(error)}"
            if (event.get("errorCount") or 0) > len(event.get("errors") or []):
                yield f"    … and {event['errorCount'] - len(event['errors'])} more"
        return
    kind, ident = sectioned(key)
    if kind == "bad" and ident == "more":
        yield f"{state.bad_lines - len(state.problems)} more bad line(s) beyond the first {len(state.problems)}"
        yield "  counted, not listed one by one; every read skips them; `regulator verify` counts them too"
        return
    if kind == "bad":
        problem = state.problems[int(ident)]
        yield f"{problem.store} line {problem.line}: {problem.kind} line skipped"
        yield f"  {escape(problem.message)}"
        yield "  every read skips it; `regulator verify` names it; the stores stay append-only"
        return
    if kind == "verify":
        yield f"verify: {escape(str(snap.verify[int(ident)]))}"
        return
    if kind == "next":
        yield f"{ident} is in Next-up: todo, not flagged by a finding, not held"
        return
    if kind == "idle":
        yield "Next-up is empty: no unit is todo, free of findings and not held"
        _, excluded = next_up(snap.ws, state)
        for out in excluded[:SHOWN_EXCLUDED]:
            yield f"  {escape(out['id'])}: {escape('; '.join(out['reasons']) or 'todo')}"
        if len(excluded) > SHOWN_EXCLUDED:
            yield f"  … and {len(excluded) - SHOWN_EXCLUDED} more (`regulator registry next-up --explain` lists every one)"
        return
    if kind == "lint":
        issue = lint_of(snap).issues[int(ident)]
        yield f"{issue.level}: {issue.code} ({issue.entry})"
        yield escape(issue.message)
        return
    if kind in ("finding", "intake", "record", "retro"):
        registers = registers_of(snap.ws, state)
        register = {
            "finding": registers.findings,
            "intake": registers.intake,
            "record": registers.records,
            "retro": registers.retro,
        }[kind][ident]
        yield f"{kind} {ident} ({register.path})"
        if kind == "record":
            from registry.lint import record_findings

            for open_finding in record_findings(registers).get(ident, []):
                acked = "acknowledged" if open_finding.fields["ack"].strip() else "awaits ack"
                yield f"  open finding {open_finding.id} ({acked}): {escape(open_finding.fields['title'])}"
        for name, value in register.fields.items():
            yield from field_lines(name, value)
        yield ""
        yield from escape_block(register.body.strip()).splitlines()
        return
    if kind == "badrecord":
        invalid = registers_of(snap.ws, state).invalid[ident]
        yield f"record {invalid.id} ({invalid.path}) is INVALID: {invalid.code}"
        yield escape(invalid.problem)
        yield "fix it in place (registry lint names why); it states nothing until it reads"
        return
    if kind == "file":
        check = next(c for c in snap.identity if c.file == ident)
        yield f"{ident}: {'as decided' if check.ok else escape(check.problem())}"
        for event in state.decisions:
            if event.get("file") == ident:
                yield f"{event['at']} {event['decision']} by {escape(event['by'])}: {escape(event['rationale'])}"
        return
    if kind == "proposal":
        p = state.proposals[ident]
        d = decision_of(state, ident)
        yield f"proposal {ident} for {p['file']}"
        yield f"{p['at']} proposed by {escape(p.get('unit') or p.get('by'))}: {escape(p['rationale'])}"
        if d:
            yield f"{d['at']} {d['decision']} by {escape(d['by'])}: {escape(d['rationale'])}"
        else:
            yield "  pending: a person with the accept grant decides"
        yield ""
        yield from (shown_line(line) for line in review(snap.ws, p))
        return
    raise KeyError(key)


def field_lines(name: str, value: object) -> list[str]:
    """A register field as an operator reads it, never as a Python repr: true/false as yes/no, a
    mapping as `key value` pairs, a short list on one line, a longer one as items under its name."""
    if isinstance(value, bool):
        return [f"  {name}: {'yes' if value else 'no'}"]
    if value is None or value == "" or value == [] or value == {}:
        return [f"  {name}: (none)"]
    if isinstance(value, dict):
        return [f"  {name}: " + " · ".join(f"{escape(k)} {_item(v)}" for k, v in value.items())]
    if isinstance(value, list):
        items = [_item(v) for v in value]
        if all(isinstance(v, str) for v in value) and len(", ".join(items)) <= 60:
            return [f"  {name}: {', '.join(items)}"]
        return [f"  {name}:", *(f"    - {item}" for item in items)]
    return [f"  {name}: {escape(value)}"]


def _item(value: object) -> str:
    """One value of a list or mapping field: a facet or one-key evidence as `kind: text`."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{escape(k)}: {_item(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_item(v) for v in value)
    return escape(value)


def decision_preview(snap: Snapshot, unit_id: str, action: str) -> list[str]:
    """What recording `action` on `unit_id` would change, as `unit decide` writes it
    (engine.read.rules.recovery): what it disposes of, what it opens, the lease it ends."""
    from engine.read.model import BLOCKING, OWED_TO

    effect = recovery(snap.state, unit_id, action)
    owed = effect.disposes
    lines = [f"{len(owed)} open obligation(s) of {unit_id} owed to {OWED_TO} become {effect.disposition}:"]
    lines += [f"  {short_id(ob.id)} {ob.severity}: {escape(ob.subject)}" for ob in owed] or ["  (none)"]
    if effect.opens:
        lines.append(
            f"opens a new {BLOCKING} obligation on {unit_id}, owed to {OWED_TO}: {unit_id} waits until it is resolved"
        )
    else:
        lines.append("opens nothing")
    if effect.releases_lease:
        lines.append(f"{unit_id} is in progress: its lease file is removed")
    return lines
