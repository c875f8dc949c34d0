"""HEAD of one worktree for a long-lived caller: git is asked again only when a file git reads to
answer (the `.git` found walking up, HEAD, the branch's ref, packed-refs) is not as it was."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from registry.gitcall import git_text

_OBJECT = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?\n?")
_SYMBOLIC = re.compile(rb"ref: (refs/heads/[^\s]+)\n?")
# git finds its repository otherwise where these are set: then git is asked every time
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_INDEX_FILE")


def _identity(path: str) -> tuple[int, int, int, int] | None:
    """A file's identity: any rewrite (git writes a lock file, then renames it) changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _kind(path: str) -> object:
    """A `.git` on the way up: absent (None), a folder (True), or a file, by its identity."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return True
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _content(path: str | Path, follow: bool = True) -> bytes | None:
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)  # a FIFO: never waited on
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # not read: git is asked instead, and refuses it
        return os.read(fd, 512)
    except OSError:
        return None
    finally:
        os.close(fd)


def _foreign(where: Path) -> bool:
    """A worktree another account owns (a confined unit's): git refuses it ("dubious ownership")
    and must not be run in it, so its HEAD is read from the host's side (`_linked_head`)."""
    try:
        return os.stat(where).st_uid != os.geteuid()
    except OSError:
        return False


def _mine(path: Path, folder: bool) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    kind = stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)
    return kind and st.st_uid == os.geteuid()


def _names(back: str, where: Path) -> bool:
    """A worktree git dir's `gitdir` file names this worktree's `.git`, as written, no link on it
    followed (a `.git` its unit made a link, or a folder on a path another account may relink,
    would lead to another worktree's): `unit run` makes a confined unit's worktree at its resolved
    path (engine.host.folders.check_parents), which is what git writes there."""
    return os.path.normpath(back) == os.path.join(os.path.realpath(where), ".git")


def _linked_head(where: Path) -> str | None:
    """The HEAD of a linked worktree the host does not own, read from the repository's own
    metadata, never from git run in the worktree: its `.git` file (a file of its own, never a link:
    a link to another worktree's `.git` would be named back by that one's `gitdir`) names
    `<common>/worktrees/<name>`, which counts only when that folder and its files are the host's and
    its `gitdir` names this worktree's `.git` back, by the worktree's own path (the unit cannot point
    it at another's); a detached HEAD is the answer, a branch is resolved by git in the common
    directory (the host's). None where any of it does not hold, or cannot be read as a path."""
    try:
        return _linked_head_of(where)
    except (OSError, ValueError):  # ValueError: a NUL in a path the unit wrote
        return None


def _linked_head_of(where: Path) -> str | None:
    text = _content(where / ".git", follow=False) or b""
    if not text.startswith(b"gitdir:") or b"\0" in text:
        return None
    gitdir = Path(os.path.realpath(where / os.fsdecode(text[len(b"gitdir:") :].strip())))
    common_text = _content(gitdir / "commondir")
    back = _content(gitdir / "gitdir")
    if common_text is None or back is None:
        return None
    common = Path(os.path.realpath(gitdir / os.fsdecode(common_text.strip())))
    if gitdir.parent != common / "worktrees" or not all(
        _mine(path, folder)
        for path, folder in (
            (common, True),
            (gitdir, True),
            (gitdir / "gitdir", False),
            (gitdir / "HEAD", False),
        )
    ):
        return None
    if b"\0" in back or not _names(os.fsdecode(back.strip()), where):
        return None
    head = _content(gitdir / "HEAD") or b""
    if _OBJECT.fullmatch(head):
        return head.decode().strip()
    symbolic = _SYMBOLIC.fullmatch(head)
    if symbolic is None:
        return None
    done = git_text(
        common,
        f"--git-dir={common}",
        "rev-parse",
        "--verify",
        "-q",
        f"{os.fsdecode(symbolic.group(1))}^{{commit}}",
        timeout=10,
        filters=False,
    )
    found = done.stdout.strip()
    return found if done.returncode == 0 and _OBJECT.fullmatch(found.encode()) else None


