"""A confined unit's folders (design §23, D-211): where they go, whether no other account can
redirect them, and handing them over and back without ever following a link a unit or another
account may have put on the way. Every walk of a tree a unit has held opens each folder relative to
its parent with O_NOFOLLOW | O_DIRECTORY | O_NONBLOCK (a link, a FIFO or a device is never opened
as a folder) and changes each entry relative to its folder, never by a path."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, NoReturn

from engine.base.errors import Refused

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_DEPTH = 256  # deeper than this, a walk leaves the rest as it is
SET_IDS = stat.S_ISUID | stat.S_ISGID


def folder_of(unit: str) -> str:
    """A unit's folder under `.worktrees/` and `.worktrees/.leases/`: its id, the `/` of a stream
    part written `+` (no unit id holds one), so that no unit's folder is inside another's. `x`'s
    worktree is the confined `x`'s own: were `x/y`'s made inside it, `x` could swap it for a link
    while the host makes it, and the host would check files out and hand them over there (D-211)."""
    return unit.replace("/", "+")


def check_owner(worktree: Path, uid: int | None) -> None:
    """An existing worktree is the confined account's (`uid`) that runs in it now, or, for an
    unconfined run, the host's. Refused (exit 3) otherwise, before anything is written: a confined
    unit could not write in a folder of the host's (one made for an unconfined run, or named by
    `--worktree`) and would report `done` having done nothing, nor work in another account's (an
    earlier confined run's, under another `--user`); an unconfined one would work, as the host,
    in a folder another account can change (D-215)."""
    try:
        st = os.stat(worktree)
    except OSError:
        return  # none yet: the host makes it
    owner = st.st_uid
    fresh = f"remove it (`rm -rf {worktree} && git worktree prune`) for a fresh one"
    if uid is None and owner in (0, os.geteuid()):
        if others_may_write(st) or acl(worktree, st):  # the host works there: no one else writes in it
            raise Refused(
                f"the worktree {worktree} is writable by other accounts, which could change what the host "
                f"works on (`chmod go-w {worktree}`, and `getfacl {worktree}` for an ACL), or {fresh}"
            )
        return
    if owner == uid:
        return
    if owner in (0, os.geteuid()):
        raise Refused(
            f"the worktree {worktree} is the host's (made for an unconfined run, or a folder you named): "
            f"a confined unit could not write in it; {fresh}, or run the unit unconfined"
        )
    try:
        whose = pwd.getpwuid(owner).pw_name
        again = f"run the unit with `--user {whose}`, or "
    except KeyError:
        again, whose = "", f"uid {owner} (an account no longer on this host)"
    raise Refused(f"the worktree {worktree} is {whose}'s (an earlier confined run's): {again}{fresh}")


_ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = 0x02, 0x04, 0x08, 0x10, 0x20
_ACL_ENTRY = struct.Struct("<HHI")  # tag, permissions, uid or gid (after a 4-byte version)


def private_group(gid: int, owner: int) -> bool:
    """A user private group (Debian, Ubuntu and Fedora make one for each user, and umask 002 goes
    with it): named as its owner, the owner's primary group, the only group with its gid, no member
    but the owner in /etc/group or /etc/gshadow, no group password, and no other account's primary
    group. Its write bit lets no one else in. Anything unknown (gshadow unreadable, an account
    missing) counts as not private (the review of D-217: a second group sharing the gid, or a
    member in gshadow alone, let another account in)."""
    try:
        user = pwd.getpwuid(owner)
        group = grp.getgrgid(gid)
        same = [g for g in grp.getgrall() if g.gr_gid == gid]
        others = [p for p in pwd.getpwall() if p.pw_gid == gid and p.pw_uid != owner]
    except (KeyError, OSError):
        return False
    if group.gr_name != user.pw_name or user.pw_gid != gid or len(same) != 1 or others:
        return False
    if any(member != user.pw_name for member in group.gr_mem):
        return False
    return _gshadow_closed(group.gr_name, user.pw_name)


def _gshadow_closed(name: str, owner: str) -> bool:
    """/etc/gshadow lets no one but `owner` into the group: no member but them, no password."""
    try:
        text = Path("/etc/gshadow").read_text(errors="replace")
    except FileNotFoundError:
        return True  # none: /etc/group says it all
    except OSError:
        return False  # not readable here (not root): unknown
    for line in text.splitlines():
        parts = line.split(":")
        if parts[0] == name and len(parts) >= 4:
            members = [m for m in parts[3].split(",") if m]
            return parts[1] in ("", "!", "*", "!!", "!*") and all(m == owner for m in members)
    return True


def others_may_write(st: os.stat_result) -> bool:
    """Another account may write in a folder with this mode: others' write bit, or the group's
    where the group is not the owner's alone."""
    return bool(st.st_mode & 0o002) or bool(st.st_mode & 0o020) and not private_group(st.st_gid, st.st_uid)


