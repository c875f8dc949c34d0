"""Register commands (SPEC §8, §9): lint, next-up, views, ack, records."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from controlroom.cli_common import (
    JsonFlag,
    absent_exit,
    emit_json,
    escape,
    global_options,
    out,
    person_workspace,
    report_problems,
    table,
    workspace,
)

registry_app = typer.Typer(no_args_is_help=True, help="Registers in git: lint, next-up, views, ack, records.")
app = typer.Typer()
app.add_typer(registry_app, name="registry")


@registry_app.command("lint")
@global_options
def registry_lint(
    trunk: Annotated[str | None, typer.Option(help="Trunk branch (default: the workspace's, main).")] = None,
    require_history: Annotated[
        bool,
        typer.Option(
            "--require-history", help="Exit 1 when trunk history is unavailable (no trunk, a shallow clone)."
        ),
    ] = False,
    range_spec: Annotated[
        str | None,
        typer.Option(
            "--range",
            metavar="A..B",
            help="Check every commit of A..B (a push to trunk) instead of the branch; grants as at A.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Lint the registers against the ladder and trunk history; exit 1 on any error."""
    from engine.registers import lint
    from engine.state import load

    ws, _ = workspace()
    state = load(ws)
    report_problems(state)
    result = lint(ws, state, trunk, range_spec=range_spec, require_history=require_history)
    from engine.storeless import ABSENT, stores

    if as_json:
        emit_json({"stores": stores(ws)} | result.as_json())
    else:
        if not ws.has_stores:
            out(ABSENT)
        for level in ("error", "warning", "notice"):
            for issue in result.of(level):
                out(f"{level}: {issue.code}: {escape(issue.message)}")
        checked = "checked" if result.history_checked else "NOT checked"
        if range_spec is not None:
            checked += f" (every commit of {escape(range_spec)})"
        out(
            f"lint: {len(result.errors)} error(s), {len(result.of('warning'))} warning(s), "
            f"{len(result.of('notice'))} notice(s); history {checked}"
        )
    if result.errors:
        raise typer.Exit(1)


def warn_invalid_one(invalid, consequence: str) -> None:
    """One stderr line for an invalid entry: a reader is never shown less than there is as fine."""
    sys.stderr.write(
        f"regulator: warning: {escape(invalid.path)} is invalid ({invalid.code}: "
        f"{escape(invalid.problem)}); {consequence}\n"
    )


@registry_app.command("next-up")
@global_options
def registry_next_up(
    explain: Annotated[
        bool, typer.Option("--explain", help="List each excluded unit with its reasons.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """The compiled work queue: todo units, not flagged by a finding, not held. Reads only."""
    from engine.ladder import registers_of
    from engine.nextup import next_up
    from engine.state import load

    ws, _ = workspace()
    state = load(ws, stores=("signals", "units"))
    queue, excluded = next_up(ws, state, explain=explain)
    registers = registers_of(ws, state)
    for invalid in registers.invalid_of("finding"):
        held = registers.held.get(invalid.path)
        warn_invalid_one(
            invalid,
            f"it holds as on trunk at {held.commit[:12]}"
            if held is not None
            else "no parseable version on trunk: it holds nothing",
        )
    from engine.storeless import ABSENT, stores

    if as_json:  # §13: the list; with --explain an object (which also carries "stores")
        emit_json({"stores": stores(ws), "nextUp": queue, "excluded": excluded} if explain else queue)
        absent_exit(ws)
        return
    if ws.has_stores:
        table(["priority", "unit"], [[u["priority"], u["id"]] for u in queue])
    else:
        out(ABSENT)
        out("next-up: empty here: no unit's state is known without the stores (run it on the host)")
    if explain:
        out()
        out("excluded:")
        for u in excluded:
            out(f"  {escape(u['id'])}: {escape('; '.join(u['reasons']))}")
    absent_exit(ws)


@registry_app.command("views")
@global_options
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
@global_options
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
        f"acknowledged {finding} in {path.relative_to(ws.tree)}; commit it with 'Authorized-by: {escape(by)}'"
        " (or use --commit, which signs it)"
    )


@registry_app.command("records")
@global_options
def registry_records(as_json: JsonFlag = False) -> None:
    """The records of the system's own parts, with statuses and limitations. Reads only."""
    from engine.ladder import registers_of
    from engine.state import load

    ws, _ = workspace()
    state = load(ws, stores=())
    registers = registers_of(ws, state)
    rows = [
        {
            "id": e.id,
            "path": e.path,
            "kind": e.fields["kind"],
            "label": e.fields["label"],
            "status": e.fields["status"],
            "relates": e.fields.get("relates") or [],
            "limitations": e.fields.get("limitations") or [],
            "invalid": None,
        }
        for e in registers.records.values()
    ]
    invalid = registers.invalid_of("record")
    rows += [
        {
            "id": i.id,
            "path": i.path,
            "kind": None,
            "label": None,
            "status": None,
            "relates": [],
            "limitations": [],
            "invalid": f"{i.code}: {i.problem}",
        }
        for i in invalid
    ]
    rows.sort(key=lambda r: (r["id"], r["path"]))
    if as_json:
        emit_json(rows)
    else:
        for r in rows:
            if r["invalid"] is not None:
                out(f"{escape(r['id'])}  INVALID  {escape(r['path'])}: {escape(r['invalid'])}")
                continue
            s = r["status"]
            out(
                f"{escape(r['id'])}  [{escape(r['kind'])}]  claim {escape(s['claim'])} · implementation "
                f"{escape(s['implementation'])} · operation {escape(s['operation'])}"
            )
            out(f"  {escape(r['label'])}")
            for limitation in r["limitations"]:
                out(f"  - limitation: {escape(limitation)}")
    if invalid:
        sys.stderr.write(f"regulator: {len(invalid)} record(s) invalid: fix them (registry lint names why)\n")
        raise typer.Exit(1)
