"""A store's files opened as regulator opens them: never following a symlink, never waiting on a
FIFO put where a store belongs, a missing store never created; and the lock file beside them that
every writer holds (engine.log.store appends under it)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from engine.base.errors import Refused

NO_STORES = "no regulator stores here (a clone? run on the host, or connect a store: design §18)"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive section across processes, held on a lock file beside the stores."""
    fd = open_store(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def lock_held(path: Path) -> bool:
    """Does another process hold the lock file `locked(path)` takes? A probe: never waits, and a
    missing or unopenable file is no lock held."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases the probe's lock
    return False


def open_store(path: Path, flags: int) -> int:
    """Open without following a symlink; a missing store is never created here (only `init`
    and `demo` create stores, design §15.4)."""
    try:
        return open_regular(path, flags)
    except FileNotFoundError:
        raise Refused(NO_STORES) from None
    except OSError as exc:
        if os.path.islink(path):
            raise Refused(f"{path} is a symlink; regulator opens its stores only where they are") from None
        raise Refused(f"{path}: cannot open ({exc.strerror})") from None


def open_regular(path: str | Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor on a store's regular file, never following a symlink and never waiting: a
    FIFO or a device put where a store belongs would block every reader (Refused instead)."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(f"{path} is not a regular file; regulator reads its stores only from files")
    return fd