def acl(folder: Path, st: os.stat_result) -> bool:
    """A POSIX ACL on the folder lets another account write there (its access ACL), or in what is
    made inside it (its default ACL), whatever its mode says: a named user or group, or the owning
    group where it is not the owner's alone, with write under the mask (and others', for a default
    ACL). An ACL that cannot be read as one counts as letting them."""
    for name in ("system.posix_acl_access", "system.posix_acl_default"):
        try:
            raw = os.getxattr(folder, name, follow_symlinks=False)
        except OSError:  # ENODATA: none; ENOTSUP: a file system without ACLs
            continue
        if len(raw) < 4 or (len(raw) - 4) % _ACL_ENTRY.size:
            return True
        entries = [_ACL_ENTRY.unpack_from(raw, at) for at in range(4, len(raw), _ACL_ENTRY.size)]
        mask = next((perm for tag, perm, _ in entries if tag == _ACL_MASK), 0o7)
        for tag, perm, who in entries:
            if not perm & 0o2:
                continue
            if tag == _ACL_USER and who != st.st_uid and mask & 0o2:
                return True
            if tag == _ACL_GROUP and mask & 0o2 and not private_group(who, st.st_uid):
                return True
            if tag == _ACL_GROUP_OBJ and mask & 0o2 and not private_group(st.st_gid, st.st_uid):
                return True
            if tag == _ACL_OTHER and name.endswith("default"):
                return True
    return False


class Step(NamedTuple):
    """One entry of a way walked from / as the kernel walks it: the folder it is in (every link
    before it resolved) and that folder's stat, the entry and its own (None: not there), and the
    names still to walk after it."""

    folder: Path
    up: os.stat_result
    entry: Path
    st: os.stat_result | None
    rest: list[str]


class TooManyLinks(Exception):
    """More than 40 links on one way (a loop, as the kernel's ELOOP)."""


def walk_way(path: Path) -> Iterator[Step]:
    """`path` walked from / entry by entry as the kernel walks it, each link followed where it
    stands after the caller has judged it (its Step comes first), `.` passed over and `..` taken as
    the resolved folder's parent; ends at the first entry that is not there. The one walk of
    `unit run`'s worktree (`check_parents`) and serve's socket (engine.host.instance): each judges
    its Steps."""
    todo = list(path.absolute().parts[1:])
    current, links = Path("/"), 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        entry = current / name
        up = os.lstat(current)
        try:
            st: os.stat_result | None = os.lstat(entry)
        except FileNotFoundError:
            st = None
        yield Step(current, up, entry, st, list(todo))
        if st is None:
            return
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > 40:
                raise TooManyLinks
            target = Path(os.readlink(entry))
            if target.is_absolute():
                current = Path("/")
            todo = [*target.parts[1 if target.is_absolute() else 0 :], *todo]
            continue
        current = entry


