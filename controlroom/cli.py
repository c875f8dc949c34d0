"""The `regulator` command line: the root app, which joins one sub-app per command group
(`add_typer`) and runs it. Group modules never import this one; it imports no Textual, so every
command but the control room starts fast."""

from __future__ import annotations

import inspect
import sys
from typing import Annotated

import typer

from controlroom import (
    cli_identity,
    cli_mcp,
    cli_memory,
    cli_obligations,
    cli_registry,
    cli_room,
    cli_signals,
    cli_store,
    cli_units,
    cli_workspace,
)
from controlroom.cli_common import (
    OPTIONS,
    KeyOption,
    LeaseOption,
    RootOption,
    declare_globals,
    lean_enough,
    remember_globals,
    switchable,
)
from controlroom.printing import escape
from engine.errors import RegulatorError

GROUPS = (
    cli_workspace,
    cli_signals,
    cli_obligations,
    cli_units,
    cli_memory,
    cli_identity,
    cli_registry,
    cli_room,
    cli_mcp,
    cli_store,
)


def build(*, lean: bool) -> typer.Typer:
    """The root app. A lean one has no --install-completion, --show-completion or help option (and
    its commands no --root, --lease or --key: declare_globals): for a command line that gives none
    of them, which then parses exactly as with them. Typer 0.29 coerces every option that is not a
    given flag through a pydantic TypeAdapter, absent or not, and so imports pydantic (about 0.1 s
    of a cold start); the lean root spares a command like `status --json` that cost through
    Typer's public API only (D-62: no patching Typer)."""
    root_app = typer.Typer(
        add_completion=not lean,
        no_args_is_help=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": [] if lean else ["-h", "--help"]},
        help="regulator: durable memory and a control room for fleets of AI agent units.",
    )
    for group in GROUPS:
        root_app.add_typer(group.app)
    return root_app


app = build(lean=False)
lean_app = build(lean=True)


def show_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("regulator")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
            number = "unknown"
        sys.stdout.write(f"regulator {number}\n")
        raise typer.Exit(0)


@lean_app.callback()
@app.callback()
def root(
    root: RootOption = None,
    lease: LeaseOption = None,
    key: KeyOption = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """regulator: durable memory and a control room for fleets of AI agent units.

    --root, --lease and --key may also be given among a command's own options."""
    remember_globals(root, lease, key)


switchable(
    root,
    inspect.signature(root, eval_str=True),
    inspect.signature(root, eval_str=True).replace(
        parameters=[inspect.signature(root, eval_str=True).parameters["version"]]
    ),
)


def flush_checkpoint() -> None:
    """A writer's load may have offered its state for a checkpoint: write it now, after the
    command and outside its lock (engine.checkpoint). Nothing to do if the engine never loaded."""
    module = sys.modules.get("engine.checkpoint")
    if module is not None:
        module.flush()


# raised while the command line is parsed, before any command runs: parsed again by the full root,
# the help shown and "did you mean" are those of every option declared
PARSE_ERRORS = ("NoArgsIsHelpError", "NoSuchOption")


def main(argv: list[str] | None = None, *, lean: bool | None = None) -> int:
    """Run one command; errors become one line on stderr and the documented exit code (SPEC §13).
    A command line that gives no global, help or completion option runs on the lean root (build)."""
    from typer.main import get_command

    args = list(sys.argv[1:] if argv is None else argv)
    OPTIONS.reset()
    if lean is None:
        lean = lean_enough(args)
    declare_globals(not lean)
    try:
        command = get_command(lean_app if lean else app)
        try:
            code = command.main(args, prog_name="regulator", standalone_mode=False)
        finally:
            flush_checkpoint()
        if isinstance(code, int):
            return code  # typer.Exit inside a command comes back as a return value
    except RegulatorError as exc:
        sys.stderr.write(f"regulator: {escape(str(exc))}\n")
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # Click's usage errors (Typer's public base class)
        if lean and type(exc).__name__ in PARSE_ERRORS:
            return main(args, lean=False)  # the help, or "did you mean", as with every option declared
        code = int(getattr(exc, "exit_code", 2))
        if type(exc).__name__ == "NoArgsIsHelpError":  # `regulator signals`-style: the help, exit 2
            exc.show()  # type: ignore[attr-defined]
            return code
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        sys.stderr.write(f"regulator: {message} (see `regulator --help`)\n")
        return code
    except typer.Abort:
        sys.stderr.write("regulator: aborted\n")
        return 130
    except BrokenPipeError:
        return 0
    return 0


def run() -> None:
    sys.exit(main())
