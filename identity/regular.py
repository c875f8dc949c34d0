"""The files regulator reads, read only when they are regular files and never waited on (design
§16.4, §26): a FIFO, a socket or a device put where a governed file, a view, a config file or
`.git/HEAD` belongs is refused in one line (exit 3), since opening a FIFO blocks until a writer
comes and reading a device may never end."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from identity.errors import Refused

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20


def not_regular(path: Path | str) -> Refused:
    return Refused(
        f"{path} is not a regular file (a FIFO, socket or device?); regulator reads only regular files "
        "and waits on none: remove it and restore the file"
    )


def read_bytes(path: Path | str, limit: int | None = None) -> bytes:
    """The bytes of a regular file (through a symlink to one). FileNotFoundError and the other
    OSErrors as `Path.read_bytes` raises them; Refused when it is no regular file: the open does
    not wait (O_NONBLOCK) and nothing is read from it. With `limit`, a file longer than that is a
    ValueError, never read whole (a sparse file of a terabyte takes no disk)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        check_regular(path)  # a socket cannot be opened at all (ENXIO): say what it is
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path)
        if limit is not None and st.st_size > limit:
            raise ValueError(f"{path} is longer than {limit} bytes")
        parts, held = [], 0
        while part := os.read(fd, _CHUNK if limit is None else min(_CHUNK, limit + 1 - held)):
            parts.append(part)
            held += len(part)
            if limit is not None and held > limit:  # grown while read
                raise ValueError(f"{path} is longer than {limit} bytes")
        return b"".join(parts)
    finally:
        os.close(fd)


def read_text(path: Path | str, limit: int | None = None) -> str:
    """A regular file's text, UTF-8 (UnicodeDecodeError as `Path.read_text` raises it)."""
    return read_bytes(path, limit).decode("utf-8")


def check_regular(path: Path | str) -> None:
    """Refused when something other than a regular file (or nothing) is at `path` (following a
    symlink): for the files git reads before regulator runs it (`.git/HEAD`)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise not_regular(path)


def replace_text(path: Path, text: str, within: Path) -> None:
    """`path` (a file inside the folder `within`) replaced by a new file holding `text`, UTF-8: a
    symlink at `path` is replaced, never followed, and a folder on the way that is a symlink is
    refused. What a person's process writes into a working tree a unit can also write (the views,
    an ack, a resolve, a retro): a link there may aim at any file or folder of the person's."""
    import tempfile

    inside = Path(os.path.realpath(within)) / path.parent.relative_to(within)
    if os.path.realpath(path.parent) != str(inside):
        where = path.parent.relative_to(within)
        raise Refused(f"{where}/ is a symlink (or reached through one): {path.name} not written")
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        was = path.lstat() if path.exists() and not path.is_symlink() else None
        os.chmod(temporary, was.st_mode & 0o777 if was is not None else 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
