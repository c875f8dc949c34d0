"""Register entries: one markdown file each, YAML frontmatter (safe_load only), typed references.

Prose is never parsed for status: only the frontmatter fields of design §8.1 and §9 count. A file
that cannot be read (invalid UTF-8, a byte-order mark, merge conflict markers, bad YAML, a key
given twice) is `unreadable`; one that reads but breaks the schema (an impossible date included)
is `schema`. Either way it is listed as invalid, never left out (design §16.3).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from datetime import date, datetime
from functools import partial
from pathlib import Path

import msgspec

from registry.frontmatter import parse as fast_parse

REGISTERS = {"findings": "finding", "intake": "intake", "records": "record", "retro": "retro"}
SLUG = re.compile(r"[A-Za-z0-9-]+")
FINDING_ID = re.compile(r"F-[A-Za-z0-9-]+")
INTAKE_ID = re.compile(r"I-[A-Za-z0-9-]+")
RECORD_ID = re.compile(r"[A-Z][A-Z0-9]*-(CMP|OBJ|RTE|CLM|BAP)-[A-Za-z0-9-]+")
RETRO_ID = re.compile(r"R-\d{4}-\d{2}-\d{2}-[A-Za-z0-9-]+")
ACK = re.compile(r"(\d{4}-\d{2}-\d{2}) (\S.*)")
DISPOSITIONS = ("new", "parked", "rejected")
RECORD_STATUS = ("claimed", "wired", "observed", "uninspected", "n/a")
AXES = ("claim", "implementation", "operation")
# design §19: the status axes a record of each kind must carry (seed 003's records carry them so)
REQUIRED_AXES: dict[str, tuple[str, ...]] = {
    "CLM": AXES,
    "BAP": AXES,
    "RTE": ("implementation", "operation"),
    "CMP": (),
    "OBJ": (),
}
# seed 003's limitation facets, named as it names them
FACETS = (
    "Immediate return",
    "Later read-back",
    "Delegated visibility",
    "Selection predicate",
    "Invalidation or expiry",
    "Activation or effect",
    "Evidence limits",
)
EVIDENCE_KINDS = ("direct", "supplied")  # inspected here; a finding supplied from elsewhere
RECORD_KINDS = {
    "CMP": "component",
    "OBJ": "operative object",
    "RTE": "route",
    "CLM": "claim",
    "BAP": "behavioural-authority path",
}
LOAD_BEARING = ("resolved", "affects", "ack")
BOM = "\ufeff"
# git's conflict markers; `=======` alone is also a markdown heading underline, so it is not one
CONFLICT = re.compile(r"^(<{7}|>{7}|\|{7})(?: |$)", re.MULTILINE)


class Issue(msgspec.Struct, frozen=True):
    """One lint result: a fixed code, the entry (or path) it is about, and a message."""

    level: str  # error | warning | notice
    code: str
    entry: str
    message: str

    def as_json(self) -> dict:
        return {"code": self.code, "entry": self.entry, "message": self.message}


class Entry(msgspec.Struct):
    kind: str  # finding | intake | record | retro
    path: str  # relative to the workspace, posix
    id: str
    fields: dict
    body: str

    @property
    def title(self) -> str:
        return str(self.fields.get("title") or self.fields.get("label") or "")


def id_of(path: str) -> str:
    """The id a register file's name gives (`findings/F-x.md` -> `F-x`)."""
    return path.rsplit("/", 1)[-1].removesuffix(".md")


class Invalid(msgspec.Struct, frozen=True):
    """A register file present in the working tree that is no valid entry."""

    kind: str  # finding | intake | record
    path: str
    code: str  # unreadable | schema
    problem: str  # what is wrong, without the path

    @property
    def id(self) -> str:
        """The id the file name gives it (the frontmatter cannot be trusted)."""
        return id_of(self.path)


class Held(msgspec.Struct, frozen=True):
    """The hold an unreadable finding keeps: its last parseable version on trunk (design §16.3)."""

    entry: Entry
    commit: str  # the trunk commit that version is from


