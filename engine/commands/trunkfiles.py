"""What the host reads from trunk, and what it runs only as trunk has it (design §24, D-310).

`trunk_files` reads files as trunk's commit holds them (a sensor's lockfiles, a command's
scripts); `not_trunks` says why the host does not run a decided argument vector (`notify`, a
command sensor) whose files in the workspace are not as trunk holds them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from engine.checkout.workspace import Workspace

MAX_LOCKFILE = 64 << 20  # bytes of one lockfile read from trunk (a blob of 2 MB can unpack to gigabytes)
STORES_FOLDER = ".regulator" + os.sep


def _named_paths(argv: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """(argument, path) for each path an argument vector may run or read: the program where a path
    names it, each later argument, an option's `=` value, and a module after `-m` (as its file and
    its folder). Text after `-c` is code no path check reads (docs/sensors.md says so)."""
    out: list[tuple[str, str]] = []
    for k, arg in enumerate(argv):
        if not arg or (k == 0 and os.sep not in arg):
            continue  # a program looked up in PATH
        if k > 0 and argv[k - 1] == "-m":
            module = arg.replace(".", os.sep)
            out += [(arg, module + ".py"), (arg, module)]
        elif arg.startswith("-"):
            if "=" in arg:
                out.append((arg, arg.split("=", 1)[1]))
        else:
            out.append((arg, arg))
    return out


def not_trunks(ws: Workspace, argv: tuple[str, ...] | list[str]) -> str | None:
    """Why the host does not run a decided argument vector (a command sensor's, `notify`), or None:
    every file it names inside the workspace (_named_paths) must be on trunk with the bytes it has
    on disk, and every folder it names or holds such a file (the workspace's own top aside) must be
    as trunk has it, nothing added (a script's sibling it sources, a package's `__main__.py`). An
    operator's review: the proposal's `! runs ./tools/notify.sh` was reviewed, then an edit of the
    script in the host's checkout, never committed, ran; an adversarial review then ran uncommitted
    code through a folder, `-m`, an option's value and a sourced file. What lies outside the
    workspace is the host's own (/usr/bin/…, a virtualenv), as the decision named it, and so is the
    stores' folder."""
    root = os.path.realpath(ws.root)
    files: dict[str, str] = {}  # path relative to the root -> the argument that names it
    folders: dict[str, str] = {}
    for arg, path in _named_paths(argv):
        named = os.path.join(root, path)  # an absolute path stays itself
        for place in (os.path.normpath(named), os.path.realpath(named)):  # the link, and where it leads
            relative = os.path.relpath(place, root)
            if not place.startswith(root + os.sep) or relative.startswith(STORES_FOLDER):
                continue
            if os.path.isfile(place) or os.path.islink(place):
                files.setdefault(relative, arg)
                if os.path.dirname(relative):
                    folders.setdefault(os.path.dirname(relative), arg)
            elif os.path.isdir(place):
                folders.setdefault(relative, arg)
    if not files and not folders:
        return None
    commit, on_trunk, _ = trunk_files(ws, list(files))
    if commit is None:
        return f"{next(iter({**files, **folders}.values()))}: no trunk to judge it by; nothing in the workspace is run"
    for relative, arg in files.items():
        try:
            on_disk: bytes | None = (Path(root) / relative).read_bytes()
        except OSError:
            on_disk = None
        if on_trunk.get(relative) is None or on_disk != on_trunk[relative]:
            said = "is not a file on trunk" if on_trunk.get(relative) is None else "differs from trunk's"
            return f"{arg}: {relative} {said} ({commit[:12]}); {_RUNS_TRUNKS}"
    if folders:
        from registry.gitcall import git_text

        listed = sorted(folders)
        changed = git_text(Path(root), "diff", "--name-only", "-z", commit, "--", *listed, timeout=60)
        added = git_text(
            Path(root), "ls-files", "-z", "--others", "--exclude-standard", "--", *listed, timeout=60
        )
        if changed.returncode or added.returncode:
            return f"{folders[listed[0]]}: git could not compare {listed[0]} with trunk; nothing is run"
        for said, found in (("differs from trunk's", changed.stdout), ("is not on trunk", added.stdout)):
            first = next((f for f in found.split("\0") if f), None)
            if first is not None:
                holder = next((d for d in listed if first.startswith(d + "/")), listed[0])
                return f"{folders[holder]}: {first} {said} ({commit[:12]}), in {holder}/; {_RUNS_TRUNKS}"
    return None


_RUNS_TRUNKS = (
    "the host runs only what trunk holds in the workspace (commit it to trunk, or name a program outside "
    "the workspace)"
)


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
