"""A confined unit's OS account (design §23, D-168): who it is, its being this run's alone (a
host-wide lock, no process of it alive), and every process of it killed when the run ends."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import select
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

from engine.base.errors import BadInput, Refused


class Account(msgspec.Struct, frozen=True):
    """The OS account a confined unit runs as."""

    name: str
    uid: int
    gid: int
    home: str


def account_named(name: str) -> Account:
    """The account `--user` names, which a confined unit may run as: not root, not the host's own."""
    try:
        entry = pwd.getpwnam(name)
    except (KeyError, ValueError):
        raise BadInput(f"--user {name!r}: no such account on this host") from None
    if entry.pw_uid == os.geteuid():
        raise BadInput(f"--user {name}: that is this host's own account; a confined unit runs as another")
    if entry.pw_uid == 0:
        raise BadInput(f"--user {name}: that is root; a confined unit runs as an account of its own")
    if os.geteuid() != 0:
        raise Refused(f"--user {name}: switching accounts needs root (this host runs as uid {os.geteuid()})")
    return Account(name, entry.pw_uid, entry.pw_gid, entry.pw_dir or "/")


def _locks_folder() -> Path:
    """Host-wide (one account is confined for one run, whatever the workspace): root's runtime
    folder, else a folder of this account's in /tmp."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path(f"/tmp/regulator-{os.geteuid()}")
    folder = base / "regulator-accounts"
    for made in (base, folder):
        if made == Path("/run"):
            continue
        made.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(made)
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
            raise Refused(f"{made} is not a folder of this account; remove it first")
    return folder


def account_processes(uid: int) -> list[int]:
    """The live processes any of whose uids (real, effective, saved, fs) is `uid`. A process is a
    zombie only when every thread of it is: one whose first thread exited while others run shows
    `Z` in its own status and lives on in its threads (/proc/PID/task/*)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        uids, zombie = _status(Path(entry.path, "status"))
        if str(uid) not in uids:
            continue
        if zombie:
            try:
                tasks = [task.path for task in os.scandir(Path(entry.path, "task"))]
            except OSError:
                continue
            if all(_status(Path(task, "status"))[1] for task in tasks):
                continue
        found.append(int(entry.name))
    return sorted(found)


def _status(path: Path) -> tuple[list[str], bool]:
    """(uids, zombie) of one /proc status file; a file gone meanwhile reads as a zombie of no one."""
    try:
        text = path.read_text()
    except OSError:
        return [], True
    uids: list[str] = []
    zombie = False
    for line in text.splitlines():
        if line.startswith("Uid:"):
            uids = line.split()[1:]
        elif line.startswith("State:"):
            zombie = line.split()[1:2] == ["Z"]
    return uids, zombie


def claim_account(account: Account) -> int:
    """The account for this run alone (design §15.2: units never act as each other): a host-wide lock
    held for the run, and no process of the account alive. Refused (exit 3) otherwise; nothing
    started, nothing written to the workspace."""
    path = _locks_folder() / f"{account.uid}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise Refused(
            f"--user {account.name}: another `unit run` (pid {holder}) is confined as {account.name} now; "
            "each confined unit needs an account of its own"
        ) from None
    busy = account_processes(account.uid)
    if busy:
        os.close(fd)
        shown = ", ".join(str(pid) for pid in busy[:5]) + (", …" if len(busy) > 5 else "")
        raise Refused(
            f"--user {account.name}: the account runs processes already (pid {shown}); each confined unit "
            "needs an account of its own that runs nothing else"
        )
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _kill_as_root(pid: int, uid: int) -> None:
    """SIGKILL to one process found as the account's, through a descriptor that pins it (a pid
    reused meanwhile by another process is read again and spared)."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return
    try:
        uids, _ = _status(Path(f"/proc/{pid}/status"))
        if str(uid) in uids:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(handle)


KILL_FOR_S = 15.0  # how long kill_account keeps at it before it says what outlived it


def kill_account(account: Account) -> list[int]:
    """Every process of the account SIGKILLed (a `setsid` escapes the process group, not this): a
    helper forked here takes the account's uid and kill(-1)s, which reaches only processes that uid
    may signal, and root kills each one it finds as the account's, until none is left (a fork
    racing the kill is caught by the next round). Returns what is still found after KILL_FOR_S,
    which the run then says aloud: a process holding the account's effective uid under another
    account's real uid, changing its pid faster than the scan (D-211, ninth review), which no set-id
    bit gained or given can make any more (D-213)."""
    until = time.monotonic() + KILL_FOR_S
    first = True
    while True:
        found = account_processes(account.uid)
        if not first and not found:  # the first round always kills: nothing the scan misses outlives it
            return []
        if not first and time.monotonic() > until:
            return found
        first = False
        for pid in found:  # as root too: a process whose real uid is another's, its effective the
            _kill_as_root(pid, account.uid)  # account's, is beyond the account's own kill(-1)
        pid = os.fork()
        if pid == 0:  # the helper: nothing but system calls, then out
            code = 0
            try:  # the account's processes may signal it once it is theirs: no stop it can ignore
                for stop in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
                    signal.signal(stop, signal.SIG_IGN)
                os.setgroups([])
                os.setgid(account.gid)
                os.setuid(account.uid)
                os.kill(-1, signal.SIGKILL)
            except BaseException:  # noqa: BLE001 - no process left to signal, or no right to switch
                code = 1
            os._exit(code)
        _reap(pid)
        time.sleep(0.05)  # killed processes leave /proc once reaped


HELPER_S = 1.0  # how long root waits for kill_account's helper before it kills it


def _reap(pid: int) -> None:
    """The helper waited for HELPER_S at most: one the account's processes stopped (SIGSTOP, which
    nothing ignores) would hang root's wait for good; it is SIGKILLed as root, and reaped."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        os.waitpid(pid, 0)
        return
    try:
        ready, _, _ = select.select([handle], [], [], HELPER_S)
        if not ready:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(handle, signal.SIGKILL)
    finally:
        os.close(handle)
    os.waitpid(pid, 0)


PROBE_S = 60.0  # how long `regulator --version` may take as the account
PROBE_TAIL = 4096  # the bytes of its stderr kept (the last ones): whatever it writes, root keeps no more


def cannot_run(account: Account, program: str, path: str) -> str | None:
    """Why the account cannot run `program --version` (the `regulator` that the harness's hooks and
    MCP server, and a unit's `door call`, name), or None: run as the account, confined as the unit
    will be, once the account is claimed and before anything is written. A virtualenv under root's
    home (mode 0700) is the usual cause. The account may have a say in what runs (a `.pth` in its
    home's user site): its output is bounded (stdout discarded, the last PROBE_TAIL bytes of stderr
    kept), it is waited for PROBE_S at most, and every process of the account is killed after it,
    whatever it left (the review of D-215)."""
    from engine.host import confine

    tail = bytearray()
    main = threading.current_thread() is threading.main_thread()
    # from before the probe starts: a signal at any moment leaves through the clean-up below
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, _stopped) for sig in stops} if main else {}
    child: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = None
    code: int | None = None
    failed: str | None = None
    try:
        try:
            child = subprocess.Popen(
                [program, "--version"],
                user=account.uid,
                group=account.gid,
                extra_groups=[],
                cwd="/",
                env={"PATH": path, "HOME": account.home},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=confine.lock_down(),
            )
        except OSError as exc:
            failed = exc.strerror or str(exc)
        except subprocess.SubprocessError:  # its filter could not be set: nothing of it ran
            failed = "the filter of a confined process could not be set"
        if child is not None and child.stderr is not None:
            reader = threading.Thread(target=_keep_tail, args=(child.stderr, tail), daemon=True)
            reader.start()
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = child.wait(timeout=PROBE_S)
    finally:  # SIGINT, SIGTERM or SIGHUP meanwhile: after this, never in the middle of it
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        try:
            left = kill_account(account)  # the probe and whatever it started: the run starts with none of it
            if child is not None:
                child.wait()
                if reader is not None:
                    reader.join(timeout=5)
                if child.stderr is not None:
                    child.stderr.close()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    if failed is not None:
        return failed
    if left:
        shown = ", ".join(str(pid) for pid in left[:5])
        raise Refused(
            f"--user {account.name}: processes of the account outlived the check that it can run {program} "
            f"(pid {shown}); nothing was written; do not use the account until none is left (`ps -u {account.name}`)"
        )
    if code is None:
        return f"it did not answer `--version` within {PROBE_S:.0f} s"
    if code != 0:
        said = bytes(tail).decode(errors="replace").strip().splitlines()
        last = said[-1][:200].encode("ascii", "backslashreplace").decode() if said else ""
        return f"`--version` said: {last}" if last else f"`--version` exited {code}"
    return None


def cannot_enter(account: Account, folder: Path) -> bool:
    """Whether the account cannot enter `folder`, asked of the kernel as the account itself (its
    modes, ACLs and groups on every folder of the way): a child takes the account's uid and groups,
    enters the folder, then runs `/bin/true` (no code of the account's). Asked once the account is
    claimed (none of its processes alive, the lock held: nothing of the account's can stop or kill
    the child) and before anything is written, so a workspace under a home of mode 0700 is refused
    in one line rather than dispatched into a worktree the unit cannot reach. Fails closed: only a
    `/bin/true` that exits 0 means entered; one stopped, killed or not answering in PROBE_S is
    Refused (the review of D-219)."""

    def enter() -> None:
        os.chdir(folder)

    try:
        child = subprocess.Popen(
            ["/bin/true"],
            user=account.uid,
            group=account.gid,
            extra_groups=[],
            cwd="/",
            env={},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # no stop from the terminal's job control
            preexec_fn=enter,
        )
    except subprocess.SubprocessError:  # the chdir failed (raised in the child, before the exec)
        return True
    except OSError:  # the chdir succeeded (it comes first), the exec of /bin/true did not
        return False
    try:
        code: int | None = child.wait(timeout=PROBE_S)
    except subprocess.TimeoutExpired:
        code = None
    if code == 0:
        return False
    kill_account(account)
    child.wait()
    raise Refused(
        f"--user {account.name}: whether the account can enter {folder} could not be checked (the "
        f"check {'did not answer' if code is None else f'ended with {code}'}); nothing was written; "
        f"see that no process runs as the account (`ps -u {account.name}`), then run the unit again"
    )


def _stopped(signum: int, _frame: object) -> None:
    """SIGINT, SIGTERM or SIGHUP while the account is checked: out through the clean-up (every
    process of the account killed), in one line; nothing is written before the check."""
    raise Refused(f"stopped by {signal.Signals(signum).name} while the account was checked; nothing written")


def _keep_tail(stream: Any, tail: bytearray) -> None:
    """Read a stream to its end, keeping only its last PROBE_TAIL bytes."""
    while True:
        try:
            chunk = stream.read1(65536)
        except (OSError, ValueError):
            return
        if not chunk:
            return
        tail += chunk
        del tail[: max(0, len(tail) - PROBE_TAIL)]
