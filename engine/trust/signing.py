"""Signing person events (design §15.1): which key signs for a person, and the event made ready.

The key comes from `--key FILE` (use_key), else `REGULATOR_SIGNING_KEY`, else git's
`user.signingkey` when `gpg.format` is `ssh` (as git signs commits). It must be one of the keys the
interaction policy in force lists for the person. The signer is prepared before the decide lock
is taken (a passphrase is asked then, never under the lock); signing itself is in-process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base import ids
from engine.base.errors import Refused
from engine.checkout.authority import People, signed_bytes
from engine.checkout.workspace import Workspace
from engine.log.store import canonical

if TYPE_CHECKING:
    from engine.base.sshsig import Signer

_explicit: Path | None = None
_loaded: dict[str, Signer] = {}  # a key is loaded (and any passphrase asked) once per process
_prompt = True  # False in the control room: it never prompts while it owns the terminal
HOW = (
    "pass --key FILE, set REGULATOR_SIGNING_KEY, or set git's user.signingkey with gpg.format ssh "
    "(make one with `ssh-keygen -t ed25519`, and have its .pub listed under your keys by proposal)"
)


def use_key(path: str | Path | None, *, prompt: bool = True) -> None:
    """The key given on the command line (`--key`) or to the control room."""
    global _explicit, _prompt
    # a relative path is the person's, from where they typed it: git, which signs a commit, runs
    # in the workspace's root, and would read it from there; `~/` is their home, as git reads it
    _explicit = Path(path).expanduser().absolute() if path is not None else None
    _prompt = prompt


def given_key() -> Path | None:
    """The key given on the command line (`--key`) or to the control room, if one was."""
    return _explicit


def key_path(ws: Workspace) -> Path | None:
    if _explicit is not None:
        return _explicit
    env = os.environ.get("REGULATOR_SIGNING_KEY")
    if env:
        return Path(env).expanduser().absolute()
    from engine.checkout.gitconfig import git_config

    if (git_config(ws.root, "gpg.format") or "") == "ssh":
        configured = git_config(ws.root, "user.signingkey")
        if configured and configured.startswith("key::"):
            return _literal(configured.removeprefix("key::"))  # a public key whose half is in the agent
        if configured:
            return Path(os.path.expanduser(configured))
    return None


def _literal(line: str) -> Path:
    """git's `key::ssh-ed25519 AAAA…` form, as a public key file the agent signs for."""
    import hashlib
    import tempfile

    path = Path(tempfile.gettempdir()) / f"regulator-key-{hashlib.sha256(line.encode()).hexdigest()[:16]}.pub"
    if not path.exists():
        path.write_text(line.strip() + "\n", encoding="utf-8")
    return path


def signer_for(ws: Workspace, person: str, people: People | None = None) -> Signer | None:
    """The signer for `person`, or None where an unsigned event still counts (a workspace whose
    policy does not require signatures, and the person lists no key). Refused (exit 3) when the
    person must sign and cannot: no key, a key the policy does not list, a key that cannot sign.
    `people`: the policy whose keys count (default the one in force)."""
    people = people or ws.authority().people
    listed = people.keys.get(person, ())
    path = key_path(ws)
    if not listed:
        if people.require_signatures:
            raise Refused(
                f"{person} lists no signing key in interaction.yaml and signatures are required; {HOW}"
            )
        return None
    if path is None:
        raise Refused(f"no signing key for {person}: {HOW}")
    from engine.base import sshsig

    signer = _loaded.get(str(path))
    if signer is None and not path.is_file():  # a folder or a FIFO is never opened (it would hang)
        raise Refused(f"signing key {path} is not a readable key file; {HOW}")
    if signer is None:
        try:
            signer = sshsig.load_signer(
                path, interactive=_prompt and sys.stdin.isatty() and sys.stdout.isatty()
            )
        except sshsig.SigningKeyError as exc:
            raise Refused(str(exc)) from None
        _loaded[str(path)] = signer
    allowed = set()
    for key in listed:
        try:
            allowed.add(sshsig.normalize_key(key))
        except ValueError:
            continue
    if signer.public_key not in allowed:
        raise Refused(
            f"key {sshsig.fingerprint(signer.public_key)} ({path}) is not one of {person}'s keys as decided "
            f"(listed: {', '.join(_fingerprints(allowed))}); sign with a listed key, or have the key "
            "added by an accepted proposal"
        )
    return signer


def _fingerprints(keys: set[str]) -> list[str]:
    from engine.base import sshsig

    return sorted(sshsig.fingerprint(k) for k in keys)


def person_event(ws: Workspace, signer: Signer | None, event: Mapping[str, Any]) -> dict[str, Any]:
    """The event as it will be appended: an id that does not depend on its place in the store
    (so it can be signed before the lock), the workspace it belongs to, and the signature."""
    body = {**event, "workspace": ws.authority().workspace_id}
    given = body.pop("id", None)
    made = {"id": given or ids.new_id("person\0" + canonical(body).decode()), **body}
    if signer is not None:
        made["sig"] = signer.sign(signed_bytes(made))
    return made
