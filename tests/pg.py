"""A real PostgreSQL 15 server for the tests (design §18): one per test session (per xdist worker),
started from the machine's binaries on a Unix socket only, one database per test.

As root (PostgreSQL refuses to run as root), initdb and pg_ctl run as the `postgres` OS user in a
folder it owns. Without the binaries the PostgreSQL tests skip, unless
REGULATOR_TEST_POSTGRES=required (CI), when they fail.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest  # only start() uses it; the bench calls launch()

BIN = Path(os.environ.get("REGULATOR_PG_BIN", "/usr/lib/postgresql/15/bin"))
ADMIN = "regulator_admin"
_names = itertools.count(1)


@dataclass
class Server:
    folder: Path
    socket: Path
    made: list[str] = field(default_factory=list)

    def url(self, db: str = "postgres", user: str = ADMIN) -> str:
        return f"postgresql://{user}@/{db}?host={self.socket}"

    def admin(self, db: str = "postgres") -> Any:
        import psycopg

        return psycopg.connect(self.url(db), autocommit=True)

    def database(self, prefix: str = "t") -> str:
        """A new, empty database of its own."""
        name = f"{prefix}_{os.getpid()}_{next(_names)}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return name


class Unavailable(Exception):
    """No server could be started here (the reason)."""


def _unavailable(why: str) -> None:
    raise Unavailable(why)


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def start() -> Server:
    """For the fixture: skip without a server, or fail where CI requires one."""
    try:
        return launch()
    except Unavailable as exc:
        if os.environ.get("REGULATOR_TEST_POSTGRES") == "required":
            pytest.fail(f"PostgreSQL required (REGULATOR_TEST_POSTGRES=required) but unavailable: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")


def launch() -> Server:
    """Start a server in a new temporary folder (raises Unavailable)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install -e '.[postgresql]')")
    if not (BIN / "initdb").exists() or not (BIN / "pg_ctl").exists():
        _unavailable(f"no initdb/pg_ctl under {BIN}")
    folder = Path(tempfile.mkdtemp(prefix="regulator-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    folder.chmod(0o755)
    data = folder / "data"
    run = _as_postgres
    try:
        subprocess.run(
            run(
                [
                    str(BIN / "initdb"),
                    "-D",
                    str(data),
                    "--auth=trust",
                    "-U",
                    ADMIN,
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                    "-N",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = f"-c listen_addresses='' -k {folder} -c fsync=off -c max_connections=200"
        subprocess.run(
            run(
                [
                    str(BIN / "pg_ctl"),
                    "-D",
                    str(data),
                    "-o",
                    options,
                    "-l",
                    str(folder / "log"),
                    "-w",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        _unavailable(f"the server did not start ({exc})")
    return Server(folder, folder)


def stop(server: Server) -> None:
    subprocess.run(
        _as_postgres([str(BIN / "pg_ctl"), "-D", str(server.folder / "data"), "-m", "immediate", "stop"]),
        capture_output=True,
        timeout=60,
    )
    shutil.rmtree(server.folder, ignore_errors=True)