def check_parents(worktree: Path, named: bool = True) -> Path:
    """A confined unit's worktree is made and handed over by the host (root): no other account may
    be able to put a link where it goes meanwhile, nor write in what the host makes (D-211); an
    unconfined unit's is where the host itself works (D-215).
    The path is walked from `/` as the kernel would, a link followed where it stands: every entry
    on the way (a link included) must be the host's or root's, lie in a folder that carries no ACL
    and lets no other account replace it (not writable by group or others, or sticky, as /tmp is),
    and the first that does not exist yet (the host makes it) in a folder no other account may
    write to at all (in /tmp another account could make it first). Returns the path with every
    link resolved, which the run uses from then on: no link is walked again."""
    mine = {0, os.geteuid()}

    def refuse(why: str) -> NoReturn:
        what = f"--worktree {worktree}" if named else f"the unit's worktree {worktree}"
        raise Refused(f"{what}: {why}; give a folder under one of yours (`--worktree DIR`)")

    current = Path("/")
    try:
        for step in walk_way(worktree):
            entry, st, up, current = step.entry, step.st, step.up, step.folder
            if st is None:
                if others_may_write(up) or acl(current, up):
                    refuse(
                        f"{current} is writable by other accounts, which could make {entry} first (a link; "
                        f"`chmod go-w {current}`, and `getfacl {current}` for an ACL)"
                    )
                return entry.joinpath(*step.rest)
            last = not step.rest
            if st.st_uid not in mine and (stat.S_ISLNK(st.st_mode) or not last):
                refuse(f"{entry} belongs to another account (uid {st.st_uid}), which could swap the worktree")
            if others_may_write(up) and not up.st_mode & stat.S_ISVTX or acl(current, up):
                refuse(
                    f"{current} is writable by other accounts, which could replace {entry} (`chmod go-w "
                    f"{current}`, and `getfacl {current}` for an ACL)"
                )
            if not stat.S_ISLNK(st.st_mode):
                if not last and not stat.S_ISDIR(st.st_mode):
                    refuse(f"{entry} is not a folder")
                current = entry
    except TooManyLinks:
        refuse("too many links")
    except (OSError, ValueError) as exc:
        refuse(f"it cannot be looked at ({exc})")
    return current


def walk_up(top: Path, each: Callable[[int, str, os.stat_result], None]) -> None:
    """Every entry below `top` (a folder, never a link: Refused otherwise), from the bottom up:
    `each(folder_fd, name, its lstat)` for an entry only after everything inside it. A folder is
    opened relative to its parent's descriptor with O_NOFOLLOW | O_DIRECTORY | O_NONBLOCK, and
    kept only if it is the folder the listing saw (device and inode): swapped meanwhile for a link,
    a FIFO or another folder, it is skipped. Python's own os.fwalk opens a folder without them, so a
    FIFO put there would hang it."""
    try:
        fd = os.open(top, _DIR_FLAGS)
    except OSError:
        raise Refused(f"{top} is not a folder of its own (a link?); remove it") from None
    try:
        _walk(fd, each, 0)
    finally:
        os.close(fd)


def _walk(fd: int, each: Callable[[int, str, os.stat_result], None], depth: int) -> None:
    entries = []
    try:
        with os.scandir(fd) as listing:
            for entry in listing:
                with contextlib.suppress(OSError):  # gone meanwhile: that entry alone is skipped
                    entries.append((entry.name, entry.stat(follow_symlinks=False)))
    except OSError:
        return
    for name, st in entries:
        if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                seen = os.fstat(sub)
                if (seen.st_dev, seen.st_ino) != (st.st_dev, st.st_ino):
                    continue
                _walk(sub, each, depth + 1)
            finally:
                os.close(sub)
        each(fd, name, st)


