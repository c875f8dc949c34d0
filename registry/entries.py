"""Register entries: one markdown file each, YAML frontmatter (safe_load only), typed references.

Prose is never parsed for status: only the frontmatter fields of SPEC §8.1 and §9 count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

from registry.frontmatter import parse as fast_parse

try:  # the C loader is the same safe subset, faster
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader

REGISTERS = {"findings": "finding", "intake": "intake", "records": "record"}
SLUG = re.compile(r"[A-Za-z0-9-]+")
FINDING_ID = re.compile(r"F-[A-Za-z0-9-]+")
INTAKE_ID = re.compile(r"I-[A-Za-z0-9-]+")
RECORD_ID = re.compile(r"[A-Z][A-Z0-9]*-(CMP|OBJ|RTE|CLM|BAP)-[A-Za-z0-9-]+")
ACK = re.compile(r"(\d{4}-\d{2}-\d{2}) (\S.*)")
DISPOSITIONS = ("new", "parked", "rejected")
RECORD_STATUS = ("claimed", "wired", "observed", "uninspected")
RECORD_KINDS = {
    "CMP": "component",
    "OBJ": "operative object",
    "RTE": "route",
    "CLM": "claim",
    "BAP": "behavioural-authority path",
}
LOAD_BEARING = ("resolved", "affects", "ack")


@dataclass(frozen=True)
class Issue:
    """One lint result: a fixed code, the entry (or path) it is about, and a message."""

    level: str  # error | warning | notice
    code: str
    entry: str
    message: str

    def as_json(self) -> dict:
        return {"code": self.code, "entry": self.entry, "message": self.message}


@dataclass
class Entry:
    kind: str  # finding | intake | record
    path: str  # relative to the workspace, posix
    id: str
    fields: dict
    body: str

    @property
    def title(self) -> str:
        return str(self.fields.get("title") or self.fields.get("label") or "")


@dataclass
class Registers:
    findings: dict[str, Entry] = field(default_factory=dict)
    intake: dict[str, Entry] = field(default_factory=dict)
    records: dict[str, Entry] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)  # every register file present, parsed or not
    texts: dict[str, str] = field(default_factory=dict)  # path -> text as read (lint compares it)


class EntryError(ValueError):
    pass


def split_frontmatter(text: str) -> tuple[str, str]:
    if not text.startswith("---"):
        raise EntryError("no YAML frontmatter (the file must start with ---)")
    lines = text.split("\n")
    if lines[0].strip() != "---":
        raise EntryError("no YAML frontmatter (the first line must be ---)")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise EntryError("frontmatter is not closed by a --- line")


def load_frontmatter(text: str) -> tuple[dict, str]:
    head, body = split_frontmatter(text)
    data = fast_parse(head)
    if data is not None:
        return data, body
    try:
        data = yaml.load(head, Loader=SafeLoader)  # noqa: S506 (SafeLoader: no tags, no code)
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "bad YAML"
        raise EntryError(f"frontmatter is not safe YAML ({first})") from None
    if not isinstance(data, dict):
        raise EntryError("frontmatter must be a mapping")
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
    if isinstance(value, date):
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
        raise EntryError(f"field {name}: expected a list of ids")
    return value


def check_id(kind: str, entry_id: object, stem: str) -> str:
    if not isinstance(entry_id, str):
        raise EntryError("field id: expected text")
    if "/" in entry_id or ".." in entry_id or "\\" in entry_id:
        raise EntryError(f"field id: {entry_id!r} holds a path separator or '..'")
    pattern = {"finding": FINDING_ID, "intake": INTAKE_ID, "record": RECORD_ID}[kind]
    if not pattern.fullmatch(entry_id):
        raise EntryError(f"field id: {entry_id!r} is not a {kind} id ({pattern.pattern})")
    if entry_id != stem:
        raise EntryError(f"field id: {entry_id!r} does not match the file name {stem!r}")
    return entry_id


def parse_entry(kind: str, relative: str, text: str) -> Entry:
    """Parse and check one entry's schema; EntryError names the field."""
    data, body = load_frontmatter(text)
    stem = relative.rsplit("/", 1)[-1].removesuffix(".md")
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
    else:
        _text(data, "label")
        record_kind = entry_id.split("-")[1]
        if data.get("kind") not in (record_kind, RECORD_KINDS[record_kind]):
            raise EntryError(f"field kind: expected {record_kind} (from the id)")
        status = data.get("status")
        if not isinstance(status, dict):
            raise EntryError("field status: expected claim, implementation and operation")
        for part in ("claim", "implementation", "operation"):
            if status.get(part) not in RECORD_STATUS:
                raise EntryError(f"field status.{part}: expected one of {', '.join(RECORD_STATUS)}")
        _list(data, "sources")
        _list(data, "relates")
        _list(data, "limitations")
    return Entry(kind, relative, entry_id, data, body)


def load_fields(kind: str, text: str) -> dict | None:
    """The frontmatter of an entry as it stood somewhere in history; None when unreadable."""
    try:
        data, _ = load_frontmatter(text)
    except EntryError:
        return None
    return data


def load_registers(root: Path) -> Registers:
    registers = Registers()
    for folder, kind in REGISTERS.items():
        base = root / folder
        if not base.is_dir():
            continue
        target = getattr(registers, folder)
        for path in sorted(base.glob("*.md")):
            relative = f"{folder}/{path.name}"
            registers.paths.add(relative)
            try:
                text = path.read_bytes().decode("utf-8")
                registers.texts[relative] = text
                entry = parse_entry(kind, relative, text)
            except (EntryError, UnicodeDecodeError, OSError) as exc:
                registers.issues.append(Issue("error", "schema", relative, f"{relative}: {exc}"))
                continue
            if entry.id in target:
                registers.issues.append(
                    Issue("error", "schema", relative, f"{relative}: duplicate id {entry.id}")
                )
                continue
            target[entry.id] = entry
    return registers


def parse_ack(ack: str) -> tuple[date, str] | None:
    match = ACK.fullmatch(ack.strip()) if isinstance(ack, str) else None
    if not match:
        return None
    try:
        return date.fromisoformat(match.group(1)), match.group(2).strip()
    except ValueError:
        return None