class Registers(msgspec.Struct):
    findings: dict[str, Entry] = msgspec.field(default_factory=dict)
    intake: dict[str, Entry] = msgspec.field(default_factory=dict)
    records: dict[str, Entry] = msgspec.field(default_factory=dict)
    retro: dict[str, Entry] = msgspec.field(default_factory=dict)
    issues: list[Issue] = msgspec.field(default_factory=list)
    paths: set[str] = msgspec.field(default_factory=set)  # every register file present, parsed or not
    texts: dict[str, str] = msgspec.field(default_factory=dict)  # path -> text as read (lint compares it)
    invalid: dict[str, Invalid] = msgspec.field(default_factory=dict)  # path -> why it is no entry
    held: dict[str, Held] = msgspec.field(default_factory=dict)  # invalid finding path -> its trunk hold
    trunk: object = None  # registry.trunkwalk.TrunkFindings, walked on first use (engine.read.ladder)

    def invalid_of(self, kind: str) -> list[Invalid]:
        return sorted((i for i in self.invalid.values() if i.kind == kind), key=lambda i: i.path)


class EntryError(ValueError):
    """An entry that is no valid entry; `code` is its lint code (schema, or unreadable)."""

    def __init__(self, message: str, code: str = "schema") -> None:
        super().__init__(message)
        self.code = code


class Unreadable(EntryError):
    """The file cannot be read as frontmatter at all."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "unreadable")


def decode(data: bytes) -> str:
    """An entry's bytes as text: UTF-8, without a byte-order mark; Unreadable otherwise."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise Unreadable("starts with a byte-order mark (U+FEFF): save it as UTF-8 without one")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise Unreadable(f"not valid UTF-8 (line {line}, byte 0x{data[exc.start]:02x})") from None


def split_frontmatter(text: str) -> tuple[str, str]:
    if text.startswith(BOM):
        raise Unreadable("starts with a byte-order mark (U+FEFF): save it as UTF-8 without one")
    conflict = CONFLICT.search(text) if "<<<<<<<" in text or ">>>>>>>" in text or "|||||||" in text else None
    if conflict:
        line = text.count("\n", 0, conflict.start()) + 1
        raise Unreadable(f"holds merge conflict markers (line {line}): resolve the conflict")
    if not text.startswith("---"):
        raise Unreadable("no YAML frontmatter (the file must start with ---)")
    lines = text.split("\n")
    if lines[0].strip() != "---":
        raise Unreadable("no YAML frontmatter (the first line must be ---)")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise Unreadable("frontmatter is not closed by a --- line")


def load_frontmatter(text: str) -> tuple[dict, str]:
    head, body = split_frontmatter(text)
    fast = fast_parse(head)
    if fast is not None:
        return fast, body
    from identity.yamlload import ImpossibleDateError, YamlError, safe_load_strict  # only now: 15 ms

    try:
        data = safe_load_strict(head)
    except ImpossibleDateError as exc:  # YAML reads it, but as no date: the schema's to name
        field_name = f"field {exc.key}" if exc.key is not None else "a value"
        raise EntryError(f"{field_name}: {exc.value} is not a real date (line {exc.line + 1})") from None
    except YamlError as exc:  # lines counted in the file: the head starts on its second line
        raise Unreadable(f"frontmatter is not safe YAML ({exc.at(1)})") from None
    if not isinstance(data, dict):
        raise Unreadable("frontmatter must be a mapping")
    return data, body


def _text(data: dict, name: str, required: bool = True) -> str | None:
    value = data.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise EntryError(f"field {name}: expected non-empty text")
    return value


def _date(data: dict, name: str) -> date:
    value = data.get(name)
    if isinstance(value, date) and not isinstance(value, datetime):  # a YAML timestamp is no date
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise EntryError(f"field {name}: expected a date YYYY-MM-DD")


def _list(data: dict, name: str) -> list[str]:
    value = data.get(name, [])
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EntryError(f"field {name}: expected a list of text")
    return value


def check_id(kind: str, entry_id: object, stem: str) -> str:
    if not isinstance(entry_id, str):
        raise EntryError("field id: expected text")
    if "/" in entry_id or ".." in entry_id or "\\" in entry_id:
        raise EntryError(f"field id: {entry_id!r} holds a path separator or '..'")
    pattern = {"finding": FINDING_ID, "intake": INTAKE_ID, "record": RECORD_ID, "retro": RETRO_ID}[kind]
    if not pattern.fullmatch(entry_id):
        raise EntryError(f"field id: {entry_id!r} is not a {kind} id ({pattern.pattern})")
    if entry_id != stem:
        raise EntryError(f"field id: {entry_id!r} does not match the file name {stem!r}")
    return entry_id


