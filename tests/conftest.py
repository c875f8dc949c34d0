"""Fixtures every test shares: a plain terminal, alice's signing key, a workspace of its own (a copy
of one `init` made: tests/helpers.py make_workspace), the markers unit/e2e/hardening."""

from __future__ import annotations

import compileall
import functools
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import forkserver, scratch
from tests.helpers import alice_key, make_workspace


def pytest_configure(config: pytest.Config) -> None:
    """Compile the packages once, before any worker starts: the end-to-end tests start the
    `regulator` command about two thousand times, and where PYTHONDONTWRITEBYTECODE is set (this
    machine sets it) each start would compile every module it imports again (~70 ms of CPU).

    pytest's own processes write bytecode whatever that setting says: pytest caches the test
    modules it rewrites for their asserts only when it may, and otherwise every worker rewrites all
    of them again on every run (~3 s of CPU each). The commands the tests start keep the setting."""
    sys.dont_write_bytecode = False
    scratch.choose()  # before the first tmp_path and before the workers start, which inherit it
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    root = Path(__file__).resolve().parent.parent
    for package in ("engine", "registry", "identity", "controlroom", "widgets"):
        compileall.compile_dir(root / package, quiet=2)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The temporary folders this process's tests made (tests.helpers.made_folder: keys, sockets,
    templates) go with the session: a suite run left one or more per process in /tmp."""
    from tests.helpers import remove_made_folders

    remove_made_folders()


# what makes a test end-to-end: a fixture that builds a workspace with the real commands (or a
# PostgreSQL server), or a body that starts the real `regulator`, git, the control room or a
# workspace of its own. Every other test outside tests/hardening is a unit test.
E2E_FIXTURES = frozenset(
    {"ws", "fleet", "fleet_ci", "pg_fleet", "demo", "demo_app", "pg_server", "pg_url", "seeded", "reg",
     "pushed", "snap_compare", "templates", "served"}
)  # fmt: skip
E2E_CALLS = (
    "make_workspace(", "prepared(", "REGULATOR", ".run(", "Popen(", "ControlRoom(", "build(",
    "demo_workspace(", "Serving(", "subprocess.", "git(",
)  # fmt: skip


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
    # the test's body, and the body of every fixture it uses (a fixture of a test module's own, such
    # as one built on `prepared`, is as much the test as its body)
    functions = [getattr(item, "function", None)]
    module = getattr(getattr(item, "module", None), "__name__", None)
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        functions += [d.func for d in defs if _ours(getattr(d.func, "__module__", None), module)]
    calls = E2E_CALLS + _e2e_helpers(getattr(item, "module", None))
    for function in functions:
        if any(call in _source(function) for call in calls):
            return "e2e"
    return "unit"


@functools.cache
def _source(function: Any) -> str:
    """A function's source, read once per function: a parametrized test and a shared fixture are
    asked for by every test that uses them (inspect tokenizes the file for each ask)."""
    try:
        return inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return ""


def _ours(defined_in: str | None, module: str | None) -> bool:
    """A function the test module defines, or one of a tests folder's shared modules (a folder's
    conftest fixtures, tests/unit_run/common.py's helpers); never this file's, which every test
    uses."""
    if defined_in is None:
        return False
    return defined_in == module or (defined_in.startswith("tests.") and defined_in != __name__)


_HELPERS: dict[str, tuple[str, ...]] = {}


def _e2e_helpers(module: Any) -> tuple[str, ...]:
    """`name(` for each function of the test module that starts a real process, itself or through
    another such function of the module (`run`, `regulator`, `system_workspace`, ...)."""
    if module is None:
        return ()
    if module.__name__ not in _HELPERS:
        own = {
            name: _source(value)
            for name, value in vars(module).items()
            if inspect.isfunction(value)
            and _ours(value.__module__, module.__name__)
            and not name.startswith("test")
        }
        found: set[str] = set()
        while True:
            calls = E2E_CALLS + tuple(f"{name}(" for name in found)
            more = {
                name for name, source in own.items() if name not in found and any(c in source for c in calls)
            }
            if not more:
                break
            found |= more
        _HELPERS[module.__name__] = tuple(f"{name}(" for name in sorted(found))
    return _HELPERS[module.__name__]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, kind_of(item)))
    # the tests marked slow first, in their order, the rest after in theirs: one started last would
    # end the run alone while the other workers wait (docs/performance.md, "The suite's tail")
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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


def three_leases(ws: Any) -> None:
    for unit in ("r1", "u1", "b1"):
        ws.lease(unit)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    """A workspace with r1, u1 and b1 dispatched (made once per test process) and its `serve`:
    (workspace, Serving, {unit: token})."""
    from tests.helpers import prepared
    from tests.serving import Serving, token_of

    ws, _ = prepared(tmp_path, three_leases)
    r1, u1, b1 = (ws.root / "wt" / unit for unit in ("r1", "u1", "b1"))
    serving = Serving(ws)
    try:
        yield ws, serving, {"r1": token_of(r1), "u1": token_of(u1), "b1": token_of(b1)}
    finally:
        serving.close()


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


@pytest.fixture(autouse=True)
def _unit_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked `unit` (kind_of) that starts `regulator` or PostgreSQL fails here: the marker
    would have been wrong, and `pytest -m unit` would no longer be the fast, in-process set. (git is
    not guarded: the engine asks git in process, e.g. whether a folder is a repository at all.)"""
    if request.node.get_closest_marker("unit") is None:
        return
    import subprocess

    real = subprocess.Popen.__init__

    def guarded(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        program = args if isinstance(args, (str, bytes, Path)) else (args[0] if args else "")
        name = Path(str(program)).name
        if name in ("regulator", "initdb", "pg_ctl", "postgres", "runuser"):
            pytest.fail(f"a test marked unit starts {name}: tests/conftest.py kind_of should mark it e2e")
        real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)

    def served(*args: Any, **kwargs: Any) -> None:
        pytest.fail("a test marked unit starts regulator: tests/conftest.py kind_of should mark it e2e")

    monkeypatch.setattr(forkserver, "_server", served)  # a start through the fork server (D-326)
