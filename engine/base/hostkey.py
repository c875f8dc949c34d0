"""The host key: `.regulator/host.key`, 32 random bytes (mode 0600) that MAC this host's caches,
and how a cache is written there (replace_private)."""

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


def replace_private(path: Path, *parts: bytes) -> bool:
    """Put the parts, one after another, at `path` (mode 0600) whole or not at all: written to a new
    file of a random name beside it, made with O_EXCL and O_NOFOLLOW (a FIFO, a link or a file put
    there beforehand is never opened, so never blocks the writer or is written through), then
    renamed over `path`. In parts, so a large file (a checkpoint) is never joined in memory first.
    False when it cannot be done (a read-only folder, a directory at `path`)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(8).hex()}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as handle:
            for part in parts:
                handle.write(part)
        os.replace(temporary, path)  # a reader sees the old file or the new, never half
        return True
    except OSError:
        try:
            temporary.unlink()
        except OSError:
            pass
        return False
