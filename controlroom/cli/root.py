"""The `regulator` command line: the root app, which joins one sub-app per command group
(`add_typer`) and runs it. Group modules never import this one; it imports no Textual, so every
command but the control room starts fast."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from controlroom import printing
from controlroom.cli.common import (
    GLOBALS,
    OPTIONS,
    KeyOption,
    LeaseOption,
    RootOption,
    declare_globals,
    gives_globals,
    lean_enough,
    remember_globals,
    switchable,
)
from engine.base.errors import RegulatorError
from engine.base.text import ensure_escaped, escape

# the command group modules, in the order of the root's help
MODULES = (
    "workspace",
    "signals",
    "obligations",
    "units",
    "memory",
    "identity",
    "registry",
    "room",
    "mcp",
    "serve",
    "hook",
    "store",
    "world",
)
# the names each module adds to the root, so that a lean command line imports and builds its own
# group only (tests/test_cli.py checks this table against what the modules register)
GROUP_OF = {
    "init": "workspace",
    "status": "workspace",
    "verify": "workspace",
    "signals": "signals",
    "obligations": "obligations",
    "obligation": "obligations",
    "unit": "units",
    "memory": "memory",
    "context": "memory",
    "identity": "identity",
    "registry": "registry",
    "controlroom": "room",
    "demo": "room",
    "mcp": "mcp",
    "serve": "serve",
    "door": "serve",
    "hook": "hook",
    "store": "store",
    "sensors": "world",
    "calibration": "world",
}


def _command_path(command: object, args: list[str]) -> str:
    """`regulator GROUP COMMAND` as far as `args` name commands, for a usage error Click raised
    without its command's context (an option that requires an argument): the options and their
    values are passed over."""
    path, current = ["regulator"], command
    for arg in args:
        if arg == "--":
            break
        commands = getattr(current, "commands", None)
        if not isinstance(commands, dict):
            break  # a command: what follows is its own
        if arg.startswith("-") or arg not in commands:
            continue  # an option, or an option's value
        current = commands[arg]
        path.append(arg)
    return " ".join(path)


def build(modules: tuple[str, ...] = MODULES, *, lean: bool = False) -> typer.Typer:
    """The root app over these group modules. A lean one has no --install-completion,
    --show-completion or help option (and, unless the command line gives one, its commands no
    --root, --lease or --key: declare_globals), for a command line that gives none of them and so
    parses exactly as with them. Typer 0.29 coerces every declared option but a given flag through a pydantic
    TypeAdapter, absent or not, which imports pydantic (about 0.1 s of a cold start): the lean
    root spares `status --json` that cost with Typer's public API only (D-84; D-62: no patching Typer)."""
    root_app = typer.Typer(
        add_completion=not lean,
        no_args_is_help=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": [] if lean else ["-h", "--help"]},
        help="regulator: durable memory and a control room for fleets of AI agent units.",
    )
    for name in modules:
        root_app.add_typer(importlib.import_module(f"controlroom.cli.{name}").app)
    root_app.callback()(root)
    return root_app


def lean_group(args: list[str]) -> str | None:
    """The one group module a command line needs when it can run on a lean root: it gives none of
    the options a lean root leaves out (controlroom.cli.common.lean_enough), so its first word that
    is no option names its command (only the root's options may precede it: --version, and
    --root, --lease or --key with its value), and the table knows that name."""
    if not lean_enough(args):
        return None
    words = iter(args)
    for arg in words:
        if arg in GLOBALS:
            next(words, None)  # its value, whatever it looks like
        elif not arg.startswith("-"):
            return GROUP_OF.get(arg)
    return None


def show_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("regulator")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
            number = "unknown"
        printing.write(f"regulator {number}\n")
        raise typer.Exit(0)


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


_ROOT = inspect.signature(root, eval_str=True)
switchable(root, _ROOT, _ROOT.replace(parameters=[_ROOT.parameters["version"]]))  # a lean root: --version


def flush_checkpoint() -> None:
    """A writer's load may have offered its state for a checkpoint: write it now, after the
    command and outside its lock (engine.read.checkpoint). Nothing to do if the engine never loaded."""
    module = sys.modules.get("engine.read.checkpoint")
    if module is not None:
        module.flush()


