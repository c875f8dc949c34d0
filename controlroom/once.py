"""`controlroom --once`: route, lint, derive, print the state, exit 0 or 1 (SPEC §10)."""

from __future__ import annotations

from controlroom.readmodel import COLUMNS, TITLES, VIEWS, Snapshot, counts, header_text, keys, row, snapshot
from engine.nextup import next_up
from engine.obligations import record
from engine.router import route
from engine.state import unit_status
from engine.status import status
from engine.text import escape
from engine.workspace import Workspace


def exit_reasons(snap: Snapshot) -> list[str]:
    reasons = []
    state = snap.state
    for unit_id, holding in sorted(snap.holds.items()):
        unit = state.units.get(unit_id)
        if unit is None or unit_status(state, unit) != "in-progress":
            continue
        for ob in holding:
            if ob.kind == "intelligence":
                what = f"signal {ob.source}: {state.signals.get(ob.source, {}).get('subject', '?')}"
            else:
                what = f"recovery decision {ob.source}"
            reasons.append(f"{unit_id} is in progress and held by {ob.severity} obligation {ob.id} ({what})")
    if snap.lint is not None:
        for issue in snap.lint.errors:
            reasons.append(f"lint error {issue.code}: {issue.message}")
    for check in snap.identity:
        if not check.ok:
            reasons.append(f"identity verify: {check.problem()}")
    for finding in snap.verify:
        reasons.append(f"verify: {finding}")
    return reasons


def once(ws: Workspace, person: str | None, read_only: bool = False) -> tuple[Snapshot, list[str]]:
    if not read_only:
        route(ws)
    snap = snapshot(ws, person)
    return snap, exit_reasons(snap)


def as_json(snap: Snapshot, reasons: list[str]) -> dict:

    state = snap.state
    queue, excluded = next_up(snap.ws, state)
    return {
        "workspace": str(snap.ws.root),
        "now": state.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "authentication": snap.ws.authority().authentication,
        "clock": snap.ws.authority().clock,
        "counts": counts(snap),
        "status": status(snap.ws, state),
        "obligations": [record(state, ob) for ob in state.obligations.values()],
        "lint": snap.lint.as_json() if snap.lint else None,
        "nextUp": queue,
        "excluded": excluded,
        "identity": [{"file": c.file, "ok": c.ok} for c in snap.identity],
        "verify": [{"store": f.store, "line": f.line, "message": f.message} for f in snap.verify],
        "problems": [str(p) for p in state.problems],
        "exitReasons": reasons,
        "exitCode": 1 if reasons else 0,
    }


def as_text(snap: Snapshot, reasons: list[str]) -> str:
    lines = [f"regulator · {snap.ws.root.name} · {header_text(snap, live='once')}", ""]
    for view in VIEWS:
        view_keys = keys(view, snap)
        lines.append(f"== {TITLES[view]} ({len(view_keys)})")
        columns = COLUMNS[view]
        lines.append(_fmt([title for title, _ in columns], columns))
        for key in view_keys[:200]:
            lines.append(_fmt(row(view, snap, key), columns))
        if len(view_keys) > 200:
            lines.append(f"... {len(view_keys) - 200} more")
        lines.append("")
    if reasons:
        lines.append("exit 1:")
        lines += [f"- {escape(r)}" for r in reasons]
    else:
        lines.append("exit 0: nothing holds in-progress work; lint, identity and stores verify")
    return "\n".join(lines) + "\n"


def _fmt(cells: list[str], columns: list[tuple[str, int]]) -> str:
    parts = []
    for (_, width), cell in zip(columns, cells, strict=False):
        parts.append(cell[:width].ljust(width) if width else cell)
    return "  ".join(parts).rstrip()
