"""git as a person's process runs it: the one way regulator runs git on a repository a unit can
write (D-199). The repository `-C` names and no other (no GIT_DIR, GIT_INDEX_FILE, GIT_NAMESPACE ...
from the environment); its objects as they are stored (no replace ref, no graft: refs are shared by
every worktree, so a unit's `git replace` would change what trunk holds for every reader); no code
of the repository's run (no hook, no fsmonitor, no filter driver, the stock SSH signer)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

SAFE = [
    "--no-replace-objects",
    # no code of the repository's: no hook, no fsmonitor, the stock SSH signer, and nothing run to
    # show a signature in a log (log.showSignature would run gpg.program on every signed commit)
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "gpg.ssh.program=ssh-keygen",
    "-c", "commit.gpgsign=false", "-c", "core.sshCommand=ssh", "-c", "log.showSignature=false",
    "-c", "gpg.program=false", "-c", "gpg.openpgp.program=false", "-c", "gpg.x509.program=false",
    # the objects as stored: replace refs stay off (the repository's core.useReplaceRefs cannot turn
    # them back on) and parents come from the commits, not from a commit-graph file beside them
    "-c", "core.useReplaceRefs=false", "-c", "core.commitGraph=false",
    # the output regulator parses as git writes it by default: log headers in UTF-8 (another
    # encoding hid every trunk commit from lint), a root commit's changes shown, no path followed
    # through renames, no submodule entered
    "-c", "i18n.logOutputEncoding=UTF-8", "-c", "log.showRoot=true", "-c", "log.follow=false",
    "-c", "submodule.recurse=false",
    "-c", "advice.graftFileDeprecated=false",  # GIT_GRAFT_FILE below: read, empty, and not a hint
]  # fmt: skip

# what points git at another repository, index, object store, ref namespace or history than the
# one `-C` names (a git hook's environment carries some of them): never passed on
ELSEWHERE = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_REPLACE_REF_BASE", "GIT_SHALLOW_FILE",
    "GIT_QUARANTINE_PATH", "GIT_PREFIX",
})  # fmt: skip
# objects as stored, and none fetched: a "promisor" remote a unit configured would run its
# `uploadpack` command to fetch an object it deleted (no protocol is allowed, no lazy fetch)
AS_STORED = {
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_GRAFT_FILE": os.devnull,
    "GIT_ALLOW_PROTOCOL": "none",
    "GIT_NO_LAZY_FETCH": "1",
}


def branch_name(name: str) -> bool:
    """Whether `name` is a branch's name as git's check-ref-format allows one, and nothing more:
    never revision syntax (`main^{/text}`, `main~3`, `@{1}`, `a..b`) that would make "trunk" an
    old commit no branch names, and no NUL or control character git could not be given."""
    # HEAD is no branch (`git check-ref-format --branch HEAD` refuses it): trunk named HEAD followed
    # whatever origin's HEAD named (D-230)
    if (
        not name
        or len(name) > 255
        or name in ("@", "HEAD")
        or name.startswith(("-", "/"))
        or name.endswith(("/", "."))
    ):
        return False
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c in " ~^:?*[\\" for c in name):
        return False
    if ".." in name or "@{" in name or "//" in name:
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


class UnsafeConfig(Exception):
    """A filter driver `-c` cannot empty (its name holds `=`): git is not run at all."""


def ignored() -> list[str]:
    """The ELSEWHERE variables this process's environment sets (git is not told of them): for a
    message that says why git reads the repository where regulator is, not where they point."""
    return sorted(name for name in ELSEWHERE if os.environ.get(name))


def person_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment git runs in: this process's without ELSEWHERE, the objects as stored, then
    what regulator itself sets (`extra`: a commit's author and its own index, say)."""
    inherited = {k: v for k, v in os.environ.items() if k not in ELSEWHERE}
    return {**inherited, **AS_STORED, **(extra or {})}


def no_filters(root: Path) -> list[str]:
    """Every filter driver the repository configures, emptied: writing the index re-hashes racily
    clean files, `status` may refresh it and a checkout smudges, each of which would run a filter a
    unit planted in .git/config. UnsafeConfig for a driver whose name `-c` cannot carry."""
    done = _run(
        ["git", "-C", str(root), *SAFE, "config", "--name-only", "--get-regexp", r"^filter\."], None, None, 30
    )
    names = {
        line.split(".", 1)[1].rsplit(".", 1)[0]
        for line in done.stdout.decode("utf-8", "surrogateescape").splitlines()
        if line.count(".") >= 2
    }
    if any("=" in name for name in names):  # `-c filter.a=b.clean=` would set `filter.a`
        raise UnsafeConfig(f"a filter driver named {sorted(n for n in names if '=' in n)[0]!r}")
    # emptied and not required: a required driver (git-lfs's) with no command stops a checkout;
    # without one, git takes the blob as it is stored (an LFS pointer file)
    return [flag for name in sorted(names) for setting in ("clean=", "smudge=", "process=", "required=false")
            for flag in ("-c", f"filter.{name}.{setting}")]  # fmt: skip


def git(
    root: Path,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 120,
    filters: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """`git -C root ARGS` as a person's process runs it, its answer in bytes. A git that cannot be
        run, that outlasts `timeout`, or a configuration that cannot be made safe answers like a failed
        command (exit 127, the reason on stderr). `env`: variables regulator sets on top of its own
    environment (person_env). `filters=False` only where git hashes no file of the
        tree and checks none out (reading objects, refs, configuration, the index as it is): the
        filter drivers are then not looked up, one git process, not two."""
    command = ["git", "-C", str(root), *SAFE]
    try:
        if filters:
            command += no_filters(root)
    except UnsafeConfig as exc:
        return subprocess.CompletedProcess(command, 127, b"", str(exc).encode())
    return _run([*command, *args], input, env, timeout)


def git_text(
    root: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 120,
    filters: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`git`, its answer as text (UTF-8; a byte that is not, kept as a surrogate escape)."""
    done = git(root, *args, env=env, timeout=timeout, filters=filters)
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode("utf-8", "surrogateescape"),
        done.stderr.decode("utf-8", "replace"),
    )


def _run(
    command: list[str], input: bytes | None, env: Mapping[str, str] | None, timeout: float | None
) -> subprocess.CompletedProcess[bytes]:
    try:  # no input: git reads nothing of the person's terminal
        return subprocess.run(
            command,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            env=person_env(env),
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(command, 127, b"", str(exc).encode())


def read(root: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """`git` for a command that hashes no file of the tree and checks none out (objects, refs,
    configuration, the index as it is: every reader of the history), with no time limit."""
    return git(root, *args, input=input, timeout=None, filters=False)
