"""The README's first command: `regulator demo` on a machine with no git identity (design §14)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import NOW, REGULATOR


def bare_env(**extra: Any) -> Any:
    """No git identity at all, as on a fresh machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "REGULATOR_"))}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", HOME=extra.pop("HOME"))
    env.update(extra)
    return env


def test_demo_on_a_fresh_machine(tmp_path: Path) -> None:
    env = bare_env(HOME=str(tmp_path / "home"))
    target = tmp_path / "demo"
    done = subprocess.run(
        [REGULATOR, "demo", "--dir", str(target)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"demo workspace: {target}" in done.stdout
    assert "u1 is in progress and held by blocking obligation" in done.stdout
    assert "GREENGROCER 114" in done.stdout and "F-alert-path-dead" in done.stdout
    # the line an agent host needs to launch r1's MCP server (design §17)
    line = next(x for x in done.stdout.splitlines() if x.startswith("r1's MCP server"))
    server = json.loads(line.split("--print-config`): ", 1)[1])["mcpServers"]["regulator-r1"]
    assert server["args"][:2] == ["mcp", "--lease"]
    assert json.loads(Path(server["args"][2]).read_text())["unit"] == "r1"
    status = subprocess.run(
        [REGULATOR, "--root", str(target), "status", "--json"], env=env, capture_output=True, text=True
    )
    assert status.returncode == 0
    assert '"held": true' in status.stdout
    # a non-empty folder is refused, and nothing is written there
    again = subprocess.run([REGULATOR, "demo", "--dir", str(target)], env=env, capture_output=True, text=True)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_the_demo_hands_over_a_signed_workspace_on_the_host_clock(tmp_path: Path) -> None:
    """Built pinned, ended on `clock: system` by a decision alice signs with a key made for her."""
    env = bare_env(HOME=str(tmp_path / "home"), REGULATOR_NOW="2026-11-29T12:00:00Z")
    target = tmp_path / "demo"
    done = subprocess.run([REGULATOR, "demo", "--dir", str(target)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    key = target / ".demo-keys" / "alice"
    assert oct(key.stat().st_mode & 0o777) == "0o600" and "signing key" in done.stdout
    status = subprocess.run(
        [REGULATOR, "--root", str(target), "status", "--json"], env=env, capture_output=True, text=True
    )
    assert '"clock": "system"' in status.stdout and '"authentication": "signatures"' in status.stdout
    assert "REGULATOR_NOW ignored" in status.stderr
    decisions = [
        json.loads(line) for line in (target / ".regulator/identity.ndjson").read_text().splitlines()
    ]
    last = decisions[-1]
    assert (
        last["decision"] == "accepted" and last["by"] == "alice" and last["sig"].startswith("-----BEGIN SSH")
    )
    assert "clock: system" in (target / "regulator/policy/routing.yaml").read_text()
    verify = subprocess.run(
        [REGULATOR, "--root", str(target), "verify"], env=env, capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout


def test_screenshot_renders_the_real_app(tmp_path: Path) -> None:
    env = bare_env(HOME=str(tmp_path / "home"), REGULATOR_NOW=NOW)
    target = tmp_path / "demo"
    subprocess.run(
        [REGULATOR, "demo", "--dir", str(target), "--once", "--clock", "pinned"],
        env=env,
        check=True,
        capture_output=True,
    )
    svg = tmp_path / "units.svg"
    done = subprocess.run(
        [
            REGULATOR,
            "--root",
            str(target),
            "controlroom",
            "--as",
            "alice",
            "--view",
            "units",
            "--screenshot",
            str(svg),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    text = svg.read_text()
    assert text.startswith("<svg") and "release-harden" in text
    bad = subprocess.run(
        [REGULATOR, "--root", str(target), "controlroom", "--view", "nope", "--screenshot", str(svg)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--view" in bad.stderr


@pytest.mark.slow
def test_bench_runs_at_smoke_scale(tmp_path: Path) -> None:
    """The benchmark is not part of the suite; this only checks that it runs and reports every figure."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "run.py"), "--scale", "smoke", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=bare_env(HOME=str(tmp_path / "home")),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    for key in (
        "projection_ratio",
        "projection_s",
        "json_loads_s",
        "events",
        "incremental_ms",
        "first_frame_s",
        "first_frame_process_s",
        "first_frame_warm_s",
        "keypress_ms",
        "lint_s",
        "next_up_ms",
        "status_cold_s",
        "verify_person_events_s",
        "mcp_start_s",
        "once_json_s",
        "status_cold_100k_s",
        "verify_s",
    ):
        assert isinstance(report[key], int | float) and report[key] > 0, key
    assert set(report["met"]) == set(report["targets"])


def test_the_demo_made_from_a_git_hook_is_whole(tmp_path: Path) -> None:
    """A git hook exports its own repository's GIT_DIR and GIT_INDEX_FILE: the demo's git follows
    neither (D-199), so the demo's repository is whole and the hook's is untouched."""
    outer = tmp_path / "outer"
    subprocess.run(["git", "init", "-q", str(outer)], check=True, env=bare_env(HOME=str(tmp_path / "home")))
    env = bare_env(
        HOME=str(tmp_path / "home"), GIT_DIR=str(outer / ".git"), GIT_INDEX_FILE=str(outer / ".git" / "index")
    )
    target = tmp_path / "demo"
    done = subprocess.run([REGULATOR, "demo", "--dir", str(target)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plain = bare_env(HOME=str(tmp_path / "home"))
    status = subprocess.run(
        ["git", "-C", str(target), "status", "--porcelain"], env=plain, capture_output=True
    )
    assert status.returncode == 0 and status.stdout == b""
    assert not (outer / ".git" / "index").exists()
