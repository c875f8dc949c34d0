"""tests/forkserver.py: a command line started through the fork server answers exactly what the
`regulator` script executed answers (exit code, stdout, stderr, every byte of the stores), input
on stdin included; a command past its time is killed and said as subprocess says it; a command
line whose interpreter would start differently, or any with REGULATOR_TEST_EXEC=1, is executed
(docs/decisions.md D-326)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import forkserver, helpers

PAYLOAD = {
    "subject": "upstream API",
    "claim": "The upstream statement API is deprecated from March.",
    "observation": "vendor notice dated 2026-11-29",
    "evidence": ["https://vendor.example/notice"],
    "confidence": "medium",
    "reportedSeverity": "blocking",
    "affectedUnits": ["u3"],
}

# a day's command lines: writes, reads, refusals, usage errors, input on stdin, bytes not UTF-8
LINES: list[tuple[list[str], str | bytes | None]] = [
    (["--version"], None),
    (["status", "--json"], None),
    (helpers.report_args(), None),
    (["signals", "report", "--json-input", "-", "--by", "alice", "--json"], json.dumps(PAYLOAD)),
    (["signals", "report", "--json-input", "-", "--by", "alice"], b"\xff\xfe not utf-8"),
    (["signals", "route"], None),
    (["obligations", "--json"], None),
    (["obligations"], None),
    (["obligation", "show", "nope"], None),
    (["signals", "report", "--nope"], None),
    (["unit", "dispatch", "u3", "--worktree", "wt/u3"], None),
    (
        [
            "memory",
            "remember",
            "--subject",
            "s",
            "--note",
            "n",
            "--review-by",
            "2026-12-20",
            "--evidence",
            "e",
        ],
        None,
    ),
    (["verify", "--json"], None),
    (["status"], None),
    ([], None),
]


def day(ws: helpers.Workspace, seed: str | None, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The day's lines in `ws`: executed under PYTHONHASHSEED=`seed` (another interpreter start than
    the server's: never forked), or forked (`seed` None)."""
    monkeypatch.delenv("REGULATOR_TEST_EXEC", raising=False)
    extra = {"PYTHONHASHSEED": seed} if seed is not None else {}
    assert forkserver.serves(helpers.REGULATOR, dict(ws.env, **extra), str(ws.root)) is (seed is None)
    seen = []
    for args, given in LINES:
        done = ws.run(*args, input=given, env=extra)
        seen.append((args, done.returncode, done.stdout, done.stderr))
    stores = {path.name: path.read_bytes() for path in sorted((ws.root / ".regulator").glob("*.ndjson"))}
    return [*seen, stores, helpers.git(ws.root, "worktree", "list", "--porcelain")]


