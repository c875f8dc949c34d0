"""What git and the tracked tree say about this checkout: git config values, the configured trunk."""

from __future__ import annotations

from pathlib import Path

from engine.checkout.workspace import Workspace
from identity import regular
from registry.gitcall import git_text

CONFIG = "regulator/config.yaml"  # the tracked file that names the trunk (init --trunk)


def git_config(root: Path, key: str) -> str | None:
    done = git_text(root, "config", "--get", key, timeout=10, filters=False)
    value = done.stdout.strip() if done.returncode == 0 else ""
    return value or None


def trunk_of(ws: Workspace) -> str:
    """The trunk `regulator/config.yaml` names (`trunk:`, read as YAML: quotes and comments are
    YAML's), or main when it names none."""
    from identity.yamlload import YamlError, safe_load_strict

    try:
        text = regular.read_text(ws.root / CONFIG)
    except FileNotFoundError:
        return "main"
    try:
        data = safe_load_strict(text)
    except YamlError:
        return "main"
    trunk = data.get("trunk") if isinstance(data, dict) else None
    if isinstance(trunk, bool) or not isinstance(trunk, str | int | float):
        return "main"
    return str(trunk).strip() or "main"
