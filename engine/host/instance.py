"""One `serve` per workspace per host (design §22): its file lock, `.regulator/serve.json` for the
host-side commands that look for it, and the door's default listen address.

The lock is an flock on `.regulator/serve.lock`, held for the life of the process (the kernel drops
it when the process dies, however it dies), so a stale serve.json never stops a new `serve`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from engine.base import clock
from engine.base.errors import BadInput, Refused, RegulatorError
from engine.checkout.workspace import Workspace

LOCK_FILE = "serve.lock"
INFO_FILE = "serve.json"
SOCKET_NAME = "door.sock"
SOCKET_PATH_MAX = 107  # bytes: sockaddr_un's sun_path, less its terminating NUL
ID_CHARS = 16  # the workspace id's hex digits in the socket's folder: unique enough, and short


class AlreadyRunning(Refused):
    """Another process holds the workspace's serve lock (exit 3 naming it, where serve.json does)."""

    def __init__(self, pid: object) -> None:
        self.pid = pid if isinstance(pid, int) else None
        super().__init__(
            f"regulator serve is already running for this workspace (pid {self.pid or 'unknown'}); "
            "one serve per workspace per host"
        )


class Instance(msgspec.Struct):
    """The lock this process holds, and where its serve.json is."""

    fd: int
    info: Path

    def write(self, door: str) -> dict[str, Any]:
        """serve.json ({"pid", "door", "startedAt"}), replaced whole."""
        data = {"pid": os.getpid(), "door": door, "startedAt": clock.iso(clock.now())}
        temporary = self.info.with_name(f".{INFO_FILE}.{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data) + "\n")
        os.replace(temporary, self.info)
        return data

    def release(self) -> None:
        """At a clean stop: serve.json removed (while the lock is still ours), then the lock."""
        with contextlib.suppress(OSError):
            current = json.loads(self.info.read_text(encoding="utf-8"))
            if current.get("pid") == os.getpid():
                self.info.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def claim(ws: Workspace) -> Instance:
    """Take the workspace's serve lock, or refuse (exit 3) naming the running serve's pid."""
    folder = ws.state_dir
    if not folder.is_dir() or folder.is_symlink():
        raise Refused(f"no regulator stores at {folder}; run `regulator serve` on the host's workspace")
    path = folder / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        raise Refused(f"{path}: cannot open ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(f"{path} is not a regular file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        running = read_info(ws)
        raise AlreadyRunning(running.get("pid") if running else None) from None
    # ours now: a serve.json left here is a dead serve's (killed before it could remove it); gone
    # before this serve's door listens, so no one finds a door that is not there
    with contextlib.suppress(FileNotFoundError):
        os.unlink(folder / INFO_FILE)
    return Instance(fd, folder / INFO_FILE)


def read_info(ws: Workspace) -> dict[str, Any] | None:
    """serve.json as the running serve wrote it, or None (no serve, or not readable)."""
    path = ws.state_dir / INFO_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = json.loads(os.read(fd, 1 << 16).decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else None


def running(ws: Workspace) -> dict[str, Any] | None:
    """serve.json of a serve that holds the lock now, its pid alive (a stale file left by a killed
    one: None)."""
    info = read_info(ws)
    if info is None or not lock_held(ws):
        return None
    pid = info.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return None
    return info


def lock_held(ws: Workspace) -> bool:
    """Some process holds the workspace's serve lock: a serve (listening, or still starting) or a
    `serve --once-tick`."""
    path = ws.state_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        return False
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another account's process: it exists
    return True


def workspace_id(ws: Workspace) -> str:
    """The workspace's id (the hash of identity.ndjson's first event), cut to ID_CHARS."""
    found = ws.authority().workspace_id
    if not found:
        raise Refused("this workspace has no identity store to name it by; run `regulator init`")
    return found[:ID_CHARS]


def default_socket(ws: Workspace) -> Path:
    """`$XDG_RUNTIME_DIR/regulator/<workspace-id>/door.sock`, else
    `/tmp/regulator-<uid>/<workspace-id>/door.sock`. XDG_RUNTIME_DIR counts only where no other
    account could turn what serve makes and removes there: an absolute path to a folder (not a
    link) of this account's or root's that no one else may write to (the user's own
    `/run/user/<uid>`, or `/run` under systemd); another account's, as `sudo -E` leaves it, or a
    relative path is passed over."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _runtime_ok(runtime):
        return Path(runtime) / "regulator" / workspace_id(ws) / SOCKET_NAME
    return Path(f"/tmp/regulator-{os.getuid()}") / workspace_id(ws) / SOCKET_NAME


def _runtime_ok(folder: str) -> bool:
    if not os.path.isabs(folder):
        return False
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, os.getuid()) or st.st_mode & 0o022:
        return False
    # serve makes `regulator/` there, or finds it made for it (systemd's RuntimeDirectory=)
    own = Path(folder) / "regulator"
    try:
        made = os.lstat(own)
    except OSError:
        return os.access(folder, os.W_OK)
    return stat.S_ISDIR(made.st_mode) and made.st_uid == os.getuid()


def check_socket_path(path: Path) -> Path:
    if not path.is_absolute():
        raise BadInput(f"--listen unix:{path}: name an absolute path")
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise BadInput(
            f"--listen unix:{path}: {len(os.fsencode(path))} bytes is over the {SOCKET_PATH_MAX} a Unix "
            "socket path may have; choose a shorter one"
        )
    return path


def prepare_socket_folder(path: Path) -> None:
    """The socket's folders made (0711: anyone may reach a socket they know the name of, no one
    may list them), and a stale socket of a dead serve removed (we hold the lock). The way to the
    socket's folder is judged first, entry by entry as the kernel walks it (`_strict_way`), and
    only then is anything made; the socket's own folder may be written by no other account at all:
    any account that could change the way, a confined unit too, could put its own socket in
    serve's place (once serve stops, or at once through a folder or link of its own) and read every
    unit's token from its calls (D-259). A folder that was there already only gains the search bits."""
    check_socket_path(path)
    folder = path.parent
    try:
        parent, missing = _strict_way(path, folder.parent)
        for name in missing:  # judged: made by serve, 0711, and found as made
            parent = _make_folder(path, parent / name)
        own = parent / folder.name
        try:
            own.mkdir(mode=0o711)
            made = True
        except FileExistsError:
            made = False
        for mine in (parent, own):
            st = os.lstat(mine)
            if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
                raise Refused(
                    f"--listen unix:{path}: {mine} is not a folder of this account; remove it first"
                )
        _only_ours(path, own, os.lstat(own))
        # every account may pass through to the socket (a confined unit calls the door): 0711 where
        # serve made the folder (whatever the umask left), else the folder's own mode with the
        # search bits added and nothing taken away
        os.chmod(own, 0o711 if made else stat.S_IMODE(os.lstat(own).st_mode) | 0o011)
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise Refused(f"--listen unix:{path}: cannot prepare its folder ({exc.strerror})") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise Refused(f"--listen unix:{path}: something that is not a socket is there; remove it first")
    if _answers(path):
        raise Refused(f"--listen unix:{path}: another process listens there; choose another path")
    os.unlink(path)


_MAY_TAKE = (
    ": such an account, a confined unit too, could take the socket's name and read the units' tokens; put "
    "the socket in a folder only this account writes (the default, or one made with mode 0711)"
)


def _strict_way(path: Path, upto: Path) -> tuple[Path, list[str]]:
    """`upto` walked from / as the kernel walks it, a link followed where it stands (as `unit run`
    walks a worktree's way: engine.host.folders.check_parents): every entry on the way, a link
    included, root's or this account's, in a folder that no other account may write in (by mode or
    ACL) unless it is sticky, as /tmp (there no one renames what is not theirs). Returns the folder
    reached with every link resolved, and the names still to be made under it (nothing is made
    here: a refusal leaves nothing behind)."""
    from engine.host.folders import TooManyLinks, walk_way

    mine = (0, os.getuid())

    def judge_contents(folder: Path, up: os.stat_result) -> None:  # who may rename what is in it
        how = _others_write(folder, up)
        if how is not None and not up.st_mode & stat.S_ISVTX:
            raise Refused(
                f"--listen unix:{path}: other accounts may rename what is in {folder} ({how})" + _MAY_TAKE
            )

    current = Path("/")
    try:
        for step in walk_way(upto):
            current, entry, st = step.folder, step.entry, step.st
            judge_contents(current, step.up)
            if st is None:
                if ".." in step.rest:
                    raise Refused(f"--listen unix:{path}: a `..` after {entry}, which is not there yet")
                return current, [entry.name, *(part for part in step.rest if part not in ("", "."))]
            if st.st_uid not in mine:
                raise Refused(
                    f"--listen unix:{path}: {entry} belongs to another account (uid {st.st_uid})" + _MAY_TAKE
                )
            if not stat.S_ISLNK(st.st_mode):
                if not stat.S_ISDIR(st.st_mode):
                    raise Refused(f"--listen unix:{path}: {entry} is not a folder")
                current = entry
    except TooManyLinks:
        raise Refused(f"--listen unix:{path}: too many links on the way") from None
    judge_contents(current, os.lstat(current))  # the folder that holds the socket's own
    return current, []


def _make_folder(path: Path, folder: Path) -> Path:
    """A folder of the way serve makes: 0711, and found as made (one another account made meanwhile
    is refused, never used)."""
    try:
        os.mkdir(folder, 0o711)
    except FileExistsError:
        raise Refused(
            f"--listen unix:{path}: {folder} appeared while serve made it; look at it, then try again"
        ) from None
    os.chmod(folder, 0o711)
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
        raise Refused(f"--listen unix:{path}: {folder} is not a folder of this account; remove it first")
    return folder


def _others_write(folder: Path, st: os.stat_result) -> str | None:
    """How another account may write in the folder, or None: by its mode (others, or a group not
    its owner's alone) or by a POSIX ACL, as `unit run` judges a worktree (engine.host.folders,
    D-211); said as `mode 777` or `mode 755 and an ACL: getfacl FOLDER`."""
    from engine.host.folders import acl, others_may_write

    mode = f"mode {stat.S_IMODE(st.st_mode):o}"
    if others_may_write(st):
        return mode
    return f"{mode} and an ACL: getfacl {folder}" if acl(folder, st) else None


def _only_ours(path: Path, folder: Path, st: os.stat_result) -> None:
    """Refused where another account may write in the socket's own folder (even a sticky one: once
    serve removes its socket, anyone may bind the name there)."""
    how = _others_write(folder, st)
    if how is not None:
        raise Refused(f"--listen unix:{path}: other accounts may write in {folder} ({how})" + _MAY_TAKE)


def release_socket_folder(ws: Workspace, path: Path) -> None:
    """prepare_socket_folder's undoing, once serve has removed its socket: the default socket's
    folder (`<runtime>/<workspace-id>/`, made for it) removed when empty, while the folder above it
    is still this account's own (not a link put there), so a host serving many workspaces over
    time keeps none of theirs. A folder `--listen` named is the operator's, and stays (D-216)."""
    try:
        if path != default_socket(ws):
            return
        up = os.lstat(path.parent.parent)
        if stat.S_ISDIR(up.st_mode) and up.st_uid == os.getuid():
            os.rmdir(path.parent)
    except (OSError, RegulatorError):
        pass


def _answers(path: Path) -> bool:
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(1.0)
    try:
        sock.connect(str(path))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def serve_state(ws: Workspace, timeout: float = 2.0) -> dict[str, Any]:
    """What the host-side commands and the control room show of serve (design §22): serve.json of
    the running serve and its /healthz, {"running": False} where none runs, or "error" where it
    runs but its door does not answer."""
    info = running(ws)
    if info is None:
        return {"running": False}
    found: dict[str, Any] = {"running": True, "pid": info.get("pid"), "door": info.get("door")}
    door = info.get("door")
    if not isinstance(door, str):
        return found | {"error": "serve.json names no door"}
    from engine.base.errors import RegulatorError
    from engine.doors.client import DoorClient

    try:
        health = DoorClient(door, "", timeout=timeout).healthz()
    except RegulatorError as exc:
        return found | {"error": str(exc)}
    shown = found | {k: health.get(k) for k in ("leader", "lag", "lastTick", "units")}
    error = health.get("doorError")  # its door refuses every unit's call (the SDK failed to load)
    return shown | {"doorError": error} if isinstance(error, str) else shown


STUCK_S = 30  # a loop that has not ticked for this long (three ticks) is said to be stuck


def describe(state: dict[str, Any], now: datetime | None = None) -> str:
    """One line for a person: `serve: leader · last tick 12:00:00Z` (`· lag N B` before the tick
    where serve has bytes still to look at; a tick of another day by its date too), or why not. A door
    that answers while the loop has not ticked for STUCK_S is said first: its duties (routing,
    lease expiry, deadlines, sensors) are not running (an operator's day: it read as healthy)."""
    if not state.get("running"):
        return "serve not running"
    if "error" in state:
        return f"serve (pid {state.get('pid')}) does not answer: {state['error']}"
    if isinstance(state.get("doorError"), str):  # its duties run, its door answers no unit: first
        return f"serve (pid {state.get('pid')}): its door is broken: {state['doorError']} (its log says why)"
    lag = state.get("lag")
    behind = sum(v for v in lag.values() if isinstance(v, int)) if isinstance(lag, dict) else 0
    role = "leader" if state.get("leader") else "follower"
    tick = state.get("lastTick") or "none yet"
    moment = clock.moment(tick) if isinstance(tick, str) else None
    if moment is not None:
        now = now or clock.now()
        idle = int((now - moment).total_seconds())
        if idle > STUCK_S:
            return f"serve: no tick for {idle}s, its duties are not running (its log says why) · {role} · lag {behind} B"
        if moment.date() == now.date():  # today's: its time alone (the date cut the line at 80 columns)
            tick = moment.strftime("%H:%M:%SZ")
    lagging = f" · lag {behind} B" if behind else ""  # none: nothing to say (it cut the line at 80 columns)
    return f"serve: {role}{lagging} · last tick {tick}"
