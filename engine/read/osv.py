"""OSV advisories against lockfiles (design §24): reading a feed, reading the four lockfile formats,
and deciding whether a pinned version is affected, as the OSV schema's evaluation says.

Pure of the stores: engine.commands.sensors reads the feed and trunk, and writes what this module finds.
Matching follows https://ossf.github.io/osv-schema/ ("Evaluation"): a version is affected when
it is in an `affected[]` entry's `versions` list, or inside one of its ranges; an `ECOSYSTEM`
range orders versions as the ecosystem does (PEP 440 for PyPI, semver for npm), a `SEMVER` range
by SemVer 2.0 precedence; `GIT` ranges need the repository and are not read. Package names compare
normalized (PEP 503 for PyPI).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import stat
import tomllib
import zipfile
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

PYPI, NPM = "PyPI", "npm"
ECOSYSTEM_OF = {"requirements": PYPI, "poetry": PYPI, "uv": PYPI, "npm": NPM}
MAX_RECORD = 4 << 20  # an OSV record is a few KiB; a file larger than this is not one


# ---- versions ---------------------------------------------------------------------------------

_SEMVER = re.compile(
    r"v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
Key = tuple[Any, ...]
ZERO: Key = (-1,)  # `introduced: "0"`: before every version
INFINITY = "*"  # a `limit` holding "*": after every version


@functools.lru_cache(maxsize=65536)
def semver_key(text: str) -> Key | None:
    """SemVer 2.0 precedence (section 11) as a sortable key; None when `text` is not semver."""
    found = _SEMVER.fullmatch(text.strip())
    if found is None:
        return None
    major, minor, patch, pre = found.groups()
    try:  # a number past Python's digit limit (4,300) is no version here (an adversarial review)
        if pre is None:
            return (0, int(major), int(minor), int(patch), 1, ())
        parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
        return (0, int(major), int(minor), int(patch), 0, parts)
    except ValueError:
        return None


@functools.lru_cache(maxsize=65536)
def pep440_key(text: str) -> Key | None:
    """PEP 440 ordering (packaging's Version) as a sortable key; None when not a version."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(text.strip()))
    except (InvalidVersion, ValueError):  # ValueError: a number past Python's digit limit
        return None


def version_key(kind: str, ecosystem: str, text: str) -> Key | None:
    """The sort key of a version in a range of `kind` (ECOSYSTEM or SEMVER) for `ecosystem`."""
    if kind == "SEMVER" or ecosystem == NPM:
        return semver_key(text)
    if ecosystem == PYPI:
        return pep440_key(text)
    return None


@functools.lru_cache(maxsize=65536)
def normalize(ecosystem: str, name: str) -> str:
    """A package name as OSV compares it: PEP 503 for PyPI, as written elsewhere (npm)."""
    if ecosystem == PYPI:
        return _SEPARATORS.sub("-", name).lower()
    return name


_SEPARATORS = re.compile(r"[-_.]+")


def _shown(value: object) -> str:
    """A value a refusal quotes, cut to 100 characters: what follows it is still said."""
    text = repr(value)
    return text if len(text) <= 100 else text[:99] + "…"


class Unordered(ValueError):
    """A range bound that does not parse as a version of its kind: the record is not judged."""


class Unversioned(Unordered):
    """A lockfile's pin that is no version of the range's kind: that pin is not judged, the record
    still is for every other pin (an adversarial review: one bad pin hid an advisory from every
    lockfile of the sensor)."""


def in_range(kind: str, ecosystem: str, version: Key, events: list[Any]) -> bool:
    """The OSV evaluation of one range (IncludedInRanges and BeforeLimits, for one range)."""
    timeline: list[tuple[Key, int, str]] = []
    limits: list[Key | None] = []
    for position, event in enumerate(events):
        if not isinstance(event, dict) or len(event) != 1:
            raise Unordered(
                f"a range event is not one of introduced, fixed, last_affected, limit: {_shown(event)}"
            )
        ((name, value),) = event.items()
        if not isinstance(value, str):
            raise Unordered(f"{_shown(name)}: {_shown(value)} is not a version")
        if name == "limit":
            limits.append(None if INFINITY in value else _bound(kind, ecosystem, value))
            continue
        if name not in ("introduced", "fixed", "last_affected"):
            raise Unordered(f"unknown range event {_shown(name)}")
        key = ZERO if name == "introduced" and value == "0" else _bound(kind, ecosystem, value)
        timeline.append((key, position, name))
    if limits and not any(limit is None or version < limit for limit in limits):
        return False
    vulnerable = False
    for key, _, name in sorted(timeline, key=lambda t: (t[0], t[1])):
        if name == "introduced" and version >= key:
            vulnerable = True
        elif (name == "fixed" and version >= key) or (name == "last_affected" and version > key):
            vulnerable = False
    return vulnerable


def _bound(kind: str, ecosystem: str, value: str) -> Key:
    key = version_key(kind, ecosystem, value)
    if key is None:
        raise Unordered(f"{_shown(value)} is not a version of {ecosystem} ({kind} range)")
    return key


def affects(entry: dict[str, Any], ecosystem: str, version: str) -> bool:
    """Whether one `affected[]` entry covers `version` (IsVulnerable, for a package already
    matched by ecosystem and name). Unordered when a range cannot be read."""
    versions = entry.get("versions")
    if isinstance(versions, list):
        if version in versions:
            return True
        key = version_key("ECOSYSTEM", ecosystem, version)  # `1.1` is `1.1.0` by PEP 440 (a review)
        if key is not None and any(
            isinstance(v, str) and version_key("ECOSYSTEM", ecosystem, v) == key for v in versions
        ):
            return True
    ranges = entry.get("ranges")
    if not isinstance(ranges, list):
        return False
    for found in ranges:
        if not isinstance(found, dict):
            continue
        kind = found.get("type")
        if kind not in ("ECOSYSTEM", "SEMVER"):
            continue  # GIT: commits, not versions
        events = found.get("events")
        if not isinstance(events, list):
            raise Unordered("a range without events")
        key = version_key(kind, ecosystem, version)
        if key is None:
            raise Unversioned(f"{_shown(version)} is not a version of {ecosystem} ({kind} range)")
        if in_range(kind, ecosystem, key, events):
            return True
    return False


# ---- lockfiles --------------------------------------------------------------------------------


class Pin(msgspec.Struct, frozen=True):
    """One package at one version in a lockfile, and the line that pins it (1-based)."""

    ecosystem: str
    name: str
    version: str
    line: int


_REQUIREMENT = re.compile(
    r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*==(?!=)\s*([^\s;,\\#]+)"
)


def parse_lockfile(kind: str, text: str) -> list[Pin]:
    """The pins of one lockfile's text; ValueError (one line) when it cannot be read."""
    if kind == "requirements":
        return _requirements(text)
    if kind in ("poetry", "uv"):
        return _toml_packages(kind, text)
    if kind == "npm":
        return _package_lock(text)
    raise ValueError(f"unknown lockfile format {kind!r}")


def _requirements(text: str) -> list[Pin]:
    """`name==version` pins (with extras, markers and hashes around them); anything else (ranges,
    options, URLs, comments) pins nothing."""
    pins = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            continue
        found = _REQUIREMENT.match(line)
        if found is None or "*" in found.group(2):
            continue
        pins.append(Pin(PYPI, found.group(1), found.group(2), number))
    return pins


_HEADER = re.compile(r"\s*\[\[\s*package\s*\]\]\s*(#.*)?$")
_NAME = re.compile(r"\s*name\s*=\s*\"([^\"]*)\"")


def _toml_packages(kind: str, text: str) -> list[Pin]:
    """poetry.lock and uv.lock: every `[[package]]` with a version that comes from an index (a
    package from a folder, a file, a URL or git is not the index's, and no advisory names it)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML ({exc})") from None
    except (
        RecursionError
    ):  # arrays or tables nested thousands deep: that lockfile alone (an adversarial review)
        raise ValueError("not read: nested too deeply") from None
    packages = data.get("package")
    if not isinstance(packages, list):
        return []
    lines = _package_lines(text)
    pins = []
    for index, package in enumerate(packages):
        if not isinstance(package, dict):
            continue
        name, version = package.get("name"), package.get("version")
        if not isinstance(name, str) or not isinstance(version, str):
            continue
        if _local(kind, package.get("source")):
            continue
        pins.append(Pin(PYPI, name, version, lines[index] if index < len(lines) else 1))
    return pins


def _package_lines(text: str) -> list[int]:
    """The line of each `[[package]]`'s `name = "…"` (its header's line when it has none), in order."""
    found: list[int] = []
    inside = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if _HEADER.match(raw):
            found.append(number)
            inside = True
        elif raw.lstrip().startswith("["):
            inside = False
        elif inside and _NAME.match(raw):
            found[-1] = number
            inside = False
    return found


def _local(kind: str, source: object) -> bool:
    if not isinstance(source, dict):
        return False
    if kind == "uv":
        return any(k in source for k in ("editable", "virtual", "directory", "path", "git", "url"))
    return source.get("type") in ("directory", "file", "git", "url")


_KEY_LINE = re.compile(r"\s*\"((?:[^\"\\]|\\.)*)\"\s*:\s*\{")


def _package_lock(text: str) -> list[Pin]:
    """package-lock.json of lockfileVersion 2 or 3: every package under node_modules (its name is
    the path's last node_modules/ part, or the entry's `name` for an alias)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a package-lock.json (no object at the top)")
    version = data.get("lockfileVersion")
    if version not in (2, 3):
        raise ValueError(f"lockfileVersion {version!r}: only versions 2 and 3 are read (npm 7 and later)")
    packages = data.get("packages")
    if not isinstance(packages, dict):
        raise ValueError("no `packages` object")
    lines: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        found = _KEY_LINE.match(raw)
        if found is not None:
            try:
                lines.setdefault(json.loads(f'"{found.group(1)}"'), number)
            except ValueError:
                continue
    pins: list[Pin] = []
    for path, entry in packages.items():
        if "node_modules/" not in path or not isinstance(entry, dict) or entry.get("link"):
            continue
        name = entry.get("name")
        if not isinstance(name, str):
            name = path.rsplit("node_modules/", 1)[1]
        pinned = entry.get("version")
        if isinstance(pinned, str):
            pins.append(Pin(NPM, name, pinned, lines.get(path, 1)))
    return pins


# ---- the feed ---------------------------------------------------------------------------------


class Feed(msgspec.Struct):
    """The records of a feed, what could not be read of it (one line each), and its newest
    `modified` (None when no record says)."""

    records: list[dict[str, Any]] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    latest: str = ""  # the newest `modified` as written (RFC 3339 in UTC orders as its text to the second)
    ceiling: str = "9999"  # a `modified` after this (to the second) is not counted as the newest

    @property
    def newest(self) -> datetime | None:
        return moment(self.latest) if self.latest else None


def read_feed(path: Path, now: datetime | None = None) -> Feed:
    """Every OSV record in a folder (recursively) or a zip of OSV JSON files, in name order. A
    `modified` later than `now` (and a day's grace) does not count as the feed's newest: one
    record dated 2999 would hide a stalled feed (an adversarial review)."""
    feed = Feed()
    if now is not None:
        feed.ceiling = (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    if path.is_dir():
        sources = _folder(path)
    elif path.is_file() and zipfile.is_zipfile(path):
        sources = _zip(path)
    elif not path.exists():  # an operator's review: a missing zip (or a link to a folder that is
        # gone) was called "neither a folder nor a zip", which sent one looking at what was there
        what = "a link to nothing" if path.is_symlink() else "a folder or a zip of OSV JSON files"
        feed.errors.append(f"feed {path}: does not exist ({what})")
        return feed
    else:
        feed.errors.append(f"feed {path}: neither a folder nor a zip of OSV JSON files")
        return feed
    try:
        for name, data in sources:
            _add(feed, name, data)
    except (OSError, zipfile.BadZipFile) as exc:
        feed.errors.append(f"feed {path}: cannot read ({exc})")
    return feed


MAX_FEED_DEPTH = 64  # folders below a feed's top that are read; deeper ones are said, not read


def _walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk's top-down order (each folder's files, then its folders in name order, links not
    followed), without recursion: Python 3.11's os.walk recursed once per level, and a feed nested
    1,200 folders deep failed the whole sensor (an adversarial review). A folder deeper than
    MAX_FEED_DEPTH is yielded with the `depth` marker and not opened."""
    stack = [(top, 0)]
    while stack:
        root, depth = stack.pop()
        if depth > MAX_FEED_DEPTH:
            yield root, [], ["\0too deep"]
            continue
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue  # as os.walk: a folder it cannot list is passed over
        dirs = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        files = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        yield root, dirs, files
        stack.extend((f"{root}/{d}", depth + 1) for d in reversed(dirs))


def _folder(path: Path) -> Iterator[tuple[str, bytes | str | None]]:
    """Every `*.json` under the folder, in name order, read with plain strings (10,000 of them)."""
    top = str(path)
    for root, _dirs, files in _walk(top):
        where = root[len(top) :].lstrip("/")
        if files == ["\0too deep"]:
            yield where, f"a folder nested deeper than {MAX_FEED_DEPTH} levels: not read"
            continue
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            full, shown = f"{root}/{name}", f"{where}/{name}" if where else name
            # never a link followed, never a wait (a FIFO or a device put in a feed hung every
            # timed duty of serve, and /dev/tty read the operator's typing: an adversarial review)
            try:
                fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
            except (
                OSError
            ) as exc:  # a link (ELOOP), a socket (ENXIO), a file it may not read: that file alone
                why = (
                    "a link, not a file (a feed's links are not followed)"
                    if exc.errno == errno.ELOOP
                    else exc.strerror
                )
                yield shown, f"cannot be read ({why})" if exc.errno != errno.ELOOP else why
                continue
            with open(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    yield shown, "not a regular file"
                    continue
                data = handle.read(MAX_RECORD + 1)
            yield shown, None if len(data) > MAX_RECORD else data


def _zip(path: Path) -> Iterator[tuple[str, bytes | str | None]]:
    with zipfile.ZipFile(path) as archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if info.is_dir() or not info.filename.endswith(".json"):
                continue
            if info.file_size > MAX_RECORD:
                yield info.filename, None
                continue
            try:
                with archive.open(info) as entry:  # to the limit, whatever size its header claims
                    data = entry.read(MAX_RECORD + 1)
            except (
                zipfile.BadZipFile,
                RuntimeError,
                NotImplementedError,
                ValueError,
                EOFError,
                zlib.error,
            ) as exc:
                # encrypted, an unknown method, a broken stream: that entry alone (an adversarial review)
                yield info.filename, f"cannot be read from the zip ({type(exc).__name__}: {str(exc)[:200]})"
                continue
            yield info.filename, None if len(data) > MAX_RECORD else data


def _entry_shaped(entry: object) -> bool:
    """An `affected[]` entry as the schema has it: an object whose `package`, where it has one (a
    git-only entry has none), names an ecosystem and a name as text."""
    if not isinstance(entry, dict):
        return False
    package = entry.get("package")
    return package is None or (
        isinstance(package, dict)
        and isinstance(package.get("ecosystem"), str)
        and isinstance(package.get("name"), str)
    )


def _add(feed: Feed, name: str, data: bytes | str | None) -> None:
    if isinstance(data, str):  # why the folder's entry is not read
        feed.errors.append(f"{name}: {data}; skipped")
        return
    if data is None:
        feed.errors.append(f"{name}: over {MAX_RECORD} bytes, not an OSV record; skipped")
        return
    try:
        record = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        feed.errors.append(f"{name}: not JSON ({exc}); skipped")
        return
    if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not record["id"]:
        feed.errors.append(f"{name}: not an OSV record (no id); skipped")
        return
    entries = record.get("affected")
    if entries is not None and not isinstance(entries, list):
        feed.errors.append(f"{name}: {_shown(record['id'])}: `affected` is not a list; skipped")
        return
    bad = [index for index, entry in enumerate(entries or ()) if not _entry_shaped(entry)]
    if bad:  # entries a matcher passes over unread: said, once for the record
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        feed.errors.append(
            f"{name}: {_shown(record['id'])}: affected[{bad[0]}]{more} is no object naming a package's "
            "ecosystem and name; not matched"
        )
    modified = record.get("modified")
    if (
        isinstance(modified, str)
        and feed.latest[:19] < modified[:19] <= feed.ceiling
        and moment(modified) is not None
    ):
        feed.latest = modified
    feed.records.append(record)


def moment(value: object) -> datetime | None:
    """An OSV timestamp (RFC 3339, UTC, fractional seconds of any length), or None."""
    if not isinstance(value, str):
        return None
    text = re.sub(r"(\.\d{6})\d+", r"\1", value.strip())
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        found = datetime.fromisoformat(text)
        # in UTC, and there within datetime's years (0001-01-01T00:00:00+05:00 is not: a review)
        return found.astimezone(UTC) if found.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def aliases(record: dict[str, Any]) -> list[str]:
    """A record's aliases that are text (a feed may hold anything)."""
    found = record.get("aliases")
    return [a for a in found if isinstance(a, str) and a] if isinstance(found, list) else []


def claim_of(record: dict[str, Any]) -> str:
    """The record's summary, else the first line of its details, else its id."""
    summary = record.get("summary")
    if isinstance(summary, str) and summary.strip():
        return summary.strip()
    details = record.get("details")
    if isinstance(details, str) and details.strip():
        return details.strip().splitlines()[0].strip()
    return f"OSV advisory {record['id']}"


def feed_severity(record: dict[str, Any]) -> str | None:
    """What the feed says of severity: `database_specific.severity` HIGH or CRITICAL (GitHub's
    advisories; in any case) as blocking or critical; anything else says nothing more than the
    sensor."""
    specific = record.get("database_specific")
    value = specific.get("severity") if isinstance(specific, dict) else None
    # any case (an operator's review: "high" said nothing); whitespace around it too
    return (
        {"HIGH": "blocking", "CRITICAL": "critical"}.get(value.strip().upper())
        if isinstance(value, str)
        else None
    )


def matches(
    record: dict[str, Any],
    index: dict[tuple[str, str], list[tuple[str, Pin]]],
    unjudged: dict[tuple[str, int], str] | None = None,
) -> Iterator[tuple[str, str, list[Pin]]]:
    """(lockfile, package as the lockfile names it, the affected pins) for each lockfile package a
    record affects; `index` maps (ecosystem, normalized name) to (lockfile, pin). Unordered when
    a range the record applies cannot be read; a pin that is no version is left out, and said in
    `unjudged` ((lockfile, line) -> why)."""
    found: dict[tuple[str, str], list[Pin]] = {}
    entries = record.get("affected")
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        package = entry.get("package")
        if not isinstance(package, dict):
            continue
        ecosystem, name = package.get("ecosystem"), package.get("name")
        if not isinstance(ecosystem, str) or not isinstance(name, str):
            continue
        for lockfile, pin in index.get((ecosystem, normalize(ecosystem, name)), ()):
            try:
                hit = affects(entry, ecosystem, pin.version)
            except Unversioned as exc:
                if unjudged is not None:
                    unjudged.setdefault((lockfile, pin.line), str(exc))
                continue
            if hit:
                pins = found.setdefault((lockfile, normalize(ecosystem, pin.name)), [])
                if pin not in pins:
                    pins.append(pin)
    for (lockfile, _), pins in found.items():
        yield lockfile, pins[0].name, pins
