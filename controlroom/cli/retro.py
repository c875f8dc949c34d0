"""`regulator registry retro` (design §19): write a RETRO entry whose numbers are generated only.

A plain function with the Typer signature; controlroom/cli/registry.py registers it on its group."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from controlroom.cli.common import JsonFlag, emit_json, escape, out, workspace


def registry_retro(
    since: Annotated[
        str, typer.Option("--since", metavar="DATE", help="First day of the period (YYYY-MM-DD).")
    ],
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="DATE|TIME",
            help="End of the period, excluded (default: now); never in the future.",
        ),
    ] = None,
    title: Annotated[str | None, typer.Option("--title", help="Heading; its slug names the file.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write retro/R-<date>-<slug>.md: numbers from the stores and trunk history, each with its query."""
    from engine.commands.registers import policy_at
    from engine.commands.retro import write
    from engine.read.load import load

    ws, _ = workspace()
    path, front = write(ws, load(ws), policy_at, since, until, title)
    relative = path.relative_to(ws.tree).as_posix()
    if as_json:
        emit_json({"id": front["id"], "path": relative} | front)
        return
    out(f"wrote {relative} for [{front['since']}, {front['until']}): edit its prose, never its numbers")
    for name, number in front["numbers"].items():
        out(f"  {name}: {escape(json.dumps(number['value'], sort_keys=True, ensure_ascii=False))}")
