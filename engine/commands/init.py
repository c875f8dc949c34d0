"""`regulator init`: the workspace skeleton, the shipped policy, a baseline identity and records."""

from __future__ import annotations

import hashlib
import secrets
import stat
from pathlib import Path

import msgspec

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_text
from engine.checkout.gitconfig import CONFIG, HOST_TRUNK, git_config, given_email
from engine.checkout.workspace import STATE_DIR, Workspace
from engine.commands.written import BaselineEvent
from engine.log.events import STORES
from engine.trust.idhistory import BASELINE, DECIDED_BY, DECISION
from identity.files import IDENTITY_DIR, POLICY_DIR, STORE_POLICY, content_hash
from identity.shipped import IDENTITY_FILES, policy_files
from registry.gitcall import branch_name


def make_read_only(path: Path) -> None:
    mode = path.stat().st_mode
    path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def write_governed(path: Path, text: str) -> None:
    """Governed files are left read-only on disk: a hand edit has to mean it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    path.write_text(text, encoding="utf-8")
    make_read_only(path)


MAKE_KEY = (
    "make one with `ssh-keygen -t ed25519` and pass --owner-key ~/.ssh/id_ed25519.pub "
    "(or set git's user.signingkey with gpg.format ssh)"
)


def owner_key(root: Path, given: Path | None) -> str:
    """The owner's public key line (design §15.1): --owner-key, else git's ssh signing key."""
    from engine.base import sshsig

    path = given
    if path is None and git_config(root, "gpg.format") == "ssh":
        configured = git_config(root, "user.signingkey")
        if configured:
            path = Path(configured.removeprefix("key::")).expanduser()
            if configured.startswith("key::"):
                return _key_line(configured.removeprefix("key::"), "git's user.signingkey")
            if not path.name.endswith(".pub"):
                path = path.with_name(path.name + ".pub")
    if path is None:
        raise BadInput(f"no key for the owner: {MAKE_KEY}; nothing created")
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(
            f"--owner-key {path}: cannot read ({getattr(exc, 'strerror', None) or exc}); {MAKE_KEY}"
        ) from None
    if "PRIVATE KEY" in text:
        raise BadInput(f"--owner-key {path} is a private key; pass its .pub (the public half)")
    line = _key_line(text.splitlines()[0] if text else "", f"--owner-key {path}")
    sshsig.fingerprint(line)
    return line


def _key_line(text: str, where: str) -> str:
    from engine.base import sshsig

    try:
        sshsig.normalize_key(text)
    except ValueError:
        raise BadInput(f"{where} is not an OpenSSH public key; {MAKE_KEY}") from None
    return text.strip()


def default_trunk(root: Path) -> tuple[str, str | None]:
    """The trunk when `--trunk` is not given, and a note where it is not `main`: `main` where the
    repository has one; else the branch `origin/HEAD` names; else `main` where `origin` has one;
    else `master` where there is one; else the branch the repository is on (an operator's review: init in a repository
    on `master` wrote `trunk: main`, every sensor then failed on a trunk that did not exist, and
    decisions were committed to `master`; a re-check: a clone on a feature branch, or a repository
    with `master` checked out on a feature branch, made the feature branch trunk)."""
    from registry.gitcall import git_text

    def found(*args: str) -> str:
        done = git_text(root, *args, timeout=10, filters=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    if found("rev-parse", "--git-dir") == "":
        return "main", None  # not in git: init says how to commit it, on main
    if found("rev-parse", "--verify", "-q", "refs/heads/main"):
        return "main", None
    # origin's declared default before a `main` anyone who can push a branch may create there (an
    # adversarial re-check: a pushed `main` became trunk, and its lockfiles were the sensors')
    remote = found("symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD").removeprefix("origin/")
    if remote == "main":
        return "main", None
    if remote and branch_name(remote):
        return remote, f"trunk: {remote} (origin's default branch; --trunk names another)"
    if found("rev-parse", "--verify", "-q", "refs/remotes/origin/main"):
        return "main", None
    if found("rev-parse", "--verify", "-q", "refs/heads/master"):
        return "master", "trunk: master (this repository has no main; --trunk names another)"
    branch = found("symbolic-ref", "--short", "-q", "HEAD")
    if not branch or branch == "main" or not branch_name(branch):
        return "main", None
    return (
        branch,
        f"trunk: {branch} (the branch this repository is on, which has no main; --trunk names another)",
    )


def setup(
    root: Path,
    owner: str | None = None,
    trunk: str = "main",
    key: Path | None = None,
    clock_mode: str = "system",
    store: str | None = None,
) -> Initialized:
    """The workspace, written and (in a git repository) committed whole: the governed files as the
    owner's baseline decision, then the rest of what init wrote in an ordinary commit."""
    root = root.resolve()
    if not root.is_dir():
        raise BadInput(f"{root} is not a folder; create it (and `git init` it) first")
    if (root / STATE_DIR).exists() or (root / STATE_DIR).is_symlink():
        raise Refused(f"{root} is already a regulator workspace ({STATE_DIR}/ exists); nothing written")
    if owner is not None:
        check_text("--owner", owner, kind="name")
    if not branch_name(trunk):
        raise BadInput(f"--trunk {trunk!r} is not a branch name")
    if clock_mode not in ("system", "pinned"):
        raise BadInput(f"--clock {clock_mode!r} is not one of system, pinned")
    if store is None:  # REGULATOR_STORE (or a committed store.yaml) names the store as --store would
        from engine.checkout.workspace import store_url

        store = store_url(root)
    if store is not None:
        from engine.log.pg.connection import check_url

        check_url(store)
    public_key = owner_key(root, key)
    if store is not None:  # reachable, and holding no stores yet: checked before anything is written
        from engine.log.pg.admin import check_empty

        check_empty(store)
    owner = owner or git_config(root, "user.name") or "owner"
    email = given_email(root)
    clock.configure(clock_mode == "pinned")
    ws = Workspace(root)
    for folder in ("contracts", "findings", "intake", "records"):
        (root / folder).mkdir(exist_ok=True)
    written: dict[str, str] = {}
    for name, text in IDENTITY_FILES.items():
        written[f"{IDENTITY_DIR}/{name}"] = text
    for name, text in policy_files(owner, email, public_key, clock_mode).items():
        written[f"{POLICY_DIR}/{name}"] = text
    for relative, text in written.items():
        write_governed(root / relative, text)
    (root / CONFIG).write_text(f"trunk: {trunk}\n", encoding="utf-8")
    rest = [CONFIG]  # what init writes beside the governed files, committed after the baseline
    from registry.shipped import write_shipped_records

    rest += [path.relative_to(root).as_posix() for path in write_shipped_records(root)]
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    missing = [name for name in (".regulator/", ".regulator-lease.json") if name not in existing.split()]
    if missing:  # the stores, and lease files (bearer tokens) that a unit's `git add -A` would commit
        gitignore.write_text(
            existing + ("" if existing.endswith("\n") or not existing else "\n") + "\n".join(missing) + "\n"
        )
        rest.append(".gitignore")
    if store is not None:  # the stores on PostgreSQL (design §18): where, recorded without a password
        from engine.log.pg import admin as pg_admin
        from engine.log.pg import connection as pg_connection
        from engine.log.pg import mirror as pg_mirror

        pg_admin.create_schema(store, clock_mode)
        written[STORE_POLICY] = f"url: {pg_connection.redact(store)}\n"  # governed: in the baseline
        write_governed(root / STORE_POLICY, written[STORE_POLICY])
        ws.state_dir.mkdir(mode=0o700)
        pg_mirror.mirror(ws.url or store, ws.state_dir).prepare()
    else:
        ws.state_dir.mkdir(mode=0o700)
        for name in STORES:
            ws.store(name).path.touch()
    from engine.read.checkpoint import host_key

    host_key(ws, create=True)
    # the trunk this host follows, where no merged branch can move it (D-224)
    (ws.state_dir / HOST_TRUNK).write_text(f"{trunk}\n", encoding="utf-8")
    now = clock.iso(clock.now())
    identity_store = ws.store("identity")
    # the first event's hash names the workspace: never two alike (under a pinned clock, for
    # reproducible tests and demos, derived from the time and the folder)
    if clock.fixed():
        nonce = hashlib.sha256(f"workspace\0{clock.iso(clock.now())}\0{root}".encode()).hexdigest()[:32]
    else:
        nonce = secrets.token_hex(16)
    for relative, text in written.items():  # the first events: trusted on first use (design §15.0)
        first: BaselineEvent = {
            "kind": "decision",
            "decision": "baseline",
            "proposal": None,
            "file": relative,
            "content": text,
            "contentHash": content_hash(text.encode()),
            "by": owner,
            "rationale": "baseline written by regulator init",
            "at": now,
        }
        identity_store.append({"nonce": nonce, **first} if nonce else first)
        nonce = ""
    from engine.commands.registers import views
    from engine.read.load import load

    # the generated views, so that CI's `registry views --check` holds from the first commit
    rest += views(ws, load(ws, stores=()), check=False)
    governed = list(written)
    if not (root / ".git").exists():
        return Initialized(ws, owner, governed, rest, None, None)
    baseline = commit_baseline(ws, owner, governed, public_key)
    done = baseline is not None and commit_rest(ws, owner, rest, sign=baseline == "signed")
    return Initialized(ws, owner, governed, rest, baseline, done)


