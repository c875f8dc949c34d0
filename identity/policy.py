"""The policy files (design §13 shapes): routing, interaction, profiles, sensors. Parsed with safe_load
only (identity/yamlload.py: strict, a duplicate key is an error), then converted to msgspec Structs:
reading a policy imports no pydantic (D-170)."""

from __future__ import annotations

import re
from types import GenericAlias
from typing import Annotated, Any, Literal, get_args, get_origin, overload

import msgspec
import msgspec.structs

from identity.durations import duration_seconds as duration_seconds  # the sensors ask it here
from identity.yamlload import BoundError, YamlError, safe_load_strict

GRANTS = ("resolve", "retract", "accept", "ack", "decide", "report")
FLOOR_FIELDS = ("subject", "observation", "rationale")  # never the claim (seed 000)
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # a sensor's name
# the lockfile formats an osv sensor reads (design §24), by file name
LOCKFILE_FORMATS = ("requirements*.txt", "poetry.lock", "uv.lock", "package-lock.json")


def lockfile_format(path: str) -> str | None:
    """Which lockfile format a path's file name is (requirements, poetry, uv, npm), or None."""
    import fnmatch

    name = path.rsplit("/", 1)[-1]
    for kind, pattern in zip(("requirements", "poetry", "uv", "npm"), LOCKFILE_FORMATS, strict=True):
        if fnmatch.fnmatchcase(name, pattern):
            return kind
    return None


def _argv(value: tuple[str, ...], what: str) -> tuple[str, ...]:
    """A command as its argument vector (run without a shell): not empty, no empty program, no NUL."""
    if not value or not value[0].strip():
        raise ValueError(f"{what} needs a program: a list such as [notify-send, regulator]")
    for arg in value:
        if "\0" in arg:
            raise ValueError(f"{what}: an argument holds a NUL byte")
    return value


# bounds on the policies' numbers: beyond them a date or count overflows where it is used
# (timedelta(days=...) past 999,999,999 days), and no real policy comes near them
MAX_DAYS = 36_500  # a hundred years
MAX_COUNT = 1_000_000


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file and the field."""


class _Invalid(ValueError):
    """A check of one key failed (raised in __post_init__): the key, as the file spells it, ends the
    path the PolicyError names (msgspec itself names only the Struct the check ran in)."""

    def __init__(self, key: str, message: object) -> None:
        super().__init__(str(message))
        self.key = key


class _Model(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A policy Struct: immutable, an unknown key refused, built from keywords; a key of the file
    that is camelCase is a snake_case attribute (msgspec.field(name=...)). Each subclass says
    frozen and kw_only again for the type checkers (PEP 681 does not inherit them); msgspec does."""


MAX_REPEAT_BOUND = 1000  # a floor's `{n,m}`: past it a pattern is a typo or an attack (regex expands it)
MAX_NESTING = 32  # a floor's groups and repeats inside each other


def _parsed(pattern: str) -> tuple[Any, bool]:
    """`re`'s parse of a floor's pattern, and whether `re` warned of a possible nested set or set
    operation (a `[[` that `regex` reads as a POSIX class and `re` does not)."""
    import warnings
    from re import _parser  # type: ignore[attr-defined]

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        tree = _parser.parse(pattern)
    return tree, any(issubclass(w.category, FutureWarning) for w in said)


def _parts(op: Any, av: Any) -> list[Any]:
    """The parts directly inside one node of `re`'s parse (a repeat, a group, an alternative, a
    lookaround, a conditional): what both walks below descend into."""
    from re import _constants as sre  # type: ignore[attr-defined]

    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        return [av[2]]
    if op is sre.SUBPATTERN:
        return [av[-1]]
    if op is sre.ATOMIC_GROUP:
        return [av]
    if op is sre.BRANCH:
        return list(av[1])
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [av[1]]
    if op is sre.GROUPREF_EXISTS:
        return [av[1], *([av[2]] if av[2] else [])]
    return []


