"""Register commands (design §8, §9): lint, next-up, views, ack, resolve, records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from controlroom import printing
from controlroom.cli.common import (
    JsonFlag,
    absent_exit,
    emit_json,
    escape,
    global_options,
    out,
    person_workspace,
    report_contracts,
    report_problems,
    table,
    workspace,
)
from controlroom.cli.retro import registry_retro

if TYPE_CHECKING:
    from engine.checkout.workspace import Workspace
    from registry.entries import Invalid

registry_app = typer.Typer(
    no_args_is_help=True, help="Registers in git: lint, next-up, views, ack, resolve, records, retro."
)
app = typer.Typer()
app.add_typer(registry_app, name="registry")


@registry_app.command("lint")
@global_options
def registry_lint(
    trunk: Annotated[
        str | None,
        typer.Option(
            help="Trunk's branch name, e.g. main (origin/main is read where there is no local main; never "
            "origin/main nor a revision). A CI job names it; config.yaml's trunk: differing from that "
            "branch's is trunk-moved. Default: the workspace's."
        ),
    ] = None,
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
    from engine.commands.registers import lint
    from engine.read.load import load

    ws, _ = workspace(git_only=True)
    state = load(ws)
    report_problems(state)
    result = lint(ws, state, trunk, range_spec=range_spec, require_history=require_history)
    from engine.read.storeless import ABSENT, stores

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


def warn_invalid_one(invalid: Invalid, consequence: str) -> None:
    """One stderr line for an invalid entry: a reader is never shown less than there is as fine."""
    printing.say(
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
    from engine.read.ladder import registers_of
    from engine.read.load import load
    from engine.read.nextup import next_up

    ws, _ = workspace()
    state = load(ws, stores=("signals", "units"))
    report_contracts(state)
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
    from engine.read.storeless import ABSENT, stores

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
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Exit 1 when a view differs (an entry committed without its views, or a hand edit).",
        ),
    ] = False,
) -> None:
    """Regenerate FINDINGS.md and INTAKE.md; --check in CI. A branch commits its views with the entries
    it changes; trunk's CI regenerates them after a direct push."""
    from engine.commands.registers import stale_view, views
    from engine.read.load import load

    ws, _ = workspace(git_only=True)
    differing = views(ws, load(ws, stores=()), check)
    if check:
        for name in differing:
            out(stale_view(name))
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
        bool,
        typer.Option(
            "--commit",
            help="Commit it and the views it changes, with Authorized-by: <you>, SSH-signed with your key.",
        ),
    ] = False,
) -> None:
    """Write a dated ack into a finding (pass --commit: it commits the entry and its views, SSH-signed,
    with Authorized-by: <you>)."""
    from engine.commands.registers import ack
    from engine.read.load import load

    ws = person_workspace(by)
    path = ack(ws, load(ws, stores=()), finding, by, commit)
    if commit:
        out(f"acknowledged {finding} and committed it with Authorized-by: {escape(by)}")
        return
    out(f"acknowledged {finding} in {path.relative_to(ws.tree)}; {_how_to_commit(ws, by)}")


@registry_app.command("resolve")
@global_options
def registry_resolve(
    finding: Annotated[str, typer.Argument(metavar="F-ID")],
    by: Annotated[str | None, typer.Option(help="The person resolving (needs the ack grant).")] = None,
    rationale: Annotated[str, typer.Option(help="Why it is resolved: what fixed it.")] = "",
    commit: Annotated[
        bool,
        typer.Option(
            "--commit",
            help="Commit it and the views it changes, with Authorized-by: <you>, SSH-signed with your key.",
        ),
    ] = False,
) -> None:
    """Resolve a finding: resolved: true and the rationale in the entry (pass --commit: it commits the
    entry and its views, SSH-signed, with Authorized-by: <you>). The units it affects are no longer
    held by it once that commit is on trunk."""
    from engine.commands.registers import resolve_finding
    from engine.read.load import load

    ws = person_workspace(by)
    path = resolve_finding(ws, load(ws, stores=()), finding, by, rationale, commit)
    if commit:
        out(f"resolved {finding} and committed it with Authorized-by: {escape(by)}")
        return
    out(f"resolved {finding} in {path.relative_to(ws.tree)}; {_how_to_commit(ws, by)}")