def give_worktree(worktree: Path, uid: int, gid: int) -> None:
    """The worktree's files to the confined account, so it can work in them. From the bottom up
    (`walk_up`): a folder is handed over only once everything in it is, so while root walks, every
    folder above what it touches is still root's and no process of the account (a set-user-id file
    it left somewhere, which anyone may start) can move an entry under it; each entry is chowned
    relative to its folder, a link as a link. A folder loses a set-group-id bit it inherited from
    where the workspace lies: the unit cannot pass the bit back (engine.host.confine), so `chmod u+w`
    of such a folder, or copying it with its mode, would fail in its hands."""
    if worktree.is_symlink() or not worktree.is_dir():
        raise Refused(f"the unit's worktree {worktree} is not the folder the host made; remove it")

    def give(fd: int, name: str, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISGID:
            with contextlib.suppress(OSError):
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                try:
                    os.fchmod(sub, stat.S_IMODE(os.fstat(sub).st_mode) & ~stat.S_ISGID)
                finally:
                    os.close(sub)
        with contextlib.suppress(OSError):
            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)

    walk_up(worktree, give)
    fd = os.open(worktree, _DIR_FLAGS)
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, 0o700)  # the account's alone: no other account passes into it
    finally:
        os.close(fd)


def close_worktree(worktree: Path, uid: int) -> None:
    """When a confined run ends, before its account's processes are killed: the worktree it was
    given (its top folder the account's) is made 0700 again, so that no other account can pass
    into it to start a set-user-id file the unit left there, at any depth, while the host strips
    them or at any time after. A folder the host did not give the account is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(worktree, _DIR_FLAGS)
        try:
            if os.fstat(fd).st_uid == uid:
                os.fchmod(fd, 0o700)
        finally:
            os.close(fd)


def strip_set_ids(worktree: Path, uid: int) -> list[str]:
    """When a confined run ends, its worktree closed (`close_worktree`): no file of it keeps a
    set-user-id or set-group-id bit, which would let anyone the worktree is opened to later run code
    as the account. Only a worktree the account was given (its top folder the account's: never a
    folder of root's or another's that `--worktree` named). Each such file is opened relative to its
    folder (O_NOFOLLOW, O_NONBLOCK: never a link, never waited on) and changed through that
    descriptor. Files the account left outside its worktree are not looked for (docs/security.md:
    mount such folders nosuid).

    Only the account's own files are changed: a set-id file of another's in the worktree is a hard
    link the account made to it (where fs.protected_hardlinks is 0), and stripping it would change
    that file everywhere, /usr/bin/sudo's bit taken by a unit (an adversarial review). Its names
    are returned, left as they are, for the run to say."""
    try:
        top = os.lstat(worktree)
    except OSError:
        return []
    if not stat.S_ISDIR(top.st_mode) or top.st_uid != uid:
        return []
    others: list[str] = []

    def strip(fd: int, name: str, st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode) or not st.st_mode & SET_IDS:
            return
        with contextlib.suppress(OSError):
            handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            try:
                now = os.fstat(handle)
                if stat.S_ISREG(now.st_mode) and now.st_uid != uid:
                    others.append(_path_in(worktree, fd, name))
                elif stat.S_ISREG(now.st_mode):
                    os.fchmod(handle, stat.S_IMODE(now.st_mode) & ~SET_IDS)
            finally:
                os.close(handle)

    with contextlib.suppress(Refused):
        walk_up(worktree, strip)
    return others


def _path_in(top: Path, fd: int, name: str) -> str:
    """`name` in the folder open as `fd`, as a path below `top` (the kernel's name of the folder:
    an adversarial review found a bare name, with the folder it was in left for the operator to
    find among many)."""
    try:
        folder = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return name
    return os.path.relpath(os.path.join(folder, name), top)


def remove_tree(top: Path) -> None:
    """A lease folder, emptied and removed when its run ends: from the bottom up, each entry
    removed relative to its folder, never through a link (shutil.rmtree opens a folder without
    O_NOFOLLOW or O_NONBLOCK)."""

    def remove(fd: int, name: str, st: os.stat_result) -> None:
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)

    with contextlib.suppress(Refused, OSError):
        walk_up(top, remove)
        os.rmdir(top)
