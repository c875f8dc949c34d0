"""Fixtures every test shares: a plain terminal, alice's signing key, a fresh workspace."""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

from tests.helpers import alice_key, make_workspace


def pytest_configure(config: pytest.Config) -> None:
    """Compile the packages once, before any worker starts: the end-to-end tests start the
    `regulator` command about two thousand times, and where PYTHONDONTWRITEBYTECODE is set (this
    machine sets it) each start would compile every module it imports again (~70 ms of CPU)."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    root = Path(__file__).resolve().parent.parent
    for package in ("engine", "registry", "identity", "controlroom", "widgets"):
        compileall.compile_dir(root / package, quiet=2)


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch):
    """Snapshots and output must not depend on the caller's terminal settings."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)


@pytest.fixture(autouse=True)
def _signing(monkeypatch):
    """In-process engine calls sign as alice (the key the workspaces list); a key chosen by one test
    (the demo's) never leaks into the next."""
    from engine.trust import signing

    monkeypatch.setenv("REGULATOR_SIGNING_KEY", str(alice_key()))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield
    signing.use_key(None)
    signing._loaded.clear()


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path)


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server per test session (per xdist worker): tests/pg.py."""
    from tests import pg

    server = pg.start()
    yield server
    pg.stop(server)


@pytest.fixture
def pg_url(pg_server):
    """A URL to an empty database of this test's own, as the server's admin (the owner)."""
    return pg_server.url(pg_server.database())
