"""What a confined unit's process may not do, whatever it runs (design §23, D-213): gain another
account's rights through a set-user-id or set-group-id program (no_new_privs), or give such a bit to
any file it makes or owns, anywhere (a seccomp filter). Either would let a process hold the unit's
account under another account's real uid, beyond the account's own kill(-1), or let another account
run code as the unit after its run. Both are set in the child after it has taken the account's uid
and before it runs anything, are inherited by every process it starts, and cannot be undone."""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from collections.abc import Callable

from engine.base.errors import Refused

# classic BPF, as the kernel reads a seccomp filter (linux/filter.h, linux/seccomp.h)
_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_KILL_PROCESS = 0x80000000
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARGS = 0, 4, 16  # offsets in struct seccomp_data
_SET_IDS = 0o6000  # S_ISUID | S_ISGID
_X32_BIT = 0x40000000

# per architecture: its audit id, the calls whose argument N is a mode that may carry set-id bits,
# and the calls refused whole (a mode the filter cannot see: openat2's is in a struct it points to,
# io_uring's operations bypass the filter)
_ARCHES: dict[str, tuple[int, dict[int, int], tuple[int, ...]]] = {
    "x86_64": (
        0xC000003E,
        {2: 2, 85: 1, 83: 1, 90: 1, 91: 1, 133: 1, 257: 3, 258: 2, 259: 2, 268: 2, 452: 2},
        (425, 437),  # io_uring_setup, openat2
    ),  # open creat mkdir chmod fchmod mknod openat mkdirat mknodat fchmodat fchmodat2
    "aarch64": (
        0xC00000B7,
        {56: 3, 34: 2, 33: 2, 52: 1, 53: 2, 452: 2},
        (425, 437),
    ),  # openat mkdirat mknodat fchmod fchmodat fchmodat2
}

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter for this machine's architecture: any other architecture's call (a 32-bit one on a
    64-bit kernel, x32) kills the process; a mode with a set-id bit is EPERM; openat2 and io_uring
    are ENOSYS (the C library falls back to openat); all else is allowed. Refused where the
    architecture is not known here: a confined run does not start unfiltered."""
    name = machine or platform.machine()
    if name not in _ARCHES:
        raise Refused(
            f"--user: no filter for this machine's architecture ({name}); a confined unit cannot run here"
        )
    audit, modes, refused = _ARCHES[name]
    ops = [_op(_LD_ABS_W, _ARCH), _op(_JEQ, audit, 1, 0), _op(_RET, _KILL_PROCESS), _op(_LD_ABS_W, _NR)]
    if name == "x86_64":
        ops += [_op(_JGE, _X32_BIT, 0, 1), _op(_RET, _KILL_PROCESS)]
    for nr in refused:
        ops += [_op(_JEQ, nr, 0, 1), _op(_RET, _ERRNO | errno.ENOSYS)]
    for nr, arg in modes.items():  # the low 32 bits of the argument (little-endian on both)
        ops += [
            _op(_JEQ, nr, 0, 4),
            _op(_LD_ABS_W, _ARGS + 8 * arg),
            _op(_JSET, _SET_IDS, 0, 1),
            _op(_RET, _ERRNO | errno.EPERM),
            _op(_RET, _ALLOW),
        ]
    ops.append(_op(_RET, _ALLOW))
    return b"".join(ops)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def lock_down() -> Callable[[], None]:
    """The child's last step before it runs the unit's command (subprocess's preexec_fn, which runs
    after the account's uid and groups are taken): everything is built here, in the parent, so the
    child only makes two system calls. A failure raises there, and the run does not start."""
    code = program()
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _Fprog(len(code) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    where = ctypes.addressof(fprog)

    def child() -> None:
        keep = (buffer, fprog)  # alive until the filter is set
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, where, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
        del keep

    return child