def backtracks(pattern: str) -> str | None:
    """Why a floor's pattern can backtrack exponentially (a repeated part inside a repeated group,
    or alternatives anywhere under a repeat: `(\\w+\\s?)+`, `(a|aa)+`, `(?:(?:a|aa)?){8,31}`), or
    cannot be compiled by both engines alike (a repeat bound over 1,000, groups nested over 32
    deep, a set inside a set `[[`, which `regex` reads as a POSIX class and `re` does not), or None.
    An adversarial review: a unit proposed such a floor as a tightening; once accepted, one
    60-character report held the router (and serve, and every writer behind the decide lock)
    without end. Refused when the policy is read, so that no proposal of one can be accepted; what
    this shape check does not see is searched under the router's time limit (bounded; D-301)."""
    from re import _constants as sre  # type: ignore[attr-defined]

    repeats = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
    tree, nested_set = _parsed(pattern)
    if nested_set:
        return "a set inside a set (`[[` or a set operation) reads differently in another engine"

    def branches(items: Any) -> bool:
        return any(op is sre.BRANCH or any(branches(i) for i in _parts(op, av)) for op, av in items)

    def walk(items: Any, repeated: bool, depth: int) -> str | None:
        if depth > MAX_NESTING:
            return f"groups nested over {MAX_NESTING} deep"
        for op, av in items:
            below = repeated
            if op in repeats:
                high = av[1]
                if high is not sre.MAXREPEAT and high > MAX_REPEAT_BOUND:
                    return f"a repeat bound over {MAX_REPEAT_BOUND:,}"
                many = high is sre.MAXREPEAT or high > 1
                if many and repeated:
                    return "a repeated part inside a repeated group"
                if many and branches(av[2]):
                    return "alternatives under a repeat"
                below = repeated or many
            for part in _parts(op, av):
                found = walk(part, below, depth + 1)
                if found:
                    return found
        return None

    return walk(tree, False, 0)


def bounded(pattern: str) -> bool:
    """Whether a floor's search is linear in its text with a small factor: no unbounded repeat, no
    backreference or conditional, and its repeats' bounds and alternatives multiplied together at
    most 64 (`INV-\\d{3}`, `(critical|blocking)`, a plain path; `(?:a|aa)` written out 32 times is
    2^32: an adversarial review). The router searches such a pattern with `re` as it is; any other
    under a time limit (engine.commands.router: the limit costs 1.4 µs a search, about 0.8 s of
    `verify`'s CPU at 100,000 signals, D-301)."""
    from re import _constants as sre  # type: ignore[attr-defined]

    try:
        items = list(_parsed(pattern)[0])
    except Exception:  # noqa: BLE001 - not one `re` reads: not known to be bounded
        return False
    refs = (sre.GROUPREF, sre.GROUPREF_IGNORE, sre.GROUPREF_LOC_IGNORE, sre.GROUPREF_UNI_IGNORE)
    work = 1
    while items:
        op, av = items.pop()
        if op in refs or op is sre.GROUPREF_EXISTS:
            return False
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            if av[1] is sre.MAXREPEAT:
                return False
            work *= av[1] + 1
        elif op is sre.BRANCH:
            work *= len(av[1])
        if work > 64:
            return False
        for part in _parts(op, av):
            items.extend(part)
    return True


def compiles_timed(pattern: str) -> str | None:
    """Why the `regex` module, which searches a floor that is not bounded, cannot compile it, or
    None (an adversarial review: a pattern `re` took and `regex` did not stopped every routing
    process with a traceback). Asked only of such a floor: `regex` is imported for it alone."""
    import regex

    try:
        regex.compile(pattern, regex.V0)
    except regex.error as exc:
        return f"pattern does not compile: {exc}"
    except (OverflowError, RecursionError, MemoryError):
        return "pattern does not compile: too large or too deeply nested"
    return None


class Floor(_Model, frozen=True, kw_only=True):
    name: str
    pattern: str
    fields: tuple[str, ...] = FLOOR_FIELDS
    at_least: str = msgspec.field(name="atLeast")

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
            risk = backtracks(self.pattern)
        except re.error as exc:
            raise _Invalid("pattern", f"pattern does not compile: {exc}") from None
        except (OverflowError, RecursionError, MemoryError):  # a{99999999999999999999}, 3,000 groups
            raise _Invalid("pattern", "pattern does not compile: too large or too deeply nested") from None
        if risk is not None:
            raise _Invalid("pattern", f"pattern may take without end on a short text: {risk}")
        if not bounded(self.pattern) and (why := compiles_timed(self.pattern)) is not None:
            raise _Invalid("pattern", why)
        for name in self.fields:
            if name not in FLOOR_FIELDS:
                raise _Invalid("fields", f"floors test only {', '.join(FLOOR_FIELDS)}; not {name!r}")


