from __future__ import annotations

import pytest

from tests.helpers import alice_key, make_workspace


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch):
    """Snapshots and output must not depend on the caller's terminal settings."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)


@pytest.fixture(autouse=True)
def _signing(monkeypatch):
    """In-process engine calls sign as alice (the key the workspaces list); a key chosen by one test
    (the demo's) never leaks into the next."""
    from engine import signing

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
