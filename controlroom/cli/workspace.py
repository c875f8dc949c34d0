"""The workspace's own commands: init, status, verify (design §3, §11, §15)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controlroom import printing
from controlroom.cli.common import (
    OPTIONS,
    JsonFlag,
    emit_json,
    escape,
    global_options,
    out,
    person_workspace,
    report_problems,
    table,
    use_given_key,
    workspace,
)

app = typer.Typer()


@app.command()
@global_options
def init(
    owner: Annotated[str | None, typer.Option(help="The one person of the shipped policy.")] = None,
    owner_key: Annotated[
        Path | None,
        typer.Option("--owner-key", help="The owner's OpenSSH public key (default: git's ssh signing key)."),
    ] = None,
    trunk: Annotated[
        str | None,
        typer.Option(
            help="The trunk branch (default: main, or the branch the repository is on if it has no main)."
        ),
    ] = None,
    clock_mode: Annotated[
        str, typer.Option("--clock", help="system, or pinned (REGULATOR_NOW honoured: tests, demos).")
    ] = "system",
    store: Annotated[
        str | None,
        typer.Option("--store", help="postgresql://HOST/DB: keep the stores on PostgreSQL (design §18)."),
    ] = None,
) -> None:
    """Create the workspace here (or at --root): policy, identity, records, views, stores; in git,
    commit it (the baseline as the owner's decision, then the rest)."""
    from engine.checkout.workspace import acting_lease
    from engine.commands.actors import host_only
    from engine.commands.init import default_trunk, setup, summary

    # a unit does not make workspaces: under a lease file, or started by `unit run` (D-218)
    host_only(acting_lease(Path(OPTIONS.lease) if OPTIONS.lease else None, Path.cwd()))

    use_given_key()  # the key to sign the baseline commit with (the owner's private half)
    root = Path(OPTIONS.root or ".")
    chosen = None
    if trunk is None:
        trunk, chosen = default_trunk(root) if root.is_dir() else ("main", None)
    made = setup(root, owner, trunk, owner_key, clock_mode, store)
    ws = made.ws
    from engine.base import sshsig

    people = ws.authority().people
    ((name, keys),) = people.keys.items()
    out(f"initialized regulator workspace at {escape(ws.root)}")
    out(
        f"owner: {escape(name)} (act with --by {escape(name)}; key {sshsig.fingerprint(keys[0])}); "
        f"requireSignatures: true; clock: {clock_mode}"
    )
    if chosen is not None:
        out(escape(chosen))
    from registry.gitcall import git_text

    on = git_text(ws.root, "symbolic-ref", "--short", "-q", "HEAD", timeout=10, filters=False).stdout.strip()
    if on and on != trunk:  # a re-check: the decisions went onto a feature branch, trunk had none
        printing.say(
            f"regulator: warning: this repository is on {escape(on)}, not trunk {escape(trunk)}: what init "
            f"commits is on {escape(on)} until it is merged into {escape(trunk)}\n"
        )
    if made.baseline == "signed":
        out(f"baseline committed as {escape(name)}'s decision, signed (identity verify reads it in a clone)")
    elif made.baseline == "claimed":
        out(
            f"baseline committed as {escape(name)}'s decision, unsigned ('claimed': no private key for the "
            "owner's key was at hand; pass --key FILE to sign it)"
        )
    if made.committed_rest:
        out(f"workspace committed: {', '.join(summary(made.rest))} (the views generated; a second commit)")
    elif made.baseline is None and made.committed_rest is None:
        out(
            f"not a git repository ({escape(ws.root)} has no .git): nothing committed. To commit it, "
            f"`git init -b {escape(trunk)}` there, then (-S on the first signs it with the owner's key, "
            "where git signs with SSH: `git config gpg.format ssh` and `git config user.signingKey "
            "OWNER_KEY.pub` first):"
        )
        for line in made.commands():
            out(f"  {escape(line)}")
    else:
        what = "the baseline" if made.baseline is None else "the rest of the workspace"
        printing.say(
            f"regulator: warning: git did not commit {what}; commit {', '.join(summary(made.rest))}"
            + (
                " and the governed files as the owner's decision (`identity verify` in a clone finds none)"
                if made.baseline is None
                else ""
            )
            + "\n"
        )


@app.command()
@global_options
def status(as_json: JsonFlag = False) -> None:
    """Units, what holds them, and signals not yet routed. Reads only; never routes."""
    from engine.base.leaving import keep
    from engine.read.load import load
    from engine.read.status import status as derive

    ws, _ = workspace()
    state = load(ws)
    report_problems(state)
    data = derive(ws, state)
    keep(state, data)  # left to the process's end, not freed object by object (D-330)
    if as_json:
        emit_json(data)
        return
    rows = [
        [
            u["id"],
            u["type"] or "?",
            u["waitsFor"] or u["status"],
            "?" if u["held"] is None else "held" if u["held"] else "",
            ", ".join(u["blockedBy"] + u["staleKnowledge"]),
            _run_text(u),
        ]
        for u in data["units"]
    ]
    from engine.read.storeless import ABSENT, authentication_line

    if data["stores"] == "absent":
        out(ABSENT)
    warning = authentication_line(data["authentication"])
    if warning:
        out(warning)
    if data["clock"] == "pinned":
        out("clock pinned: REGULATOR_NOW is honoured here (tests and demos only)")
    table(["unit", "type", "status", "held", "by", "run"], rows, whole=(0, 4))  # ids to copy, whole
    if data["unrouted"] is None:
        out("unrouted signals: unknown (no stores here)")
        return
    out(f"{data['unrouted']} unrouted signal(s)")
    for s in data["unroutedSignals"]:
        out(f"  {s['id']}  {escape(s['subject'])}")


def _run_text(unit: dict) -> str:
    """How a started unit runs (design §23) and the result its lease recorded, in words."""
    parts = []
    if unit["confined"] is not None:
        parts.append("confined" if unit["confined"] else "unconfined")
    if unit["result"]:
        parts.append(f"result {unit['result']['outcome']}: {unit['result']['summary']}")
    return "; ".join(parts)


@app.command()
@global_options
def verify(
    as_json: JsonFlag = False,
    dismiss: Annotated[
        str | None, typer.Option("--dismiss", metavar="STORE:LINE", help="Dismiss a named bad line (signed).")
    ] = None,
    by: Annotated[str | None, typer.Option(help="The person dismissing (needs the accept grant).")] = None,
    rationale: Annotated[str, typer.Option(help="Why the line is dismissed.")] = "",
) -> None:
    """Check every store's hash chain, every person event's signature and any checkpoint (exit 1)."""
    from engine.commands import verification

    if dismiss is not None:
        ws = person_workspace(by)
        event, leaves = verification.dismiss(ws, dismiss, by, rationale)
        out(f"dismissed {event['store']}:{event['line']} by {escape(event['by'])}; {leaves}")
        return
    ws, _ = workspace()
    if not ws.has_stores:  # nothing verified is not "ok" (design §16.2)
        from engine.read.storeless import ABSENT

        if as_json:
            emit_json({"ok": False, "stores": "absent", "findings": [], "limit": "no stores here"})
        else:
            out(ABSENT)
            out("verify: nothing to verify here: the stores live on the host (run it there)")
        raise typer.Exit(1)
    findings = verification.findings(ws, kept=True)  # this process ends with the answer (D-330)
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
            done = (
                f"ok: nothing undismissed; {len(findings)} bad line(s) dismissed (a dismissal changes no "
                "reader: each is listed above with what readers make of it)"
            )
        out("verify: " + done)
        out(f"note: {limit}")
    if failing:
        raise typer.Exit(1)
