"""`regulator unit run` (design §23): the one command a host needs to run an agent as a unit.

It finds `serve` (its serve.json), dispatches the unit (vetoes first: a held unit starts nothing),
makes its git worktree (detached at trunk), writes the lease and the harness's files in the lease's
folder outside the worktree, and runs the command there: as another account when asked (the unit is
confined), else as the host's (unconfined, and every surface says so). The child's environment is
an allowlist carrying the door's URL and the lease's token. While the child lives its lease is
heartbeaten through the door (engine.host.beats); SIGINT, SIGTERM and SIGHUP are forwarded to its process
group, which is killed at the contract's wall budget and when the lease ends (the log says so, or the
door answers 401). When the child has
exited, whatever of its group is left is killed and, for a confined unit, every process of its
account (the account is the unit's alone: a second run under it is refused while one runs or any
process of it lives); then the lease is over (engine.checkout.runs: the door refuses it). Then: a
`result` if the unit reported none, then the close (exit 0), or awaiting close (exit 3, or `--wait`
for the disposition), or, for `failed`/`blocked`, a recovery obligation (exit 1).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.checkout.workspace import DOOR_ENV, STATE_DIR, TOKEN_ENV, UNIT_ENV, Workspace, check_unit_id
from engine.host import confine
from engine.host.accounts import Account, account_named, cannot_enter, cannot_run, claim_account, kill_account
from engine.host.folders import (
    check_owner,
    check_parents,
    close_worktree,
    folder_of,
    give_worktree,
    remove_tree,
    strip_set_ids,
)
from engine.host.streams import confined_streams, give_terminal, relay_output, take_terminal
from engine.host.worktree import WORKTREES, behind_trunk, make_worktree
from engine.read.contracts import Contract, read_contract
from registry.gitcall import git_text

HARNESSES = ("env", "claude-code")
DEFAULT_TTL = "15m"
LEASES = ".leases"  # WORKTREES/.leases/<folder_of(unit)>: the lease's folder, outside every worktree
ALLOWED_ENV = ("PATH", "HOME", "LANG", "TERM", "TZ")  # the host's, passed on where set
CHILD_ENV = (DOOR_ENV, TOKEN_ENV, UNIT_ENV)  # what the child is given of the run, besides --env
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
KILL_GRACE_S = 5.0  # SIGTERM, then SIGKILL this much later
WAIT_POLL_S = 1.0
STOPS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}  # forwarded to the child; held until it runs
EXIT_DONE, EXIT_FAILED, EXIT_HELD = 0, 1, 3


class RunRequest(msgspec.Struct):
    """What `unit run` was asked, as given on the command line."""

    unit: str
    command: list[str]
    worktree: Path | None = None
    user: str | None = None
    harness: str = "env"
    ttl: str = DEFAULT_TTL
    wait: bool = False
    env: list[str] = msgspec.field(default_factory=list)


class Plan(msgspec.Struct):
    """A request checked against the workspace: nothing is written until all of it holds."""

    unit: str
    command: list[str]
    worktree: Path
    lease_dir: Path
    account: Account | None
    harness: str
    ttl: int | None
    wait: bool
    env: dict[str, str]  # the child's environment without the door's three
    door: str
    contract: Contract
    regulator: str  # the `regulator` the harness's files name
    account_lock: int | None = None  # held for the whole run: the account is this run's alone
    note: str | None = None  # a warning said before the dispatch


Say = Callable[[str], None]


# ---- checking the request (nothing written) ------------------------------------------------------
def plan(ws: Workspace, request: RunRequest) -> Plan:
    """Check everything the run needs, in the order a user fixes it: bad input (exit 2) first, then
    what the host or the workspace refuses (exit 3: no serve, no right to switch accounts, stores a
    confined unit could read)."""
    from engine.host.instance import lock_held, running

    unit = check_unit_id(request.unit)
    if not request.command:
        raise BadInput("no command: give it after `--` (e.g. regulator unit run r1 -- claude -p 'do it')")
    if request.harness not in HARNESSES:
        raise BadInput(f"--harness {request.harness!r} is not one of {', '.join(HARNESSES)}")
    ttl = None if request.ttl == "none" else clock.parse_duration(request.ttl, "--ttl")
    contract = read_contract(ws, unit)
    env = _environment(request.env)
    account = account_named(request.user) if request.user is not None else None
    worktree = _worktree_path(ws, unit, request.worktree)
    lease_dir = ws.root / WORKTREES / LEASES / folder_of(unit)
    if account is not None:
        _check_confinable(ws, account)
    # every link resolved, none another account could turn (an unconfined unit runs as the host):
    # the run never walks one again
    worktree = check_parents(worktree, named=request.worktree is not None)
    check_owner(worktree, account.uid if account else None)
    info = running(ws)
    if (info is None or not isinstance(info.get("door"), str)) and lock_held(ws):
        raise Refused(
            "regulator serve is starting (it holds the workspace's serve lock, its door does not listen "
            f"yet: no live {STATE_DIR}/serve.json), or a `serve --once-tick` runs; run the unit again "
            "in a moment"
        )
    if info is None or not isinstance(info.get("door"), str):
        raise Refused(
            f"no `regulator serve` is running for this workspace (no live {STATE_DIR}/serve.json): "
            "start it first (`regulator serve`), then run the unit"
        )
    if str(info["door"]).startswith("http://"):
        raise Refused(
            f"serve's door is plain TCP ({info['door']}): any local account (a confined unit of any "
            "workspace too) may take its port while serve is stopped, answer the run's calls and read its "
            "token; run serve on a Unix socket (its default) or with --tls-cert/--tls-key (D-259)"
        )
    _check_last_run_ended(ws, unit)
    lock, note, regulator = None, None, _regulator()
    if account is not None:
        env["HOME"] = account.home
        lock = claim_account(account)  # from here no process of the account's runs but ours
        _check_enterable(ws, account, worktree)
        why = cannot_run(account, regulator, env.get("PATH", DEFAULT_PATH))
        if why is not None:
            said = (
                f"--user {account.name} cannot run {regulator} ({why}{_interpreter_note(account, regulator)}): "
                + (
                    "the harness's hooks and MCP server name it"
                    if request.harness == "claude-code"
                    else "the unit's `regulator door call` names it"
                )
                + "; install regulator where every account can read and execute it (docs/units.md)"
            )
            if request.harness == "claude-code":
                os.close(lock)
                raise Refused(said)
            note = f"warning: {said}"
    return Plan(
        unit=unit,
        command=list(request.command),
        worktree=worktree,
        lease_dir=lease_dir,
        account=account,
        harness=request.harness,
        ttl=ttl,
        wait=request.wait,
        env=env,
        door=info["door"],
        contract=contract,
        regulator=regulator,
        account_lock=lock,
        note=note,
    )


def _check_last_run_ended(ws: Workspace, unit: str) -> None:
    """A `unit run` of the unit that lives though its lease is over (demoted, closed, decided on) is
    still stopping its command: a second run now would work beside it in the same worktree (exit 3).
    One whose lease is current is left to the dispatch, which refuses an in-progress unit (exit 2)."""
    from engine.checkout import runs
    from engine.read.load import load
    from engine.read.rules import lease_current

    found = runs.live(ws, unit)
    if found is None:
        return
    pid, lease_hash = found
    if lease_current(load(ws, stores=("units",)), unit, lease_hash):
        return
    raise Refused(
        f"{unit}'s last `unit run` (pid {pid}) has not ended: its lease is over and it is stopping its "
        "command (SIGTERM, then SIGKILL 5 s later); run the unit again once it has exited"
    )


def _environment(names: list[str]) -> dict[str, str]:
    """The allowlist (design §23): PATH, HOME, LANG, TERM, TZ where the host has them, and each
    `--env NAME` the host has; the door's three are added at the start. Nothing else."""
    env = {name: os.environ[name] for name in ALLOWED_ENV if name in os.environ}
    env.setdefault("PATH", DEFAULT_PATH)
    for name in names:
        if not ENV_NAME.fullmatch(name):
            raise BadInput(f"--env {name!r} is not a variable name")
        if name in CHILD_ENV or name in ALLOWED_ENV:
            raise BadInput(f"--env {name}: already given to every unit (or set by unit run itself)")
        if name not in os.environ:
            raise BadInput(f"--env {name}: not set in this environment; set it or leave it out")
        env[name] = os.environ[name]
    return env


