"""What a confined unit's process may not do, whatever it runs (design §23, D-213): gain another
account's rights through a set-user-id or set-group-id program (no_new_privs), or give such a bit to
any file it makes or owns, anywhere (a seccomp filter: no mode with the bit, and no namespace or
mount through which a file system could show one). Either would let a process hold the unit's
account under another account's real uid, beyond the account's own kill(-1), or let another account
run code as the unit after its run. Both are set in the child after it has taken the account's uid
and before it runs anything, are inherited by every process it starts, and cannot be undone."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Callable

import msgspec

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
_SET_UID = 0o4000
_X32_BIT = 0x40000000

_NAMESPACES = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_NEWTIME = 0x80  # unshare's only (in clone's flags these bits are the exit signal)


class Table(msgspec.Struct, frozen=True):
    """One architecture's system calls, as the filter judges them."""

    audit: int  # its AUDIT_ARCH_* id
    modes: dict[int, int]  # call -> the argument that is a mode: no set-id bit in it
    folder_modes: dict[
        int, int
    ]  # mkdir's: no set-user-id bit (a set-gid folder is the kernel's own inheritance)
    flags: dict[int, tuple[int, int]]  # call -> (argument, bits refused in it): new namespaces
    refused: dict[int, int]  # call -> errno: refused whole


_MOUNTS = {428: 1, 429: 1, 430: 1, 431: 1, 432: 1, 433: 1, 442: 1, 467: 1}  # open_tree … open_tree_attr
_ENOSYS = {425: errno.ENOSYS, 435: errno.ENOSYS, 437: errno.ENOSYS}  # io_uring_setup, clone3, openat2
_ARCHES = {
    "x86_64": Table(
        0xC000003E,
        # open creat chmod fchmod mknod mq_open openat mknodat fchmodat fchmodat2
        {2: 2, 85: 1, 90: 1, 91: 1, 133: 1, 240: 2, 257: 3, 259: 2, 268: 2, 452: 2},
        {83: 1, 258: 2},  # mkdir mkdirat
        {272: (0, _NAMESPACES | _NEWTIME), 56: (0, _NAMESPACES)},  # unshare clone
        # setns mount umount2 pivot_root, the new mount API; and what hides its arguments
        {308: 1, 165: 1, 166: 1, 155: 1, **_MOUNTS, **_ENOSYS},
    ),
    "aarch64": Table(
        0xC00000B7,
        {56: 3, 33: 2, 52: 1, 53: 2, 180: 2, 452: 2},  # openat mknodat fchmod fchmodat mq_open fchmodat2
        {34: 2},  # mkdirat
        {97: (0, _NAMESPACES | _NEWTIME), 220: (0, _NAMESPACES)},  # unshare clone
        {268: 1, 40: 1, 39: 1, 41: 1, **_MOUNTS, **_ENOSYS},  # setns mount umount2 pivot_root
    ),
}

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _bits(nr: int, arg: int, refused: int, why: int) -> list[bytes]:
    """Call `nr` with any of `refused`'s bits in argument `arg` (its low 32 bits: little-endian on
    both architectures) is errno `why`; without them it is allowed; another call goes on."""
    return [
        _op(_JEQ, nr, 0, 4),
        _op(_LD_ABS_W, _ARGS + 8 * arg),
        _op(_JSET, refused, 0, 1),
        _op(_RET, _ERRNO | why),
        _op(_RET, _ALLOW),
    ]


def program(machine: str | None = None) -> bytes:
    """The filter for this machine's architecture: any other architecture's call (a 32-bit one on a
    64-bit kernel, x32) kills the process; a mode with a set-id bit is EPERM; a new namespace,
    joining one, and every mount are EPERM (inside its own user namespace a unit could mount a file
    system that shows a set-user-id file and copy it up through overlayfs onto a real disk, with no
    mode ever passed: D-213's review); clone3, openat2 and io_uring are ENOSYS (their arguments are
    behind a pointer the filter cannot read, and io_uring's operations pass no filter; the C
    library falls back to clone and openat); all else is allowed. Refused where the architecture is
    not known here: a confined run does not start unfiltered."""
    name = machine or platform.machine()
    if name not in _ARCHES:
        raise Refused(
            f"--user: no filter for this machine's architecture ({name}); a confined unit cannot run here"
        )
    table = _ARCHES[name]
    ops = [_op(_LD_ABS_W, _ARCH), _op(_JEQ, table.audit, 1, 0), _op(_RET, _KILL_PROCESS), _op(_LD_ABS_W, _NR)]
    if name == "x86_64":
        ops += [_op(_JGE, _X32_BIT, 0, 1), _op(_RET, _KILL_PROCESS)]
    for nr, why in table.refused.items():
        ops += [_op(_JEQ, nr, 0, 1), _op(_RET, _ERRNO | why)]
    for nr, arg in table.modes.items():
        ops += _bits(nr, arg, _SET_IDS, errno.EPERM)
    for nr, arg in table.folder_modes.items():
        ops += _bits(nr, arg, _SET_UID, errno.EPERM)
    for nr, (arg, refused) in table.flags.items():
        ops += _bits(nr, arg, refused, errno.EPERM)
    ops.append(_op(_RET, _ALLOW))
    return b"".join(ops)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def lock_down(cwd: str | None = None) -> Callable[[], None]:
    """The child's last step before it runs the unit's command (subprocess's preexec_fn, which runs
    after the account's uid and groups are taken): everything is built here, in the parent, so the
    child only makes its system calls. `cwd`: the folder it enters first, as the account (subprocess's
    own `cwd` is entered as root, before the switch: through a link the account had put in its
    worktree's place, the unit would start in a folder it may not enter; the review of D-215). A
    failure raises there (subprocess.SubprocessError in the parent), and the run does not start."""
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
        if cwd is not None:
            os.chdir(cwd)
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, where, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
        del keep

    return child