class Rule(_Model, frozen=True, kw_only=True):
    at_or_above: str = msgspec.field(name="atOrAbove")
    owed_to: str = msgspec.field(name="owedTo")


class MemoryPolicy(_Model, frozen=True, kw_only=True):
    """How much current memory one recording unit may hold (design §16.1)."""

    max_current_per_unit: Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)] = msgspec.field(
        default=25, name="maxCurrentPerUnit"
    )


class RoutingPolicy(_Model, frozen=True, kw_only=True):
    severities: tuple[str, ...]
    blocks_at_or_above: str = msgspec.field(name="blocksAtOrAbove")
    # at most 64: each signal is searched by every floor (an adversarial review proposed 100)
    floors: Annotated[tuple[Floor, ...], msgspec.Meta(max_length=64)] = ()
    rules: dict[str, Rule]
    intake_debt_days: Annotated[int, msgspec.Meta(ge=0, le=MAX_DAYS)] = msgspec.field(
        default=14, name="intakeDebtDays"
    )
    # design §15.3: REGULATOR_NOW is honoured only under `pinned` (tests, the demo's build)
    clock: Literal["system", "pinned"] = "system"
    memory: MemoryPolicy = msgspec.field(default_factory=MemoryPolicy)
    # design §24: how long an obligation of each severity may stay open before it is overdue and
    # escalated; who it is escalated to; the command run once per escalation (no shell). A policy
    # written before these keys has none: nothing is ever overdue, no one is notified.
    deadlines: dict[str, str] = {}
    escalate: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for severity, text in self.deadlines.items():
            try:
                duration_seconds(text)
            except ValueError as exc:
                raise _Invalid("deadlines", f"{severity}: {exc}") from None
        if self.notify:
            try:
                _argv(self.notify, "notify")
            except ValueError as exc:
                raise _Invalid("notify", exc) from None
        known = set(self.severities)
        named = [self.blocks_at_or_above, *(f.at_least for f in self.floors)]
        named += [r.at_or_above for r in self.rules.values()]
        named += list(self.deadlines)
        for severity in named:
            if severity not in known:
                raise ValueError(f"severity {severity!r} is not in severities")
        if "intelligence-signal" not in self.rules:
            raise ValueError("rules needs an intelligence-signal rule")

    def deadline_seconds(self, severity: str) -> int | None:
        """How long an obligation of this severity may stay open, or None: no deadline."""
        text = self.deadlines.get(severity)
        return duration_seconds(text) if text is not None else None

    def rank(self, severity: str) -> int:
        return self.severities.index(severity)


# an OpenSSH public key line: type, base64 blob, optional comment (fully checked when it is used)
SSH_KEY = re.compile(r"(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+={0,2}( .*)?")


def _openssh_keys(key: str, value: tuple[str, ...]) -> tuple[str, ...]:
    for line in value:
        if not SSH_KEY.fullmatch(line.strip()):
            raise _Invalid(
                key,
                f"{line[:40]!r} is not an OpenSSH public key line (e.g. `ssh-ed25519 AAAA… alice@laptop`)",
            )
    return tuple(line.strip() for line in value)


class Person(_Model, frozen=True, kw_only=True):
    grants: tuple[str, ...] = ()
    resolve: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # OpenSSH public keys that may sign this person's events (design §15.1)
    retired_keys: tuple[str, ...] = msgspec.field(default=(), name="retiredKeys")  # verify old events only

    def __post_init__(self) -> None:
        for grant in self.grants:
            if grant not in GRANTS:
                raise _Invalid("grants", f"unknown grant {grant!r} (known: {', '.join(GRANTS)})")
        # kept as written but stripped: the key lines are compared as text
        msgspec.structs.force_setattr(self, "keys", _openssh_keys("keys", self.keys))
        msgspec.structs.force_setattr(self, "retired_keys", _openssh_keys("retiredKeys", self.retired_keys))


