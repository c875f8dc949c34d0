"""The host key: `.regulator/host.key`, 32 random bytes (mode 0600) that MAC this host's caches."""

from __future__ import annotations

import os
import stat
from pathlib import Path

NAME = "host.key"


def read(folder: Path, create: bool = False) -> bytes | None:
    """The key in `folder` (made there first when `create` and it is missing); None when it
    cannot be read: a symlink, a FIFO or a device is no key (readers never block on one)."""
    path = Path(folder) / NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
    except FileNotFoundError:
        if not create:
            return None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            os.write(fd, os.urandom(32))
            os.close(fd)
        except OSError:
            pass
        return read(folder)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        key = handle.read(64)
    return key if len(key) >= 32 else None
