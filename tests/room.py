"""Helpers for the control room's Pilot tests: the demo workspace, a script run under Pilot, a wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from controlroom.app import ControlRoom
from controlroom.demo import build
from engine.checkout.workspace import Workspace
from tests.helpers import NOW

SIZE = (150, 42)  # wide enough that the detail pane is shown


def demo_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """The demo's workspace on a pinned clock, with no machine git configuration."""
    monkeypatch.setenv("REGULATOR_NOW", NOW)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    return build(tmp_path / "fleet-repo", clock_mode="pinned")


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
