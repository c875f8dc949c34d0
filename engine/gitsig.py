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
