"""What the control room shows, as plain rows: one source for the app, --once and screenshots.

It formats what the engine derives (held, stale, current, Next-up); it decides none of it. Rows
are computed on demand per key, so a table of 100,000 obligations formats only what is on screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine import clock
from engine.errors import RegulatorError
from engine.ladder import registers_of, stale_knowledge
from engine.load import load
from engine.model import State
from engine.nextup import next_up
from engine.proposals import FileCheck, decision_of, verify_identity
from engine.queries import days_left, holds_index, is_stale, memory_status, unit_status, unrouted_count
from engine.registers import lint
from engine.text import escape
from engine.verification import Finding, findings
from engine.workspace import Workspace
from registry.lint import LintResult, record_findings

VIEWS = ("obligations", "units", "memory", "signals", "registers", "identity")
TITLES = {
    "obligations": "Obligations",
    "units": "Units",
    "memory": "Memory",
    "signals": "Signals",
    "registers": "Registers",
    "identity": "Identity",
}
COLUMNS: dict[str, list[tuple[str, int]]] = {
    "obligations": [
        ("id", 8),
        ("unit", 14),
        ("severity", 8),
        ("blocks", 6),
        ("age", 4),
        ("status", 9),
        ("subject", 0),
    ],
    "units": [
        ("id", 18),
        ("type", 10),
        ("status", 11),
        ("held", 4),
        ("prio", 4),
        ("held by", 18),
        ("title", 0),
    ],
    "memory": [
        ("id", 8),
        ("status", 9),
        ("left", 13),
        ("review-by", 10),
        ("unit", 6),
        ("scope", 12),
        ("subject: note", 0),
    ],
    "signals": [("id", 8), ("from", 12), ("reported", 8), ("derived", 8), ("outcome", 11), ("subject", 0)],
    "registers": [("register", 8), ("id", 24), ("state", 20), ("title / message", 0)],
    "identity": [("kind", 8), ("id", 34), ("state", 22), ("detail", 0)],
}
EXPIRING_DAYS = 7


@dataclass
class Snapshot:
    """The engine's state plus the checks --once reports, for one operator."""

    ws: Workspace
    state: State
    person: str | None = None
    lint: LintResult | None = None
    identity: list[FileCheck] = field(default_factory=list)
    verify: list[Finding] = field(default_factory=list)
    holds: dict = field(default_factory=dict)
    stale: dict = field(default_factory=dict)
    policy: object = None  # the interaction policy, read once per refresh (actions ask it per keypress)
    known: bool = True  # the stores are here: without them (a clone) unit state is unknown (§16.2)
    history: object = None  # without the stores: identity judged by git history (idhistory.HistoryVerdict)
    _memory_counts: tuple = ()  # (memory cursor, today, expiring): memory is counted once per change
    _evidence: dict | None = None  # entry id -> engine.freshness.Freshness, checked on first use

    def derive(self) -> None:
        """Recompute the indexes every row reads (cheap, one pass each)."""
        self.known = self.ws.has_stores
        self._evidence = None  # checked again (one git pass, cached by HEAD) when next shown
        self.holds = holds_index(self.state)
        self.stale = stale_knowledge(self.ws, self.state)
        try:
            self.policy = self.ws.interaction()
        except RegulatorError:
            self.policy = None


def evidence(snap: Snapshot, entry_id: str):
    """Whether the files a memory entry cites changed since it was recorded (SPEC §20)."""
    from engine import freshness

    if snap._evidence is None:
        snap._evidence = freshness.check(snap.ws.root, (e.event for e in snap.state.memory.values()))
    return snap._evidence.get(entry_id, freshness.NO_PATH)


def snapshot(ws: Workspace, person: str | None = None, with_checks: bool = True) -> Snapshot:
    snap = Snapshot(ws, load(ws), person)
    if with_checks:
        refresh_checks(snap)
    snap.derive()
    return snap


def refresh_checks(snap: Snapshot) -> None:
    """Lint, identity verify and store verify: slower (git, hashing), run when their inputs change."""
    snap.state.registers = None
    snap.lint = lint(snap.ws, snap.state)
    if snap.ws.has_stores:
        snap.identity = verify_identity(snap.ws, snap.state)
    else:  # a clone: the decisions are not here, their commits are (SPEC §16.2)
        from engine.idhistory import verify_history

        snap.history = verify_history(snap.ws)
        snap.identity = list(snap.history.files)
    snap.verify = [f for f in findings(snap.ws, snap.state) if f.dismissed is None]