class InteractionPolicy(_Model, frozen=True, kw_only=True):
    people: dict[str, Person]
    # design §15.1: a person event counts only when signed by one of the person's keys. A policy
    # without it (made before signatures) counts unsigned person events: "names unauthenticated".
    require_signatures: bool = msgspec.field(default=False, name="requireSignatures")

    def may(self, person: str, grant: str) -> bool:
        entry = self.people.get(person)
        return entry is not None and grant in entry.grants

    def may_resolve(self, person: str, severity: str) -> bool:
        entry = self.people.get(person)
        return entry is not None and "resolve" in entry.grants and severity in entry.resolve


def _inside(key: str, path: str) -> None:
    """A path of sensors.yaml: relative to the workspace and inside it, no control character."""
    if any(ord(c) < 32 or c == "\x7f" for c in path):
        raise _Invalid(key, f"{path!r}: a control character in a path")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in path.split("/")):
        raise _Invalid(
            key, f"{path!r}: a path relative to the workspace, inside it, with no '.' or '..' part"
        )


class Sensor(_Model, frozen=True, kw_only=True):
    """One declared sensor (design §24): a command printing report_intelligence lines, or an OSV feed
    matched against lockfiles read from trunk."""

    kind: Literal["command", "osv"]
    every: str = "1h"
    severity: str = "advisory"
    command: tuple[str, ...] = ()  # kind: command
    timeout: str = "60s"  # kind: command
    feed: str | None = None  # kind: osv: a folder or a zip of OSV JSON files
    lockfiles: dict[str, tuple[str, ...]] = {}  # kind: osv: path on trunk -> the units it serves
    stale_after: str | None = msgspec.field(default=None, name="staleAfter")  # kind: osv

    def __post_init__(self) -> None:
        for key, value in (
            ("every", self.every),
            ("timeout", self.timeout),
            ("staleAfter", self.stale_after),
        ):
            if value is not None:
                try:
                    duration_seconds(value)
                except ValueError as exc:
                    raise _Invalid(key, exc) from None
        if self.feed is not None:  # an operator's review: `feed: ../../etc` read /etc
            _inside("feed", self.feed.removesuffix("/"))
            if self.feed.split("/")[0] in (".regulator", ".git", ".worktrees"):  # the stores, git's
                # own files, the units' worktrees (a unit would write its own advisories: D-301)
                raise _Invalid("feed", f"{self.feed!r}: a feed is never in .regulator/, .git/ or .worktrees/")
        for path in self.lockfiles:
            _inside("lockfiles", path)
            if lockfile_format(path) is None:
                raise _Invalid(
                    "lockfiles", f"{path!r} is none of the lockfiles read: {', '.join(LOCKFILE_FORMATS)}"
                )
        if self.kind == "command":
            _argv(self.command, "command")
            if self.feed is not None or self.lockfiles or self.stale_after is not None:
                raise ValueError(
                    "a command sensor takes command and timeout, not feed, lockfiles or staleAfter"
                )
        else:
            if not self.feed:
                raise ValueError("an osv sensor needs feed: a folder or a zip of OSV JSON files")
            if not self.lockfiles:
                raise ValueError("an osv sensor needs lockfiles: {path: [units]}")
            if self.command:
                raise ValueError("an osv sensor takes feed and lockfiles, not command")

    @property
    def every_seconds(self) -> int:
        return duration_seconds(self.every)

    @property
    def timeout_seconds(self) -> int:
        return duration_seconds(self.timeout)


class SensorsPolicy(_Model, frozen=True, kw_only=True):
    """regulator/policy/sensors.yaml (governed where it exists): none declared by default."""

    sensors: dict[str, Sensor] = {}

    def __post_init__(self) -> None:
        for name in self.sensors:
            if not NAME.fullmatch(name):
                raise _Invalid(
                    "sensors", f"{name!r} is not a sensor name (lowercase letters, digits and '-')"
                )


class Profile(_Model, frozen=True, kw_only=True):
    tools: tuple[str, ...] = ()


HarnessTools = dict[str, dict[str, tuple[str, ...]]]  # harness -> abstract tool -> the harness's names


