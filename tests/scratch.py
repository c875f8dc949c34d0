"""Where the suite's folders go: a memory filesystem where the machine has one (D-339)."""

from __future__ import annotations

import os
import stat
import tempfile

MEMORY = "/dev/shm"
ROOM_NEEDED = 4 << 30  # the largest test writes a 200 MB line; four workers, each a few at once


def choose() -> str:
    """Point this process's temporary folder (and its children's, TMPDIR) at /dev/shm where that
    is a tmpfs anyone may write to with room to spare, unless the caller chose a TMPDIR; returns
    the folder chosen. On this machine /tmp is ext4 on a virtual disk mounted with `discard`:
    every file the suite writes is journaled and written back, and every one removed is trimmed."""
    if not os.environ.get("TMPDIR") and _usable(MEMORY):
        os.environ["TMPDIR"] = MEMORY
        tempfile.tempdir = None  # asked again: gettempdir() may have cached /tmp already
    return tempfile.gettempdir()


def _usable(folder: str) -> bool:
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            if not any(line.split()[1:3] == [folder, "tmpfs"] for line in mounts if line.count(" ") >= 2):
                return False
        seen = os.stat(folder)
        room = os.statvfs(folder)
    except OSError:
        return False
    sticky_and_open = seen.st_mode & stat.S_ISVTX and seen.st_mode & 0o777 == 0o777
    return bool(sticky_and_open) and room.f_bavail * room.f_frsize >= ROOM_NEEDED


def root() -> str:
    """The folder a test's own folders go in when they hold a socket (a socket's path holds ~107
    bytes) or must be on the workspaces' filesystem (a rename, a hard link): the temporary folder
    `choose` set; where a caller's TMPDIR is long, /tmp if that is on the same filesystem, else the
    long one (a socket test may then fail on its path's length, never on a rename)."""
    chosen = tempfile.gettempdir()
    if len(chosen) <= 20:
        return chosen
    try:
        same = os.stat("/tmp").st_dev == os.stat(chosen).st_dev
    except OSError:
        same = False
    return "/tmp" if same else chosen
