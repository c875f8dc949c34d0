"""What the control room asks of the host it runs on: whether another writer holds the decide
lock, whether its store role can write, the PostgreSQL server's appends, a file written whole."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from engine.base.errors import RegulatorError
from engine.checkout.workspace import Workspace


def cannot_write(ws: Workspace) -> str | None:
    """Why no write this room offers can be taken on these stores (a PostgreSQL role without
    INSERT, or not a host), in the words the operator sees; None on files and for regulator_host."""
    try:
        why = ws.cannot_write()
    except RegulatorError as exc:  # never "may write" by default: shown disabled, and why
        return f"cannot tell whether this store's role can write ({exc})"
    return f"{why}: open the room as regulator_host" if why else None


def follow_server(ws: Workspace) -> threading.Event | None:
    """On PostgreSQL (design §18), a thread LISTENs for appends from every host and brings them into
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
    """The file whole or not at all: a temporary file beside it, renamed over it (design §16.4)."""
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


REGISTER_DIRS = ("findings", "intake", "records", "retro", "contracts", "regulator")
GIT_PARTS = ("HEAD", "index", "packed-refs", "refs")  # a commit, a checkout, a fetch, a staged file


def watch_paths(ws: Workspace) -> list[Path]:
    """The stores, the register folders and git's HEAD, refs and index (a commit changes lint
    and Next-up without touching a register file). A clone has no .regulator/ (design §16.2)."""
    candidates = [ws.state_dir, *(ws.root / d for d in REGISTER_DIRS), ws.tree / ".git"]
    return [p for p in candidates if p.is_dir()]


def classify(ws: Workspace, changed: list[Path]) -> tuple[bool, bool, bool]:
    """(a store changed, a register file changed, git moved)."""
    git_dir = ws.tree / ".git"
    stores = registers = git = False
    for path in changed:
        if path == git_dir or git_dir in path.parents:
            parts = path.relative_to(git_dir).parts
            git |= bool(parts) and parts[0] in GIT_PARTS and not path.name.endswith(".lock")
        elif path == ws.state_dir or ws.state_dir in path.parents:
            stores |= path.suffix == ".ndjson"
        else:
            registers = True
    return stores, registers, git
