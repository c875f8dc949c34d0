"""Identity and policy by decision only: propose, accept, reject, verify, show (design §7, §15)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controlroom.cli.common import (
    JsonFlag,
    absent_exit,
    absent_listing,
    emit_json,
    escape,
    global_options,
    out,
    person_workspace,
    table,
    workspace,
)
from engine.base.errors import BadInput
from engine.base.text import shown_line

if TYPE_CHECKING:
    from engine.checkout.workspace import Workspace

identity_app = typer.Typer(
    no_args_is_help=True, help="Identity and policy: propose, accept, reject, verify, show."
)
app = typer.Typer()
app.add_typer(identity_app, name="identity")


@identity_app.command("propose")
@global_options
def identity_propose(
    file: Annotated[
        str, typer.Option("--file", help="The governed file, e.g. regulator/identity/invariants.md")
    ],
    content_from: Annotated[Path, typer.Option("--content-from", help="The whole proposed content.")],
    rationale: Annotated[
        str, typer.Option(metavar="TEXT", help="Why the change (required; a person reads it to decide).")
    ] = "",
    by: Annotated[str | None, typer.Option()] = None,
    as_json: JsonFlag = False,
) -> None:
    """Propose a change to an identity or policy file (from a lease, or --by a person)."""
    from engine.commands.actors import unit_or_person
    from engine.commands.proposals import propose

    try:
        content = content_from.read_bytes()
    except OSError as exc:
        raise BadInput(f"--content-from {content_from}: cannot read ({exc.strerror})") from None
    ws, lease = workspace()
    actor = unit_or_person(lease, by, "propose_identity_change")
    event = propose(ws, file, content, rationale, actor)
    if as_json:
        emit_json({"id": event["id"]})
    else:
        out(f"proposed {event['id']} for {event['file']}; a person with the accept grant decides")


def _decide(proposal_id: str, by: str | None, rationale: str, verdict: str) -> None:
    from engine.commands.proposals import decide

    ws = person_workspace(by)
    event = decide(ws, proposal_id, by, rationale, verdict)
    out(f"proposal {event['proposal']} {verdict} by {escape(event['by'])} ({event['file']})")


@identity_app.command("accept")
@global_options
def identity_accept(
    proposal_id: Annotated[str, typer.Argument(metavar="ID")],
    by: Annotated[str | None, typer.Option()] = None,
    rationale: Annotated[
        str, typer.Option(metavar="TEXT", help="Why you accept it (required: the record says it).")
    ] = "",
) -> None:
    """Accept a proposal: write the file, record the decision, commit it."""
    _decide(proposal_id, by, rationale, "accepted")


@identity_app.command("reject")
@global_options
def identity_reject(
    proposal_id: Annotated[str, typer.Argument(metavar="ID")],
    by: Annotated[str | None, typer.Option()] = None,
    rationale: Annotated[
        str, typer.Option(metavar="TEXT", help="Why you reject it (required: the record says it).")
    ] = "",
) -> None:
    """Reject a proposal: the decision is recorded; the file is unchanged."""
    _decide(proposal_id, by, rationale, "rejected")


@identity_app.command("verify")
@global_options
def identity_verify(
    require_history: Annotated[
        bool,
        typer.Option(
            "--require-history",
            help="Without the stores: exit 1 when git history is unavailable (a shallow clone, no trunk).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Exit 1 naming each governed file whose content differs from its last decided hash (without
    the stores, a clone: from the decision commits in git history)."""
    from engine.commands.proposals import verify_identity
    from engine.read.load import load

    ws, _ = workspace()
    if not ws.has_stores:
        _identity_from_history(ws, require_history, as_json)
        return
    checks = verify_identity(ws, load(ws, stores=("identity",)))
    bad = [c for c in checks if not c.ok]
    if as_json:
        emit_json(
            {
                "ok": not bad,
                "files": [
                    {"file": c.file, "ok": c.ok, "decided": c.decided, "actual": c.actual} for c in checks
                ],
            }
        )
    else:
        for c in bad:
            out(escape(c.problem()))
        out("identity verify: " + ("ok" if not bad else f"{len(bad)} file(s) differ from their decision"))
    if bad:
        raise typer.Exit(1)


