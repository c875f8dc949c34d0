"""Which leases belong to a `unit run` that is over (design §23; docs/decisions.md D-?): the door
answers a lease only while the run that made it still has its child.

`unit run` writes `.regulator/runs/<lease hash>.json` (the host's folder: no unit reads or writes it)
when it dispatches: its own pid and that process's start time. When the child has exited (and every
process of a confined account is killed) it marks the file ended. The door (engine.host.door) asks
`over(hash)` on every request: a marked file, or a `unit run` no longer alive (killed with its host),
and the lease is refused (401) though the log still holds it current (a person decides what becomes
of the unit). A lease without a file (`unit dispatch`, a lease from before) answers as before.

`unit run` and `serve` run on one host, in one process namespace (serve.json is found the same way).
In fleet mode other hosts' `serve`s read the same units store but not this folder: `unit run`'s
dispatch records which host runs it (`runOn`: `host_id`), and every other host's door refuses that
lease (`elsewhere`), so a token taken out of a run acts at no other host's door (D-266).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from engine.checkout.workspace import Workspace

RUNS = "runs"


def _folder(ws: Workspace) -> Path:
    return ws.state_dir / RUNS


def _path(ws: Workspace, lease_hash: str) -> Path:
    if not lease_hash.isalnum():
        raise ValueError(lease_hash)
    return _folder(ws) / f"{lease_hash}.json"


def host_id(ws: Workspace) -> str:
    """This checkout's host, as a dispatch records it: derived from its host key (random, 0600, in
    `.regulator/`: each host's own), never the key itself."""
    import hashlib

    from engine.base import hostkey

    key = hostkey.read(ws.state_dir, True)
    if key is None:
        raise OSError("no host key in .regulator/ (it cannot be made here)")
    return hashlib.sha256(b"regulator run host\0" + key).hexdigest()[:20]


def elsewhere(ws: Workspace, run_on: str | None) -> bool:
    """The lease's `unit run` runs on another host (a dispatch's `runOn` not this host's): this
    host's door does not answer it. A lease without one (`unit dispatch`) answers everywhere."""
    if run_on is None:
        return False
    try:
        return run_on != host_id(ws)
    except OSError:
        return True  # this host cannot say who it is: fail closed


def _started(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), which a reused pid does not share."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _write(path: Path, data: dict[str, object]) -> None:
    part = path.with_suffix(".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data))
    os.replace(part, path)


def begin(ws: Workspace, lease_hash: str, current: set[str], unit: str | None = None) -> None:
    """This process runs the lease's child (written before the child starts); the files of leases
    that are no one's current lease any more, and whose run is over, are removed. A run's file is
    never removed while its `unit run` lives: `current` is read before another run's dispatch may
    have made its lease (no lock is held here), and a missing file reads as over (D-291), so a
    sweep that removed it would stop that run's child at every door (an adversarial review)."""
    folder = _folder(ws)
    folder.mkdir(mode=0o700, exist_ok=True)
    for old in folder.glob("*.json"):
        if old.stem not in current and old.stem != lease_hash and _finished(old):
            with contextlib.suppress(OSError):
                old.unlink()
    record: dict[str, object] = {"pid": os.getpid(), "started": _started(os.getpid()), "ended": False}
    if unit is not None:
        record["unit"] = unit  # `live` finds a unit's run still stopping by it
    _write(_path(ws, lease_hash), record)


def live(ws: Workspace, unit: str) -> tuple[int, str] | None:
    """(pid, lease hash) of a `unit run` of this unit that has not ended and lives: its command
    runs, or, after a demote, a close or a decision, it is still stopping it (SIGTERM, SIGKILL 5 s
    later) and recording its end. A second run then would work in the same worktree beside the
    first's command (D-336's review)."""
    with contextlib.suppress(OSError):
        for path in _folder(ws).glob("*.json"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if (
                isinstance(data, dict)
                and data.get("unit") == unit
                and data.get("ended") is False
                and _alive(data)
            ):
                return int(data["pid"]), path.stem
    return None


def end(ws: Workspace, lease_hash: str) -> None:
    """The lease's child is gone: the door refuses the lease from now on."""
    _write(_path(ws, lease_hash), {"ended": True})


def waiting(ws: Workspace, lease_hash: str) -> None:
    """The lease's child is gone and this `unit run --wait` waits for its close: the lease acts no
    more (as `end`), and a person's resolve can say that the waiting run closes the unit."""
    pid = os.getpid()
    _write(_path(ws, lease_hash), {"ended": True, "waiting": True, "pid": pid, "started": _started(pid)})


def waits(ws: Workspace, lease_hash: str | None, run_on: str | None) -> bool:
    """A `unit run --wait` on this host waits to close the unit of this lease (`waiting`), and
    lives: it closes the unit once nothing holds it. Unknown (a run elsewhere, an unreadable file):
    False, and the person is told to close it."""
    if lease_hash is None or run_on is None or elsewhere(ws, run_on):
        return False
    try:
        data = json.loads(_path(ws, lease_hash).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("waiting") is True and _alive(data)


def _alive(data: dict) -> bool:
    """The `unit run` a run's file names lives: its pid, with the start time the file recorded (a
    reused pid does not share it)."""
    pid = data.get("pid")
    return isinstance(pid, int) and data.get("started") is not None and _started(pid) == data.get("started")


def _finished(path: Path) -> bool:
    """A run's file that says it ended, or whose `unit run` is gone (or that cannot be read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    if not isinstance(data, dict) or data.get("ended") is not False:
        return True
    return not _alive(data)


def over(ws: Workspace, lease_hash: str, run_on: str | None = None) -> bool:
    """The lease belongs to a `unit run` that ended (or died). Without a file: over where the
    dispatch says a `unit run` made it (`run_on`, D-266: that run writes the file before its child
    starts, so a missing one was removed: an adversarial review deleted it and the lease acted
    again), else not (`unit dispatch`)."""
    path = _path(ws, lease_hash)
    if not os.path.lexists(path):
        return run_on is not None
    return _finished(path)  # a file there but unreadable: fail closed


def ended(ws: Workspace, lease_hash: str | None, run_on: str | None) -> bool:
    """The unit's lease acts no more here, known from this host: none, or its `unit run` on this
    host over (`over`). A `unit dispatch` lease, or a run on another host, is taken as still acting
    (this host cannot tell)."""
    if lease_hash is None:
        return True
    if run_on is None or elsewhere(ws, run_on):
        return False
    return over(ws, lease_hash, run_on)