def parse_entry(kind: str, relative: str, text: str) -> Entry:
    """Parse and check one entry's schema; EntryError names the field."""
    data, body = load_frontmatter(text)
    stem = id_of(relative)
    entry_id = check_id(kind, data.get("id"), stem)
    if kind == "finding":
        _date(data, "date")
        _text(data, "title")
        _list(data, "affects")
        ack = data.get("ack", "")
        if ack is None:
            ack = ""
        if not isinstance(ack, str):
            raise EntryError('field ack: expected "" or "YYYY-MM-DD <person>"')
        data["ack"] = ack
        if not isinstance(data.get("resolved"), bool):
            raise EntryError("field resolved: expected true or false")
    elif kind == "intake":
        _date(data, "date")
        _text(data, "title")
        disposition = data.get("disposition")
        if not isinstance(disposition, str) or not (
            disposition in DISPOSITIONS or re.fullmatch(r"scoped:[a-z0-9][a-z0-9-]*", disposition)
        ):
            raise EntryError("field disposition: expected new, parked, scoped:<stream> or rejected")
        if disposition == "rejected":
            _text(data, "reason")  # a tombstone says why
    elif kind == "retro":
        _retro(data)
    else:
        _record(data, entry_id)
    return Entry(kind, relative, entry_id, data, body)


def _record(data: dict, entry_id: str) -> None:
    """A record's schema (design §9 as amended by §19)."""
    _text(data, "label")
    record_kind = entry_id.split("-")[1]
    if data.get("kind") not in (record_kind, RECORD_KINDS[record_kind]):
        raise EntryError(f"field kind: expected {record_kind} (from the id)")
    _status(data, record_kind)
    _list(data, "sources")
    _list(data, "relates")
    _list(data, "absences")
    external = _list(data, "external")
    for ref in external:
        if not RECORD_ID.fullmatch(ref):
            raise EntryError(f"field external: {ref!r} is not a record id (<PREFIX>-<KIND>-<slug>)")
    _limitations(data)
    _evidence(data)


def _status(data: dict, record_kind: str) -> None:
    """Kind-dependent axes: CLM and BAP all three, RTE implementation and operation (a claim only
    as n/a), CMP and OBJ none required (the key may be absent). Any value may be n/a."""
    required = REQUIRED_AXES[record_kind]
    status = data.get("status")
    if status is None and not required:
        return
    if not isinstance(status, dict):
        need = " and ".join(required) if required else "nothing (omit it) or axes"
        raise EntryError(f"field status: expected a mapping of {need}")
    for part in status:
        if part not in AXES:
            raise EntryError(f"field status.{part}: not an axis (claim, implementation, operation)")
    for part in required:
        if part not in status:
            raise EntryError(f"field status.{part}: a {record_kind} record states it ({', '.join(required)})")
    for part, value in status.items():
        if value not in RECORD_STATUS:
            raise EntryError(f"field status.{part}: expected one of {', '.join(RECORD_STATUS)}")
    if record_kind == "RTE" and status.get("claim", "n/a") != "n/a":
        raise EntryError(
            "field status.claim: a route carries no claim status (omit it, or n/a; a record shipped "
            "before design §19 carries one: delete that line)"
        )


def _limitations(data: dict) -> None:
    """Plain strings, or facets {facet, text} named as seed 003 names them."""
    value = data.get("limitations") or []
    if not isinstance(value, list):
        raise EntryError("field limitations: expected a list")
    for item in value:
        if isinstance(item, str):
            continue
        if not isinstance(item, dict) or set(item) != {"facet", "text"} or not isinstance(item["text"], str):
            raise EntryError("field limitations: each is text or {facet, text}")
        if item["facet"] not in FACETS:
            raise EntryError(f"field limitations: facet {item['facet']!r} is not one of {', '.join(FACETS)}")


def _evidence(data: dict) -> None:
    """Plain strings, or one-key maps {direct: TEXT} / {supplied: TEXT}."""
    value = data.get("evidence") or []
    if not isinstance(value, list):
        raise EntryError("field evidence: expected a list")
    for item in value:
        if isinstance(item, str):
            continue
        if (
            not isinstance(item, dict)
            or len(item) != 1
            or next(iter(item)) not in EVIDENCE_KINDS
            or not isinstance(next(iter(item.values())), str)
        ):
            raise EntryError("field evidence: each is text, {direct: TEXT} or {supplied: TEXT}")


def _retro(data: dict) -> None:
    """A RETRO entry (design §19): the period and the generated numbers; the body is prose."""
    _date(data, "since")
    until = data.get("until")
    if not isinstance(until, str | date):
        raise EntryError("field until: expected a time YYYY-MM-DDTHH:MM:SSZ")
    numbers = data.get("numbers")
    if not isinstance(numbers, dict):
        raise EntryError("field numbers: expected {name: {value, query}}")
    for name, number in numbers.items():
        if not isinstance(number, dict) or set(number) != {"value", "query"}:
            raise EntryError(f"field numbers.{name}: expected {{value, query}}")