class Profiles(_Model, frozen=True, kw_only=True):
    profiles: dict[str, Profile]
    # design §23: the abstract tools a profile grants, as each harness names them; a file without it
    # (every workspace before this round) uses the shipped mapping (identity.shipped.HARNESS_TOOLS)
    harness_tools: HarnessTools | None = msgspec.field(default=None, name="harnessTools")

    def harness(self, name: str) -> dict[str, tuple[str, ...]]:
        """The mapping for one harness (`claude-code`): the file's, else the shipped default."""
        from identity.shipped import HARNESS_TOOLS

        mapping = (self.harness_tools or {}).get(name)
        if mapping is None:
            mapping = {tool: tuple(names) for tool, names in HARNESS_TOOLS.get(name, {}).items()}
        return mapping


POLICY_MODELS: dict[str, type[_Model]] = {
    "routing.yaml": RoutingPolicy,
    "interaction.yaml": InteractionPolicy,
    "profiles.yaml": Profiles,
    "sensors.yaml": SensorsPolicy,
}


@overload
def parse_policy(name: Literal["routing.yaml"], text: str) -> RoutingPolicy: ...
@overload
def parse_policy(name: Literal["interaction.yaml"], text: str) -> InteractionPolicy: ...
@overload
def parse_policy(name: Literal["profiles.yaml"], text: str) -> Profiles: ...
@overload
def parse_policy(name: Literal["sensors.yaml"], text: str) -> SensorsPolicy: ...
@overload
def parse_policy(name: str, text: str) -> _Model: ...
def parse_policy(name: str, text: str) -> _Model:
    """Parse one policy file's text; PolicyError names the file and what is wrong. Strict: a key
    takes only its own type (a quoted "14" is no integer, a 1 no boolean), as YAML reads it."""
    model = POLICY_MODELS[name]
    try:
        data = safe_load_strict(text)
    except BoundError as exc:  # valid YAML, past what regulator reads (D-253, D-258)
        raise PolicyError(f"{name}: YAML regulator does not read ({exc})") from None
    except YamlError as exc:  # a duplicate key is refused too: never the last one wins
        raise PolicyError(f"{name}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{name}: expected a mapping at the top")
    found = _a_set(data)
    if found is not None:  # a YAML !!set is unordered: never a command's arguments, nor any list here
        raise PolicyError(f"{name}: {_one_line(found or '(top)')}: a set (!!set) where a list is expected")
    try:
        # inside a mapping, so every error of msgspec's ends with its path, the top's `$[...]` too
        return msgspec.convert({name: data}, type=GenericAlias(dict, (str, model)))[name]
    except msgspec.ValidationError as exc:
        where, what = _problem(model, data, exc)
        raise PolicyError(f"{name}: {_one_line(where)}: {_one_line(what)}") from None


def _a_set(node: Any) -> str | None:
    """The dotted path of the first set (YAML `!!set`) in the loaded data, or None. The path is
    written only for the set found (a fourth review: a path built for every value, under a long
    key the loader's aliases repeat, cost the square of the text under serve's write lock); the
    refusal cuts it (`_one_line`)."""
    path: list[object] = []

    def walk(value: Any) -> bool:
        if isinstance(value, (set, frozenset)):
            return True
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            return False
        for key, item in items:
            path.append(key)
            if walk(item):
                return True
            path.pop()
        return False

    return ".".join(str(key) for key in path) if walk(node) else None


# ---- what went wrong, where: msgspec's "<what> - at `$.floors[0].pattern`" as floors.0.pattern ----

_AT = " - at `"
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]|\[(\.\.\.)\]")
_TYPE = re.compile(r"`([a-z]+(?: \| [a-z]+)*)`")
_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean (true or false)",
          "null": "nothing (null)", "array": "a list", "object": "a mapping", "set": "a set (!!set)",
          "bytes": "binary data (!!binary)", "date": "a date", "datetime": "a date and time"}  # fmt: skip
_LOST = object()  # the data along the path could not be followed (the path is then shown as is)


