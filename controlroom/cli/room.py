"""`regulator controlroom` and `regulator demo` (design §10, §14). Textual is imported only here,
and only when the application itself runs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controlroom import printing
from controlroom.cli.common import (
    OPTIONS,
    JsonFlag,
    emit_json,
    escape,
    global_options,
    out,
    report_contracts,
    workspace,
)
from engine.base.errors import BadInput

if TYPE_CHECKING:
    from engine.checkout.workspace import Workspace

app = typer.Typer()


def _views() -> tuple[str, ...]:
    from controlroom.views import VIEWS

    return VIEWS


def _signer_ready(ws: Workspace, person: str) -> None:
    """The room signs its operator's actions (design §15.1); it never prompts while it owns the
    terminal, so a key it cannot use is exit 2 at start, with one line."""
    from engine.base.errors import Refused
    from engine.trust.signing import _explicit, signer_for, use_key

    use_key(_explicit, prompt=False)
    try:
        signer_for(ws, person)
    except Refused as exc:
        raise BadInput(f"--as {person}: {exc} (or open it --read-only)") from None


def _person(ws: Workspace, person: str | None) -> str | None:
    if person is None:
        return None
    from engine.base.limits import check_text

    check_text("--as", person, kind="name")
    if person not in ws.interaction().people:
        raise BadInput(f"--as {person!r} is not a person in regulator/policy/interaction.yaml")
    return person


@app.command()
@global_options
def controlroom(
    as_: Annotated[
        str | None, typer.Option("--as", help="The operator: a person in interaction.yaml.")
    ] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="Hide every write; do not route.")] = False,
    once: Annotated[
        bool, typer.Option("--once", help="Route, lint, print the state and exit (for CI).")
    ] = False,
    as_json: JsonFlag = False,
    screenshot: Annotated[Path | None, typer.Option(help="Render to an SVG file and exit.")] = None,
    view: Annotated[
        str, typer.Option(help="The view to open (obligations, units, memory, ...).")
    ] = "obligations",
    registers_only: Annotated[
        bool,
        typer.Option(
            "--registers-only",
            help="With --once: check only what git holds (lint, views, identity by git history).",
        ),
    ] = False,
    require_history: Annotated[
        bool,
        typer.Option(
            "--require-history",
            help="With --once: exit 1 when trunk history is unavailable (lint unchecked). "
            "--registers-only always requires it.",
        ),
    ] = False,
    trunk: Annotated[
        str | None,
        typer.Option(
            help="With --registers-only: trunk's branch name, e.g. main, as `registry lint --trunk` "
            "takes it (origin/main is read where there is no local main). A CI job names trunk itself; "
            "default: the workspace's."
        ),
    ] = None,
) -> None:
    """Open the control room; --once prints the state for CI (exit 1 when a blocking obligation holds
    an in-progress unit, lint has an error, identity or verify fails, or the stores are absent)."""
    from engine.commands.actors import no_person_under_lease

    if registers_only and not (once or as_json):
        raise BadInput("--registers-only goes with --once (a check for CI)")
    if require_history and not (once or as_json):
        raise BadInput("--require-history goes with --once (a check for CI)")
    if trunk is not None and not registers_only:
        raise BadInput("--trunk goes with --once --registers-only (the trunk its lint follows, for CI)")
    interactive = not (once or as_json or screenshot is not None)
    if screenshot is not None and not (once or as_json):
        writable_svg(screenshot)
    ws, lease = workspace(git_only=registers_only)  # what git holds: no store is reached (D-87)
    no_person_under_lease(lease, as_)
    person = _person(ws, as_)
    if person is not None and not read_only and interactive:
        _signer_ready(ws, person)
    if view not in _views():
        raise BadInput(f"--view {view!r} is not one of {', '.join(_views())}")
    if interactive and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BadInput(
            "the control room needs a terminal (stdin and stdout); without one use "
            "`regulator controlroom --once [--json]` (or --screenshot F.svg)"
        )
    if registers_only:
        raise typer.Exit(run_registers_only(ws, as_json, trunk))
    if once or as_json:
        code = run_once(ws, person, read_only, as_json, require_history)
        raise typer.Exit(code)
    if screenshot is not None:
        from controlroom.shots import screenshot as shoot

        shoot(ws, screenshot, view, person, read_only=read_only)
        out(f"wrote {escape(screenshot)}")
        return
    from controlroom.app import ControlRoom

    ControlRoom(ws, person, read_only=read_only, view=view).run()


def writable_svg(path: Path) -> None:
    """--screenshot names a .svg file that can be written, checked before anything is rendered
    (design §16.4: exit 2, one line, nothing written)."""
    import os

    if path.suffix != ".svg":
        raise BadInput(f"--screenshot {path}: give a .svg file name")
    folder = path.parent
    if not folder.is_dir():
        raise BadInput(f"--screenshot {path}: the folder {folder} does not exist; create it first")
    if path.is_dir() or (path.exists() and not path.is_file()):
        raise BadInput(f"--screenshot {path}: not a regular file; name a new or existing .svg file")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise BadInput(f"--screenshot {path}: cannot write there (permission denied)")


def run_registers_only(ws: Workspace, as_json: bool, trunk: str | None = None) -> int:
    from controlroom.once import registers_only, registers_only_text

    found = registers_only(ws, trunk)
    if as_json:
        emit_json(found.as_json())
    else:
        printing.write(registers_only_text(found))
    return found.exit_code


def run_once(
    ws: Workspace, person: str | None, read_only: bool, as_json: bool, require_history: bool = False
) -> int:
    from controlroom.once import as_json_text, as_text, exit_reasons, once
    from controlroom.printing import emit_json_text
    from engine.base.gcpause import gc_paused
    from engine.base.leaving import keep, keep_heap

    keep_heap()  # its large blocks from a heap that keeps them (D-260)
    # one pass that builds rows, reports and their JSON, every one alive until printed: the cyclic
    # collector would walk the 100,000 obligations' objects again and again and free nothing
    with gc_paused():
        snap = once(ws, person, read_only)
        keep(snap)  # left to the process's end (D-260)
        report_contracts(snap.state)
        if as_json:
            text, code = as_json_text(snap, require_history)
            emit_json_text(text)
            return code
        snap.settle()
        reasons = exit_reasons(snap, require_history)
        printing.write(as_text(snap, reasons))
    return 1 if reasons else 0


@app.command()
def demo(
    dir_: Annotated[
        Path | None, typer.Option("--dir", help="A new or empty folder (default: a temp folder).")
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Print the --once state instead of opening the app.")
    ] = False,
    clock_mode: Annotated[
        str, typer.Option("--clock", help="system (default), or pinned: keep REGULATOR_NOW (tests).")
    ] = "system",
    store: Annotated[
        str | None,
        typer.Option("--store", help="postgresql://HOST/DB (an empty database): the stores on PostgreSQL."),
    ] = None,
) -> None:
    """Build the seeds' worked examples in a fresh workspace, then open the control room."""
    from controlroom.demo import KEY_DIR, OWNER, build
    from engine.trust.signing import use_key

    if clock_mode not in ("system", "pinned"):
        raise BadInput(f"--clock {clock_mode!r} is not one of system, pinned")
    for name, given in (("--root", OPTIONS.root), ("--lease", OPTIONS.lease), ("--key", OPTIONS.key)):
        if given is not None:  # an operator's review: `demo --root D` built in a temp folder, silently
            raise BadInput(
                f"{name}: the demo builds a workspace of its own and signs with its own key; give a new or empty folder with --dir"
            )
    root = dir_ or Path(tempfile.mkdtemp(prefix="regulator-demo-"))
    ws = build(root, clock_mode, store)
    key = ws.root / KEY_DIR / OWNER
    use_key(key, prompt=False)
    out(f"demo workspace: {escape(ws.root)}")
    out(f"{OWNER}'s signing key (made for the demo, mode 0600): {escape(key)}")
    from controlroom.mcp_config import demo_config_line

    out(demo_config_line(ws.root, "r1"))
    if once or not (sys.stdin.isatty() and sys.stdout.isatty()):
        run_once(ws, OWNER, False, False)
        out(
            f"(the demo exits 0; run `regulator controlroom --root {escape(ws.root)} --as {OWNER} "
            f"--key {escape(key)}` to look around)"
        )
        return
    from controlroom.app import ControlRoom

    ControlRoom(ws, OWNER, welcome=demo_welcome(ws.root, key, temporary=dir_ is None)).run()


def demo_welcome(root: Path, key: Path, temporary: bool) -> str:
    """What the room says as the demo opens it: where the workspace lives and how to come back."""
    from controlroom.demo import OWNER

    where = "a temporary folder: it stays until you delete it" if temporary else "the folder you gave"
    return (
        f"The demo workspace is {root} ({where}). Reopen it with: regulator controlroom --root {root} "
        f"--as {OWNER} --key {key}. `?` shows this path again."
    )
