"""Regenerate the SVG screenshots of the control room from the demo, with a fixed clock.

    python screenshots/regenerate.py

Builds the demo in a temporary folder (REGULATOR_NOW fixed, no git identity needed) and renders
every view of the real application headless through `regulator controlroom --screenshot`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from controlroom.views import VIEWS  # every view, as the room defines them

NOW = "2026-11-29T12:00:00Z"

HERE = Path(__file__).resolve().parent


def main() -> int:
    regulator = str(Path(sys.executable).parent / "regulator")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TEXTUAL_THEME")}
    env.update(REGULATOR_NOW=NOW, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "fleet-repo"
        subprocess.run(
            [regulator, "demo", "--dir", str(root), "--once", "--clock", "pinned"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for view in VIEWS:
            target = HERE / f"{view}.svg"
            subprocess.run(
                [
                    regulator,
                    "--root",
                    str(root),
                    "controlroom",
                    "--as",
                    "alice",
                    "--view",
                    view,
                    "--screenshot",
                    str(target),
                ],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            print(f"wrote {target.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