def short(value: str | None, n: int = 8) -> str:
    return (value or "")[:n] if value else "-"


def age(state: State, at: str) -> str:
    seconds = max(0, int((state.now - clock.parse_time(at)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def expiry_bar(days: int, status: str, width: int = 8) -> str:
    """Days left as a bar: full at 90 days; expired and retracted read differently at a glance."""
    if status == "retracted":
        return "retracted".ljust(width + 6)
    if status == "expired":
        return ("×" * width) + " expired"
    filled = max(1, min(width, round(days / 90 * width)))
    mark = "!" if days <= EXPIRING_DAYS else ""
    return ("█" * filled + "░" * (width - filled)) + f" {days}d{mark}"


# ---- keys: which rows a view has, in order -------------------------------------------------------


def keys(view: str, snap: Snapshot, show_all: bool = False) -> list[str]:
    state = snap.state
    if view == "obligations":
        return [k for k, ob in state.obligations.items() if show_all or ob.status == "open"]
    if view == "units":
        return sorted(k for k, u in state.units.items() if u.contract is not None)
    if view == "memory":
        today = state.now.date()
        return [k for k, e in state.memory.items() if show_all or memory_status(e, today) != "retracted"]
    if view == "signals":
        return list(state.signals)
    if view == "registers":
        registers = registers_of(snap.ws, state)
        queue, _ = next_up(snap.ws, state, explain=False)
        out = [f"next:{u['id']}" for u in queue]
        if snap.lint is not None:
            out += [f"lint:{i}" for i in range(len(snap.lint.issues))]
        out += [f"finding:{k}" for k in sorted(registers.findings)]
        out += [f"intake:{k}" for k in sorted(registers.intake)]
        out += [f"retro:{k}" for k in sorted(registers.retro)]
        return out
    if view == "identity":
        registers = registers_of(snap.ws, state)
        out = [f"file:{c.file}" for c in snap.identity]
        out += [f"proposal:{k}" for k in state.proposals]
        out += [f"record:{k}" for k in sorted(registers.records)]
        out += [f"badrecord:{i.path}" for i in registers.invalid_of("record")]  # listed, never left out
        return out
    raise KeyError(view)


def row(view: str, snap: Snapshot, key: str) -> list[str]:
    """The cells of one row, escaped: store text is never markup and never a terminal escape."""
    return [escape(c) for c in _row(view, snap, key)]


def _row(view: str, snap: Snapshot, key: str) -> list[str]:
    state = snap.state
    if view == "obligations":
        ob = state.obligations[key]
        subject = ob.subject + (" (stale)" if is_stale(state, ob) else "")
        status = ob.status if ob.status != "resolved" else (ob.disposition or "resolved")
        return [
            ob.id[:8],
            ob.unit or "(no unit)",
            ob.severity,
            "■" if ob.blocks else "·",
            age(state, ob.opened_at),
            status,
            subject,
        ]
    if view == "units":
        unit = state.units[key]
        held = [ob.id[:8] for ob in snap.holds.get(key, [])] + snap.stale.get(key, [])
        return [
            key,
            unit.contract.type,
            unit_status(state, unit) if snap.known else "unknown",
            "■" if snap.holds.get(key) else "",
            str(unit.contract.priority),
            ", ".join(held),
            unit.contract.title,
        ]
    if view == "memory":
        entry = state.memory[key]
        e = entry.event
        today = state.now.date()
        status = memory_status(entry, today)
        return [
            key[-8:],
            status,
            expiry_bar(days_left(entry, today), status),
            e["reviewBy"],
            e.get("unit") or "?",
            ",".join(e.get("scope") or []) or "every unit",
            ("⚠ evidence changed · " if evidence(snap, key).status == "changed" else "")
            + f"{e['subject']}: {e['note']}",
        ]
    if view == "signals":
        s = state.signals[key]
        routing = state.routings.get(key)
        return [
            key[-8:],
            s.get("unit") or f"@{s.get('by')}",
            s["reportedSeverity"],
            routing["derivedSeverity"] if routing else "-",
            routing["outcome"] if routing else "unrouted",
            s["subject"],
        ]
    if view == "registers":
        kind, _, ident = key.partition(":")
        registers = registers_of(snap.ws, state)
        if kind == "next":
            unit = state.units[ident]
            return ["next-up", ident, f"priority {unit.contract.priority}", unit.contract.title]
        if kind == "lint":
            issue = snap.lint.issues[int(ident)]
            return ["lint", issue.entry, f"{issue.level}: {issue.code}", issue.message]
        if kind == "finding":
            f = registers.findings[ident].fields
            state_text = (
                "resolved" if f["resolved"] else ("acknowledged" if f["ack"].strip() else "awaits ack")
            )
            return [
                "finding",
                ident,
                state_text,
                f"{f['title']} → {', '.join(f.get('affects') or []) or '-'}",
            ]
        if kind == "retro":
            from engine.retro import summary

            entry = registers.retro[ident]
            return ["retro", ident, f"since {entry.fields['since']}", summary(entry)]
        f = registers.intake[ident].fields
        return ["intake", ident, f["disposition"], f["title"]]
    if view == "identity":
        kind, _, ident = key.partition(":")
        if kind == "file":
            check = next(c for c in snap.identity if c.file == ident)
            return [
                "file",
                ident,
                "as decided" if check.ok else "DIFFERS (hand edit)",
                "" if check.ok else check.problem(),
            ]
        if kind == "proposal":
            p = state.proposals[ident]
            d = decision_of(state, ident)
            verdict = f"{d['decision']} by {d['by']}" if d else "pending"
            return ["proposal", ident[-8:] + " " + p["file"], verdict, p["rationale"]]
        registers = registers_of(snap.ws, state)
        if kind == "badrecord":
            invalid = registers.invalid[ident]
            return ["record", invalid.id, "INVALID", f"{invalid.code}: {invalid.problem}"]
        r = registers.records[ident].fields
        axes = "/".join(f"{v}" for v in (r.get("status") or {}).values()) or "no status axes"
        open_findings = record_findings(registers).get(ident, [])
        flag = "".join(
            f" ⚑ {f.id}" + ("" if f.fields["ack"].strip() else " (awaits ack)") for f in open_findings
        )
        return ["record", ident, axes, r["label"] + flag]
    raise KeyError(view)


# ---- header counts -------------------------------------------------------------------------------


def counts(snap: Snapshot) -> dict:
    state = snap.state
    today = state.now.date()
    open_count = blocking = stale = 0
    now = state.now
    for ob in state.obligations.values():
        if ob.status == "open":
            open_count += 1
            blocking += ob.blocks
            if ob.expires_at is not None and ob.expires_at <= now:  # is_stale, inlined: runs per append
                stale += 1
    held_units = [u for u in snap.holds if u in state.units]
    cursor = state.cursors.get("memory")
    marker = (cursor.offset if cursor else -1, len(state.memory), today)
    if snap._memory_counts[:3] != marker:  # memory is counted again only when it changed
        expiring = sum(
            1
            for e in state.memory.values()
            if memory_status(e, today) == "current" and days_left(e, today) <= EXPIRING_DAYS
        )
        snap._memory_counts = (*marker, expiring)
    return {
        "open": open_count,
        "blocking": blocking,
        "held": len(held_units),
        "stale": stale,
        "expiring": snap._memory_counts[3],
        "lintErrors": len(snap.lint.errors) if snap.lint else 0,
        "unrouted": unrouted_count(state),
        "badLines": len(state.problems),
    }


def header_text(snap: Snapshot, live: str = "● live") -> str:
    c = counts(snap)
    if snap.lint is None:
        lint_part = "lint …"
    else:
        lint_part = "lint ✓" if c["lintErrors"] == 0 else f"lint ✗{c['lintErrors']}"
    parts = [
        f"{c['blocking']} blocking",
        f"{c['held']} held",
        f"{c['stale']} stale",
        f"{c['expiring']} expiring ≤7d",
        lint_part,
        f"{c['unrouted']} unrouted",
    ]
    if c["badLines"]:
        parts.append(f"{c['badLines']} bad line(s)")
    parts += trust_marks(snap.ws)
    return " · ".join(parts) + f" · {live}"


def trust_marks(ws: Workspace) -> list[str]:
    """What the header must never hide (SPEC §15.1, §15.3): names not proven, a clock not the host's."""
    auth = ws.authority()
    marks = [] if auth.present else ["stores absent: unit state unknown"]
    if auth.present and auth.authentication == "names":
        marks.append("names unauthenticated")
    if auth.present and auth.clock == "pinned":
        marks.append("clock pinned")
    return marks
