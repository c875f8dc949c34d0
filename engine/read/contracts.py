"""Unit contracts: `contracts/<id>.json`, one unit each (an id with "/" is a subfolder)."""

from __future__ import annotations

import json
import marshal
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import msgspec

from engine.base.errors import BadInput
from engine.base.gcpause import gc_paused
from engine.checkout.workspace import UNIT_ID, Workspace

REQUIRED = ("id", "type", "profile", "title")

# a large fleet has thousands of contract files: msgspec reads each several times faster
_loads = msgspec.json.decode


class Contract(msgspec.Struct, frozen=True):
    """A unit's contract. Plain and hand-checked: every command reads contracts, and a pydantic
    model here would cost the cold start more than the whole read does. A Struct: 10,000 of them
    are built in 5 ms, a frozen dataclass took 40."""

    id: str
    type: str
    profile: str
    title: str
    priority: int = 100
    workload: str | None = None
    contract: str | None = None
    budget: object = None  # {wallSeconds, tokens, costUsd}, or a free-form budget from before (text)
    route: str | None = None
    extra: dict = {}  # a new dict for each
    checks: tuple[str, ...] = ()  # commands run_checks may run, exactly (design §23)

    @property
    def wall_seconds(self) -> int | None:
        """The wall-clock budget `unit run` enforces, or None (none, or a free-form budget)."""
        budget = self.budget
        return budget.get("wallSeconds") if isinstance(budget, dict) else None

    @classmethod
    def from_dict(cls, data: dict) -> Contract:
        return cls(*checked_fields(data))


KNOWN = frozenset(
    {"id", "type", "profile", "title", "priority", "workload", "contract", "budget", "route", "checks"}
)
BUDGET_KEYS = ("wallSeconds", "tokens", "costUsd")
MAX_CHECKS = 64


