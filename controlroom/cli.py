"""The `regulator` command line: the root app, which joins one sub-app per command group
(`add_typer`) and runs it. Group modules never import this one; it imports no Textual, so every
command but the control room starts fast."""

from __future__ import annotations

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
from controlroom.cli_common import OPTIONS, KeyOption, LeaseOption, RootOption, remember_globals
from controlroom.printing import escape
from engine.errors import RegulatorError

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="regulator: durable memory and a control room for fleets of AI agent units.",
)
for group in (
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
):
    app.add_typer(group.app)


def show_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("regulator")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
            number = "unknown"
        sys.stdout.write(f"regulator {number}\n")
        raise typer.Exit(0)


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


def flush_checkpoint() -> None:
    """A writer's load may have offered its state for a checkpoint: write it now, after the
    command and outside its lock (engine.checkpoint). Nothing to do if the engine never loaded."""
    module = sys.modules.get("engine.checkpoint")
    if module is not None:
        module.flush()


def main(argv: list[str] | None = None) -> int:
    """Run one command; errors become one line on stderr and the documented exit code (SPEC §13)."""
    from typer.main import get_command

    args = list(sys.argv[1:] if argv is None else argv)
    OPTIONS.reset()
    try:
        command = get_command(app)
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
