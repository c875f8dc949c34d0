"""Folding or decoding with the cyclic garbage collector paused: what is built all stays alive."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Folding a large log allocates millions of objects that all stay alive: the cyclic collector
    would rescan them again and again (seconds on a million events) and find nothing to free."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # what was folded lives on: later collections need not walk it again
        if enabled:
            gc.enable()
