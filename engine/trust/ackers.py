"""Who may authorize a load-bearing register change (design §8.4, §15.1, §26): the `ack` grants,
the persons' emails and keys, and whether signatures are required, as lint and the trunk walk
(engine.read.ladder) judge commits by them."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from engine.checkout.authority import People
from engine.checkout.gitconfig import trunk_of
from engine.checkout.workspace import Workspace
from registry.lint import Policy

if TYPE_CHECKING:
    from identity.policy import InteractionPolicy


def lint_policy(ws: Workspace) -> Policy:
    policy = _signing_policy(ws, ws.interaction())
    policy.intake_debt_days = ws.routing().intake_debt_days
    return policy


def _signing_policy(ws: Workspace, interaction: InteractionPolicy, note: str = "") -> Policy:
    """Who may authorize a load-bearing change, and whether it must be SSH-signed (design §15.1)."""
    people = interaction.people
    ackers = {name: person.emails for name, person in people.items() if "ack" in person.grants}
    keys = {name: person.keys for name, person in people.items()}

    def signed(sha: str, person: str) -> bool:
        from engine.trust.gitsig import signed_by

        return signed_by(ws.root, sha, {person: keys.get(person, ())})[person]

    said = json.dumps([ackers, keys, interaction.require_signatures], sort_keys=True).encode()
    return Policy(
        ackers=ackers,
        signed=signed,
        require_signatures=interaction.require_signatures,
        note=note,
        fingerprint=hashlib.sha256(said).hexdigest(),
    )


def walk_policy(ws: Workspace) -> Policy:
    """Whose `Authorized-by:` counts on trunk's history (design §26): on the host, the decided
    policy; in a clone (no decisions here), the interaction policy trunk holds, never the
    checkout's files, which a branch may have edited."""
    if ws.has_stores:
        return lint_policy(ws)
    found = _trunk_interaction(ws)
    if found is None:
        return lint_policy(ws)
    ref, text = found
    return policy_at(ws, text, f"trunk ({ref})")


def trunk_people(ws: Workspace) -> People | None:
    """In a clone, the persons' keys and whether they must sign as trunk's interaction policy says
    (what lint judges a person's commit by); None on the host, or where trunk has no such file."""
    found = None if ws.has_stores else _trunk_interaction(ws)
    if found is None or found[1] is None:
        return None
    return People.parse(found[1].decode("utf-8", errors="replace"))


def _trunk_interaction(ws: Workspace) -> tuple[str, bytes | None] | None:
    """(trunk's ref, its interaction.yaml as stored, None where it has none); None without a trunk."""
    from registry.gitcall import git
    from registry.history import resolve_trunk

    ref = resolve_trunk(ws.tree, trunk_of(ws))
    if ref is None:
        return None
    # the blob as stored: a replace ref a unit made (refs are every worktree's) cannot stand in
    done = git(ws.tree, "cat-file", "blob", f"{ref}:regulator/policy/interaction.yaml", filters=False)
    return ref, done.stdout if done.returncode == 0 else None


def policy_at(ws: Workspace, text: bytes | None, where: str) -> Policy:
    """The ack grants and keys of an interaction policy as it stood at a commit (--range: at A), so
    a push cannot use signing rights it grants itself."""
    from identity.policy import PolicyError, parse_policy

    if text is None:
        return Policy(ackers={}, note=f"no interaction policy at {where}: nobody holds the ack grant")
    try:
        interaction = parse_policy("interaction.yaml", text.decode("utf-8"))
    except (PolicyError, UnicodeDecodeError) as exc:
        return Policy(ackers={}, note=f"the interaction policy at {where} does not read ({exc})")
    return _signing_policy(ws, interaction, note=f"ack grants as the policy at {where} gives them")