def _how_to_commit(ws: Workspace, by: str | None) -> str:
    """What makes the edit count on trunk: where the policy requires signatures, only a commit
    SSH-signed with the person's key (an unsigned trailer counts for nothing there)."""
    if ws.people().require_signatures:
        return (
            f"run `regulator registry views`, then commit the entry and FINDINGS.md SSH-signed with "
            f"{escape(by)}'s key and 'Authorized-by: {escape(by)}' (--commit does all of it; an unsigned "
            "commit counts for nothing here)"
        )
    return (
        f"run `regulator registry views`, then commit the entry and FINDINGS.md with 'Authorized-by: "
        f"{escape(by)}' (or use --commit, which does both and signs it)"
    )


@registry_app.command("records")
@global_options
def registry_records(as_json: JsonFlag = False) -> None:
    """The records of the system's own parts: status axes, limitations, evidence, absences, and the
    open findings that affect each. Reads only; exit 1 when a record is invalid (listed as such)."""
    from engine.read.ladder import registers_of
    from engine.read.load import load
    from registry.lint import record_findings

    ws, _ = workspace(git_only=True)
    state = load(ws, stores=())
    registers = registers_of(ws, state)
    affecting = record_findings(registers)
    rows = [
        {
            "id": e.id,
            "path": e.path,
            "kind": e.fields["kind"],
            "label": e.fields["label"],
            "status": e.fields.get("status") or {},
            "relates": e.fields.get("relates") or [],
            "external": e.fields.get("external") or [],
            "sources": e.fields.get("sources") or [],
            "limitations": e.fields.get("limitations") or [],
            "evidence": e.fields.get("evidence") or [],
            "absences": e.fields.get("absences") or [],
            "openFindings": [
                {
                    "id": f.id,
                    "title": f.fields.get("title"),
                    "acknowledged": bool((f.fields.get("ack") or "").strip()),
                }
                for f in affecting.get(e.id, [])
            ],
            "invalid": None,
        }
        for e in registers.records.values()
    ]
    invalid = registers.invalid_of("record")
    empty: dict = {"status": None, "kind": None, "label": None}
    rows += [
        {
            "id": i.id,
            "path": i.path,
            **empty,
            **{k: [] for k in ("relates", "external", "sources", "limitations", "evidence", "absences")},
            "openFindings": [],
            "invalid": f"{i.code}: {i.problem}",
        }
        for i in invalid
    ]
    rows.sort(key=lambda r: (r["id"], r["path"]))
    if as_json:
        emit_json(rows)
    else:
        from registry.entries import evidence_text, limitation_text

        for r in rows:
            if r["invalid"] is not None:
                out(f"{escape(r['id'])}  INVALID  {escape(r['path'])}: {escape(r['invalid'])}")
                continue
            axes = " · ".join(f"{escape(k)} {escape(v)}" for k, v in r["status"].items()) or "no status axes"
            out(f"{escape(r['id'])}  [{escape(r['kind'])}]  {axes}")
            out(f"  {escape(r['label'])}")
            for f in r["openFindings"]:
                state_text = "acknowledged" if f["acknowledged"] else "awaits ack"
                out(f"  ! open finding {escape(f['id'])} ({state_text}): {escape(f['title'])}")
            for limitation in r["limitations"]:
                out(f"  - limitation: {escape(limitation_text(limitation))}")
            for item in r["evidence"]:
                out(f"  - evidence: {escape(evidence_text(item))}")
            for absence in r["absences"]:
                out(f"  - absence: {escape(absence)}")
            if r["external"]:
                out(f"  - external: {escape(', '.join(r['external']))}")
    if invalid:
        printing.say(f"regulator: {len(invalid)} record(s) invalid: fix them (registry lint names why)\n")
        raise typer.Exit(1)


registry_app.command("retro")(global_options(registry_retro))  # design §19, in its own module
