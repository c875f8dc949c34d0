"""What every command group shares: the global options, finding the workspace, reading input,
and the printing helpers. Group modules import this; it imports no group and not the root."""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import typer

from controlroom import printing
from controlroom.printing import emit_json, out, table
from engine.base.errors import BadInput
from engine.base.text import escape

__all__ = [
    "OPTIONS",
    "declare_globals",
    "gives_globals",
    "lean_enough",
    "switchable",
    "JsonFlag",
    "absent_exit",
    "emit_json",
    "escape",
    "fields_from",
    "global_options",
    "in_flag_names",
    "host_workspace",
    "out",
    "person_workspace",
    "read_json_input",
    "report_flags",
    "report_contracts",
    "report_problems",
    "our_import",
    "sdk_failed",
    "table",
    "workspace",
]

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (camelCase keys).")]

# a signal's field flags (design §5.2), for `signals report` and `signals route --dry-run`
Subject = Annotated[str | None, typer.Option()]
Claim = Annotated[str | None, typer.Option()]
Observation = Annotated[str | None, typer.Option()]
Evidence = Annotated[list[str] | None, typer.Option(help="Repeat for each reference.")]
Confidence = Annotated[str | None, typer.Option(help="low|medium|high")]
Severity = Annotated[str | None, typer.Option(help="info|advisory|blocking|critical")]
Affects = Annotated[list[str] | None, typer.Option(help="A unit id; repeat for more.")]
ObservedAt = Annotated[str | None, typer.Option("--observed-at")]
ExpiresAt = Annotated[str | None, typer.Option("--expires-at")]
Rationale = Annotated[str | None, typer.Option()]


class GlobalOptions(msgspec.Struct):
    """--root, --lease and --key: given before the command or among its own options (design §3)."""

    root: str | None = None
    lease: str | None = None
    key: str | None = None

    def reset(self) -> None:
        self.root = self.lease = self.key = None


OPTIONS = GlobalOptions()

RootOption = Annotated[
    str | None,
    typer.Option("--root", metavar="DIR", help="The workspace (default: found from the current directory)."),
]
LeaseOption = Annotated[
    str | None,
    typer.Option("--lease", metavar="FILE", help="Act as the unit of this lease file (default: found)."),
]
KeyOption = Annotated[
    str | None,
    typer.Option("--key", metavar="FILE", help="The SSH private key that signs a person's action."),
]

