"""Declared sensors (design §24, seed 000 gap 1: "a watcher on an advisory feed").

`regulator/policy/sensors.yaml` (governed) declares each sensor. A sensor's report is a signal
like any other (source S4, routed with the severity floors applied), stamped by the host with
`sensor: <name>`, no unit, the host's revision and time:
- `kind: command` runs its argument vector (engine.base.confine) and reads report_intelligence JSON
  objects, one a line, from its standard output; a bad line is one error, never a partial signal;
- `kind: osv` reads OSV advisories from a folder or a zip and matches them against lockfiles read
  from trunk (engine.read.osv): one signal per (advisory, package, lockfile), deduplicated by advisory
  id and aliases across runs and feeds (a more severe record raised again, superseding: D-306); a
  withdrawn advisory gets one `advisory-withdrawn` event on its signal; a feed whose newest `modified` is older than `staleAfter` raises one
  `sensor-stalled` signal per stall.
Each run is recorded as a `sensor-run` event (its outcome, the signals it raised, its errors), so
`regulator sensors` shows the last run and the duty knows when a sensor is due again.

What a sensor brings is collected first (a command may run up to its timeout) and written inside
the decide lock, judged against the stores as they are then: every id is derived, so a run that
races another writes each signal once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Container, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from engine.base import clock, confine, ids
from engine.base.errors import BadInput, RegulatorError
from engine.checkout.workspace import Workspace
from engine.commands.duty import Outcome, deciding
from engine.commands.signals import stamped, validate_report
from engine.commands.trunkfiles import not_trunks, trunk_files
from engine.commands.units import seen
from engine.commands.written import AdvisoryWithdrawnEvent, SensorRunEvent, SignalEvent
from engine.log.events import HOST_KINDS
from engine.log.store import SKEW_S, canonical
from engine.read.load import load
from engine.read.model import EventKind, State
from engine.read.osv import (
    ECOSYSTEM_OF,
    Feed,
    Pin,
    Unordered,
    aliases,
    claim_of,
    feed_severity,
    matches,
    normalize,
    parse_lockfile,
    read_feed,
)
from engine.read.worldfold import OSV_KEY
from identity.policy import RoutingPolicy, Sensor, duration_seconds, lockfile_format

MAX_ALIASES = 256  # an advisory's aliases a signal keeps (its deduplication keys); the rest counted
MAX_ALIAS_TEXT = 128  # an alias longer is no advisory id: not kept
MAX_ERRORS = 20  # errors a run keeps in its event (and prints); the rest are counted
MAX_HELD = 1000  # errors a run holds while it runs (Collected.error); the rest are counted
MAX_TEXT = 1000  # characters of one error kept: a run's event always fits a store line
MAX_LINES = 100_000  # lines of a command's output judged in one run; the rest are one error
STALLED = "sensor-stalled"

SensorEvent = SignalEvent | AdvisoryWithdrawnEvent | SensorRunEvent  # what a run writes


class Collected(msgspec.Struct):
    """What one run of a sensor brought, before it is judged against the stores."""

    signals: list[SignalEvent] = msgspec.field(default_factory=list)  # whole signal events, ids derived
    # (id, names, when, the normalized packages it is about)
    withdrawn: list[tuple[str, list[str], str, set[str]]] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    revision: str | None = None
    exit_code: int | None = None
    dropped: int = 0  # errors past MAX_HELD, counted only (`error`)
    # what an OSV run judged, so it can say which earlier signals no longer stand (D-308): the
    # lockfiles read whole, every pin judged; "<name>\0<package>" of the records judged; the (name, package,
    # lockfile) keys they affected
    stalled: bool = False  # the feed's newest record is older than staleAfter: the run's outcome
    moving: bool = False  # staleAfter set and the feed's newest record within it: a stall is over
    read: set[str] = msgspec.field(default_factory=set)
    judged: set[str] = msgspec.field(default_factory=set)
    unjudged: set[str] = msgspec.field(default_factory=set)
    pinned: set[str] = msgspec.field(default_factory=set)  # "<package>\0<lockfile>" of every pin read
    matched: set[str] = msgspec.field(default_factory=set)

    def error(self, text: str) -> None:
        """One error of the run, kept cut to MAX_TEXT while fewer than MAX_HELD are; counted after
        (an adversarial review: a command printing ten million bad lines held 3.2 GB of errors and
        wrote a log line of 869 MB)."""
        if len(self.errors) < MAX_HELD:
            self.errors.append(text[:MAX_TEXT])
        else:
            self.dropped += 1

    @property
    def error_count(self) -> int:
        return len(self.errors) + self.dropped


def sensor_of(ws: Workspace, name: str) -> Sensor:
    sensors = ws.sensors().sensors
    if name not in sensors:
        named = (
            ", ".join(sorted(sensors))
            or "none (no decision has declared any in regulator/policy/sensors.yaml)"
        )
        raise BadInput(f"no sensor {name!r}; the sensors are: {named}")
    return sensors[name]


# ---- when ---------------------------------------------------------------------------------------


def last_run(state: State, name: str) -> dict[str, Any] | None:
    runs = state.world.runs.get(name)
    return state.source.event(runs[-1]) if runs else None


def next_run(state: State, name: str, sensor: Sensor) -> datetime | None:
    """When the sensor is due again (None: now: it never ran, or its last run is stamped later
    than this state's time, or so late no date holds the next: no time a host writes, so a line
    written by hand never silences a sensor)."""
    last = last_run(state, name)
    at = clock.moment(last.get("at")) if last else None
    if at is None or at > state.now + timedelta(seconds=SKEW_S):
        return None
    return clock.later(at, sensor.every_seconds)


def is_due(state: State, name: str, sensor: Sensor, now: datetime) -> bool:
    due = next_run(state, name, sensor)
    return due is None or due <= now


# ---- collecting ---------------------------------------------------------------------------------


def _signal(
    name: str,
    fields: dict[str, Any],
    policy: RoutingPolicy,
    known: set[str],
    now: datetime,
    revision: str | None,
) -> SignalEvent:
    """A sensor's report as the signal it becomes: validated as report_intelligence validates
    (exit 2 on the first problem), stamped by the host; not yet given its id."""
    event = stamped(
        validate_report(fields, policy.severities, known, now), None, None, revision, clock.iso(now)
    )
    event["sensor"] = name
    return event


def _higher(policy: RoutingPolicy, *severities: str | None) -> str:
    known = [s for s in severities if s in policy.severities]
    return max(known, key=policy.rank)


def collect_command(
    ws: Workspace, name: str, sensor: Sensor, policy: RoutingPolicy, known: set[str], now: datetime
) -> Collected:
    """Run the command; each line of its output that is a report becomes a signal (its id derived
    from the sensor and the line, so the same line printed on every run is one signal)."""
    found = Collected(revision=ws.revision())
    refused = not_trunks(ws, sensor.command)
    if refused is not None:
        found.errors.append(f"not run: {refused}")
        return found
    ran = confine.run(sensor.command, stdin=b"", timeout=sensor.timeout_seconds, cwd=ws.root)
    found.exit_code = ran.code
    if ran.problem:  # it did not run, or was killed: what it printed is not judged at all
        found.errors.append(ran.problem)
        return found
    if ran.code != 0:
        found.errors.append(ran.exited(" ".join(sensor.command)[:200]))
    lines = ran.stdout.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if number > MAX_LINES:  # a run's time is bounded by its lines too (an adversarial review:
            # 20 million bad lines were judged for 78 s past a 60 s timeout)
            rest = sum(1 for line in lines[number - 1 :] if line.strip())
            if rest:
                found.error(f"{rest:,} more line(s) after line {MAX_LINES:,}: not judged")
            break
        if not raw.strip():
            continue
        try:
            fields = json.loads(raw.decode("utf-8"))
            if not isinstance(fields, dict):
                raise BadInput("not a JSON object of report_intelligence fields")
            given = dict(fields)
            fields.setdefault("reportedSeverity", sensor.severity)
            if fields["reportedSeverity"] not in policy.severities:
                raise BadInput(
                    f"severity: {fields['reportedSeverity']!r} is not one of {', '.join(policy.severities)}"
                )
            fields["reportedSeverity"] = _higher(policy, fields["reportedSeverity"], sensor.severity)
            event = _signal(name, fields, policy, known, now, found.revision)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError too
            found.error(f"line {number}: not JSON ({exc})")
            continue
        except RegulatorError as exc:
            found.error(f"line {number}: {exc}")
            continue
        event["id"] = ids.derived_id("sensor-signal", name, canonical(given).decode())
        found.signals.append(event)
    return found


def collect_osv(
    ws: Workspace, name: str, sensor: Sensor, policy: RoutingPolicy, known: set[str], now: datetime
) -> Collected:
    """The feed against the lockfiles on trunk: a signal per (advisory, package, lockfile) a
    record affects; withdrawn records noted; a stall raised."""
    commit, files, errors = trunk_files(ws, list(sensor.lockfiles))
    found = Collected(errors=errors, revision=commit)
    index: dict[tuple[str, str], list[tuple[str, Pin]]] = {}
    for path, data in files.items():
        kind = lockfile_format(path) or ""
        try:
            pins = parse_lockfile(kind, data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            found.errors.append(f"lockfile {path} on trunk: {exc}")
            continue
        found.read.add(path)
        for pin in pins:
            normalized = normalize(pin.ecosystem, pin.name)
            index.setdefault((pin.ecosystem, normalized), []).append((path, pin))
            found.pinned.add(OSV_KEY.join((normalized, path)))
    for path, units in sorted(sensor.lockfiles.items()):
        gone = [u for u in units if u not in known]
        if gone:  # its advisories are raised on the units that are (an operator's review: one unit
            # removed, or a typo, dropped every advisory of the lockfile, the valid units' too)
            kept = [u for u in units if u in known]
            found.errors.append(
                f"lockfile {path}: {', '.join(gone)} {'has' if len(gone) == 1 else 'have'} no contract under "
                f"contracts/; its advisories are raised on {', '.join(kept) or 'no unit'}"
            )
    feed = _feed(ws, sensor.feed or "", now)
    found.errors.extend(feed.errors)
    if not feed.records and not feed.errors:
        found.errors.append(f"feed {sensor.feed} holds no OSV record")
    unjudged: dict[tuple[str, int], str] = {}  # (lockfile, line) -> why its pin is not judged
    for record in feed.records:
        rid = record["id"]
        names = [rid, *aliases(record)]
        packages = record_packages(record)
        withdrawn = record.get("withdrawn")
        if withdrawn is not None:
            found.withdrawn.append((rid, names, withdrawn if isinstance(withdrawn, str) else "", packages))
            continue
        try:
            hits = list(matches(record, index, unjudged))
        except Unordered as exc:
            found.error(f"advisory {rid}: {exc}; not judged")
            found.unjudged.update(names)  # nothing under its names is said to be clear this run
            continue
        severity = _higher(policy, sensor.severity, feed_severity(record))
        found.judged.update(OSV_KEY.join((n, package)) for n in names for package in packages)
        for lockfile, package, pins in hits:
            ecosystem = _ecosystem(lockfile)
            found.matched.update(OSV_KEY.join((n, normalize(ecosystem, package), lockfile)) for n in names)
            try:
                found.signals.append(
                    _osv_signal(
                        name, sensor, policy, known, now, commit, record, lockfile, package, pins, severity
                    )
                )
            except RegulatorError as exc:
                found.error(f"advisory {rid} for {package} in {lockfile}: {exc}")
    for (lockfile, line), why in sorted(unjudged.items()):
        found.error(f"lockfile {lockfile} line {line}: {why}; that pin is judged against no advisory")
        found.read.discard(lockfile)  # a pin not judged: nothing of this lockfile is said to be clear
    stall = sensor.stale_after
    if stall is not None and feed.records and feed.newest is None:
        found.error(
            f"feed {sensor.feed}: no record says when it was modified (before now): staleAfter cannot judge it"
        )
    if (
        stall is not None
        and feed.newest is not None
        and now - feed.newest > timedelta(seconds=duration_seconds(stall))
    ):
        found.stalled = True  # this run's outcome, each run until the feed moves (not its signal: once)
        fields = {
            "subject": f"sensor {name} stalled: its feed's newest advisory was modified {clock.iso(feed.newest)}",
            "claim": f"the feed {sensor.feed} has not changed for longer than {stall}: advisories published "
            "since may be missing, so an empty result proves nothing",
            "observation": f"newest `modified` in {len(feed.records)} record(s) is {clock.iso(feed.newest)}, "
            f"more than staleAfter {stall} before {clock.iso(now)}",
            "evidence": [str(sensor.feed)],
            "confidence": "high",
            "reportedSeverity": sensor.severity,
        }
        event = _signal(name, fields, policy, known, now, commit)
        event["id"] = ids.derived_id(STALLED, name, clock.iso(feed.newest))
        event["stalled"] = clock.iso(feed.newest)
        found.signals.append(event)
    elif stall is not None and feed.newest is not None:
        found.moving = True
    return found


def _ecosystem(lockfile: str) -> str:
    """The OSV ecosystem of a lockfile by its name (PyPI, npm); "" for a name no format has."""
    return ECOSYSTEM_OF.get(lockfile_format(lockfile) or "", "")


def record_packages(record: dict[str, Any]) -> set[str]:
    """The packages an OSV record is about: "<ecosystem>\0<name normalized as it names it>" (a
    re-check: `urllib3` on npm withdrew and cleared PyPI's `urllib3`)."""
    found = set()
    entries = record.get("affected")
    for entry in entries if isinstance(entries, list) else ():
        package = entry.get("package") if isinstance(entry, dict) else None
        if isinstance(package, dict):
            ecosystem, name = package.get("ecosystem"), package.get("name")
            if isinstance(ecosystem, str) and isinstance(name, str):
                found.add(OSV_KEY.join((ecosystem, normalize(ecosystem, name))))
    return found


def _feed(ws: Workspace, relative: str, now: datetime) -> Feed:
    """The sensor's feed, inside the workspace (identity.policy.Sensor checks the path as written),
    never read where a link leads into .regulator/ or .git/ (an operator's review:
    `feeds/reg -> ../.regulator` read the stores' folder)."""
    path = ws.root / relative
    real = os.path.realpath(path)
    for private, said in _not_feeds(ws):
        inside = os.path.realpath(ws.root / private)
        if real == inside or real.startswith(inside + os.sep) or inside.startswith(real + os.sep):
            found = Feed()
            found.errors.append(f"feed {relative} leads into {said}: not read")
            return found
    return read_feed(path, now)


def _not_feeds(ws: Workspace) -> list[tuple[str, str]]:
    """Where a feed is never read from, as (folder, how it is named): the stores, git's own files,
    and every folder a unit writes in: `.worktrees/` and each worktree a dispatch recorded (an
    adversarial review: a feed in a unit's own worktree let the unit write the advisories, raising
    holds on other units or an alias at `info` that kept the world's critical record from being
    raised). A feed above one of them would read it too."""
    from engine.read.load import load as load_units

    out = [
        (".regulator", ".regulator/"),
        (".git", ".git/"),
        (".worktrees", ".worktrees/ (the units' worktrees)"),
    ]
    for unit in load_units(ws, stores=("units",)).units.values():
        # every worktree any of its dispatches recorded, kept by the fold (UnitState.worktrees), not
        # its last alone: a unit dispatched again elsewhere still wrote its first one's feed (D-304)
        out += [(place, f"unit {unit.id}'s worktree {place}") for place in unit.worktrees]
    return out


def _osv_signal(
    name: str,
    sensor: Sensor,
    policy: RoutingPolicy,
    known: set[str],
    now: datetime,
    revision: str | None,
    record: dict[str, Any],
    lockfile: str,
    package: str,
    pins: list[Pin],
    severity: str,
) -> SignalEvent:
    rid = record["id"]
    versions = ", ".join(dict.fromkeys(p.version for p in pins))
    ecosystem = _ecosystem(lockfile)
    # at most MAX_ALIASES names kept, each an id's length, the rest counted (an adversarial review: a
    # record with 250,000 aliases made an observation over the limit, and the record was dropped)
    every = [a for a in aliases(record) if len(a) <= MAX_ALIAS_TEXT]
    others = every[:MAX_ALIASES]
    shown = ", ".join(every[:16]) + (f", and {len(every) - 16} more" if len(every) > 16 else "")
    fields = {
        "subject": f"{package} {versions}: {rid}",
        "claim": claim_of(record),
        "observation": f"{lockfile} on trunk pins {package} {versions} ({ecosystem}), which OSV advisory "
        f"{rid}{' (' + shown + ')' if every else ''} affects",
        "evidence": ([f"{lockfile}:{p.line}" for p in pins] + [rid, *others])[:64],
        "confidence": "high",
        "reportedSeverity": severity,
        "affectedUnits": [u for u in sensor.lockfiles[lockfile] if u in known],  # the rest: an error
    }
    event = _signal(name, fields, policy, known, now, revision)
    normalized = normalize(ecosystem, package)
    event["id"] = ids.derived_id("osv", rid, ecosystem, normalized, lockfile)
    event["osv"] = {
        "id": rid,
        "aliases": others,
        "package": normalized,
        "lockfile": lockfile,
        "ecosystem": ecosystem,
    }
    return event


# ---- judging and writing --------------------------------------------------------------------------


def _standing(
    state: State, keys: set[str], sensor: str
) -> tuple[list[tuple[str, str, list[str]]], tuple[int, str] | None]:
    """The sensors' advisory signals raised under these keys, and under every name those signals
    carry in turn, that still stand for `sensor`'s run: (id, reported severity, affected units) of
    each; and of the others the latest that stopped standing (when, its id), which a raise after
    it names and supersedes (D-308). A signal stops standing once cleared, and for another sensor
    once withdrawn: a withdrawn signal still stands for its own sensor, so an alias of it in that
    feed raises nothing anew (D-131), but another sensor's feed that still lists the advisory
    raises it (an operator's review: one feed's withdrawal lifted the hold another feed still
    asked for). A unit's report that supersedes one is no record of the world's and is never among
    them (an adversarial review: a unit's already-expired report at `critical` kept GHSA's later
    HIGH record from being raised)."""
    world, refs = state.world, state.signals.refs
    todo, seen_keys, seen_ids = list(keys), set(keys), set()
    standing: list[tuple[str, str, list[str]]] = []
    gone: list[tuple[int, str]] = []
    while todo:
        for signal_id in world.advisories.get(todo.pop(), ()):
            if signal_id in seen_ids or signal_id not in refs:
                continue
            seen_ids.add(signal_id)
            event = state.source.event(refs[signal_id])
            found = event.get("osv")
            ref: dict[str, Any] = found if isinstance(found, dict) else {}
            for name in (ref.get("id"), *(ref.get("aliases") or ())):
                key = OSV_KEY.join((str(name), str(ref.get("package")), str(ref.get("lockfile"))))
                if key not in seen_keys:
                    seen_keys.add(key)
                    todo.append(key)
            ended = world.cleared.get(signal_id)
            if ended is None and event.get("sensor") != sensor:
                ended = world.withdrawn.get(signal_id)
            if ended is not None:
                gone.append((ended, signal_id))
                continue
            units = [u for u in event.get("affectedUnits") or () if isinstance(u, str)]
            standing.append((signal_id, str(event.get("reportedSeverity")), units))
    return standing, (max(gone) if gone else None)


def _still_owed(
    state: State, event: SignalEvent, keys: set[str], rank: Callable[[str, int], int], sensor: str
) -> bool:
    """Whether an advisory's signal is owed although one was raised under its names before, and,
    if so, made the signal that is: for the units none standing covers at its severity or above
    (a second sensor's lockfile mapping, a unit added to it), superseding the most severe standing
    one where it is more severe than all (the record re-scored, or another record of it); or, where
    none stands, anew after the last that stopped standing, superseding it (the pin regressed after
    it was cleared, another feed's withdrawal); its id derived from what makes it owed, so the next
    run finds it raised (D-306, D-308)."""
    standing, after = _standing(state, keys, sensor)
    if not standing and event["id"] not in state.signals.refs and after is None:
        return True  # the first raise, under the id it always had
    severity = rank(event["reportedSeverity"], -1)
    units = list(event["affectedUnits"])
    top = max(standing, key=lambda s: rank(s[1], -1)) if standing else None
    if top is not None:
        covered = {u: max((rank(s, -1) for _, s, us in standing if u in us), default=-2) for u in units}
        units = [u for u in units if severity > covered[u]]
        if not units and not (not event["affectedUnits"] and severity > rank(top[1], -1)):
            return False
        if severity > rank(top[1], -1):
            event["supersedes"] = top[0]  # the world now says more of it: raised again, linked
    elif after is not None:
        event["supersedes"] = after[1]  # raised again after it stopped standing: the two linked
    event["affectedUnits"] = units
    marks = [event["reportedSeverity"], *units]
    if after is not None:
        marks.append(str(state.source.event(after[0]).get("id")))
    event["id"] = ids.derived_id(event["id"], *marks)
    return True


def _cleared(state: State, name: str, found: Collected) -> list[str]:
    """This sensor's advisory signals, still standing, whose advisory this run judged against
    their lockfile read whole, its package still pinned there, and found affecting no pin:
    cleared, so that the pin regressing raises it again (D-308: it was remembered for ever). A run
    that met any error clears nothing (an adversarial review: a record whose file did not parse,
    or whose `affected` could not be used, cleared what it had raised, and a feed that flapped
    raised it anew on every good run), nor does a package no longer pinned (moved to an included
    file, a range: nothing says it was upgraded)."""
    world, refs = state.world, state.signals.refs
    if found.error_count:
        return []
    mine = [s for s in world.sensed.get(name, ()) if s in refs and s not in world.withdrawn]
    mine = [s for s in mine if s not in world.cleared and s not in world.resumed]
    # its stall signals, once its feed moves again (D-321: the stall's obligation stayed open with
    # nothing to say the stall was over)
    out = [s for s in mine if s in world.stalls] if found.moving else []
    if not found.read or not found.judged:
        return out
    mine = [s for s in mine if s not in world.stalls]
    for signal_id, event in zip(mine, state.source.events([refs[s] for s in mine]), strict=True):
        ref = event.get("osv")
        if not isinstance(ref, dict) or ref.get("lockfile") not in found.read:
            continue
        package, lockfile = str(ref.get("package")), str(ref["lockfile"])
        if OSV_KEY.join((package, lockfile)) not in found.pinned:
            continue  # not pinned there now: nothing is said of its version
        names = [str(n) for n in (ref.get("id"), *(ref.get("aliases") or ()))]
        ecosystem = _ecosystem(lockfile)
        if not any(OSV_KEY.join((n, ecosystem, package)) in found.judged for n in names):
            continue  # no record of it, for its package, in this feed now (an adversarial review:
            # another package's record sharing a CVE alias cleared it once its own record left)
        if any(n in found.unjudged for n in names):
            continue  # a record naming it was not judged
        if any(OSV_KEY.join((n, package, lockfile)) in found.matched for n in names):
            continue
        out.append(signal_id)
    return out


def plan(
    state: State, name: str, sensor: Sensor, found: Collected, now: datetime, severities: Sequence[str]
) -> list[SensorEvent]:
    """What a run writes, judged against the stores inside the lock: the signals not already
    there (by id, and for an advisory by any of its names for the same package and lockfile, unless
    it is more severe than every signal raised under them: then it supersedes the most severe), an
    advisory-withdrawn event for each signal a withdrawn advisory raised, then the run itself.

    `severities` are routing.yaml's, in order (one it no longer names ranks below them all). An
    advisory's records are judged most severe first, so of two records of one run naming each
    other the more severe is raised (an adversarial review: the one read first was, and a record at
    `info` kept a CRITICAL one from being raised)."""
    world = state.world
    last = world.runs.get(name)
    run_id = ids.derived_id(
        EventKind.SENSOR_RUN,
        name,
        state.source.event(last[-1]).get("id", "") if last else "-",
        clock.iso(now),
    )
    if run_id in world.ids:
        return []
    keys: set[str] = set()
    planned: set[str] = set()
    refs = state.signals.refs
    rank = {severity: k for k, severity in enumerate(severities)}.get
    severe = {k: -rank(e["reportedSeverity"], -1) for k, e in enumerate(found.signals) if "osv" in e}
    chosen: list[int] = []  # judged most severe first, written in the order the run found them
    for k in sorted(range(len(found.signals)), key=lambda k: severe.get(k, 0)):
        event = found.signals[k]
        ref = event.get("osv")
        if ref is not None:
            mine = {OSV_KEY.join((n, ref["package"], ref["lockfile"])) for n in (ref["id"], *ref["aliases"])}
            if any(key in keys for key in mine):
                continue  # a more severe record of this run names it
            keys |= mine
            if not _still_owed(state, event, mine, rank, name):
                continue  # raised already, under this id or an alias, as severe, for these units
        if event["id"] in refs or event["id"] in planned:
            continue
        if "supersedes" in event and event["supersedes"] not in refs:
            found.errors.append(f"a report supersedes {event['supersedes']}, which is no signal; not written")
            continue
        planned.add(event["id"])
        chosen.append(k)
    events: list[SensorEvent] = [found.signals[k] for k in sorted(chosen)]
    by_name: dict[str, list[str]] = {}  # "<name>\0<ecosystem>\0<package>" -> the signals raised under it
    for key, raised in world.advisories.items():
        named, package, lockfile = key.split(OSV_KEY, 2)
        ecosystem = _ecosystem(lockfile)
        by_name.setdefault(OSV_KEY.join((named, ecosystem, package)), []).extend(raised)
    withdrawn: list[str] = []
    mine = set(world.sensed.get(name, ()))  # a feed withdraws only what its own sensor raised
    for rid, names, when, packages in found.withdrawn:  # for its own packages only (an adversarial
        # review: a withdrawn record for another package, sharing a CVE alias, marked this one's)
        about = (OSV_KEY.join((n, package)) for n in names for package in packages)
        for signal_id in dict.fromkeys(s for key in about for s in by_name.get(key, ())):
            if signal_id in world.withdrawn or signal_id in withdrawn or signal_id not in mine:
                continue
            withdrawn.append(signal_id)
            routing = state.routings.get(signal_id)
            events.append(
                {
                    "id": ids.derived_id(EventKind.ADVISORY_WITHDRAWN, signal_id),
                    "kind": EventKind.ADVISORY_WITHDRAWN.value,
                    "signal": signal_id,
                    "advisory": rid,
                    "withdrawn": when,
                    "sensor": name,
                    "obligations": [o.get("id") for o in routing.get("obligations") or []] if routing else [],
                    "at": clock.iso(now),
                }
            )
    raised = [e["id"] for e in events if e["kind"] == EventKind.SIGNAL]
    run: SensorRunEvent = {
        "id": run_id,
        "kind": EventKind.SENSOR_RUN.value,
        "sensor": name,
        "sensorKind": sensor.kind,
        "outcome": "error" if found.error_count else "stalled" if found.stalled else "ok",
        "signals": raised,
        "withdrawn": withdrawn,
        "errors": [e[:MAX_TEXT] for e in found.errors[:MAX_ERRORS]],
        "errorCount": found.error_count,
        "exitCode": found.exit_code,
        "revision": found.revision,
        "at": clock.iso(now),
    }
    cleared = _cleared(state, name, found)
    if cleared:
        run["cleared"] = cleared
    if found.stalled:  # said even where an error makes the outcome `error`
        run["stalled"] = True
    return [*events, run]


def run(ws: Workspace, name: str, now: datetime | None = None, *, only_due: bool = False) -> Outcome:
    """Run one sensor now (`regulator sensors run NAME`), or, `only_due`, if it is due (the duty)."""
    now = now or clock.now()
    sensor = sensor_of(ws, name)
    policy = ws.routing()
    state = load(ws, now, stores=("signals",))
    if only_due and not is_due(state, name, sensor, now):
        return Outcome(f"sensor {name}", note="not due")
    try:
        if sensor.severity not in policy.severities:
            found = Collected(errors=[f"severity {sensor.severity!r} is not a severity of routing.yaml"])
        elif sensor.kind == "command":
            found = collect_command(ws, name, sensor, policy, set(state.contracts), now)
        else:
            found = collect_osv(ws, name, sensor, policy, set(state.contracts), now)
    except RegulatorError:
        raise
    except Exception as exc:  # noqa: BLE001 - a fault in what it read: a failed run, recorded and said
        # (an adversarial review: a lockfile nested too deeply failed the sensor with a traceback,
        # no run was recorded, and every display said it had never run, never that it failed)
        found = Collected(
            errors=[f"failed ({type(exc).__name__}: {str(exc)[:300]}); nothing of this run was raised"]
        )
    with deciding(ws):
        state = load(ws, now, stores=("signals",))
        if only_due and not is_due(state, name, sensor, now):  # another host ran it meanwhile
            return Outcome(f"sensor {name}", note="not due")
        store = ws.store("signals")
        marks = seen(ws, state, "signals")  # on its host events: a sensor's reports are not host events
        planned = plan(state, name, sensor, found, now, policy.severities)
        written = [
            store.append(event | {"seen": marks} if event["kind"] in HOST_KINDS else event)["id"]
            for event in planned
        ]
    said = [f"sensor {name}: {e}" for e in found.errors[:MAX_ERRORS]]
    if found.error_count > MAX_ERRORS:
        said.append(f"sensor {name}: and {found.error_count - MAX_ERRORS} more error(s), counted in its run")
    if found.stalled:  # a problem as an error is (an operator's review: exit 0, nothing on stderr,
        # where the header counted the sensor failing; a cron job never learnt its feed was dead)
        newest = next((e.get("stalled") for e in found.signals if "stalled" in e), None)
        said.append(
            f"sensor {name}: its feed stalled: its newest record was modified {newest or '?'}, more than "
            f"staleAfter {sensor.stale_after} ago; advisories published since may be missing"
        )
    note = _said_of(planned[-1] if planned else None, state.world.stalls)
    return Outcome(f"sensor {name}", written, said, note=note)


def _said_of(run: Mapping[str, Any] | None, stalls: Container[str] = ()) -> str:
    """What a run's record says beyond its signals, for `sensors run` and serve's log: the feed
    stalled, earlier signals cleared (an operator's re-check: neither was said where a cron job
    reads), a stall over (`stalls`: the stall signals, D-321)."""
    if run is None or run.get("kind") != EventKind.SENSOR_RUN:
        return ""
    parts = ["its feed stalled (nothing modified for longer than staleAfter)"] if run.get("stalled") else []
    cleared = list(run.get("cleared") or ())
    over = sum(1 for s in cleared if s in stalls)
    if len(cleared) > over:
        parts.append(f"{len(cleared) - over} earlier signal(s) no longer affect their pin (cleared)")
    if over:
        parts.append(f"its feed moves again: {over} stall signal(s) marked (a person dispositions them)")
    return "; ".join(parts)


def run_due(ws: Workspace, now: datetime) -> Outcome:
    """The sensors duty (design §24): every declared sensor that is due runs, one after another."""
    total = Outcome("sensors")
    sensors = ws.sensors().sensors
    ran = 0
    notes: list[str] = []
    for name in sorted(sensors):
        try:
            outcome = run(ws, name, now, only_due=True)
        except RegulatorError as exc:
            total.errors.append(f"sensor {name}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - one sensor's fault never stops the others' runs
            total.errors.append(f"sensor {name}: failed ({type(exc).__name__}: {str(exc)[:300]})")
            continue
        if outcome.note != "not due":
            ran += 1
            if outcome.note:
                notes.append(f"{name}: {outcome.note}")
        total.written += outcome.written
        total.errors += outcome.errors
    total.note = f"{ran} of {len(sensors)} sensor(s) ran" if sensors else "no sensors declared"
    total.note += "".join(f"; {note}" for note in notes)
    return total


# ---- listing ------------------------------------------------------------------------------------


def listing(ws: Workspace, state: State) -> list[dict[str, Any]]:
    """Each declared sensor with its last run, outcome and signals (`regulator sensors --json`).
    Without the stores (a clone, design §16.2) no run is known: its run fields are null, never
    "never run, due now" (an operator's review read a sensor that had run three times so)."""
    rows = []
    for name, sensor in sorted(ws.sensors().sensors.items()):
        row: dict[str, Any] = {
            "name": name,
            "kind": sensor.kind,
            "every": sensor.every,
            "severity": sensor.severity,
        }
        if not ws.has_stores:
            row |= dict.fromkeys(_RUN_FIELDS)
            row["errors"] = []  # in its place: the host's rows' order
        else:
            last = last_run(state, name)
            due = next_run(state, name, sensor)
            row |= {
                "lastRun": last.get("at") if last else None,
                "outcome": last.get("outcome") if last else None,
                "signals": list(last.get("signals") or []) if last else [],
                "errors": list(last.get("errors") or []) if last else [],
                "errorCount": last.get("errorCount", 0) if last else 0,
                "raised": len(state.world.sensed.get(name, ())),
                "runs": len(state.world.runs.get(name, ())),
                "nextRun": clock.iso(due) if due else None,
            }
        rows.append(row)
    return rows


# what a run says of a sensor: null where no run is known (no stores here)
_RUN_FIELDS = ("lastRun", "outcome", "signals", "errors", "errorCount", "raised", "runs", "nextRun")