class Initialized(msgspec.Struct, frozen=True):
    """What `init` made and committed (the command says it)."""

    ws: Workspace
    owner: str
    governed: list[str]  # committed as the owner's baseline decision
    rest: list[str]  # records, views, config, .gitignore: committed after it, as an ordinary commit
    baseline: str | None  # "signed", "claimed", or None: not committed (outside git, or git refused)
    committed_rest: bool | None  # None outside git

    def commands(self) -> list[str]:
        """The git commands that commit what init wrote, as init would have (outside git)."""
        import shlex

        folders = (f"{IDENTITY_DIR}/", f"{POLICY_DIR}/")
        governed = " ".join(shlex.quote(path) for path in summary(self.governed, folders))
        rest = " ".join(shlex.quote(path) for path in summary(self.rest))
        trailers = " ".join(
            shlex.quote(f"--trailer={line}")
            for line in (f"{DECISION}: {BASELINE}", f"{DECIDED_BY}: {self.owner}")
        )
        return [
            f"git add {governed} && git commit -m {shlex.quote(BASELINE_SUBJECT)} {trailers}",
            f"git add {rest} && git commit -m {shlex.quote(REST_SUBJECT)}",
        ]


def summary(paths: list[str], folders: tuple[str, ...] = ("records/",)) -> list[str]:
    """The paths, those under the folders given (which init fills) named once by their folder."""
    shown: list[str] = []
    for path in paths:
        named = next((f for f in folders if path.startswith(f)), path)
        if named not in shown:
            shown.append(named)
    return shown


