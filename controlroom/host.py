"""What the control room asks of the host it runs on: whether another writer holds the decide
lock, whether its store role can write, the PostgreSQL server's appends, a file written whole."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from pathlib import Path

from engine.base.errors import RegulatorError
from engine.checkout.workspace import Workspace


def decide_lock_busy(ws: Workspace) -> bool:
    """Does another writer hold `.regulator/decide.lock` right now? (A probe: never waits.)"""
    path = ws.state_dir / "decide.lock"
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


def cannot_write(ws: Workspace) -> str | None:
    """Why no write this room offers can be taken on these stores (a PostgreSQL role without
    INSERT), in the words the operator sees; None on files and for a writer role."""
    try:
        why = ws.cannot_write()
    except RegulatorError as exc:  # never "may write" by default: shown disabled, and why
        return f"cannot tell whether this store's role can write ({exc})"
    return f"{why}: open the room with a writer role" if why else None


def follow_server(ws: Workspace) -> threading.Event | None:
    """On PostgreSQL (SPEC §18), a thread LISTENs for appends from every host and brings them into
    the local mirror, where the file watch above sees them; None for file stores."""
    url = ws.url
    if url is None:
        return None
    from engine.log.pg import server as pg_srv

    stop = threading.Event()

    def pull() -> None:
        ws.sync()

    def run() -> None:
        with contextlib.suppress(Exception):  # the watch goes on with what the mirror holds
            pg_srv.follow(url, pull, stop)

    threading.Thread(target=run, name="regulator-listen", daemon=True).start()
    return stop


def write_whole(path: Path, text: str) -> None:
    """The file whole or not at all: a temporary file beside it, renamed over it (SPEC §16.4)."""
    import tempfile

    from engine.base.errors import BadInput

    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(prefix=".regulator-", suffix=".svg.tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)  # as a plain write would leave it, not mkstemp's 0600
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise BadInput(f"{path}: cannot write it ({exc.strerror or exc}); nothing written") from None