def test_a_day_forked_answers_byte_for_byte_what_it_answers_executed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executed under two hash seeds and forked (every fork of a server shares its hash seed: an
    answer that hung on a set's order would differ between the executed two)."""
    days = []
    for seed in ("1", "2", None):
        ws = helpers.make_workspace(tmp_path)  # the same workspace each time, at the same path
        days.append(day(ws, seed, monkeypatch))
        shutil.rmtree(ws.root)
    executed, again, forked = days
    for one, other, third in zip(executed, again, forked, strict=True):
        assert one == other == third
    codes = [seen[1] for seen in executed[: len(LINES)]]
    assert 0 in codes and 2 in codes and executed[-2], codes  # writes, refusals, stores written


def test_a_command_past_its_time_is_killed_and_said_as_subprocess_says_it(tmp_path: Path) -> None:
    ws = helpers.make_workspace(tmp_path)
    assert forkserver.serves(helpers.REGULATOR, dict(ws.env), str(ws.root))
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run(
            helpers.REGULATOR,
            ["status", "--json"],
            cwd=str(ws.root),
            env=dict(ws.env),
            input=None,
            text=True,
            timeout=0.0,
        )
    done = ws.run("status", "--json")  # the server still serves
    assert done.returncode == 0 and json.loads(done.stdout)


def test_a_line_whose_interpreter_would_start_differently_is_executed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = helpers.make_workspace(tmp_path)
    monkeypatch.delenv("REGULATOR_TEST_EXEC", raising=False)
    assert forkserver.serves(helpers.REGULATOR, dict(ws.env), str(ws.root))
    assert not forkserver.serves(helpers.REGULATOR, dict(ws.env, PYTHONIOENCODING="latin-1"), str(ws.root))
    assert not forkserver.serves(helpers.REGULATOR, dict(ws.env, LC_ALL="C"), str(ws.root))
    assert not forkserver.serves(helpers.REGULATOR, dict(ws.env), str(ws.root / "absent"))
    monkeypatch.setenv("REGULATOR_TEST_EXEC", "1")
    assert not forkserver.serves(helpers.REGULATOR, dict(ws.env), str(ws.root))
    # executed, the latin-1 interpreter writes what the forked one could not have: its own encoding
    monkeypatch.delenv("REGULATOR_TEST_EXEC")
    done = ws.run("obligation", "show", "é", env={"PYTHONIOENCODING": "latin-1"}, input=b"")
    assert done.returncode == 2 and b"'\xe9'" in done.stderr, done.stderr
    done = ws.run("obligation", "show", "é", input=b"")
    assert done.returncode == 2 and b"'\xc3\xa9'" in done.stderr, done.stderr


def test_the_server_holds_none_of_what_reads_its_settings_as_it_is_imported() -> None:
    """textual, GitPython, the SDK, psycopg, pydantic and the engine's PostgreSQL modules are
    imported by each command that needs them, in its own process, as executed."""
    import sys

    done = subprocess.run(
        [sys.executable, forkserver.__file__, "--modules", helpers.REGULATOR],
        capture_output=True,
        text=True,
        check=True,
    )
    held = done.stdout.split()
    assert "controlroom.cli.root" in held and "engine.commands.signals" in held and "yaml" in held
    assert [name for name in held if forkserver._excluded(name)] == []


SURVIVES = """
import os, sys, threading
from pathlib import Path
from tests import helpers
ws = helpers.make_workspace(Path(sys.argv[1]))
first = []
thread = threading.Thread(target=lambda: first.append(ws.run("status", "--json").returncode))
thread.start()
thread.join()  # the thread that started the server ends
pid = os.fork()
if pid == 0:
    sys.exit(0)  # a forked child of the test ends as Python ends: its exit hooks run
os.waitpid(pid, 0)
print(first[0], ws.run("status", "--json").returncode)
"""


def test_the_server_outlives_the_thread_that_started_it_and_a_forked_child_of_the_test(
    tmp_path: Path,
) -> None:
    """A server asked to die with its parent thread, or stopped by a forked child's exit hooks,
    would refuse every later command line of the worker."""
    import sys

    done = subprocess.run(
        [sys.executable, "-c", SURVIVES, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(helpers.clean_env(), REGULATOR_TEST_EXEC="0"),
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0 and done.stdout == "0 0\n", done.stderr


def test_what_subprocess_refuses_or_takes_otherwise_is_the_same_forked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Input and arguments that cannot be encoded raise before anything starts, and leave no
    descriptor open; a path in the environment is its text; a relative folder through a symlink
    and `..` is the one the kernel finds; a changed umask, or a variable read as a process starts
    (LD_PRELOAD, TYPER_*), has the command line executed."""
    import os

    monkeypatch.delenv("REGULATOR_TEST_EXEC", raising=False)
    ws = helpers.make_workspace(tmp_path)
    assert ws.run("status", "--json").returncode == 0  # the server started
    fds = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(UnicodeEncodeError):
        ws.run("status", "--json", input="\udcff")
    with pytest.raises(UnicodeEncodeError):
        ws.run("obligation", "show", "\ud800")
    assert sorted(os.listdir("/proc/self/fd")) == fds
    done = ws.run("status", "--json", env={"REGULATOR_CHECKPOINT": Path("off")})
    assert done.returncode == 0 and json.loads(done.stdout)
    (tmp_path / "alias").symlink_to(ws.root / "wt")  # alias/.. is the workspace, not tmp_path
    monkeypatch.chdir(tmp_path)
    forked = ws.run("status", "--json", cwd=Path("alias/.."))
    monkeypatch.setenv("REGULATOR_TEST_EXEC", "1")
    executed = ws.run("status", "--json", cwd=Path("alias/.."))
    assert forked.returncode == executed.returncode == 0 and forked.stdout == executed.stdout
    monkeypatch.delenv("REGULATOR_TEST_EXEC")
    for changed in ({"LD_PRELOAD": "libnothing.so"}, {"TYPER_USE_RICH": "1"}):
        assert not forkserver.serves(helpers.REGULATOR, dict(ws.env, **changed), str(ws.root))
    old = os.umask(0o077)
    try:
        assert not forkserver.serves(helpers.REGULATOR, dict(ws.env), str(ws.root))
    finally:
        os.umask(old)
    assert forkserver.serves(helpers.REGULATOR, dict(ws.env), str(ws.root))


def _u1_and_r1(ws: helpers.Workspace) -> None:
    ws.lease("u1")
    ws.lease("r1")


def test_a_serve_started_through_the_serve_profile_answers_and_stops_as_an_executed_one(
    tmp_path: Path,
) -> None:
    """tests/serving.py's `Serving` starts serve through a second fork server holding the door's
    modules and the mcp SDK (D-327): in its own session as `start_new_session` puts it, its door
    answers a unit's call, SIGTERM ends it with the same lines and exit code as an executed serve,
    SIGKILL is said as -9, and a wait past its time raises as subprocess's does."""
    import os
    import signal

    from tests.serving import DEADLINE_S, Serving, sdk_call, token_of, wait_for

    ws, _ = helpers.prepared(tmp_path, _u1_and_r1)
    token = token_of(ws.root / "wt" / "u1")
    seen = []
    for fork in (False, True):
        serving = Serving(ws, fork=fork)
        try:
            assert isinstance(serving.proc, forkserver.Forked) is fork
            assert os.getsid(serving.proc.pid) == serving.proc.pid and serving.proc.poll() is None
            for timeout in (0.05, 0, -1):
                with pytest.raises(subprocess.TimeoutExpired):
                    serving.proc.wait(timeout=timeout)
            answer = sdk_call(serving.sock, token, "status")
            assert not answer.is_error
            serving.proc.send_signal(signal.SIGTERM)
            code = serving.proc.wait(timeout=DEADLINE_S)
            said = [(line.get("serve"), sorted(line)) for line in serving.lines() if "serve" in line]
            seen.append((code, said, answer.structured_content["unit"], serving.sock.exists()))
        finally:
            serving.close()
    assert seen[0] == seen[1] == (0, seen[0][1], "u1", False), seen
    assert [name for name, _ in seen[0][1]] == ["listening", "stopped"]
    serving = Serving(ws)
    try:
        serving.kill()
        assert isinstance(serving.proc, forkserver.Forked) and serving.proc.returncode == -signal.SIGKILL
    finally:
        serving.close()
    # ended but not yet waited for: a zombie, its pid still its own (as a Popen's child), so a signal
    # sent now reaches nothing else and raises nothing; the waiter reaps it once its code is read
    serving = Serving(ws)
    try:
        os.kill(serving.proc.pid, signal.SIGKILL)
        stat = Path(f"/proc/{serving.proc.pid}/stat")
        wait_for(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", "serve a zombie")
        serving.proc.send_signal(signal.SIGTERM)
        assert serving.proc.wait(timeout=DEADLINE_S) == -signal.SIGKILL
        wait_for(lambda: not stat.exists(), "serve reaped once its code was read")
    finally:
        serving.close()


def test_the_serve_profile_holds_the_sdk_and_no_thread_and_reads_no_setting_it_was_not_given() -> None:
    """The serve profile's server holds the SDK and uvicorn, never Textual, GitPython or the
    PostgreSQL backend, and one thread (a fork copies one); a line whose pydantic or OpenTelemetry
    settings differ from the server's is executed (both read theirs as they are imported)."""
    import os
    import sys

    done = subprocess.run(
        [sys.executable, forkserver.__file__, "--modules", helpers.REGULATOR, "serve"],
        capture_output=True,
        text=True,
        check=True,
    )
    held = done.stdout.split()
    assert held[-1] == "threads=1"
    assert "mcp.server.streamable_http_manager" in held and "controlroom.door_http" in held
    assert [name for name in held if forkserver._excluded(name, forkserver.SERVE_NOT_PRELOADED)] == []
    env = helpers.clean_env()
    folder = os.getcwd()
    if os.environ.get("REGULATOR_TEST_EXEC") != "1":
        assert forkserver.serves(helpers.REGULATOR, env, folder, "serve")
    for changed in ({"PYDANTIC_DISABLE_PLUGINS": "__all__"}, {"OTEL_PYTHON_CONTEXT": "contextvars_context"}):
        assert not forkserver.serves(helpers.REGULATOR, dict(env, **changed), folder, "serve")


CLOSED_STDIN = """
import os, sys
from tests import forkserver, helpers
os.close(0)
print(forkserver.serves(helpers.REGULATOR, helpers.clean_env(), os.getcwd()))
"""


def test_what_a_fork_would_inherit_otherwise_has_the_line_executed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second review (D-327): what the C library reads as cryptography loads (OPENSSL_*,
    CRYPTOGRAPHY_*), a relative or empty PYTHONPATH entry (read against the command's folder), a
    signal the test blocked or a resource limit it changed since the server started, or a closed
    stdin (the request's own socket would take its place) each have the line executed; the server
    is in a process group of its own (a Ctrl-C at the terminal reaches the tests, not it)."""
    import os
    import resource
    import signal
    import sys

    monkeypatch.delenv("REGULATOR_TEST_EXEC", raising=False)
    env, folder = helpers.clean_env(), os.getcwd()
    assert forkserver.serves(helpers.REGULATOR, env, folder)
    server = forkserver._SERVERS["command"]["proc"]
    assert os.getpgid(server.pid) == server.pid != os.getpgid(0)  # type: ignore[attr-defined]
    for changed in (
        {"OPENSSL_CONF": "/nowhere.cnf"},
        {"CRYPTOGRAPHY_OPENSSL_NO_LEGACY": "1"},
        {"PYTHONPATH": ""},
        {"PYTHONPATH": "/abs:relative"},
    ):
        assert not forkserver.serves(helpers.REGULATOR, dict(env, **changed), folder), changed
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
    try:
        assert not forkserver.serves(helpers.REGULATOR, env, folder)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR2])
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0 if soft else min(4096, hard), hard))
    try:
        assert not forkserver.serves(helpers.REGULATOR, env, folder)
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    assert forkserver.serves(helpers.REGULATOR, env, folder)
    done = subprocess.run(
        [sys.executable, "-c", CLOSED_STDIN],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env, REGULATOR_TEST_EXEC="0"),
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0 and done.stdout == "False\n", done.stderr