BASELINE_SUBJECT = "regulator: baseline identity and policy"
REST_SUBJECT = "regulator: workspace (records, views, config, .gitignore)"


def commit_baseline(ws: Workspace, owner: str, paths: list[str], public_key: str) -> str | None:
    """In a git repository, commit the baseline governed files (only those) as the owner's decision,
    with the trailers `identity verify` reads in a clone (design §16.2; engine.trust.idhistory), SSH-signed
    only when a private key for the owner's public key is at hand (`--key`, REGULATOR_SIGNING_KEY,
    git's ssh signing key) and usable without a prompt; else unsigned: the baseline is then
    'claimed', as a baseline in the stores is (trusted on first use). "signed" or "claimed"; None
    when git did not commit it."""
    from engine.trust.gitsig import commit

    message = (
        f"{BASELINE_SUBJECT}\n\n"
        f"Written by regulator init as {owner}'s decision.\n\n"
        f"{DECISION}: {BASELINE}\n{DECIDED_BY}: {owner}\n"
    )
    if _can_sign(ws, public_key) and commit(ws, paths, message, owner, sign=True):
        return "signed"
    return "claimed" if commit(ws, paths, message, owner, sign=False) else None


def commit_rest(ws: Workspace, owner: str, paths: list[str], sign: bool) -> bool:
    """The rest of what init wrote, in an ordinary commit after the baseline (no trailers: it
    decides nothing; D-89), signed with the key that signed the baseline. Only these paths."""
    from engine.trust.gitsig import commit

    message = (
        f"{REST_SUBJECT}\n\n"
        "Written by regulator init beside the baseline decision: the shipped records, the generated\n"
        "views, the trunk setting and the ignore rules for the stores and lease files. These change by\n"
        "ordinary review, not by decision.\n"
    )
    if sign and commit(ws, paths, message, owner, sign=True, allow_empty=False):
        return True
    return commit(ws, paths, message, owner, sign=False, allow_empty=False)


def _can_sign(ws: Workspace, public_key: str) -> bool:
    """A signing key is configured, loads without asking anything, and is the owner's."""
    from engine.base import sshsig
    from engine.trust.signing import key_path

    path = key_path(ws)
    if path is None or not path.is_file():
        return False
    try:
        return sshsig.load_signer(path).public_key == sshsig.normalize_key(public_key)
    except (sshsig.SigningKeyError, ValueError):
        return False