def _identity_from_history(ws: Workspace, require_history: bool, as_json: bool) -> None:
    """identity verify in a clone (design §16.2): each governed file against git history."""
    from engine.trust.idhistory import verify_history
    from registry.history import how_to_read

    verdict = verify_history(ws)
    head = "stores: absent — identity checked against git history"
    failed = verdict.ok is False or (verdict.ok is None and require_history)
    if as_json:
        emit_json({"stores": "absent"} | verdict.as_json())
    elif not verdict.available:
        out(head)
        tail = "exit 1 under --require-history" if require_history else "--require-history fails here"
        out(
            f"identity verify: history unavailable ({escape(verdict.why)}): not checked; "
            f"{how_to_read(verdict.why)} ({tail})"
        )
    else:
        out(head)
        for c in verdict.files:
            out(escape(c.describe() if c.ok else c.problem()))
        bad = [c for c in verdict.files if not c.ok]
        out(
            "identity verify (git history): "
            + ("ok" if not bad else f"{len(bad)} file(s) match no decision that counts")
        )
    if failed:
        raise typer.Exit(1)


@identity_app.command("show")
@global_options
def identity_show(
    proposal_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="One proposal, with its diff.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """The governed files with their decision state, and the proposals; with an ID, what accepting
    that proposal would change (who gains a key or a grant, and the diff)."""
    from engine.base.lookup import by_prefix
    from engine.commands.proposals import marks, pending, proposal_json, review, verify_identity
    from engine.read.load import load
    from engine.read.rules import decision_of

    ws, _ = workspace()
    state = load(ws, stores=("identity",))
    if proposal_id is not None:
        p = by_prefix(state.proposals, proposal_id, "proposal")
        d = decision_of(state, p["id"])
        lines = review(ws, p)
        if as_json:
            emit_json(
                proposal_json(p, d, None if d else marks(ws, p)) | {"content": p["content"], "review": lines}
            )
            return
        out(
            f"proposal {p['id']} for {p['file']} by {escape(p.get('unit') or p.get('by'))}: {escape(p.get('rationale'))}"
        )
        out(f"status: {d['decision'] + ' by ' + escape(d['by']) if d else pending(marks(ws, p))}")
        for line in lines:
            out(shown_line(line))
        return
    if not ws.has_stores:  # a clone: no decisions here to judge the files by, and no proposals
        if as_json:
            emit_json({"files": [], "proposals": []})
            absent_exit(ws)
        absent_listing(
            ws, "decisions and proposals (`regulator identity verify` judges the files by git history)"
        )
    checks = verify_identity(ws, state)
    proposals = []
    for p in state.proposals.values():
        d = decision_of(state, p["id"])
        proposals.append(proposal_json(p, d, None if d else marks(ws, p)))
    if as_json:
        emit_json({"files": [{"file": c.file, "ok": c.ok} for c in checks], "proposals": proposals})
        return
    table(["file", "state"], [[c.file, "as decided" if c.ok else "DIFFERS"] for c in checks])
    out()

    def status(row: dict) -> str:
        """A pending proposal with its marks counted (a key, a grant, a command, the stores moved)."""
        if row["status"] != "pending":
            return str(row["status"])
        return pending(row["marks"])

    rows = [[p["id"], p["file"], p["unit"] or p["by"], status(p), p["rationale"] or ""] for p in proposals]
    table(["proposal", "file", "from", "status", "rationale"], rows)
    if any(row[3].startswith("pending, ") for row in rows):
        out(
            "! what accepting it would grant, run, move, loosen or hasten: `regulator identity show ID` lists each"
        )