def limitation_text(item: object) -> str:
    """A limitation as one line: a facet is shown as `Facet: text`."""
    if isinstance(item, dict):
        return f"{item.get('facet')}: {item.get('text')}"
    return str(item)


def evidence_text(item: object) -> str:
    """An evidence item as one line: `direct: ...`, `supplied: ...`, or the plain text."""
    if isinstance(item, dict) and len(item) == 1:
        kind, text = next(iter(item.items()))
        return f"{kind}: {text}"
    return str(item)


def load_fields(kind: str, text: str) -> dict | None:
    """The frontmatter of an entry as it stood somewhere in history; None when unreadable."""
    try:
        data, _ = load_frontmatter(text)
    except EntryError:
        return None
    return data


MAX_ENTRY_BYTES = 1 << 20  # a register entry is prose and frontmatter: a larger file is not one


_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _read_entry(path: Path) -> bytes:
    """A regular file's bytes, never through a symlink and never more than MAX_ENTRY_BYTES: a
    committed link to /dev/zero or a FIFO must not hang every command (design §16.4). Read with
    os.read, no buffered file object: `registry lint` reads 10,000 of these in the bench."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        why = "a symlink (entries are files)" if path.is_symlink() else exc.strerror
        raise Unreadable(f"cannot be read ({why})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("cannot be read (not a regular file)")
        if st.st_size > MAX_ENTRY_BYTES:
            raise Unreadable(f"cannot be read ({st.st_size} bytes: over {MAX_ENTRY_BYTES})")
        parts = []
        left = MAX_ENTRY_BYTES + 1
        while left > 0:  # to the end, as a buffered read does (a file may grow while it is read)
            part = os.read(fd, left)
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def _name(path: Path) -> str:
    return path.name


def load_registers(root: Path) -> Registers:
    registers = Registers()
    for folder, kind in REGISTERS.items():
        base = root / folder
        if base.is_symlink():  # a register folder is read where it is, never through a link (D-230)
            message = (
                f"{folder}/ is a symlink: register folders are read only where they are (a link lets "
                f"entries leave git's {folder}/ while they still show here); commit {folder}/ as a folder"
            )
            registers.issues.append(Issue("error", "unreadable", f"{folder}/", message))
            continue
        if not base.is_dir():
            continue
        target = getattr(registers, folder)
        # by name: one folder's paths order as their names do, compared as text (not as Paths)
        for path in sorted(base.glob("*.md"), key=_name):
            relative = f"{folder}/{path.name}"
            registers.paths.add(relative)
            _add(registers, kind, relative, target, partial(_read_entry, path))
    return registers


def _add(
    registers: Registers, kind: str, relative: str, target: dict[str, Entry], read: Callable[[], bytes]
) -> None:
    try:
        text = decode(read())
        registers.texts[relative] = text
        entry = parse_entry(kind, relative, text)
        if entry.id in target:
            raise EntryError(f"duplicate id {entry.id}")
    except EntryError as exc:
        registers.invalid[relative] = Invalid(kind, relative, exc.code, str(exc))
        registers.issues.append(Issue("error", exc.code, relative, f"{relative}: {exc}"))
        return
    target[entry.id] = entry


def registers_from(blobs: dict[str, bytes]) -> Registers:
    """The registers a tree held (path -> bytes, e.g. a trunk commit's), read as load_registers
    reads the working tree."""
    registers = Registers()
    for relative in sorted(blobs):
        folder, _, name = relative.partition("/")
        kind = REGISTERS.get(folder)
        if kind is None or "/" in name or not name.endswith(".md"):
            continue
        registers.paths.add(relative)
        if len(blobs[relative]) > MAX_ENTRY_BYTES:
            registers.invalid[relative] = Invalid(kind, relative, "unreadable", "too large")
            registers.issues.append(Issue("error", "unreadable", relative, f"{relative}: too large"))
            continue
        _add(registers, kind, relative, getattr(registers, folder), partial(blobs.__getitem__, relative))
    return registers


def entry_or_none(kind: str, relative: str, text: str) -> Entry | None:
    """The entry a version of a file holds, or None when that version is no valid entry."""
    try:
        return parse_entry(kind, relative, text)
    except EntryError:
        return None


def parse_ack(ack: str) -> tuple[date, str] | None:
    match = ACK.fullmatch(ack.strip()) if isinstance(ack, str) else None
    if not match:
        return None
    try:
        return date.fromisoformat(match.group(1)), match.group(2).strip()
    except ValueError:
        return None
