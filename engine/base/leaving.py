"""A short command's large read: its heap kept as it grows, its objects left to the system at exit."""

from __future__ import annotations

import atexit
import os
import sys
import threading

# what a command asked to keep until the process ends (`keep`); only once `arm` was called
_KEPT: list[object] = []
_ARMED = [False]


def arm() -> None:
    """Called by the `regulator` script's entry point (controlroom.cli.start) alone: this process
    ends when its one command returns. A caller of the command line's `main` in its own process
    (the tests, a script) never arms it, and frees what a command read as usual."""
    _ARMED[0] = True


def keep(*objects: object) -> None:
    """Keep `objects` alive until the process ends, where `arm` was called: a command that printed
    its answer from a read of 100,000 obligations (`controlroom --once`) would otherwise free them
    one by one, first when its functions return and again as the interpreter ends (0.2-0.4 s of
    the command's time after its answer was written: docs/performance.md)."""
    if _ARMED[0]:
        _KEPT.extend(objects)


def leave(code: int) -> None:
    """End the process with exit `code`. Where a command kept its read (`keep`), the standard
    streams are flushed and the exit hooks run (atexit: a declared command still running is
    killed), then the process ends without the interpreter's teardown (os._exit): nothing kept is
    freed one object at a time. Not while a thread the interpreter would wait for still runs, nor
    where a stream cannot be flushed (a closed pipe): those end as any Python process does."""
    if not _KEPT or any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
    ):
        sys.exit(code)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: that descriptor was closed when the process began
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)
    atexit._run_exitfuncs()
    os._exit(code)


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_HEAP_KEPT = [False]


def keep_heap() -> None:
    """For a command that reads a whole large store and prints it once (`controlroom --once
    --json`, where --once's JSON is 80 MB at 100,000 obligations): large blocks come from the
    process's heap and what is freed stays in it (glibc's mallopt), instead of each block being
    fresh pages from the kernel, faulted in and zeroed one by one, and given back when freed (half
    of --once's 480,000 page faults; docs/performance.md). Only where `arm` was called (the
    process ends with the command: a long-lived caller's heap is never held at its peak), and
    where the C library has mallopt; its forked children inherit it."""
    if not _ARMED[0] or _HEAP_KEPT[0]:
        return
    _HEAP_KEPT[0] = True
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: the heap as the C library keeps it
        return
    mallopt(_M_MMAP_THRESHOLD, 1 << 30)
    mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1)
