"""SSH-signed git commits (design §15.1): which listed key, if any, signed a commit, checked in-process.

Git signs a commit with `ssh-keygen -Y sign -n git` over the commit object without its `gpgsig`
header, and stores the armored signature in that header. Lint asks this only of the commits that
authorize a load-bearing register change, so its cost stays with those few commits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from engine.base import sshsig
from registry.gitcall import git

if TYPE_CHECKING:
    from engine.checkout.workspace import Workspace

NAMESPACE = "git"


def split_signature(raw: bytes) -> tuple[bytes, str | None]:
    """(the signed payload, the armored SSH signature) of a raw commit object."""
    head, sep, body = raw.partition(b"\n\n")
    kept: list[bytes] = []
    signature: list[bytes] = []
    inside = False
    for line in head.split(b"\n"):
        if line.startswith(b"gpgsig "):
            inside = True
            signature.append(line[len(b"gpgsig ") :])
            continue
        if inside and line.startswith(b" "):
            signature.append(line[1:])
            continue
        inside = False
        kept.append(line)
    payload = b"\n".join(kept) + sep + body
    if not signature:
        return payload, None
    text = b"\n".join(signature).decode("utf-8", "replace")
    return payload, text if "BEGIN SSH SIGNATURE" in text else None


def signed_by(root: Path, sha: str, keys: Mapping[str, tuple[str, ...]]) -> dict[str, bool]:
    """For each person given, whether the commit is SSH-signed by one of their keys."""
    done = git(root, "cat-file", "commit", sha, timeout=30, filters=False)  # the object as stored
    if done.returncode != 0:
        return {person: False for person in keys}
    payload, signature = split_signature(done.stdout)
    if signature is None:
        return {person: False for person in keys}
    return {
        person: bool(listed) and sshsig.verify(signature, payload, listed, NAMESPACE) is not None
        for person, listed in keys.items()
    }


def _git(
    root: Path, *args: str, env: Mapping[str, str] | None = None, data: bytes | None = None
) -> str | None:
    """git's answer (stripped), run as a person's process runs it (registry.gitcall: no hook, no
    fsmonitor, no filter, the stock signer; `env` set on top); None when it fails."""
    done = git(root, *args, env=env, input=data, timeout=60)
    return done.stdout.decode().strip() if done.returncode == 0 else None


def _emails(ws: Workspace, person: str) -> list[str]:
    """The emails the interaction policy lists for `person` (none when it cannot be read)."""
    from engine.base.errors import RegulatorError

    try:
        entry = ws.interaction().people.get(person)
    except RegulatorError:
        return []
    return list(entry.emails) if entry else []


def _author_email(root: Path, env: dict[str, str]) -> str | None:
    """The author email git would write here (its environment first, then its configuration)."""
    ident = _git(root, "var", "GIT_AUTHOR_IDENT", env=env)
    if ident is None or "<" not in ident:
        return None
    return ident.split("<", 1)[1].split(">", 1)[0]


def commit(
    ws: Workspace,
    paths: list[str],
    message: str,
    person: str,
    sign: bool,
    root: Path | None = None,
    allow_empty: bool = True,
) -> bool:
    """Commit these paths' working-tree bytes (only these: anything else staged is left alone) as
    `person`, SSH-signed with the person's key when `sign`. Built with git's plumbing (hash-object
    --no-filters, a private index, commit-tree), so no hook, filter or fsmonitor of the repository
    runs. False outside git or when git refuses. Without `allow_empty`, paths that HEAD already
    holds as they are make no commit (True: nothing was left to commit)."""
    import tempfile

    from engine.base import clock
    from engine.checkout.gitconfig import given_email
    from engine.trust.signing import key_path

    root = root or ws.root
    if not (root / ".git").exists():
        return False
    env: dict[str, str] = {}  # what this commit sets on top of the person's environment
    if clock.fixed():  # a pinned workspace (tests, the demo) makes the same commits every time
        stamp = clock.iso(clock.now())
        env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
    listed = _emails(ws, person)
    # git's own identity is kept: configured, or given in its environment (CI, a fresh machine); an
    # author given there without a committer commits as itself
    given = given_email(root)
    if os.environ.get("GIT_AUTHOR_EMAIL", "").strip() and not os.environ.get("GIT_COMMITTER_EMAIL"):
        env.update(
            GIT_COMMITTER_NAME=os.environ.get("GIT_AUTHOR_NAME") or person, GIT_COMMITTER_EMAIL=given or ""
        )
    if given is None or (listed and _author_email(root, env) not in listed):
        # the commit is the person's: where the policy lists their emails, its author is one of
        # them (lint authorizes a change only from a listed email), whatever git would have used
        email = listed[0] if listed else f"{person}@regulator.invalid"
        env.update(GIT_AUTHOR_NAME=person, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=person,
                   GIT_COMMITTER_EMAIL=email)  # fmt: skip
    signing: list[str] = []
    if sign:
        key = key_path(ws)
        if key is None:
            return False
        signing = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"]
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    blobs = _hashed(root, paths)
    if blobs is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        index = dict(env, GIT_INDEX_FILE=str(Path(tmp) / "index"))
        if head is not None and _git(root, "read-tree", head, env=index) is None:
            return False
        if not _staged(root, blobs, index):
            return False
        tree = _git(root, "write-tree", env=index)
    if tree is None:
        return False
    if not allow_empty and head is not None and tree == _git(root, "rev-parse", f"{head}^{{tree}}"):
        return True
    parents = ["-p", head] if head else []
    new = _git(root, *signing, "commit-tree", tree, *parents, *(["-S"] if sign else []), "-F", "-",
               env=env, data=message.encode())  # fmt: skip
    if new is None:
        return False
    if _git(root, "update-ref", "-m", "regulator: commit", "HEAD", new, *([head] if head else [])) is None:
        return False
    _staged(root, blobs)  # the real index agrees, so `git status` shows the files committed
    return True


def _plain(root: Path, path: str) -> bool:
    """A path a person's commit takes: relative, normalized (no empty, `.` or `..` part), outside
    `.git`, and no symlink (git would hash what it points to, which a unit may have aimed at a
    file of the person's): git's index refuses the first kinds only by skipping them silently."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        return False
    return not (root / path).is_symlink()


def _hashed(root: Path, paths: list[str]) -> list[tuple[str, str]] | None:
    """(path, blob) for each path's working-tree bytes, written to the object store unfiltered: one
    git process for them all. A path --stdin-paths would read otherwise (a line break in it, or a
    leading quote, which git unquotes) sends the batch to one process each. None when a path is no
    plain file of the tree (`_plain`) or git refuses."""
    if not paths:
        return []
    if not all(_plain(root, path) for path in paths):
        return None
    found: list[str | None]
    if any("\n" in path or "\r" in path or path.startswith('"') for path in paths):
        found = [_git(root, "hash-object", "-w", "--no-filters", "--", path) for path in paths]
    else:
        listed = b"".join(os.fsencode(path) + b"\n" for path in paths)
        out = _git(root, "hash-object", "-w", "--no-filters", "--stdin-paths", data=listed)
        found = list(out.split("\n")) if out is not None else [None]
    blobs = [blob for blob in found if blob]
    if len(blobs) != len(paths) or len(found) != len(paths):
        return None
    return list(zip(paths, blobs, strict=True))


def _staged(root: Path, blobs: list[tuple[str, str]], env: dict | None = None) -> bool:
    """These blobs entered at their paths (mode 100644) in the index `env` names (the repository's
    own without): one git process, NUL-separated."""
    if not blobs:
        return True
    entries = b"".join(f"100644 {blob}\t".encode() + os.fsencode(path) + b"\0" for path, blob in blobs)
    return _git(root, "update-index", "--add", "-z", "--index-info", env=env, data=entries) is not None
