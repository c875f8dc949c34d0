"""The whole history of a row, in order: signal → routed → opened → dispositioned; memory recorded →
expired or retracted; unit dispatched → held → closed. Plain lines; store text escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from controlroom.readmodel import Snapshot, contract_of, evidence, lint_of, plain, sectioned
from controlroom.views import Key
from engine import freshness
from engine.ladder import registers_of
from engine.model import EventKind, MemoryStatus, ObligationKind, ObligationStatus, UnitStatus
from engine.proposals import decision_of, review
from engine.queries import days_left, history, is_stale, memory_status, unit_status
from engine.text import ensure_escaped, escape, escape_block


def lifecycle(view: str, snap: Snapshot, key: Key | None) -> list[str]:
    if key is None:
        return ["(nothing selected)"]
    try:
        # a last guard: whatever a branch below forgot, a store field never reaches the terminal
        # as a control sequence (a line of escaped fields passes unchanged: escape doubles the
        # backslash, so it is not applied twice)
        return [ensure_escaped(line) for line in _lifecycle(view, snap, key)]
    except KeyError:
        return ["(gone: the row changed under the cursor)"]


def _signal_lines(snap: Snapshot, signal_id: str) -> list[str]:
    s = snap.state.signals.get(signal_id)
    if s is None:
        return [f"signal {signal_id} (not in the log)"]
    who = f"unit {s['unit']}" if s.get("unit") else f"person {s.get('by')}"
    lines = [
        f"{s['at']} signal {signal_id} from {escape(who)}",
        f"  subject: {escape(s['subject'])}",
        f"  claim: {escape(s['claim'])}",
        f"  observation: {escape(s['observation'])}",
        f"  evidence: {escape('; '.join(s['evidence']))}",
        f"  confidence {s['confidence']} · reported {s['reportedSeverity']} · affects "
        f"{escape(', '.join(s.get('affectedUnits') or []) or '(none)')}",
        f"  observed {s['observedAt']} · expires {s.get('expiresAt') or 'never'}",
    ]
    routing = snap.state.routings.get(signal_id)
    if routing is None:
        lines.append("  not yet routed")
    else:
        floors = ", ".join(routing.get("floors") or []) or "no floor"
        lines.append(
            f"{routing['at']} routed: reported {routing['reportedSeverity']}, derived "
            f"{routing['derivedSeverity']} ({floors}); outcome {routing['outcome']}"
        )
        lines.append(f"  {escape(routing['reason'])}")
    return lines


def _uncounted(events: Iterable[Mapping[str, object]]) -> Iterator[str]:
    """Person events that count for nothing, shown for what they are (SPEC §15.1)."""
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
        if ob.kind == ObligationKind.INTELLIGENCE:
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
                if "leaseHash" not in event:
                    where = "a first-round lease, not honoured"
                yield f"{event['at']} dispatched as {event.get('type')}/{event.get('profile')} ({where})"
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
        why = snap.held.get(unit_id)
        for ob in why.obligations if why else ():
            yield f"held by {ob.severity} obligation {ob.id}: {escape(ob.subject)}"
        for finding_id in why.findings if why else ():
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
            f"{escape(e.get('revision') or 'unknown')} (S1)"
        )
        yield f"  subject: {escape(e['subject'])}"
        yield f"  note: {escape(e['note'])}"
        yield f"  evidence: {escape('; '.join(e.get('evidence') or []))}"
        fresh = evidence(snap, entry_id)
        if fresh.status == freshness.CHANGED:
            yield f"  evidence changed since {escape(e.get('revision'))}: {escape(', '.join(fresh.changed_paths))}"
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
            if found is not None:
                yield f"  obligation {found.id} on {found.unit or '(no unit)'}: {found.status}"
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
            yield f"  {name}: {escape(value)}"
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
        yield from (escape(line) for line in review(snap.ws, p))
        return
    raise KeyError(key)


def decision_preview(snap: Snapshot, unit_id: str, action: str) -> list[str]:
    """What recording `action` on `unit_id` would change, as engine.units.decide writes it: the
    unit's open obligations owed to S3 are disposed of, and a waiting action opens a blocking one."""
    from engine.model import BLOCKING, OWED_TO, WAITING_ACTIONS
    from engine.units import disposition_of

    state = snap.state
    owed = [
        ob
        for ob in state.obligations.values()
        if ob.unit == unit_id and ob.status == ObligationStatus.OPEN and ob.owed_to == OWED_TO
    ]
    verb = disposition_of(action)  # what engine.units.decide writes on each of them
    lines = [f"{len(owed)} open obligation(s) of {unit_id} owed to {OWED_TO} become {verb}:"]
    lines += [f"  {ob.id[:8]} {ob.severity}: {escape(ob.subject)}" for ob in owed] or ["  (none)"]
    if action in WAITING_ACTIONS:
        lines.append(
            f"opens a new {BLOCKING} obligation on {unit_id}, owed to {OWED_TO}: {unit_id} waits until it is resolved"
        )
    else:
        lines.append("opens nothing")
    unit = state.units.get(unit_id)
    if unit is not None and unit.status == UnitStatus.IN_PROGRESS:
        lines.append(f"{unit_id} is in progress: its lease file is removed")
    return lines
