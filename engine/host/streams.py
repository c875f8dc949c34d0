"""A `unit run` child's standard streams and the terminal (design §23, D-211, D-255): a confined
child's output piped and relayed with every control escaped, never the host's terminal; an
unconfined one given the terminal's foreground while it runs, and the terminal taken back after."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from typing import Any


def confined_streams() -> dict[str, Any]:
    """A confined child's standard streams: its output always a pipe, relayed to the host's own
    (`relay_output`: escaped, since what is a file or a pipe here often ends on a terminal, `| tee`);
    its input /dev/null where the host's is a terminal, else the host's."""
    streams: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with contextlib.suppress(OSError):
        if os.isatty(0):
            streams["stdin"] = subprocess.DEVNULL
    return streams


def relay_output(child: subprocess.Popen[bytes]) -> list[threading.Thread]:
    """Copy a confined child's piped output to the host's own stream (a terminal, or a file or pipe
    that often ends on one), as it comes, with every control and invisible character written as an escape
    (`terminal_safe`): an adversarial review's confined unit retitled root's window, erased `unit
    run`'s own warning line (ESC [1A ESC [2K) and could ask the terminal for answers that land in
    root's shell. Bytes that are no UTF-8 are shown as backslash escapes."""
    import codecs

    from engine.base.text import terminal_safe

    def copy(source: Any, fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")
        writing = True  # until the host's side is gone (`unit run … | head`): then drained unread, so
        # that the child never blocks on a full pipe (it got EPIPE itself before D-255)
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(source.fileno(), 65536):
                if writing:
                    writing = _write_all(fd, terminal_safe(decoder.decode(chunk)))
            if writing:
                _write_all(fd, terminal_safe(decoder.decode(b"", final=True)))

    relays = []
    for source, fd in ((child.stdout, 1), (child.stderr, 2)):
        if source is not None:
            relay = threading.Thread(target=copy, args=(source, fd), name="relay", daemon=True)
            relay.start()
            relays.append(relay)
    return relays


def _write_all(fd: int, text: str) -> bool:
    """All of `text` written to `fd`; False where the other side is gone (a broken pipe)."""
    shown = text.encode("utf-8", "backslashreplace")
    try:
        while shown:
            shown = shown[os.write(fd, shown) :]
    except OSError:
        return False
    return True


def give_terminal(group: int) -> int | None:
    """An interactive agent (a terminal on stdin) gets the terminal's foreground; returns whom to
    give it back to."""
    try:
        if not os.isatty(0):
            return None
        before = os.tcgetpgrp(0)
        with _quiet_ttou():
            os.tcsetpgrp(0, group)
        return before
    except OSError:
        return None


def take_terminal(before: int | None) -> None:
    if before is None:
        return
    with contextlib.suppress(OSError), _quiet_ttou():
        os.tcsetpgrp(0, before)


@contextlib.contextmanager
def _quiet_ttou() -> Any:
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTTOU, previous)
