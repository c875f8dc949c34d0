"""Screenshots of the real control room, rendered headless (`controlroom --screenshot`, the
source of screenshots/)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from controlroom.app import ControlRoom
from controlroom.host import write_whole
from controlroom.views import BY_VIEW
from engine.checkout.workspace import Workspace


def screenshot(
    ws: Workspace,
    path: Path,
    view: str,
    person: str | None,
    size: tuple[int, int] = (150, 42),
    read_only: bool = False,
) -> None:
    """Render the real application headless to an SVG (the source of screenshots/). `read_only`:
    as `controlroom --read-only` runs, routing nothing and offering no write, marked in its header."""
    app = ControlRoom(ws, person, read_only=read_only, view=view, watch=False, background_checks=False)
    app.live = "● live"

    async def shoot() -> str:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return app.export_screenshot(title=f"regulator · {BY_VIEW[view].title}")

    write_whole(path, asyncio.run(shoot()))
