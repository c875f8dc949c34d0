"""Fixtures every test shares: a plain terminal, alice's signing key, a fresh workspace."""

from __future__ import annotations

import compileall
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import alice_key, make_workspace


def pytest_configure(config: pytest.Config) -> None:
    """Compile the packages once, before any worker starts: the end-to-end tests start the
    `regulator` command about two thousand times, and where PYTHONDONTWRITEBYTECODE is set (this
    machine sets it) each start would compile every module it imports again (~70 ms of CPU).

    pytest's own processes write bytecode whatever that setting says: pytest caches the test
    modules it rewrites for their asserts only when it may, and otherwise every worker rewrites all
    of them again on every run (~3 s of CPU each). The commands the tests start keep the setting."""
    sys.dont_write_bytecode = False
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    root = Path(__file__).resolve().parent.parent
    for package in ("engine", "registry", "identity", "controlroom", "widgets"):
        compileall.compile_dir(root / package, quiet=2)


# what makes a test end-to-end: a fixture that builds a workspace with the real commands (or a
# PostgreSQL server), or a body that starts the real `regulator`, git, the control room or a
# workspace of its own. Every other test outside tests/hardening is a unit test.
E2E_FIXTURES = frozenset(
    {"ws", "fleet", "fleet_ci", "pg_fleet", "demo", "demo_app", "pg_server", "pg_url", "seeded", "reg",
     "pushed", "snap_compare", "templates"}
)  # fmt: skip
E2E_CALLS = ("make_workspace(", "REGULATOR", ".run(", "Popen(", "ControlRoom(", "build(", "demo_workspace(")


def kind_of(item: pytest.Item) -> str:
    """`hardening` (tests/hardening), `e2e` or `unit`: the marker `pytest -m` selects by
    (README: run the fast ones alone with `pytest -m unit`)."""
    path = Path(str(item.fspath))
    if "hardening" in path.parts:
        return "hardening"
    if set(getattr(item, "fixturenames", ())) & E2E_FIXTURES:
        return "e2e"
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any("postgres" in str(v) for v in callspec.params.values()):
        return "e2e"
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return "e2e" if any(call in source for call in E2E_CALLS) else "unit"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, kind_of(item)))


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots and output must not depend on the caller's terminal settings."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)


@pytest.fixture(autouse=True)
def _signing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """In-process engine calls sign as alice (the key the workspaces list); a key chosen by one test
    (the demo's) never leaks into the next."""
    from engine.trust import signing

    monkeypatch.setenv("REGULATOR_SIGNING_KEY", str(alice_key()))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield
    signing.use_key(None)
    signing._loaded.clear()


@pytest.fixture
def ws(tmp_path: Path) -> Any:
    return make_workspace(tmp_path)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One real PostgreSQL server per test session (per xdist worker): tests/pg.py."""
    from tests import pg

    server = pg.start()
    yield server
    pg.stop(server)


@pytest.fixture
def pg_url(pg_server: Any) -> Any:
    """A URL to an empty database of this test's own, as the server's admin (the owner)."""
    return pg_server.url(pg_server.database())