# raised while the command line is parsed, before any command runs: parsed again by the full root,
# the help shown and "did you mean" are those of every option declared
PARSE_ERRORS = ("NoArgsIsHelpError", "NoSuchOption")


def main(
    argv: list[str] | None = None, *, full: bool = False, resume: Callable[[], None] | None = None
) -> int:
    """Run one command; errors become one line on stderr and the documented exit code (design §13).
    A command line that gives no help or completion option runs on a lean root holding its own
    group only (build, lean_group), declaring --root, --lease and --key where it gives one of them;
    any other on the full root. `resume` is called once the
    command line is built, just before the command runs (controlroom.cli.start)."""
    from typer.main import get_command

    try:  # a string parameter spares pydantic's import (D-171)
        from controlroom.cli import fastparams

        fastparams.install()
    except (ImportError, AttributeError):  # a Typer whose private names moved: pay it, as before
        pass
    args = list(sys.argv[1:] if argv is None else argv)
    OPTIONS.reset()
    group = None if full else lean_group(args)
    declare_globals(group is None or gives_globals(args))
    try:
        command = get_command(build() if group is None else build((group,), lean=True))
        if resume is not None:
            resume()
        try:
            code = command.main(args, prog_name="regulator", standalone_mode=False)
        finally:
            flush_checkpoint()
        printing.flush()  # a full disk met by the output's last bytes: said here, not at the exit
        if isinstance(code, int):
            return code  # typer.Exit inside a command comes back as a return value
    except RegulatorError as exc:
        printing.say(f"regulator: {escape(str(exc))}\n")
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # Click's usage errors (Typer's public base class)
        if group is not None and type(exc).__name__ in PARSE_ERRORS:
            # the help, or "did you mean", as with every option declared
            return main(args, full=True, resume=resume)
        code = int(getattr(exc, "exit_code", 2))
        if type(exc).__name__ == "NoArgsIsHelpError":  # `regulator signals`-style: the help, exit 2
            exc.show()  # type: ignore[attr-defined]
            return code
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        context = getattr(exc, "ctx", None)  # the command the error is of: its own help says its options
        where = getattr(context, "command_path", None) or _command_path(command, args)
        option = getattr(exc, "option_name", None)
        if option in ("--root", "--lease", "--key") and hasattr(
            getattr(context, "command", None), "list_commands"
        ):
            # a group's own options are not every command's (an operator's review: `unit --root D dispatch`)
            message += f"; it goes with the command (`{where} COMMAND {option} …`) or first (`regulator {option} … {where.removeprefix('regulator ')} COMMAND`)"
        # Click writes a control character it quotes as `\xNN` itself; what it leaves raw (a bidi or
        # invisible character of the person's typing) has the line escaped whole
        printing.say(f"regulator: {ensure_escaped(message)} (see `{where} --help`)\n")
        return code
    except typer.Abort:
        printing.say("regulator: aborted\n")
        return 130
    except PermissionError as exc:  # met past the workspace's lookup (which refuses: exit 3, D-220)
        from engine.checkout.workspace import denied

        # not exit 3 ("refused, nothing written"): the command may have written part of its work
        printing.say(f"regulator: {escape(denied(exc))}; the command stopped there (exit 1)\n")
        return 1
    except BrokenPipeError:  # a closed pipe met outside the command's own output (printing's): quietly
        printing.discard_rest()
        return 0
    except OSError as exc:  # a full disk, an output device's error: one line, never a traceback
        return failed(exc)
    finally:  # whatever ended the command, its output's buffer cannot fail the process's end (D-332)
        printing.settle()
    return 0


def failed(exc: OSError) -> int:
    """A system error the command met: one line, exit 1. Where it was the command's own output
    that could not be written (printing.OutputError: a full disk, `> /dev/full`), the output is
    pointed at /dev/null so that the process's end does not fail on it again; anything else is
    named with its file."""
    if isinstance(exc, printing.OutputError):
        line = f"its output could not be written ({exc.strerror}): the command ran, its answer is lost"
        printing.discard_rest()  # what the buffer still holds goes nowhere at exit
    else:
        why = exc.strerror or str(exc)
        if exc.filename is not None:
            why = f"{why}: {exc.filename}"
        line = f"{why}; the command stopped there"
    printing.say(f"regulator: {escape(line)} (exit 1)\n")
    return 1


def run() -> None:
    sys.exit(main())