def _check_confinable(ws: Workspace, account: Account) -> None:
    """A confined unit must not read the stores: `.regulator/` may be open to its owner only; and
    its process must be filterable here (engine.host.confine knows the architecture)."""
    confine.program()
    try:
        st = os.stat(ws.state_dir)
    except OSError:
        return  # PostgreSQL without a mirror here: nothing on this disk to read
    groups = {account.gid, *os.getgrouplist(account.name, account.gid)}
    readable = st.st_mode & stat.S_IRWXO or (st.st_mode & stat.S_IRWXG and st.st_gid in groups)
    if readable or st.st_uid == account.uid:
        raise Refused(
            f"--user {account.name} could read {ws.state_dir} (mode {stat.S_IMODE(st.st_mode):o}): a confined unit "
            f"must not read the stores; `chmod 700 {ws.state_dir}` first"
        )


def _worktree_path(ws: Workspace, unit: str, given: Path | None) -> Path:
    """--worktree DIR, or `.worktrees/<folder_of(unit)>` at the workspace's root; never under
    `.regulator/`."""
    path = (given if given is not None else ws.root / WORKTREES / folder_of(unit)).absolute()
    resolved = path.resolve()
    state = ws.state_dir.resolve()
    if resolved == state or state in resolved.parents:
        raise BadInput(f"--worktree {path}: never under {STATE_DIR}/ (the stores)")
    if (
        resolved == (ws.root / WORKTREES / LEASES).resolve()
        or (ws.root / WORKTREES / LEASES).resolve() in resolved.parents
    ):
        raise BadInput(f"--worktree {path}: {WORKTREES}/{LEASES} holds the leases' folders")
    if path.exists() and not path.is_dir():
        raise BadInput(f"--worktree {path}: not a folder")
    return path


