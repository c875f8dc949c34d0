"""The `regulator` script's entry point: a command's start is made with the cyclic garbage collector
paused, and the collector resumes as the command itself begins (D-194)."""

from __future__ import annotations

import gc
import os
import sys


def resume() -> None:
    """What the start built (modules, classes, the command tree) all lives on: frozen, no later
    collection walks it again; then the collector runs as usual for the command."""
    gc.freeze()
    gc.enable()


def run() -> None:
    """Importing Typer, PyYAML, msgspec and the command's group allocates tens of thousands of
    objects and frees almost none: each collection meanwhile walks them all and finds nothing
    (about 8 % of a short command's CPU)."""
    gc.disable()
    if sys.stdout is None or sys.stderr is None:  # started with that descriptor closed: what the
        # command writes there goes nowhere, as print() would send it, and it exits as it judged
        sys.stdout = sys.stdout or open(os.devnull, "w")  # noqa: SIM115 - open until the process ends
        sys.stderr = sys.stderr or open(os.devnull, "w")  # noqa: SIM115
    from controlroom.cli.root import main
    from engine.base import leaving

    leaving.arm()  # this process ends with its command: what the command kept is not freed (D-260)
    leaving.leave(main(resume=resume))
