"""What git and the tracked tree say about this checkout: git config values, the configured trunk."""

from __future__ import annotations

import os
from pathlib import Path

from engine.base.errors import RegulatorError
from engine.checkout.workspace import Workspace
from identity import regular
from registry.gitcall import git_text

CONFIG = "regulator/config.yaml"  # the tracked file that names the trunk (init --trunk)


def git_config(root: Path, key: str) -> str | None:
    done = git_text(root, "config", "--get", key, timeout=10, filters=False)
    value = done.stdout.strip() if done.returncode == 0 else ""
    return value or None


def given_email(root: Path) -> str | None:
    """The email git authors a commit with where one is given, in git's own precedence: its
    environment (GIT_AUTHOR_EMAIL: CI, a fresh machine) over its configuration (`user.email`);
    None where git would guess one."""
    return os.environ.get("GIT_AUTHOR_EMAIL", "").strip() or git_config(root, "user.email") or None


HOST_TRUNK = "trunk"  # .regulator/trunk: the trunk this host follows (init writes it; a person edits it)


def trunk_of(ws: Workspace) -> str:
    """The trunk every command follows: on the host, the one `.regulator/trunk` names (D-224); in a
    clone, or on a host made before that file, the one `regulator/config.yaml` names. A committed
    file any merged branch can change does not move the host's trunk."""
    recorded = host_trunk(ws)
    return recorded if recorded is not None else configured_trunk(ws)


def host_trunk(ws: Workspace) -> str | None:
    """`.regulator/trunk`'s name, as written (a name that is no branch's is refused where it is
    resolved: then no commit is trunk and every finding holds, D-201); None where there is none."""
    path = ws.state_dir / HOST_TRUNK
    try:
        text = regular.read_text(path, limit=4096)
    except FileNotFoundError:
        return "" if os.path.lexists(path) else None  # a dangling link is there, and names no trunk
    except (OSError, UnicodeDecodeError, ValueError, RegulatorError):  # there, unreadable: no trunk
        return ""
    return text.strip()


def doubted_trunk(ws: Workspace) -> str | None:
    """Why a person's signed register command may not judge by the trunk `trunk_of` names, or None:
    in a clone (no `.regulator/trunk`) that name comes from the checked-out branch's own
    `regulator/config.yaml`, which a unit's branch can point at a branch of its own, whose history
    holds nothing. Where the clone's origin names another default branch, that is refused (D-237)."""
    if host_trunk(ws) is not None:
        return None
    done = git_text(ws.root, "symbolic-ref", "-q", "refs/remotes/origin/HEAD", timeout=10, filters=False)
    remote = done.stdout.strip().removeprefix("refs/remotes/origin/") if done.returncode == 0 else ""
    configured = configured_trunk(ws)
    if not remote or remote == configured:
        return None
    return (
        f"{CONFIG} names trunk {configured!r} here, but this clone's origin names {remote!r}: a "
        f"committed file does not move trunk; sign on a checkout whose {CONFIG} names {remote!r}"
    )


def configured_trunk(ws: Workspace) -> str:
    """The trunk `regulator/config.yaml` names (`trunk:`, read as YAML: quotes and comments are
    YAML's), or main when it names none."""
    try:
        text = regular.read_text(ws.root / CONFIG, limit=1 << 20)
    except FileNotFoundError:
        return "" if os.path.lexists(ws.root / CONFIG) else "main"
    except (OSError, UnicodeDecodeError, ValueError):
        # a link loop, not UTF-8, too large (no regular file at all is refused): it names no trunk,
        # so no commit is trunk and every finding holds (fail closed, D-201)
        return ""
    return trunk_in(text)


def trunk_in(text: str | None) -> str:
    """The trunk a `regulator/config.yaml` text names, or main when it names none."""
    from identity.yamlload import YamlError, safe_load_strict

    if text is None:
        return "main"
    try:
        data = safe_load_strict(text)
    except YamlError:
        return "main"
    trunk = data.get("trunk") if isinstance(data, dict) else None
    if isinstance(trunk, bool) or not isinstance(trunk, str | int | float):
        return "main"
    return str(trunk).strip() or "main"
