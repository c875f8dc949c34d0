"""Register commands (SPEC §8, §9): lint, next-up, views, ack, records."""

from __future__ import annotations

from typing import Annotated

import typer

from controlroom.cli import (
    JsonFlag,
    app,
    emit_json,
    escape,
    out,
    person_workspace,
    report_problems,
    table,
    workspace,
)

registry_app = typer.Typer(no_args_is_help=True, help="Registers in git: lint, next-up, views, ack, records.")
app.add_typer(registry_app, name="registry")


@registry_app.command("lint")
def registry_lint(
    trunk: Annotated[str | None, typer.Option(help="Trunk branch (default: the workspace's, main).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Lint the registers against the ladder and trunk history; exit 1 on any error."""
    from engine.registers import lint
    from engine.state import load

    ws, _ = workspace()
    state = load(ws)
    report_problems(state)
    result = lint(ws, state, trunk)
    if as_json:
        emit_json(result.as_json())
    else:
        for level in ("error", "warning", "notice"):
            for issue in result.of(level):
                out(f"{level}: {issue.code}: {escape(issue.message)}")
        out(
            f"lint: {len(result.errors)} error(s), {len(result.of('warning'))} warning(s), "
            f"{len(result.of('notice'))} notice(s); history "
            + ("checked" if result.history_checked else "NOT checked")
        )
    if result.errors:
        raise typer.Exit(1)


@registry_app.command("next-up")
def registry_next_up(
    explain: Annotated[
        bool, typer.Option("--explain", help="List each excluded unit with its reasons.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """The compiled work queue: todo units, not flagged by a finding, not held. Reads only."""
    from engine.nextup import next_up
    from engine.state import load

    ws, _ = workspace()
    state = load(ws, stores=("signals", "units"))
    queue, excluded = next_up(ws, state, explain=explain)
    if as_json:
        emit_json(queue if not explain else {"nextUp": queue, "excluded": excluded})
        return
    table(["priority", "unit"], [[u["priority"], u["id"]] for u in queue])
    if explain:
        out()
        out("excluded:")
        for u in excluded:
            out(f"  {escape(u['id'])}: {escape('; '.join(u['reasons']))}")


@registry_app.command("views")
def registry_views(
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when a view differs (a hand edit).")] = False,
) -> None:
    """Regenerate FINDINGS.md and INTAKE.md (single writer: trunk's CI); --check elsewhere."""
    from engine.registers import views
    from engine.state import load

    ws, _ = workspace()
    differing = views(ws, load(ws, stores=()), check)
    if check:
        for name in differing:
            out(f"{name} differs from what `regulator registry views` generates (a hand edit?)")
        out("views: " + ("up to date" if not differing else f"{len(differing)} differ"))
        if differing:
            raise typer.Exit(1)
    else:
        out(f"views: wrote {', '.join(differing) or 'nothing (up to date)'}")


@registry_app.command("ack")
def registry_ack(
    finding: Annotated[str, typer.Argument(metavar="F-ID")],
    by: Annotated[str | None, typer.Option()] = None,
    commit: Annotated[
        bool, typer.Option("--commit", help="Commit it with Authorized-by: <you>, SSH-signed with your key.")
    ] = False,
) -> None:
    """Write a dated ack into a finding (commit it with Authorized-by: <you>, or pass --commit)."""
    from engine.registers import ack
    from engine.state import load

    ws = person_workspace(by)
    path = ack(ws, load(ws, stores=()), finding, by, commit)
    if commit:
        out(f"acknowledged {finding} and committed it with Authorized-by: {escape(by)}")
        return
    out(
        f"acknowledged {finding} in {path.relative_to(ws.root)}; commit it with 'Authorized-by: {escape(by)}'"
        " (or use --commit, which signs it)"
    )


@registry_app.command("records")
def registry_records(as_json: JsonFlag = False) -> None:
    """The records of the system's own parts, with statuses and limitations. Reads only."""
    from engine.ladder import registers_of
    from engine.state import load

    ws, _ = workspace()
    state = load(ws, stores=())
    registers = registers_of(ws, state)
    for issue in registers.issues:
        if issue.entry.startswith("records/"):
            import sys

            sys.stderr.write(f"regulator: warning: {escape(issue.message)}\n")
    rows = [
        {
            "id": e.id,
            "kind": e.fields["kind"],
            "label": e.fields["label"],
            "status": e.fields["status"],
            "relates": e.fields.get("relates") or [],
            "limitations": e.fields.get("limitations") or [],
        }
        for e in sorted(registers.records.values(), key=lambda e: e.id)
    ]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        s = r["status"]
        out(
            f"{escape(r['id'])}  [{r['kind']}]  claim {s['claim']} · implementation {s['implementation']}"
            f" · operation {s['operation']}"
        )
        out(f"  {escape(r['label'])}")
        for limitation in r["limitations"]:
            out(f"  - limitation: {escape(limitation)}")