def checked_fields(data: dict) -> tuple:
    """A contract's fields in Contract's order, checked; ValueError names the first bad one."""
    for name in REQUIRED:
        value = data.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name}: required text")
        if len(value) > (1024 if name == "title" else 200):
            raise ValueError(f"{name}: too long")
    if not UNIT_ID.fullmatch(data["id"]):
        raise ValueError(f"id: {data['id']!r} is not a unit id")
    priority = data.get("priority", 100)
    if type(priority) is not int:
        raise ValueError("priority: expected a whole number")
    for name in ("workload", "contract", "route"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ValueError(f"{name}: expected text")
    _check_budget(data.get("budget"))
    checks = _checks(data.get("checks"))
    return (
        data["id"],
        data["type"],
        data["profile"],
        data["title"],
        priority,
        data.get("workload"),
        data.get("contract"),
        data.get("budget"),
        data.get("route"),
        {k: v for k, v in data.items() if k not in KNOWN},
        checks,
    )


def _contract(fields: tuple | list) -> Contract:
    """A Contract from its fields in order; `checks` a tuple again however they were kept (a
    checkpoint keeps the tuple as a list)."""
    contract = Contract(*fields)
    if type(contract.checks) is not tuple:
        contract = msgspec.structs.replace(contract, checks=tuple(contract.checks))
    return contract


def _check_budget(budget: object) -> None:
    """`{wallSeconds, tokens, costUsd}`, each optional; text or a number is a free-form budget from
    before this round, kept as it is and enforcing nothing (design §23)."""
    if budget is None or isinstance(budget, str) or type(budget) in (int, float):
        return
    if not isinstance(budget, dict):
        raise ValueError(
            "budget: expected {wallSeconds, tokens, costUsd} (or free text, which enforces nothing)"
        )
    unknown = sorted(set(budget) - set(BUDGET_KEYS))
    if unknown:
        raise ValueError(f"budget: unknown key {unknown[0]!r} (known: {', '.join(BUDGET_KEYS)})")
    wall, tokens, cost = (budget.get(k) for k in BUDGET_KEYS)
    if wall is not None and (type(wall) is not int or wall < 1):
        raise ValueError("budget.wallSeconds: expected a whole number of seconds, 1 or more")
    if tokens is not None and (type(tokens) is not int or tokens < 0):
        raise ValueError("budget.tokens: expected a whole number, 0 or more")
    if cost is not None and (type(cost) not in (int, float) or not 0 <= cost < 1e12):
        raise ValueError("budget.costUsd: expected a number of dollars, 0 or more")


def _checks(value: object) -> tuple[str, ...]:
    """The commands a unit's run_checks grant lets it run (exact match), as text."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_CHECKS:
        raise ValueError(f"checks: expected a list of at most {MAX_CHECKS} commands")
    for command in value:
        if not isinstance(command, str) or not command.strip() or len(command) > 4096 or "\x00" in command:
            raise ValueError("checks: each command is non-empty text of at most 4096 characters")
    return tuple(value)


def contract_path(ws: Workspace, unit_id: str) -> Path:
    return ws.root / "contracts" / f"{unit_id}.json"


def no_contract(unit_id: str, known: Iterable[str]) -> BadInput:
    """A unit id that names no contract (exit 2): the units it is near said first (an operator's
    typo, `unit demote alhpa`, was told to add a contract), else how to add one."""
    import difflib

    near = difflib.get_close_matches(unit_id, sorted(set(known)), n=3, cutoff=0.6)
    hint = (
        "did you mean " + " or ".join(repr(n) for n in near) + "? If not, add it" if near else "add it first"
    )
    return BadInput(
        f"unit {unit_id!r} has no contract (contracts/{unit_id}.json); {hint} (`regulator unit new`)"
    )


def read_contract(ws: Workspace, unit_id: str) -> Contract:
    """One unit's contract, read now; BadInput (exit 2) in one line when it is missing or invalid,
    naming the file and what is wrong."""
    path = contract_path(ws, unit_id)
    relative = f"contracts/{unit_id}.json"
    if not path.is_file():
        folder = ws.root / "contracts"
        raise no_contract(
            unit_id, (p.relative_to(folder).with_suffix("").as_posix() for p in folder.glob("**/*.json"))
        )
    outcome = _read_contract(unit_id, str(path))
    if type(outcome) is str:
        raise BadInput(f"invalid contract {relative}: {outcome.removeprefix(str(path) + ': ')}")
    assert not isinstance(outcome, str)
    return _contract(outcome)


def _parse_fields(path: Path | str, text: str) -> tuple:
    try:
        data = _loads(text)
    except (ValueError, RecursionError):
        try:  # the standard library's message names line and column in words people know
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise BadInput(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object")
    try:
        return checked_fields(data)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{path}: {exc}") from None


class ContractFiles(msgspec.Struct):
    """What each contract file gave when last read, keyed by path with the file's identity: a
    checkpoint keeps it, so a file whose identity is unchanged is not read again."""

    seen: dict[str, tuple] = msgspec.field(default_factory=dict)  # path -> (identity, fields or problem)
    read: int = 0  # files actually read by the last load


def load_contracts(
    ws: Workspace, problems: list[str] | None = None, files: ContractFiles | None = None
) -> dict[str, Contract]:
    """Every contract under contracts/; a bad file is named in `problems` and left out."""
    seen, read = _outcomes(ws, files.seen if files is not None else {})
    if files is not None:
        files.seen, files.read = seen, read
    return contracts_of(seen, problems)


def contracts_of(seen: dict[str, tuple], problems: list[str] | None = None) -> dict[str, Contract]:
    """The contracts, and the problems of the files left out, from what a read gave (in path order)."""
    found: dict[str, Contract] = {}
    for _identity, outcome in seen.values():
        if type(outcome) is str:
            if problems is not None:
                problems.append(outcome)
        else:
            found[outcome[0]] = _contract(outcome)
    return found


def _outcomes(ws: Workspace, before: dict[str, tuple]) -> tuple[dict[str, tuple], int]:
    """path -> (identity, fields or problem) for every contract file, in path order, reading only
    the files whose identity differs from `before`; and how many were read."""
    folder = ws.root / "contracts"
    after: dict[str, tuple] = {}
    read = 0
    if folder.is_dir():
        for expected, path, identity in sorted(_contract_files(folder)):
            cached = before.get(path)
            if cached is not None and identity is not None and cached[0] == identity:
                outcome = cached[1]
            else:
                outcome = _read_contract(expected, path)
                read += 1
            after[path] = (identity, outcome)
    return after, read


def _read_contract(expected: str, path: str) -> tuple | str:
    """A contract's fields, or the one-line problem that leaves it out."""
    try:
        fd = os.open(path, os.O_RDONLY)  # no buffered file object: 10,000 of these on a large fleet
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
        found = _parse_fields(path, b"".join(chunks).decode("utf-8"))
    except (BadInput, UnicodeDecodeError, OSError) as exc:
        return str(exc)
    if found[0] != expected:
        return f"{path}: id {found[0]!r} does not match the file name {expected!r}"
    return found


def _contract_files(folder: Path) -> list[tuple[str, str, tuple | None]]:
    """(unit id the path implies, path, file identity) for every contracts/<id>.json and
    contracts/<a>/<b>.json. The identity (inode, size, mtime, ctime) changes whenever the file does."""
    files = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_file() and entry.name.endswith(".json"):
                files.append((entry.name[:-5], entry.path, _identity(entry)))
            elif entry.is_dir():
                with os.scandir(entry.path) as inner:
                    for sub in inner:
                        if sub.is_file() and sub.name.endswith(".json"):
                            files.append((f"{entry.name}/{sub.name[:-5]}", sub.path, _identity(sub)))
    return files


def _identity(entry: os.DirEntry) -> tuple | None:
    try:
        st = entry.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


PREFETCH_BYTES = 16 << 20  # a cold read of this much log lets a second process read the contracts
HELPER = "engine.read.contracts_helper"  # run as `python -m`, from this code's own folder


def prefetch_threshold() -> int | None:
    """`REGULATOR_PREFETCH_BYTES`: how much log a cold read must face to start the helper; off: never."""
    value = os.environ.get("REGULATOR_PREFETCH_BYTES", "")
    if value == "off":
        return None
    try:
        return max(0, int(value)) if value else PREFETCH_BYTES
    except (ValueError, RecursionError):
        return PREFETCH_BYTES


class Prefetch:
    """The contract files, read by a second process while this one folds a large log from its
    first byte, so a cold start uses both cores. It hands back what `load_contracts` would have
    read here a moment earlier (each file's outcome under its identity, the cache a checkpoint
    keeps); a file that changes later is seen as any change is, by the next read. Any failure of
    the helper only means reading them here."""

    def __init__(self, ws: Workspace) -> None:
        import subprocess

        self._subprocess = subprocess
        package_root = str(Path(__file__).resolve().parents[2])  # this code, installed or not
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", HELPER, str(ws.root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def files(self) -> ContractFiles | None:
        """What the helper read, or None when it did not finish well."""
        try:
            out, _ = self.process.communicate(timeout=120)
        except self._subprocess.TimeoutExpired:
            self.close()
            return None
        if self.process.returncode != 0:
            return None
        try:
            with gc_paused():  # 10,000 entries, all kept: nothing for the collector to find
                seen = marshal.loads(out)
        except (EOFError, ValueError, TypeError):
            return None
        return ContractFiles(seen=seen) if type(seen) is dict else None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def prefetch(ws: Workspace) -> Prefetch | None:
    if not sys.executable or not (ws.root / "contracts").is_dir():
        return None
    try:
        return Prefetch(ws)
    except OSError:
        return None


def new_contract(
    ws: Workspace,
    unit_id: str,
    unit_type: str,
    profile: str,
    title: str,
    text: str | None = None,
    budget_wall: str | None = None,
) -> Path:
    """`regulator unit new`: a valid contracts/<id>.json (design §23), never over an existing one.
    The profile must be one the decided profiles.yaml names (exit 2 otherwise); the type is free."""
    from engine.base.clock import parse_duration
    from engine.base.limits import check_text
    from engine.checkout.workspace import check_unit_id

    check_unit_id(unit_id)
    contract: dict = {
        "id": unit_id,
        "type": check_text("--type", unit_type, kind="id"),
        "profile": check_text("--profile", profile, kind="id"),
        "title": check_text("--title", title, kind="title"),
    }
    if text is not None:
        contract["contract"] = check_text("--contract", text, kind="content")
    if budget_wall is not None:
        contract["budget"] = {"wallSeconds": parse_duration(budget_wall, "--budget-wall")}
    known = ws.profiles().profiles
    if profile not in known:
        raise BadInput(f"--profile {profile!r} is not in profiles.yaml (known: {', '.join(sorted(known))})")
    try:
        Contract.from_dict(contract)
    except ValueError as exc:
        raise BadInput(f"contract: {exc}") from None
    path = contract_path(ws, unit_id)
    if path.exists() or path.is_symlink():
        raise BadInput(f"contracts/{unit_id}.json exists; edit it, or choose another id")
    data = (json.dumps(contract, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise BadInput(f"contracts/{unit_id}.json: cannot write ({exc.strerror})") from None
    return path


def write_contract(ws: Workspace, contract: dict) -> Path:
    """Used by `demo` and tests: validate, then write the contract file."""
    checked = Contract.from_dict(contract)
    path = contract_path(ws, checked.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(contract, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


_TEXT = {"type": "string", "pattern": r"\S"}  # text with something in it besides spaces
SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://regulator.invalid/schema/contract.json",
    "title": "regulator unit contract (contracts/<id>.json)",
    "description": "One unit: what it is asked to do, under which profile, within which budget (design §4.1, §23).",
    "type": "object",
    "required": list(REQUIRED),
    "properties": {
        "id": {
            "type": "string",
            "pattern": "^" + UNIT_ID.pattern + "$",
            "maxLength": 200,
            "description": "The unit id; the file is contracts/<id>.json (an id with '/' is a subfolder).",
        },
        "type": {**_TEXT, "maxLength": 200, "description": "Free text: research, implement, bookkeeper, ..."},
        "profile": {**_TEXT, "maxLength": 200, "description": "A key of regulator/policy/profiles.yaml."},
        "title": {**_TEXT, "maxLength": 1024, "description": "One line people read."},
        "contract": {"type": "string", "description": "The task, in words; it opens the unit's context."},
        "workload": {"type": "string", "description": "e.g. software-development, household-ledger."},
        "route": {"type": "string", "description": "The model route."},
        "priority": {"type": "integer", "description": "Lower first in Next-up; default 100."},
        "budget": {
            "description": "What a run may spend. Text or a number is a free-form budget from before: kept, enforcing nothing.",
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "wallSeconds": {
                            "type": "integer",
                            "minimum": 1,
                            "description": "`unit run` kills the run's process group after this many seconds.",
                        },
                        "tokens": {"type": "integer", "minimum": 0},
                        "costUsd": {"type": "number", "minimum": 0},
                    },
                },
                {"type": "string"},
                {"type": "number"},
            ],
        },
        "checks": {
            "type": "array",
            "maxItems": MAX_CHECKS,
            "items": {**_TEXT, "maxLength": 4096},
            "description": "Commands the run_checks grant lets the unit run in a shell, matched exactly.",
        },
    },
}


def schema_text() -> str:
    """What `regulator unit schema` prints."""
    return json.dumps(SCHEMA, indent=2, ensure_ascii=False) + "\n"
