"""Helpers for end-to-end tests: a real git repository and the real `regulator` command."""

from __future__ import annotations

import atexit
import contextlib
import copy
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.log.events import INDEX, EventSource
from tests import forkserver

REGULATOR = str(Path(sys.executable).parent / "regulator")
NOW = "2026-11-29T12:00:00Z"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Alice Owner",
    "GIT_AUTHOR_EMAIL": "alice@example.org",
    "GIT_COMMITTER_NAME": "Alice Owner",
    "GIT_COMMITTER_EMAIL": "alice@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,  # no machine identity leaks in: the tests set their own
}


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "TEXTUAL_THEME", "REGULATOR_NOW", "REGULATOR_SIGNING_KEY", "SSH_AUTH_SOCK")
    }
    env.update(GIT_ENV)
    env.update(extra)
    return env


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env or clean_env(), check=True
    )
    return done.stdout


@dataclass
class Workspace:
    root: Path
    env: dict[str, str]
    url: str | None = None  # the PostgreSQL store a fixture put it on (tests/test_door.py)
    lease_file: Path | None = None  # a lease a fixture dispatched (tests/test_door.py)

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        input: str | bytes | None = None,
        env: dict | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess:
        merged = dict(self.env)
        if env:
            merged.update(env)
        text = not isinstance(input, bytes)
        folder = str(cwd or self.root)
        if forkserver.serves(REGULATOR, merged, folder):  # the script's entry point, forked (D-326)
            code, out, err = forkserver.run(
                REGULATOR, list(args), cwd=folder, env=merged, input=input, text=text, timeout=120
            )
            done = subprocess.CompletedProcess([REGULATOR, *args], code, out, err)
        else:
            done = subprocess.run(
                [REGULATOR, *args],
                cwd=folder,
                capture_output=True,
                text=text,
                input=input,
                env=merged,
                timeout=120,
            )
        if check and done.returncode != 0:
            raise AssertionError(f"regulator {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done

    def json(self, *args: str, cwd: Path | None = None, env: dict | None = None) -> Any:
        done = self.run(*args, "--json", cwd=cwd, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def contract(self, unit_id: str, unit_type: str, profile: str, **more: Any) -> None:
        path = self.root / "contracts" / f"{unit_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"id": unit_id, "type": unit_type, "profile": profile, "title": f"{unit_id} work", **more}
        path.write_text(json.dumps(data))

    def store(self, name: str) -> Path:
        return self.root / ".regulator" / f"{name}.ndjson"

    def digest(self) -> str:
        """A fingerprint of every store: a refused command must leave it unchanged."""
        h = hashlib.sha256()
        for name in ("signals", "memory", "units", "identity"):
            path = self.store(name)
            h.update(path.read_bytes() if path.exists() else b"-")
        return h.hexdigest()

    def events(self, name: str) -> list[dict]:
        return [json.loads(line) for line in self.store(name).read_text().splitlines() if line.strip()]

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def commit(self, message: str, email: str = "alice@example.org", sign: bool = True) -> None:
        """Commit everything; SSH-signed with alice's key (as `registry ack --commit` would) unless
        `sign` is False."""
        env = dict(self.env, GIT_AUTHOR_EMAIL=email)
        git(self.root, "add", "-A", env=env)
        signing = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={alice_key()}"] if sign else []
        git(
            self.root,
            *signing,
            "commit",
            "-q",
            *(["-S"] if sign else []),
            "--allow-empty",
            "-m",
            message,
            env=env,
        )

    def git(self, *args: str) -> str:
        return git(self.root, *args, env=self.env)

    def decide(self, relative: str, text: str, by: str = "alice", env: dict | None = None) -> None:
        """Change a governed file the only way it changes: a proposal, accepted (design §7, §15.0)."""
        source = self.root.parent / f"proposed-{relative.replace('/', '-')}"
        source.write_text(text)
        args = ["identity", "propose", "--file", relative, "--content-from", str(source)]
        done = self.run(*args, "--rationale", "test policy", "--by", by, "--json", env=env)
        assert done.returncode == 0, done.stderr
        proposal = json.loads(done.stdout)["id"]
        self.run("identity", "accept", proposal, "--by", by, "--rationale", "ok", env=env, check=True)

    def lease(self, unit_id: str) -> Path:
        """Dispatch the unit with a worktree; return the worktree folder holding the lease."""
        worktree = self.root / "wt" / unit_id.replace("/", "-")
        worktree.mkdir(parents=True, exist_ok=True)
        self.run("unit", "dispatch", unit_id, "--worktree", str(worktree), check=True)
        return worktree


def imported(
    ws: Workspace, args: list[str], heavy: set[str], before: str = ""
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`regulator ARGS` run by `controlroom.cli.root.main` in a fresh interpreter in the workspace
    (after the Python statements `before`): its result, and which of the top-level packages
    `heavy` it imported, sorted (the cold start's weight: design §12)."""
    code = (
        f"import json, sys\n{before}\n"
        "from controlroom.cli.root import main\n"
        "code = main(sys.argv[2:])\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[1])))),"
        " file=sys.stderr)\n"
        "sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(sorted(heavy)), *args],
        cwd=ws.root,
        capture_output=True,
        text=True,
        env=ws.env,
    )
    lines = done.stderr.strip().splitlines()
    return done, json.loads(lines[-1]) if lines else ["(no report: the interpreter failed)"]


def clone(ws: Workspace, target: Path) -> Path:
    """A git clone of the workspace's repository (what CI checks out): never its stores."""
    git(ws.root.parent, "clone", "-q", f"file://{ws.root}", str(target), env=ws.env)
    assert not (target / ".regulator").exists()
    return target


def one_line(done: Any) -> str:
    """The one line a refusal prints on stderr, and no traceback."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def make_key(folder: Path, name: str = "id", kind: str = "ed25519", passphrase: str = "") -> Path:
    """A real OpenSSH key pair made by ssh-keygen; returns the private key's path (.pub beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-C", f"{name}@test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path


@functools.cache
def alice_key() -> Path:
    """Alice's signing key, made once per test process (ssh-keygen per test would be slow)."""
    return make_key(made_folder("regulator-keys-"), "alice")


def make_workspace(
    tmp: Path, now: str | None = NOW, clock: str = "pinned", store: str | None = None, fresh: bool = False
) -> Workspace:
    """A git repository with `regulator init` run in it, four unit contracts and one commit.

    The real `init` runs once per test process for each (now, clock): later calls copy that
    workspace (the repository, `.regulator/` and its host key included), which costs a few
    milliseconds instead of a command and five git processes. Copies share their ids and host key;
    on the system clock (`now=None`) they were initialized when the process's first such test ran,
    minutes ago at most, as a workspace in use would have been. `fresh=True` (or a store URL)
    runs `init` anew."""
    root = tmp / "fleet-repo"
    if store is None and not fresh:  # on a real clock, init ran at the first such test's time
        copy_template(_template(now, clock) / "fleet-repo", root)
        return Workspace(root, _workspace_env(now))
    root.mkdir()
    key = alice_key()
    env = _workspace_env(now)
    git(root, "init", "-q", "-b", "main", env=env)
    git(root, "config", "user.email", "alice@example.org", env=env)
    ws = Workspace(root, env)
    more = ["--store", store] if store else []
    ws.run("init", "--owner", "alice", "--owner-key", f"{key}.pub", "--clock", clock, *more, check=True)
    ws.contract("u1", "implement", "implement")
    ws.contract("u3", "implement", "implement")
    ws.contract("r1", "research", "intelligence")
    ws.contract("b1", "bookkeeper", "bookkeeper")
    (root / "wt").mkdir()
    (root / ".gitignore").write_text(".regulator/\nwt/\n")
    git(root, "add", "-A", env=env)
    git(root, "commit", "-q", "-m", "workspace", env=env)
    return ws


def prepared(tmp: Path, steps: Callable[[Workspace], Any]) -> tuple[Workspace, Any]:
    """`make_workspace(tmp)` (pinned at NOW), then `steps` run on it: the real commands run once per
    test process for each `steps` (a module-level function whose effect does not depend on the
    folder); later calls copy that workspace, its worktrees (`ws.lease`) pointed at the copy's path.
    Returns the workspace and a deep copy of what `steps` returned, which must be plain data (ids,
    text, numbers): never a path or the workspace, which would name the template, not the copy.
    The template is built in the environment the test process started with, whatever the test
    that happens to build it has set (`pristine`)."""
    template, answer = _prepared(steps)
    root = tmp / "fleet-repo"
    copy_template(template, root)
    return Workspace(root, _workspace_env(NOW)), copy.deepcopy(answer)


@functools.cache
def _prepared(steps: Callable[[Workspace], Any]) -> tuple[Path, Any]:
    with pristine():
        ws = make_workspace(template_folder("regulator-prepared-"))
        answer = steps(ws)
        compact(ws.root)
    if str(ws.root.parent) in repr(answer) or isinstance(answer, (Path, Workspace)):
        raise AssertionError(f"{steps.__name__} returned a path of the template: return plain data")
    return ws.root, answer


def _workspace_env(now: str | None) -> dict[str, str]:
    return clean_env(REGULATOR_SIGNING_KEY=str(alice_key()), **({"REGULATOR_NOW": now} if now else {}))


@functools.cache
def _template(now: str | None, clock: str) -> Path:
    """The workspace `make_workspace` copies, made once per test process by the real commands."""
    with pristine():
        folder = template_folder("regulator-template-")
        compact(make_workspace(folder, now=now, clock=clock, fresh=True).root)
    return folder


STARTED_WITH = dict(os.environ)  # the test process's environment before any test changed it


@contextlib.contextmanager
def pristine(**overrides: str) -> Iterator[None]:
    """Run a template's build in the environment the test process started with (plus `overrides`),
    so that the test that happens to build it first cannot leave its settings in every copy."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(STARTED_WITH, **overrides)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# the files of a workspace that name its own path: lease files, and git's links between a repository
# and its worktrees (`ws.lease` puts worktrees in wt/, the demo in .worktrees/)
NAMES_ITS_PATH = (
    "wt/*/.regulator-lease.json",
    ".worktrees/*/.regulator-lease.json",
    ".worktrees/*/.git",
    ".git/worktrees/*/gitdir",
)


def copy_template(template: Path, root: Path) -> None:
    """A copy of a template workspace at `root`, the files that named the template's path naming
    the copy's (what a build of its own at `root` would have written)."""
    shutil.copytree(template, root, symlinks=True)
    for pattern in NAMES_ITS_PATH:
        for path in root.glob(pattern):
            path.write_text(path.read_text().replace(str(template), str(root)))


def compact(root: Path) -> Path:
    """A template's repository as a clone's is: its objects in one pack, no sample hooks (the hooks
    folder stays). Each copy then writes ~40 files fewer: 18 → 6 ms of CPU a copy, and a third of
    the files a run leaves behind (docs/decisions.md D-329). git reads either form alike."""
    git(root, "repack", "-a", "-d", "-q")
    git(root, "prune-packed")
    for sample in (root / ".git" / "hooks").glob("*.sample"):
        sample.unlink()
    return root


def template_folder(prefix: str) -> Path:
    """A folder for a template, removed when the test process's session ends."""
    return made_folder(prefix)


_MADE: list[Path] = []  # removed with what they hold by remove_made_folders


def made_folder(prefix: str, where: str | None = None) -> Path:
    """A temporary folder this test process removes, with what it holds (a private key, a socket),
    when its session ends (conftest's pytest_sessionfinish: an xdist worker runs no atexit), or
    failing that at its exit. A suite run left a key folder per process in /tmp."""
    if not _MADE:
        atexit.register(remove_made_folders)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=where))
    _MADE.append(folder)
    return folder


def remove_made_folders() -> None:
    for folder in _MADE:
        shutil.rmtree(folder, ignore_errors=True)
    _MADE.clear()


def report_args(**fields: Any) -> list[str]:
    base = {
        "subject": "vendor/left-pad.js",
        "claim": "The vendored helper is a modified copy.",
        "observation": "diff against upstream 1.3.0 shows a patched padStart",
        "evidence": ["vendor/left-pad.js"],
        "confidence": "high",
        "severity": "blocking",
        "affects": ["u1", "u3"],
    }
    base.update(fields)
    args = ["signals", "report"]
    for key, value in base.items():
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        for item in value if isinstance(value, list) else [value]:
            args += [flag, str(item)]
    return args


def remember_args(
    subject: str = "s",
    note: str = "n",
    review_by: str = "2026-12-20",
    evidence: tuple[str, ...] = ("e",),
    scope: tuple[str, ...] = (),
) -> list[str]:
    """`memory remember` with its flags, for tests that need an entry and do not care which."""
    args = ["memory", "remember", "--subject", subject, "--note", note, "--review-by", review_by]
    for item in evidence:
        args += ["--evidence", item]
    for unit_type in scope:
        args += ["--scope", unit_type]
    return args


class MemoryEvents(EventSource):
    """An in-memory event source for a read model built by hand (State(now=..., source=...)): `add`
    keeps an event and returns the reference a fold would have kept, so production types hold
    references only, as they do when folded from the stores."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[int, dict] = {}

    def add(self, event: dict, store: str = "signals") -> int:
        ref = len(self.held) << 2 | INDEX[store]
        self.held[ref] = event
        return ref

    def event(self, item: int) -> dict:
        return self.held[item]

    def events(self, refs: Any) -> list[dict]:
        return [self.held[item] for item in refs]


def tick(ws: Any, env: dict | None = None, cwd: Path | None = None) -> dict[str, dict]:
    """`regulator serve --once-tick`: one tick of the host's duties (design §22, §24); the JSON line
    each duty logged on stderr, by the duty's name."""
    done = ws.run("serve", "--once-tick", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    found = {}
    for line in done.stderr.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("duty"), str):
            found[data["duty"]] = data
    return found


def accounts(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """useradd, userdel, usermod, groupadd or groupdel, tried again for up to 15 s while it fails:
    tests on other workers hold /etc/passwd's lock for a moment, and userdel refuses an account
    whose killed processes are not yet reaped. An account a test made is never left behind."""
    import time

    end = time.monotonic() + 15
    while True:
        done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
        if done.returncode == 0 or time.monotonic() > end:
            break
        time.sleep(0.2)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done
