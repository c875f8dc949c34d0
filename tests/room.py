"""Helpers for the control room's Pilot tests: the demo workspace, a script run under Pilot, a wait."""

from __future__ import annotations

import asyncio
import functools
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from controlroom.app import ControlRoom
from controlroom.demo import KEY_DIR, OWNER, build
from engine.checkout.workspace import Workspace, configure_clock
from engine.trust.signing import use_key
from tests.helpers import NOW, REGULATOR, clean_env, compact, copy_template, pristine, template_folder

SIZE = (150, 42)  # wide enough that the detail pane is shown


def demo_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """The demo's workspace on a pinned clock, with no machine git configuration.

    The demo is built once per test process (`controlroom.demo.build`, pinned at NOW: the same byte
    for byte each time, its key included); each test gets a copy of it at its own path, whose
    worktree links and lease files are pointed at that path, and signs with the copy's key, as
    after a build of its own."""
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    root = tmp_path / "fleet-repo"
    copy_template(_demo_template(NOW), root)
    use_key(root / KEY_DIR / OWNER)
    return configure_clock(Workspace(root))


@functools.cache
def _demo_template(now: str) -> Path:
    """The demo built by `controlroom.demo.build` at `now`, once per test process."""
    with pristine(REGULATOR_NOW=now, GIT_CONFIG_GLOBAL="/dev/null"):
        return compact(build(template_folder("regulator-demo-") / "fleet-repo", clock_mode="pinned").root)


def run(
    app: ControlRoom,
    script: Callable[[Any], Awaitable[None]],
    size: tuple[int, int] = SIZE,
    notifications: bool = False,
) -> None:
    """Under Pilot; an exception the room did not handle is raised here (Textual re-raises it).
    `notifications`: draw the toasts (Textual's tests leave them out by default)."""

    async def main() -> None:
        async with app.run_test(size=size, notifications=notifications) as pilot:
            await pilot.pause()
            await script(pilot)

    asyncio.run(main())


async def until(pilot: Any, condition: Callable[[], object], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await pilot.pause(0.05)
    return True


async def opened(pilot: Any, kind: type) -> bool:
    """Wait for a dialog the room reads in a worker before it opens (controlroom.prepare)."""
    return await until(pilot, lambda: isinstance(pilot.app.screen, kind))


def screen_lines(app: ControlRoom) -> list[str]:
    """What the terminal shows now, line by line (the top screen over the ones beneath): what an
    operator reads, cut where the screen cuts it."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False).splitlines()


def once_of(demo: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `regulator controlroom --once ARGS` on the demo, as alice, on its pinned clock."""
    env = clean_env(REGULATOR_NOW=NOW, REGULATOR_SIGNING_KEY=str(demo.root / KEY_DIR / OWNER))
    command = [REGULATOR, "--root", str(demo.root), "controlroom", "--once", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True)
