"""`regulator init`: the workspace skeleton, the shipped policy, a baseline identity and records."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from engine import clock
from engine.errors import BadInput, Refused
from engine.limits import check_text
from engine.workspace import STATE_DIR, STORE_NAMES, Workspace
from identity.files import IDENTITY_DIR, POLICY_DIR, content_hash
from identity.shipped import IDENTITY_FILES, policy_files

CONFIG = "regulator/config.yaml"


def git_config(root: Path, key: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "config", "--get", key], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value or None


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


def initialize(root: Path, owner: str | None = None, trunk: str = "main") -> Workspace:
    root = root.resolve()
    if not root.is_dir():
        raise BadInput(f"{root} is not a folder; create it (and `git init` it) first")
    if (root / STATE_DIR).exists():
        raise Refused(f"{root} is already a regulator workspace ({STATE_DIR}/ exists); nothing written")
    if owner is not None:
        check_text("--owner", owner, kind="name")
    if not trunk or any(c in trunk for c in " \t\n~^:?*[\\") or trunk.startswith("-"):
        raise BadInput(f"--trunk {trunk!r} is not a branch name")
    owner = owner or git_config(root, "user.name") or "owner"
    email = git_config(root, "user.email")
    ws = Workspace(root)
    for folder in ("contracts", "findings", "intake", "records"):
        (root / folder).mkdir(exist_ok=True)
    written: dict[str, str] = {}
    for name, text in IDENTITY_FILES.items():
        written[f"{IDENTITY_DIR}/{name}"] = text
    for name, text in policy_files(owner, email).items():
        written[f"{POLICY_DIR}/{name}"] = text
    for relative, text in written.items():
        write_governed(root / relative, text)
    (root / CONFIG).write_text(f"trunk: {trunk}\n", encoding="utf-8")
    from registry.shipped import write_shipped_records

    write_shipped_records(root)
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    if ".regulator/" not in existing.split():
        gitignore.write_text(
            existing + ("" if existing.endswith("\n") or not existing else "\n") + ".regulator/\n"
        )
    ws.state_dir.mkdir()
    for name in STORE_NAMES:
        ws.store(name).path.touch()
    now = clock.iso(clock.now())
    store = ws.store("identity")
    for relative, text in written.items():
        store.append(
            {
                "kind": "decision",
                "decision": "baseline",
                "proposal": None,
                "file": relative,
                "contentHash": content_hash(text.encode()),
                "by": owner,
                "rationale": "baseline written by regulator init",
                "at": now,
            }
        )
    return ws


def trunk_of(ws: Workspace) -> str:
    try:
        for line in (ws.root / CONFIG).read_text(encoding="utf-8").splitlines():
            if line.startswith("trunk:"):
                return line.split(":", 1)[1].strip() or "main"
    except FileNotFoundError:
        pass
    return "main"