_GLOBAL_PARAMETERS = [
    inspect.Parameter("global_root", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=RootOption),
    inspect.Parameter("global_lease", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=LeaseOption),
    inspect.Parameter("global_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=KeyOption),
]

F = TypeVar("F", bound=Callable[..., Any])


def remember_globals(root: str | None, lease: str | None, key: str | None) -> None:
    """Record the global options given at this level (a later level may give others). An empty
    value is bad input, never taken for the option left out (`--root=` is no folder)."""
    for name, value in (("--root", root), ("--lease", lease), ("--key", key)):
        if value is not None and not value.strip():
            raise BadInput(f"{name}: must not be empty (name a {'folder' if name == '--root' else 'file'})")
    if root is not None:
        OPTIONS.root = root
    if lease is not None:
        OPTIONS.lease = lease
    if key is not None:
        OPTIONS.key = key


# (callable, its signature with the global options, without them): see declare_globals
_SIGNATURES: list[tuple[Any, inspect.Signature, inspect.Signature]] = []
# what a lean root (controlroom.cli.root.build) leaves out; Click matches a long option by its full name
LEAN_OMITS = ("--help", "--install-completion", "--show-completion")
# the global options: declared on a lean root's commands only when the command line gives one
GLOBALS = ("--root", "--lease", "--key")
COMPLETE_VAR = "_REGULATOR_COMPLETE"  # Typer's shell completion for prog_name "regulator"


_DECLARED = [True]  # what declare_globals last said (a group module imported later follows it)


def switchable(function: Any, with_globals: inspect.Signature, without: inspect.Signature) -> None:
    """Let declare_globals give `function` (a command, a group's callback or the root's) the
    signature that declares --root, --lease and --key, or the one that leaves them out."""
    function.__signature__ = with_globals if _DECLARED[0] else without
    _SIGNATURES.append((function, with_globals, without))


def declare_globals(declared: bool) -> None:
    """Declare --root, --lease and --key on every command (the default), or on none (a lean root's
    commands: controlroom.cli.root.build). Typer reads the signatures when it builds the commands."""
    _DECLARED[0] = declared
    for function, with_globals, without in _SIGNATURES:
        function.__signature__ = with_globals if declared else without


def lean_enough(args: list[str]) -> bool:
    """Whether a command line can give none of the options a lean root leaves out: no token spelled
    as one of them, no short flag group holding -h, and no shell completion under way. Conservative:
    a value that merely looks like one (`--subject --help`) makes it run on the full root."""
    if COMPLETE_VAR in os.environ:
        return False
    for arg in args:
        if arg.startswith(LEAN_OMITS):
            return False
        if arg.startswith("-") and not arg.startswith("--") and "h" in arg:
            return False
    return True


def gives_globals(args: list[str]) -> bool:
    """Whether a command line may give --root, --lease or --key (a lean root then declares them, as
    the full root does). Conservative: a value that merely looks like one declares them too."""
    return any(arg.startswith(GLOBALS) for arg in args)


def global_options(command: F) -> F:
    """Give a command (or a group's callback) --root, --lease and --key of its own, declared in its
    signature so that its --help shows them. A public-API decorator: Typer reads the signature."""
    signature = inspect.signature(command, eval_str=True)
    parameters = list(signature.parameters.values())

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        remember_globals(
            kwargs.pop("global_root", None), kwargs.pop("global_lease", None), kwargs.pop("global_key", None)
        )
        return command(*args, **kwargs)

    switchable(wrapper, signature.replace(parameters=[*parameters, *_GLOBAL_PARAMETERS]), signature)
    return wrapper  # type: ignore[return-value]


def use_given_key() -> None:
    """--key, where given, is the key that signs: a path naming no file is exit 2 before anything
    runs (an operator's review: `--once --key TYPO` said nothing, `init --key TYPO` committed unsigned)."""
    if OPTIONS.key:
        from engine.trust.signing import use_key

        given = Path(OPTIONS.key).expanduser()
        if not given.exists():
            raise BadInput(
                f"--key {OPTIONS.key}: no such file (the SSH private key that signs a person's action)"
            )
        if not given.is_file():  # a folder, /dev/null: no key (`init --key /tmp` committed unsigned)
            raise BadInput(
                f"--key {OPTIONS.key}: not a file (the SSH private key that signs a person's action)"
            )
        use_key(OPTIONS.key)


def workspace(git_only: bool = False) -> tuple[Any, Any]:
    """The workspace and the lease (if any) for this command, found as design §3 orders it.
    `git_only`: the command answers from git, and opens no store that is not a file here (D-87)."""
    from engine.checkout.workspace import locate

    use_given_key()
    root, lease = OPTIONS.root, OPTIONS.lease
    return locate(Path(root) if root else None, Path(lease) if lease else None, git_only=git_only)


def person_workspace(by: str | None) -> Any:
    """The workspace for a person's action: --by under a lease is refused (exit 2, design §15.2)."""
    from engine.commands.actors import no_person_under_lease

    ws, lease = workspace()
    no_person_under_lease(lease, by)
    return ws


def host_workspace() -> Any:
    """The workspace for a host operation: refused under a lease (exit 3, design §15.0). (A unit
    closing itself under its lease file: `unit close` asks host_only itself.)"""
    from engine.commands.actors import host_only

    ws, lease = workspace()
    host_only(lease)
    return ws


def absent_exit(ws: Any) -> None:
    """A list read where the stores are absent is not an empty list: exit 1, saying so on stderr, so
    a consumer of the §13 JSON list cannot take "unknown" for "nothing" (design §16.2)."""
    if not ws.has_stores:
        from engine.read.storeless import ABSENT

        printing.say(f"regulator: {ABSENT}\n")
        raise typer.Exit(1)


def absent_listing(ws: Any, what: str) -> None:
    """A listing's text where the stores are absent: says so and exits 1, never an empty table
    (design §16.2); `what` names what the stores would have listed."""
    if not ws.has_stores:
        from engine.read.storeless import ABSENT

        out(ABSENT)
        out(f"{what}: unknown (the stores hold them, and a clone does not have the stores)")
        absent_exit(ws)


def report_problems(state: Any) -> None:
    unknown = getattr(getattr(state, "auth", None), "unknown", None)
    if unknown:
        printing.say(
            f"regulator: warning: the policy in force is unknown ({unknown}): no person event counts "
            "until identity.ndjson verifies again (regulator verify)\n"
        )
    for problem in state.problems:  # the first ones; the rest are counted (design §26)
        printing.say(f"regulator: warning: {problem}\n")
    more = getattr(state, "bad_lines", 0) - len(state.problems)
    if more > 0:
        printing.say(
            f"regulator: warning: and {more} more bad line(s) skipped, not listed one by one "
            "(`regulator verify` names the first of each store)\n"
        )
    report_contracts(state)


def report_contracts(state: Any) -> None:
    """Each invalid contract, named in one line on stderr (it is left out of what is read)."""
    for problem in state.contract_problems:
        printing.say(f"regulator: warning: contract skipped: {escape(problem)}\n")


def sdk_failed(command: str, exc: BaseException) -> BadInput:
    """An installed mcp extra whose import fails (a broken install, an SDK that exits as it loads):
    one line naming the failure and the reinstall, exit 2, never a traceback. serve's door says the
    same failure per call and in its log (controlroom.door_http._Sdk, D-248)."""
    try:
        said = str(exc)
    except Exception:  # noqa: BLE001 - an exception that cannot say itself is named by its type
        said = "(its message could not be read)"
    # escaped where every error line is (controlroom.cli.root)
    failure = f"{type(exc).__name__}: {said[:300]}" if said else type(exc).__name__  # as serve's log line
    return BadInput(
        f"{command} could not load the mcp SDK ({failure}); reinstall the optional extra mcp: "
        "pip install -e '.[mcp]' from a checkout"
    )


def our_import(exc: ImportError) -> bool:
    """An import of regulator's own packages that failed: a defect of this checkout, shown whole."""
    return (exc.name or "").split(".")[0] in ("controlroom", "engine", "identity", "registry", "widgets")


def read_json_input(source: str) -> dict[str, Any]:
    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        if source.lstrip().startswith("{"):  # the JSON itself, where a file name goes
            raise BadInput(
                "--json-input takes a file, or - for stdin, not the JSON itself: "
                "echo '{...}' | regulator ... --json-input -"
            ) from None
        raise BadInput(f"--json-input {source}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--json-input {source}: not valid UTF-8") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"--json-input {source}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"--json-input {source}: expected one JSON object")
    return data


def fields_from(flags: dict[str, Any], json_input: str | None) -> dict[str, Any]:
    """The given field flags, or the one JSON object of --json-input: never both (exit 2)."""
    given = {k: v for k, v in flags.items() if v is not None}
    if json_input is None:
        return given
    if given:
        raise BadInput("--json-input and field flags mixed; give one or the other")
    return read_json_input(json_input)


# a signal's JSON fields (--json-input's names) and the flags that give them (report_flags)
FLAG_OF_FIELD = {
    "supersedes": "--supersedes",
    "prediction": "--resolves-at",
    "resolvesAt": "--resolves-at",
    "subject": "--subject",
    "claim": "--claim",
    "observation": "--observation",
    "evidence": "--evidence",
    "confidence": "--confidence",
    "reportedSeverity": "--severity",
    "severity": "--severity",
    "affectedUnits": "--affects",
    "observedAt": "--observed-at",
    "expiresAt": "--expires-at",
    "rationale": "--rationale",
}
_REQUIRED = re.compile(r"(\w+): required(?: \(and ((?:\w+, )*\w+)\))?")
_LEADING_FIELD = re.compile(r"(\w+)(?=: )")
# the camel-cased names, which no word of a person's own reads as: named as flags wherever they stand
_CAMEL_FIELD = re.compile(
    r"\b(?:prediction\.)?(resolvesAt|reportedSeverity|affectedUnits|observedAt|expiresAt)\b"
)
# a value the message quotes as repr quotes it: never rewritten (`--confidence 'x observedAt'`)
_QUOTED = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def in_flag_names(exc: BadInput) -> BadInput:
    """A refusal of a signal's fields given by flags, said with the flags' names (`--severity`,
    not `reportedSeverity`): the field that leads the message, every name of a "required" line
    (limits.check_required's one format), and the camel-cased field names wherever they stand
    (`expiresAt … is not after observedAt …`). Anything else is returned as it is."""
    text = str(exc)
    required = _REQUIRED.fullmatch(text)
    if required is not None:
        names = [required.group(1), *(required.group(2).split(", ") if required.group(2) else [])]
        flags = [FLAG_OF_FIELD.get(name, name) for name in names]
        more = f" (and {', '.join(flags[1:])})" if len(flags) > 1 else ""
        return BadInput(f"{flags[0]}: required{more}")
    leading = _LEADING_FIELD.match(text)
    if leading is not None and leading.group(1) in FLAG_OF_FIELD:
        text = FLAG_OF_FIELD[leading.group(1)] + text[leading.end() :]
    parts = _QUOTED.split(text)  # odd places: the quoted values
    said = "".join(
        part if index % 2 else _CAMEL_FIELD.sub(lambda found: FLAG_OF_FIELD[found.group(1)], part)
        for index, part in enumerate(parts)
    )
    return exc if said == str(exc) else BadInput(said)


def report_flags(
    subject: str | None,
    claim: str | None,
    observation: str | None,
    evidence: list[str] | None,
    confidence: str | None,
    severity: str | None,
    affects: list[str] | None,
    observed_at: str | None,
    expires_at: str | None,
    rationale: str | None,
    supersedes: str | None = None,
    resolves_at: str | None = None,
) -> dict[str, Any]:
    """A signal's field flags under the JSON names of --json-input (design §5.2, §24)."""
    return {
        "supersedes": supersedes,
        "prediction": {"resolvesAt": resolves_at} if resolves_at is not None else None,
        "subject": subject,
        "claim": claim,
        "observation": observation,
        "evidence": evidence,
        "confidence": confidence,
        "reportedSeverity": severity,
        "affectedUnits": affects,
        "observedAt": observed_at,
        "expiresAt": expires_at,
        "rationale": rationale,
    }
