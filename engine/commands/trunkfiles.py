"""What the host reads from trunk, and what it runs only as trunk has it (design §24, D-310).

`trunk_files` reads files as trunk's commit holds them (a sensor's lockfiles, a command's
scripts); `not_trunks` says why the host does not run a decided argument vector (`notify`, a
command sensor) whose files in the workspace are not as trunk holds them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from pathlib import Path

from engine.checkout.workspace import Workspace

MAX_LOCKFILE = 64 << 20  # bytes of one lockfile read from trunk (a blob of 2 MB can unpack to gigabytes)
STORES_FOLDER = ".regulator" + os.sep


_MODULE = re.compile(r"-[A-Za-z]*m(.*)")  # python's -m, alone or at the end of a cluster (-um, -mX)


def _named_paths(argv: tuple[str, ...] | list[str]) -> tuple[list[tuple[str, str]], str | None]:
    """(argument, path) for each path an argument vector may run or read: the program where a path
    names it, each later argument, an option's `=` value; and the argument that makes Python read
    the workspace's top as a whole (`-m` in any form, -m X, -mX, -um X: Python puts the top first
    on sys.path and imports from anywhere under it), or None. Text after `-c` is code no path
    check reads (docs/sensors.md says so)."""
    out: list[tuple[str, str]] = []
    whole = None
    for k, arg in enumerate(argv):
        if not arg or (k == 0 and os.sep not in arg):
            continue  # a program looked up in PATH
        if k > 0 and not arg.startswith("--") and _MODULE.fullmatch(arg):
            whole = whole or arg
        elif arg.startswith("-"):
            if "=" in arg:
                out.append((arg, arg.split("=", 1)[1]))
        else:
            out.append((arg, arg))
    return out, whole


def not_trunks(ws: Workspace, argv: tuple[str, ...] | list[str]) -> str | None:
    """Why the host does not run a decided argument vector (a command sensor's, `notify`), or None:
    every file it names inside the workspace (_named_paths) must be on trunk with the bytes it has
    on disk, and every folder it names or holds such a file must hold exactly trunk's files, byte
    for byte (line endings aside), nothing added, ignored or not (a script's sibling it sources, a
    package's `__main__.py`); a vector that has Python read the workspace's top as a whole (`-m`,
    or the top itself named) is not run: what it may import is everything under the top. An
    operator's review: the proposal's `! runs ./tools/notify.sh` was reviewed, then an edit of the
    script in the host's checkout, never committed, ran; adversarial reviews then ran uncommitted
    code through a folder, `-m` in its forms, an option's value, a sourced file, a module or an
    ignored `.pyc` shadowing the standard library at the top, a folder whose own `.gitignore` hid
    it, and an `ident` attribute that made `git diff` call an edit clean. What lies outside the
    workspace is the host's own (/usr/bin/…, a virtualenv), as the decision named it, and so is
    the stores' folder."""
    root = os.path.realpath(ws.root)
    files: dict[str, str] = {}  # path relative to the root -> the argument that names it
    folders: dict[str, str] = {}
    named, whole = _named_paths(argv)
    for arg, path in named:
        joined = os.path.join(root, path)  # an absolute path stays itself
        for place in (os.path.normpath(joined), os.path.realpath(joined)):  # the link, and where it leads
            relative = os.path.relpath(place, root)
            if place == root:
                whole = whole or arg
                continue
            if not place.startswith(root + os.sep) or relative.startswith(STORES_FOLDER):
                continue
            if os.path.isfile(place) or os.path.islink(place):
                files.setdefault(relative, arg)
                if os.path.dirname(relative):
                    folders.setdefault(os.path.dirname(relative), arg)
            elif os.path.isdir(place):
                folders.setdefault(relative, arg)
    if whole is not None:
        return _whole(whole)
    if not files and not folders:
        return None
    what = next(iter({**files, **folders}.values()))
    commit, on_trunk, _ = trunk_files(ws, list(files))
    if commit is None:
        return f"{what}: no trunk to judge it by; nothing in the workspace is run"
    for relative, arg in files.items():
        if os.path.islink(os.path.join(root, relative)):
            return f"{arg}: {relative} is a link; name the file it leads to (the host runs files trunk holds)"
        try:
            on_disk: bytes | None = (Path(root) / relative).read_bytes()
        except OSError:
            on_disk = None
        if on_trunk.get(relative) is None:
            return (
                f"{arg}: {relative} is not a file on trunk ({commit[:12]}); {_RUNS_TRUNKS} (commit it to "
                "trunk, or name a program outside the workspace)"
            )
        if on_disk is None or not _same(on_disk, on_trunk[relative]):
            return (
                f"{arg}: {relative} differs from trunk's ({commit[:12]}); {_RUNS_TRUNKS} (commit the change "
                "to trunk, or undo it)"
            )
    for folder, arg in sorted(folders.items()):
        problem = _folder_differs(ws, commit, folder)
        if problem is not None:
            return f"{arg}: {problem} ({commit[:12]}), in {folder}/; {_RUNS_TRUNKS}"
    return None


def reads_whole_top(ws: Workspace, argv: tuple[str, ...] | list[str]) -> str | None:
    """Why an argument vector can never run (`-m` in any form, or the workspace's top named as a
    program), or None: asked of a proposal, so that one is refused at review, not at each run."""
    root = os.path.realpath(ws.root)
    named, whole = _named_paths(argv)
    whole = whole or next(
        (arg for arg, path in named if os.path.realpath(os.path.join(root, path)) == root), None
    )
    return None if whole is None else _whole(whole)


def _whole(arg: str) -> str:
    return (
        f"{arg}: Python would read the workspace's top as a whole (a module anywhere under it, ignored "
        "or not, may be imported), which no check can hold to trunk; name the script by its path instead "
        "(python3 tools/scan.py)"
    )


def _same(on_disk: bytes, on_trunk: bytes) -> bool:
    """The checkout's bytes are trunk's, or differ only in line endings (a CRLF checkout: an eol
    attribute or core.autocrlf; a re-check found every such clean checkout refused)."""
    return on_disk == on_trunk or on_disk.replace(b"\r\n", b"\n") == on_trunk.replace(b"\r\n", b"\n")


def _tree(ws: Workspace, commit: str, folder: str) -> dict[str, tuple[bytes, bytes]] | None:
    """path -> (mode, object id) of every file trunk holds under `folder`; None when git fails."""
    listed = _git(ws, ["--literal-pathspecs", "ls-tree", "-z", "--full-tree", "-r", commit, "--", folder])
    if listed.returncode != 0:
        return None
    out = {}
    for item in listed.stdout.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        if tab and len(fields) == 3:
            out[name.decode("utf-8", "surrogateescape")] = (fields[0], fields[2])
    return out


def _object_ids(ws: Workspace, data: bytes) -> set[bytes]:
    """The object ids git gives a blob of these bytes, as they are and with CRLF made LF, whatever
    attributes say (no filter, no ident)."""
    digest = hashlib.sha256 if _format(str(ws.root)) == "sha256" else hashlib.sha1
    forms = {data, data.replace(b"\r\n", b"\n")}
    return {digest(b"blob %d\0" % len(form) + form).hexdigest().encode() for form in forms}


@functools.lru_cache(maxsize=8)
def _format(root: str) -> str:
    """The repository's object format (sha1, or sha256), asked once per process."""
    from registry.gitcall import git

    done = git(Path(root), "rev-parse", "--show-object-format", timeout=60, filters=False)
    return done.stdout.decode().strip() if done.returncode == 0 else "sha1"


def _folder_differs(ws: Workspace, commit: str, folder: str) -> str | None:
    """Whether a folder of the checkout holds anything but trunk's files, byte for byte: a file
    added (ignored or not: a bytecode cache too, which Python may run instead of its source),
    changed, a link where trunk has none, or one of trunk's missing."""
    tree = _tree(ws, commit, folder)
    if tree is None:
        return f"git could not list {folder} on trunk"
    root = Path(os.path.realpath(ws.root))
    seen: set[str] = set()
    for here, dirs, names in os.walk(root / folder, followlinks=False):
        links = [d for d in dirs if os.path.islink(os.path.join(here, d))]
        for name in [*names, *links]:
            path = os.path.join(here, name)
            relative = os.path.relpath(path, root)
            seen.add(relative)
            entry = tree.get(relative)
            if entry is None:
                cache = "__pycache__" in relative.split(os.sep) or relative.endswith((".pyc", ".pyo"))
                return f"{relative} is not on trunk" + (
                    " (a bytecode cache: remove it; PYTHONDONTWRITEBYTECODE=1 when trying a tool by hand)"
                    if cache
                    else " (remove it, or commit it to trunk)"
                )
            link = os.path.islink(path)
            try:
                data = (
                    os.readlink(path).encode("utf-8", "surrogateescape") if link else Path(path).read_bytes()
                )
            except OSError:
                return f"{relative} cannot be read"
            if entry[1] not in _object_ids(ws, data) or (entry[0] == b"120000") != link:
                return f"{relative} differs from trunk's"
    missing = sorted(set(tree) - seen)
    return f"{missing[0]} is missing" if missing else None


_RUNS_TRUNKS = "the host runs only what trunk holds in the workspace"


def trunk_files(ws: Workspace, paths: list[str]) -> tuple[str | None, dict[str, bytes], list[str]]:
    """The commit trunk is at and each path's content there (`git ls-tree`, then one `git cat-file
    --batch` by object id); the problems, one line each (no trunk; a path not on trunk as a file)."""
    from engine.checkout.gitconfig import trunk_of
    from registry.history import no_trunk, trunk_commit

    trunk = trunk_of(ws)
    found = trunk_commit(ws.root, trunk)
    if found is None:
        return None, {}, [f"{no_trunk(ws.root, trunk)}: the lockfiles are read from trunk"]
    commit = found[1]
    # each path's entry first (its mode: a link or a folder is no lockfile), then the files by
    # their object ids: a path is never a line of git's batch protocol (an adversarial review: a
    # folder at a lockfile's path, and a file named with newlines inside it, made every later
    # lockfile read from the wrong bytes, or from bytes that file's name chose)
    listed = _git(
        ws, ["--literal-pathspecs", "ls-tree", "-z", "-t", "-l", "--full-tree", commit, "--", *paths]
    )
    if listed.returncode != 0:
        return commit, {}, ["git ls-tree failed reading the lockfiles from trunk"]
    entries: dict[bytes, tuple[bytes, bytes, bytes, bytes] | None] = {}  # None: named twice in its tree
    for item in listed.stdout.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        if tab and len(fields) == 4:  # mode, type, object, size ("-" for a folder)
            entries[name] = None if name in entries else (fields[0], fields[1], fields[2], fields[3])
    files: dict[str, bytes] = {}
    errors: list[str] = []
    wanted: list[tuple[str, bytes]] = []
    where = f"on trunk {trunk} ({commit[:12]})"
    for path in paths:
        name = path.encode("utf-8", "surrogateescape")
        entry = entries.get(name)
        if name not in entries:
            errors.append(f"lockfile {path} is not {where}")
        elif entry is None:  # git reads the first, fsck calls the tree broken: neither is guessed
            errors.append(
                f"lockfile {path} {where} is named twice in its folder (a malformed tree): not read"
            )
        elif entry[1] != b"blob" or entry[0] not in (b"100644", b"100755"):
            what = {b"tree": "a folder", b"commit": "a submodule"}.get(entry[1], "a link")
            errors.append(f"lockfile {path} {where} is {what}, not a file: not read")
        elif entry[3].isdigit() and int(entry[3]) > MAX_LOCKFILE:  # "-": its object is missing (below)
            errors.append(f"lockfile {path} {where} is over {MAX_LOCKFILE >> 20} MiB: not read")
        else:
            wanted.append((path, entry[2]))
    if not wanted:
        return commit, files, errors
    done = _git(ws, ["cat-file", "--batch"], b"".join(sha + b"\n" for _, sha in wanted))
    if done.returncode != 0:
        return commit, {}, [*errors, "git cat-file failed reading the lockfiles from trunk"]
    data, at = done.stdout, 0
    for path, sha in wanted:
        end = data.find(b"\n", at)
        header = data[at:end].split() if end >= 0 else []
        if len(header) == 2 and header == [sha, b"missing"]:  # not in this clone's objects: that file alone
            errors.append(
                f"lockfile {path} {where}: its content is missing from this clone's objects; not read"
            )
            at = end + 1
            continue
        if len(header) != 3 or header[0] != sha or header[1] != b"blob" or not header[2].isdigit():
            errors.append(f"git cat-file did not give lockfile {path} as trunk holds it: not read")
            break  # what follows cannot be placed either
        size = int(header[2])
        files[path] = data[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return commit, files, errors


def _git(ws: Workspace, args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Trunk's objects as stored (registry.gitcall): a replace ref a unit made cannot hide a pin."""
    from registry.gitcall import git

    return git(ws.root, *args, input=stdin, timeout=60, filters=False)