def _problem(model: type[_Model], data: dict[str, Any], exc: msgspec.ValidationError) -> tuple[str, str]:
    """(where, what) of a failed conversion: where is the dotted path of the key at fault, the
    mapping keys msgspec leaves out (`[...]`) found again (people.alice.keys); what is one line."""
    text = str(exc)
    head, at_, tail = text.rpartition(_AT)  # the last: what precedes may quote the file's own text
    if not at_:  # not a message msgspec writes inside a mapping: shown as it is
        return "(top)", _plain(text)
    of_key = tail.startswith("key` in `")
    path = tail.removeprefix("key` in `").removesuffix("`").removeprefix("$[...]")  # the wrapper
    steps: list[str | int | None] = []  # a field, an index, a mapping's value (None: msgspec's [...])
    at = 0
    while at < len(path):
        matched = _STEP.match(path, at)
        if matched is None:  # not a path msgspec writes: shown as it is
            return path or "(top)", head or text
        field, index, _ = matched.groups()
        steps.append(field if field is not None else int(index) if index is not None else None)
        at = matched.end()
    where: list[str] = []
    kind: Any = model
    node: Any = data
    for step in steps:
        kind = _bare(kind)
        if node is _LOST:
            where.append("*" if step is None else str(step))
        elif isinstance(step, str):  # a Struct's key, as the file spells it
            keys = msgspec.structs.fields(kind) if isinstance(kind, type) and issubclass(kind, _Model) else ()
            kind = next((f.type for f in keys if f.encode_name == step), Any)
            node = node.get(step, _LOST) if isinstance(node, dict) else _LOST
            where.append(step)
        elif isinstance(step, int):  # an item of a list
            kind = get_args(kind)[0] if get_args(kind) else Any
            node = list(node)[step] if isinstance(node, list | tuple) and step < len(node) else _LOST
            where.append(str(step))
        else:  # a mapping's value: the first one that fails on its own (msgspec stops at it)
            kind = get_args(kind)[1] if len(get_args(kind)) == 2 else Any
            found = (
                next((k for k, v in node.items() if _fails(v, kind)), _LOST)
                if isinstance(node, dict)
                else _LOST
            )
            node = _LOST if found is _LOST else node[found]
            where.append("*" if found is _LOST else str(found))
    cause = exc.__cause__
    if isinstance(cause, _Invalid):  # a check of one key, in __post_init__
        where.append(cause.key)
        what = str(cause)
    elif isinstance(cause, ValueError | TypeError):  # a check of the whole Struct
        what = str(cause)
    elif of_key:  # a mapping's key of the wrong type
        args = get_args(_bare(kind))
        key_kind = args[0] if len(args) == 2 else str
        found = next((k for k in node if _fails(k, key_kind)), _LOST) if isinstance(node, dict) else _LOST
        where.append("*" if found is _LOST else str(found))
        what = f"this key is not text ({_plain(head)})"
    elif unknown := re.fullmatch(r"Object contains unknown field `(.*)`", head, re.DOTALL):
        where.append(unknown.group(1))
        what = "an unknown key (not one this file takes)"
    elif missing := re.fullmatch(r"Object missing required field `(.*)`", head, re.DOTALL):
        where.append(missing.group(1))
        what = "missing: this key is required"
    elif head.startswith("Invalid enum value") and get_origin(_bare(kind)) is Literal:
        what = f"{head.removeprefix('Invalid enum value ')} is none of {', '.join(map(str, get_args(_bare(kind))))}"
    else:
        what = _plain(head)
    return ".".join(where) or "(top)", what


def _bare(kind: Any) -> Any:
    """A type without its constraints (Annotated) and without None (an optional key)."""
    if get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    args = [a for a in get_args(kind) if a is not type(None)]
    if type(None) in get_args(kind) and len(args) == 1:
        kind = args[0]
    return kind


def _fails(value: object, kind: Any) -> bool:
    try:
        msgspec.convert(value, type=kind)
    except msgspec.ValidationError:
        return True
    return False


def _plain(message: str) -> str:
    """msgspec's words for types as a YAML writer's: "Expected `array`, got `str`" as "expected a
    list, got a string"."""
    words = _TYPE.sub(lambda m: " or ".join(_WORDS.get(t, t) for t in m.group(1).split(" | ")), message)
    return words[:1].lower() + words[1:]


def _one_line(text: str) -> str:
    """The text with every control character escaped (a key of the file can hold a newline), cut at
    300 characters (a key may be 256 KiB long: the refusal names it, never echoes it whole)."""
    text = text if len(text) <= 300 else text[:299] + "…"
    return "".join(c if c.isprintable() or c == " " else ascii(c)[1:-1] for c in text)
