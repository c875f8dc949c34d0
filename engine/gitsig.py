"""SSH-signed git commits (SPEC §15.1): which listed key, if any, signed a commit, checked in-process.

Git signs a commit with `ssh-keygen -Y sign -n git` over the commit object without its `gpgsig`
header, and stores the armored signature in that header. Lint asks this only of the commits that
authorize a load-bearing register change, so its cost stays with those few commits.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from engine import sshsig

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
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "cat-file", "commit", sha], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return {person: False for person in keys}
    if done.returncode != 0:
        return {person: False for person in keys}
    payload, signature = split_signature(done.stdout)
    if signature is None:
        return {person: False for person in keys}
    return {
        person: bool(listed) and sshsig.verify(signature, payload, listed, NAMESPACE) is not None
        for person, listed in keys.items()
    }


def commit(ws, paths: list[str], message: str, person: str, sign: bool) -> bool:
    """Commit these paths (only these: anything else staged is left alone) as `person`, SSH-signed
    with the person's key when `sign` (the key regulator signs events with). False outside git or
    when git refuses."""
    from engine.init import git_config
    from engine.signing import key_path

    root = ws.root
    if not (root / ".git").exists():
        return False
    flags: list[str] = []
    if not git_config(root, "user.email"):
        entry = ws.interaction().people.get(person)
        email = entry.emails[0] if entry and entry.emails else f"{person}@regulator.invalid"
        flags += ["-c", f"user.name={person}", "-c", f"user.email={email}"]
    signing: list[str] = []
    if sign:
        key = key_path(ws)
        if key is None:
            return False
        flags += ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"]
        signing = ["-S"]
    subprocess.run(["git", "-C", str(root), "add", "--", *paths], capture_output=True)
    done = subprocess.run(
        ["git", "-C", str(root), *flags, "commit", "-q", *signing, "-m", message, "--", *paths],
        capture_output=True,
    )
    return done.returncode == 0