class Head:
    """`revision()` answers what `git -C where rev-parse HEAD` answers, from memory while the
    files that decide it are unchanged. It remembers only a layout it reads itself and git
    confirms: a `.git` folder or file found walking up from `where`, HEAD holding a branch or an
    object name, the branch a loose ref holding an object name or absent (then packed-refs).
    Anything else (a reftable, a symbolic ref pointing elsewhere, git's repository variables
    set) and git is asked on every call, as before."""

    def __init__(self, where: Path) -> None:
        self.where = Path(where)
        # (each .git looked at and the HEAD beside it, git dir's HEAD, common dir); None: ask git
        self._layout: tuple[tuple[tuple[str, str], ...], str, str] | None = None
        self._key: tuple | None = None
        self._revision: str | None = None

    def revision(self) -> str | None:
        if _foreign(self.where):
            return _linked_head(self.where)
        key = self._fingerprint(self._layout)
        if key is not None and key == self._key:
            return self._revision
        try:
            layout = self._walk()
        except (OSError, ValueError):  # ValueError: a NUL in a path a `.git` file names
            layout = None  # git is asked, and says what it makes of it
        key = self._fingerprint(layout)  # taken before git answers: a move meanwhile is seen next call
        done = git_text(
            self.where,
            "rev-parse",
            "--absolute-git-dir",
            "--git-common-dir",
            "HEAD",
            timeout=10,
            filters=False,
        )
        if done.returncode == 127:  # git could not be run, or did not answer in time
            self._layout, self._key, self._revision = None, None, None
            return None
        said = done.stdout.splitlines()
        if layout is not None and (
            len(said) < 2
            or str(Path(said[0]).resolve() / "HEAD") != layout[1]
            or str((self.where / said[1]).resolve()) != layout[2]
            or os.path.exists(os.path.join(layout[2], "reftable"))
        ):
            layout = key = None  # not the layout read here: git is asked every time
        self._layout, self._key = layout, key
        self._revision = said[2].strip() or None if done.returncode == 0 and len(said) == 3 else None
        return self._revision

    def _walk(self) -> tuple[tuple[tuple[str, str], ...], str, str] | None:
        """Where git would find this worktree's repository, walking up as git does; its HEAD and
        (for a linked worktree, from its `commondir`) where its refs are."""
        if any(os.environ.get(name) for name in _GIT_ENV):
            return None
        looked: list[Path] = []
        for folder in (self.where, *self.where.parents):
            dotgit = folder / ".git"
            looked.append(dotgit)
            if dotgit.is_dir():
                gitdir = dotgit.resolve()
                break
            if dotgit.is_file():
                text = _content(dotgit) or b""
                if not text.startswith(b"gitdir:"):
                    return None
                gitdir = (folder / os.fsdecode(text[len(b"gitdir:") :].strip())).resolve()
                break
            if (folder / "HEAD").exists():  # maybe a bare repository: git's business
                return None
        else:
            return None
        common = gitdir
        shared = _content(gitdir / "commondir")
        if shared is not None:
            common = (gitdir / os.fsdecode(shared.strip())).resolve()
        walked = tuple((str(p), str(p.parent / "HEAD")) for p in looked)
        return walked, str(gitdir / "HEAD"), str(common)

    @staticmethod
    def _fingerprint(layout: tuple[tuple[tuple[str, str], ...], str, str] | None) -> tuple | None:
        if layout is None:
            return None
        looked, head_path, common = layout
        # each folder walked: its .git (a file by identity) and whether it holds a HEAD (a bare
        # repository git would stop at); a repository made on the way is a change
        walk = tuple((_kind(dotgit), os.path.exists(beside)) for dotgit, beside in looked)
        head = _content(head_path)
        if head is None:
            return None
        if _OBJECT.fullmatch(head):
            return walk, head
        symbolic = _SYMBOLIC.fullmatch(head)
        if symbolic is None:
            return None
        ref = os.fsdecode(symbolic.group(1))
        if ".." in ref.split("/"):
            return None
        loose = _content(os.path.join(common, ref))
        if loose is not None:
            return (walk, head, loose) if _OBJECT.fullmatch(loose) else None
        return walk, head, None, _identity(os.path.join(common, "packed-refs"))