def _interpreter_note(account: Account, program: str) -> str:
    """Where the script's own interpreter is out of the account's reach, say so: a virtualenv made
    from a pyenv or conda Python links its `python3` into that install, often under root's home,
    so a script every account may read still cannot start (found by an operator's review)."""
    try:
        with open(program, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return ""
    if not first.startswith(b"#!"):
        return ""
    named = first[2:].split(maxsplit=1)[0].decode(errors="replace") if first[2:].split() else ""
    real = Path(os.path.realpath(named)) if named else None
    if real is None or not real.is_file() or not cannot_enter(account, real.parent):
        return ""
    return f"; its interpreter {named} is {real}, in a folder the account cannot enter"


def _regulator() -> str:
    """The `regulator` command the harness's files name: the one running now."""
    beside = Path(sys.executable).parent / "regulator"
    return str(beside) if beside.is_file() else shutil.which("regulator") or "regulator"


# ---- preparing (the writes, in order) ------------------------------------------------------------
def check_vetoes(ws: Workspace, unit: str) -> None:
    """Route what is unrouted, then the dispatch's vetoes, before anything is made (a held unit
    starts nothing: exit 3 naming what holds it)."""
    from engine.commands.router import route
    from engine.read.load import load
    from engine.read.rules import refuse
    from engine.read.vetoes import dispatch_veto

    route(ws)
    state = load(ws)
    refuse(dispatch_veto(ws, state, state.unit(unit)))


def _missing_command(p: Plan) -> str | None:
    """Why the unit's command cannot be found where it will run, or None: a path is looked for in
    the worktree (a relative one) or where it names, a bare name on the unit's PATH. Asked before
    the dispatch, since a command that never starts is a failed run and a recovery to decide (an
    operator's review: a script committed after the worktree was made failed so on every retry)."""
    command = p.command[0]
    if "/" not in command:
        path = p.env.get("PATH", DEFAULT_PATH)
        # a relative entry of PATH is found from the worktree, where the command starts
        here = os.pathsep.join(e if os.path.isabs(e) else str(p.worktree / e) for e in path.split(os.pathsep))
        if shutil.which(command, path=here) is None:
            return f"no {command!r} on the unit's PATH ({path}, from {p.worktree}); nothing was dispatched"
        return None
    target = Path(command) if os.path.isabs(command) else p.worktree / command
    # a file some account may execute: not a folder, not a link to nothing (an adversarial review)
    if os.path.isfile(target) and os.stat(target).st_mode & 0o111:
        return None
    if os.path.isabs(command):
        return f"no program {command} (a file that may be executed); nothing was dispatched"
    if os.path.lexists(target):
        return f"{command!r} in the unit's worktree {p.worktree} is no file that may be executed; nothing was dispatched"
    return (
        f"{command!r} is not in the unit's worktree {p.worktree}, where it runs: the worktree is made "
        "from trunk where none is and kept across runs, so commit the script to trunk, and `git worktree "
        f"remove {p.worktree}` where the worktree is older than that commit; nothing was dispatched"
    )


def _check_enterable(ws: Workspace, account: Account, worktree: Path) -> None:
    """The account can reach its worktree (or, not made yet, the folder it will be made in) and its
    lease's folder under the workspace: refused (exit 3, nothing written) where a folder on the way
    is closed to it, e.g. a workspace under root's home (0700)."""
    existing = next((f for f in (worktree, *worktree.parents) if f.is_dir()), Path("/"))
    for folder in dict.fromkeys((existing, ws.root)):
        if cannot_enter(account, folder):
            raise Refused(
                f"--user {account.name} cannot enter {folder}: a folder on the way is closed to the "
                "account (a home of mode 0700?), so the unit could not reach its worktree; nothing "
                f"was written; keep the workspace where every account may pass (`namei -l {folder}` "
                "shows each folder's mode)"
            )


def make_lease_dir(ws: Workspace, p: Plan) -> None:
    """`.worktrees/.leases/<unit>`, 0700 (given to the account when confined), emptied of an
    earlier run's files; the folders above it passable (0711), never listable by a unit."""
    top = ws.root / WORKTREES
    top.mkdir(exist_ok=True)
    leases = top / LEASES
    leases.mkdir(mode=0o711, exist_ok=True)
    # a confined unit passes through to its worktree; no one else writes here, whatever the umask
    os.chmod(top, (stat.S_IMODE(os.stat(top).st_mode) | 0o011) & ~0o022)
    os.chmod(leases, 0o711)
    if os.path.lexists(p.lease_dir):  # an earlier run's, left (its host killed, or too deep to
        aside = leases / f".gone-{secrets.token_hex(8)}"  # remove): never reused, moved aside whole
        os.rename(p.lease_dir, aside)
        remove_tree(aside)
    p.lease_dir.mkdir(mode=0o700)  # fresh, the host's, one folder below .leases (folder_of)
    if p.account is not None:
        os.chown(p.lease_dir, p.account.uid, p.account.gid)


def write_private(path: Path, text: str, account: Account | None) -> Path:
    """A file of the lease's folder: 0600, the confined account's when there is one."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        raise Refused(f"{path} cannot be written ({exc.strerror}); remove it") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # never a FIFO or a device the unit left there
        os.close(fd)
        raise Refused(f"{path} is not a regular file; remove it")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        if account is not None:
            os.fchown(handle.fileno(), account.uid, account.gid)
        handle.write(text)
    return path


def harness_files(ws: Workspace, p: Plan) -> list[str]:
    """`--harness claude-code`: the MCP config and the settings in the lease's folder; what is
    appended to the command when it is `claude`."""
    from engine.doors import harness

    profiles = ws.profiles()
    profile = profiles.profiles.get(p.contract.profile)
    tools = profile.tools if profile is not None else ()
    grants = harness.grants_for(
        p.contract.profile, tools, profiles.harness(harness.CLAUDE_CODE), p.contract.checks
    )
    mcp = write_private(
        p.lease_dir / "mcp.json", harness.file_text(harness.mcp_config(p.regulator)), p.account
    )
    settings = write_private(
        p.lease_dir / "settings.json",
        harness.file_text(harness.settings(p.regulator, str(p.lease_dir), grants)),
        p.account,
    )
    if Path(p.command[0]).name != "claude":
        return []
    return ["--mcp-config", str(mcp), "--strict-mcp-config", "--settings", str(settings)]


# ---- running ---------------------------------------------------------------------------------------
class Outcome(msgspec.Struct):
    """How the child ended, as the run saw it."""

    code: int  # the child's exit code (128 + N when killed by signal N, as shells say)
    seconds: int
    stopped: str | None = None  # why the run stopped it: "wall" or "refused"


class Supervisor:
    """The child, its process group, its heartbeats, and the signals forwarded to it."""

    def __init__(self, p: Plan, env: dict[str, str], token: str, say: Say, ws: Workspace) -> None:
        from engine.host.beats import Beats

        self.p, self.env, self.say, self.ws = p, env, say, ws
        self.beats = Beats(ws, p.unit, p.door, token, p.ttl, say)  # refused: the lease is over
        self.child: subprocess.Popen[bytes] | None = None
        self.pending: int | None = None  # a stop that came before the child existed

    def run(self) -> Outcome:
        p = self.p
        account = p.account
        start = time.monotonic()
        # confined: never the host's terminal (a session of its own, and a terminal on the host's
        # streams relayed through pipes): a child holding it could push keystrokes into root's shell
        # (TIOCSTI) or hand it to another account that reads what root types after the run
        streams = confined_streams() if account else {}
        # SIGINT, SIGTERM and SIGHUP (a closed terminal) are held from the dispatch on (run):
        # forwarded from here, one that came meanwhile reaching the child as soon as it exists
        previous = {sig: signal.signal(sig, self._forward) for sig in STOPS}
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)  # before the fork: the child's own mask
        self.child = subprocess.Popen(
            p.command,
            cwd=None if account else p.worktree,  # confined: entered as the account (confine.lock_down)
            env=self.env,
            process_group=None if account else 0,
            start_new_session=account is not None,
            user=account.uid if account else None,
            group=account.gid if account else None,
            extra_groups=[] if account else None,
            close_fds=True,
            preexec_fn=confine.lock_down(str(p.worktree))
            if account
            else None,  # no set-id gained or given (D-213)
            **streams,
        )
        relays = relay_output(self.child) if account else []
        group = self.child.pid
        if self.pending is not None:
            self._forward(self.pending, None)
        foreground = None if account else give_terminal(group)
        beating = self.beats.start()
        wall = p.contract.wall_seconds
        stopped: str | None = None
        try:
            while True:
                try:
                    code = self.child.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if stopped is None and self.beats.refused.is_set():
                    stopped = "refused"
                    self._kill(group)
                elif stopped is None and wall is not None and time.monotonic() - start >= wall:
                    stopped = "wall"
                    self._kill(group)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)  # whatever of the group outlived its leader
            self.beats.stop(beating)
            if account is not None:
                close_worktree(self.p.worktree, account.uid)  # first: no one else passes into it
                left = kill_account(account)  # and, confined, whatever escaped the group (setsid)
                if left:
                    shown = ", ".join(str(pid) for pid in left[:5])
                    self.say(
                        f"warning: processes of {account.name} outlived the run (pid {shown}): do not use the "
                        f"account again until none is left (`ps -u {account.name}`); docs/security.md"
                    )
            for relay in relays:
                relay.join(timeout=2)  # what the child wrote last; a survivor's pipe is not waited on
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            take_terminal(foreground)
        return Outcome(128 - code if code < 0 else code, round(time.monotonic() - start), stopped)

    def _forward(self, signum: int, _frame: object) -> None:
        self.pending = signum
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.child.pid, signum)

    def _kill(self, group: int) -> None:
        """SIGTERM to the group, SIGKILL what is left after the grace."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
        assert self.child is not None
        try:
            self.child.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


# ---- after the child -------------------------------------------------------------------------------
def host_summary(outcome: Outcome, wall: int | None) -> str:
    if outcome.stopped == "wall":
        return f"stopped at its wall budget ({clock.format_duration(wall or 0)}); the command's exit code {outcome.code}"
    return f"the command exited {outcome.code} after {outcome.seconds}s; the unit reported no result"


def finish(ws: Workspace, p: Plan, lease_hash: str, outcome: Outcome, say: Say) -> int:
    """The result (the unit's, or the host's), then the close, the wait or the recovery."""
    from engine.commands.results import record_host_result
    from engine.read.load import load

    if outcome.stopped == "refused":
        from engine.host.beats import ended_by

        raise Refused(
            f"{p.unit}'s lease ended ({ended_by(ws, p.unit, lease_hash)}): the command was stopped "
            f"(it exited {outcome.code}); nothing more recorded"
        )
    host_outcome = "done" if outcome.code == 0 and outcome.stopped is None else "failed"
    summary = host_summary(outcome, p.contract.wall_seconds)
    written = record_host_result(ws, p.unit, lease_hash, host_outcome, summary, outcome.code, outcome.seconds)
    state = load(ws, stores=("signals", "units"))
    result = state.units[p.unit].result
    if result is None:  # not current any more: a person decided meanwhile
        raise Refused(f"{p.unit}'s lease is no longer its current one; no result recorded")
    who = "the host" if written is not None else "the unit"
    how = f"the command exited {outcome.code}"
    if outcome.stopped == "wall":
        how = f"stopped at its wall budget ({clock.format_duration(p.contract.wall_seconds or 0)}): {how}"
    say(f"{p.unit}: result {result.outcome} recorded by {who} ({how})")
    if result.outcome != "done":
        say(
            f"{p.unit} stays in progress; a person records a recovery decision "
            f"(`regulator unit decide {p.unit} --action ...`): an advisory recovery obligation asks for it"
        )
        return EXIT_FAILED
    return close_or_wait(ws, p, say, lease_hash)


def close_or_wait(ws: Workspace, p: Plan, say: Say, lease_hash: str) -> int:
    from engine.checkout import runs
    from engine.commands.units import close

    told = False
    while True:
        try:
            close(ws, p.unit)
        except Refused as exc:
            if not p.wait:
                raise Refused(
                    f"{p.unit} is awaiting close: {exc}; once that is dispositioned, run "
                    f"`regulator unit close {p.unit}` (or give `unit run` --wait to wait for it)"
                ) from None
            if not told:
                say(f"{p.unit} is awaiting close: {exc}; waiting for its disposition (--wait)")
                told = True
                with contextlib.suppress(OSError, ValueError):  # a resolve then says this run closes it
                    runs.waiting(ws, lease_hash)
            time.sleep(WAIT_POLL_S)
            continue
        say(f"closed {p.unit}")
        return EXIT_DONE


def run(ws: Workspace, request: RunRequest, say: Say) -> int:
    """The whole run; its exit code (errors raise as every command's do)."""
    p = plan(ws, request)
    if p.note is not None:
        say(p.note)
    relative = f"contracts/{p.unit}.json"  # an operator's first day: a contract not committed ran unsaid
    status = git_text(ws.root, "--literal-pathspecs", "status", "--porcelain=v1", "--ignored", "--", relative)
    if status.returncode != 0 or status.stdout.strip():  # new, changed, ignored, or git could not say
        say(f"warning: {relative} is not as committed: this run takes it as the working tree holds it")
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)  # never a stop halfway through a write
    try:
        return _dispatched(ws, p, say)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _dispatched(ws: Workspace, p: Plan, say: Say) -> int:
    """The run from its vetoes on, SIGINT, SIGTERM and SIGHUP held until the child runs (then
    forwarded to it: Supervisor.run)."""
    from engine.checkout.runs import host_id
    from engine.commands.units import LeaseTerms, dispatch

    check_vetoes(ws, p.unit)
    made = make_worktree(ws, p.worktree)
    if not made and (behind := behind_trunk(ws, p.worktree)) is not None:
        say(f"warning: {behind}")
    missing = _missing_command(p)
    if missing is not None:  # found before the dispatch: nothing written, no recovery to decide
        if made:
            git_text(ws.root, "worktree", "remove", "--force", "--force", str(p.worktree), timeout=120)
        raise BadInput(missing)
    make_lease_dir(ws, p)
    if p.account is not None and made:
        give_worktree(p.worktree, p.account.uid, p.account.gid)
    owner = (p.account.uid, p.account.gid) if p.account else None
    terms = LeaseTerms(
        ttl=p.ttl, confined=p.account is not None, lease_dir=p.lease_dir, owner=owner, run_on=host_id(ws)
    )
    event = dispatch(ws, p.unit, p.worktree, terms)
    try:
        _begin_run(ws, event["leaseHash"], p.unit)
        extra = harness_files(ws, p) if p.harness == "claude-code" else []
        env = {**p.env, DOOR_ENV: p.door, TOKEN_ENV: event["lease"], UNIT_ENV: p.unit}
        who = (
            f"confined, as {p.account.name}"
            if p.account
            else "UNCONFINED: as this host's account, it could read the stores"
        )
        expiry = (
            "never expires"
            if p.ttl is None
            else f"expires {clock.format_duration(p.ttl)} after its last heartbeat"
        )
        say(f"dispatched {p.unit} in {p.worktree} ({who}; its lease {expiry})")
        p.command = p.command + extra
        try:
            outcome = Supervisor(p, env, event["lease"], say, ws).run()
        except OSError as exc:  # dispatched, but the command never started: a failed run
            say(f"{p.unit}: cannot start {p.command[0]!r} ({exc.strerror})")
            outcome = Outcome(127, 0)
        except subprocess.SubprocessError:  # confined: its worktree not enterable as the account
            who = p.account.name if p.account else "the account"
            say(
                f"{p.unit}: cannot start {p.command[0]!r}: as {who}, it could not enter {p.worktree} or take its filter"
            )
            outcome = Outcome(127, 0)
    finally:
        from engine.checkout import runs

        with contextlib.suppress(OSError):
            runs.end(ws, event["leaseHash"])  # the child is gone: so is its lease, at the door
        if p.account is not None:  # its lease over first: no walk can keep it alive (D-211)
            # nothing of the account's runs again by its bits; another's file linked in is not changed
            others = strip_set_ids(p.worktree, p.account.uid)
            for name in others[:20]:
                say(
                    f"{p.unit}: warning: '{name}' in its worktree is set-user-id or set-group-id and not "
                    f"{p.account.name}'s (a hard link to another's file?): left as it is; remove it"
                )
            if len(others) > 20:
                say(f"{p.unit}: warning: and {len(others) - 20} more such file(s) in {p.worktree}")
        remove_tree(p.lease_dir)
        if p.account_lock is not None:  # every process of the account is gone: it is free again
            os.close(p.account_lock)
            p.account_lock = None
    from engine.host.claims import claiming, warning

    if claimed := claiming(ws, p.worktree):
        say(warning(p.unit, claimed))
    return finish(ws, p, event["leaseHash"], outcome, say)


def _begin_run(ws: Workspace, lease_hash: str, unit: str) -> None:
    """The lease is this run's (engine.checkout.runs): the door answers it while the run has its child."""
    from engine.checkout import runs
    from engine.read.load import load

    state = load(ws, stores=("units",))
    current = {unit.lease for unit in state.units.values() if unit.lease}
    runs.begin(ws, lease_hash, current | {lease_hash}, unit)
