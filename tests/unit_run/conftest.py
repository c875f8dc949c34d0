"""The `unit run` tests' fixtures: a system-clock workspace and its `serve`, a throwaway account and a
confined workspace for it, and every run a test started stopped after it."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests import scratch
from tests.helpers import accounts
from tests.serving import Serving
from tests.unit_run.common import (
    stop_runs,
    system_workspace,
)


@pytest.fixture
def served(tmp_path: Any) -> Any:
    ws = system_workspace(tmp_path)
    serving = Serving(ws)
    try:
        yield ws, serving
    finally:
        serving.close()


@pytest.fixture(autouse=True)
def _stop_runs() -> Any:
    yield
    stop_runs()


# ---- confined: --user ---------------------------------------------------------------------------
@pytest.fixture
def account() -> Any:
    """A throwaway system account without a home, removed after the test."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd")
    name = f"regt{secrets.token_hex(3)}"
    accounts("useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name)
    try:
        yield pwd.getpwnam(name)
    finally:
        stop_runs()  # its processes first: userdel refuses an account still running
        accounts("userdel", name)


# ---- one account per confined unit; nothing acts as the unit after its run -----------------------
@pytest.fixture
def confined(account: Any) -> Any:
    """A system-clock workspace under /tmp (the account passes through to its worktree, never into
    .regulator/), its serve, and a folder the account may write to."""
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir=scratch.root()))
    home.chmod(0o755)
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    ws = system_workspace(home)
    serving = Serving(ws)
    try:
        yield ws, serving, account, shared
    finally:
        stop_runs()
        serving.close()
        shutil.rmtree(home, ignore_errors=True)
