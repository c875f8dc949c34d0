"""Trunk's history of the findings since the baseline, walked once (design §26): each load-bearing
change authorized or not, and the holds trunk keeps.

The walk follows trunk's first-parent line, oldest first, from the baseline commit (`regulator
init`'s, trailer `Regulator-Decision: baseline`; the root when there is none). A commit on that
line brings each change to trunk: the commit itself, or a merge or squash. A change to a
finding's load-bearing fields (resolved, affects, ack), or one that would lift a hold, counts when
the commit that brought it carries a valid `Authorized-by:` (signed by that person's key, or,
where signatures are not required, claimed) or, for a merge, when the newest commit of the merged
side that touched the entry, holding the same fields, does. Otherwise it is `unauthorized-change`
and lifts nothing: the units held before stay held (a hold can be added by anyone, never removed
without the grant). A later authorized commit touching the entry decides it afresh.

A version that is no valid finding (bad YAML, a schema error) changes nothing: the entry keeps
what it held. A deleted entry keeps its hold (deletion is `tombstone-not-delete`, never a release).

A merge is judged against the lines it merges too (D-228): where a merged (non-first) parent's
version of a finding holds units the merge's result does not, those units stay held unless the merge
itself, or a commit of the merge's own line since that parent (one that contains the parent's last
change of the entry), lifted them with authorization. So trunk's own line, merged into a unit's
branch as its *second* parent and fast-forwarded onto trunk, keeps what it held.

Whatever the history's length: a handful of git calls (rev-parse, the baseline, one `git log` over
findings/, one `git rev-list` of the line, one `git diff-tree --stdin` of the line's merges against
their merged parents, one `cat-file --batch` of the versions and commits), plus a `git log` or two
per merge whose own commit does not authorize a change it brought. Lint gives the walk the history
pass it reads anyway (registry.history.trunk_log), and the walk follows that instead of its own
`git log` and `git rev-list`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from registry.entries import LOAD_BEARING, Entry, entry_or_none, id_of
from registry.gitcall import branch_name
from registry.gitcall import read as _git

if TYPE_CHECKING:
    from registry.history import Change, TrunkLog

BASELINE_GREP = "^Regulator-Decision: baseline$"

FOLDER = "findings"

# (commit sha, author email, message, path) -> (person or None, how or why not)
Authorize = Callable[[str, str, str], tuple[str | None, str]]


class TrunkChange(msgspec.Struct, frozen=True):
    """One load-bearing change a trunk commit brought to a finding, and whether it counts."""

    path: str
    commit: str
    subject: str
    changed: tuple[str, ...]  # the load-bearing fields that differ from the version before
    lifts: tuple[str, ...]  # units it would have released
    who: str | None  # the person whose authorization covers it (None: unauthorized)
    how: str  # "authorized (signed) by ..." / "authorized (claimed) by ...", or why not
    ack_removed: bool = False
    superseded: str = ""  # a later authorized commit that decided the entry afresh (sha)

    @property
    def undecided(self) -> bool:
        """Nobody authorized it and no later authorized commit decided the entry afresh: lint's
        `unauthorized-change` on trunk, which a person's signed ack or resolve would end."""
        return self.who is None and not self.superseded


class TrunkFindings(msgspec.Struct):
    available: bool
    why: str = ""
    tip: str = ""
    baseline: str = ""  # the commit the walk starts after ("" : from the root)
    holds: dict[str, frozenset[str]] = msgspec.field(
        default_factory=dict
    )  # finding path -> units trunk holds
    changes: list[TrunkChange] = msgspec.field(default_factory=list)  # oldest first
    missing: int = 0  # objects trunk's history names that git could not give (a damaged repository)

    def ids(self) -> dict[str, str]:
        """finding path -> its id (the file name's: the content may be unreadable)."""
        return {path: id_of(path) for path in self.holds}


def unavailable(why: str) -> TrunkFindings:
    return TrunkFindings(available=False, why=why)


def held_units(entry: Entry | None) -> frozenset[str]:
    """The units a valid finding holds: those it affects, while it is not resolved."""
    if entry is None or entry.fields.get("resolved") is True:
        return frozenset()
    return named_units(entry)


def named_units(entry: Entry | None) -> frozenset[str]:
    """The units a valid finding affects, resolved or not."""
    if entry is None:
        return frozenset()
    return frozenset(u for u in entry.fields.get("affects") or [] if isinstance(u, str))


def load_bearing(entry: Entry) -> dict:
    return {k: entry.fields.get(k) for k in LOAD_BEARING}


def _finding_path(path: str) -> bool:
    folder, _, name = path.partition("/")
    return folder == FOLDER and name.endswith(".md") and "/" not in name


def _commit_fields(raw: bytes | None) -> tuple[str, str]:
    """(author email, message) of a raw commit object."""
    from registry.history import AUTHOR

    if raw is None:
        return "", ""
    head, _, message = raw.partition(b"\n\n")
    author = AUTHOR.search(head)
    email = author.group(1).decode("utf-8", errors="replace") if author else ""
    return email, message.decode("utf-8", errors="replace")


def baseline_of(root: Path, ref: str) -> str:
    """The oldest commit on trunk's first-parent line carrying init's baseline trailer, or ""."""
    done = _git(
        root, "rev-list", "--first-parent", "--reverse", f"--grep={BASELINE_GREP}", "--extended-regexp", ref,
    )  # fmt: skip
    if done.returncode != 0:
        return ""
    first = done.stdout.split(b"\n", 1)[0].strip()
    return first.decode() if first else ""


def locate(root: Path, trunk: str) -> tuple[str, str] | TrunkFindings:
    """(trunk's ref, its commit), or why trunk's history cannot be walked here."""
    if not branch_name(trunk):  # never revision syntax: "trunk" is a branch, not any commit
        from registry.history import no_trunk_branch

        return unavailable(no_trunk_branch(trunk))
    # the common case in one call: not shallow, and the local trunk branch's commit
    local = f"refs/heads/{trunk}"
    said = _git(root, "rev-parse", "--is-shallow-repository", f"{local}^{{commit}}", "--")
    answer = said.stdout.split()[:2] if said.stdout.split()[2:] == [b"--"] else []
    if said.returncode == 0 and len(answer) == 2 and answer[0] == b"false":
        return local, answer[1].decode()
    shallow = _git(root, "rev-parse", "--is-shallow-repository")
    if shallow.returncode != 0:
        return unavailable("not a git repository")
    if shallow.stdout.strip() == b"true":
        return unavailable("the clone is shallow")
    from registry.history import no_trunk_branch, resolve_trunk

    ref = resolve_trunk(root, trunk)
    if ref is None:
        return unavailable(no_trunk_branch(trunk))
    tip = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").stdout.decode().strip()
    return (ref, tip) if tip else unavailable(f"trunk {ref!r} names no commit")


def walk(root: Path, trunk: str, authorize: Authorize) -> TrunkFindings:
    """Walk trunk's findings since the baseline; `authorize(sha, email, message)` says whether a
    commit's trailers and signature authorize a change (engine.commands.registers gives it the policy)."""
    where = locate(root, trunk)
    return where if isinstance(where, TrunkFindings) else walk_at(root, where[1], authorize)


def walk_at(
    root: Path, tip: str, authorize: Authorize, shared: Callable[[], TrunkLog | None] | None = None
) -> TrunkFindings:
    """The walk of trunk's history up to the commit `tip` (locate's): a function of that commit's
    history and of `authorize` alone (engine.read.trunkcache keeps it on that). `shared()`, when
    given, is trunk's one history pass that lint reads anyway (registry.history.trunk_log): the
    walk follows its first-parent line instead of running a `git log` of its own, where the pass
    was read at this very commit (D-221)."""
    from registry.history import ZERO, cat_batch  # the walk's own: a kept walk needs none

    base = baseline_of(root, tip)  # the commit, not the ref: a ref moved meanwhile changes nothing
    found = TrunkFindings(available=True, tip=tip, baseline=base)
    log = shared() if shared is not None else None
    order = _order(log, base) if log is not None and log.tip == tip else None
    if log is not None and order is not None:
        commits: Line | None = _line(log, order)
    else:
        commits, order = _own_log(root, base, tip), _own_order(root, base, tip)
    sides = _sides(root, order) if order is not None else None
    if commits is None or order is None or sides is None:
        return unavailable("git could not read trunk's history")
    start = _start(root, base)
    if start is None:  # the baseline's findings could not be listed: what they held is unknown
        start, found.missing = {}, 1
    blobs = {c.new for _, _, changes in commits for c in changes if c.new != ZERO}
    blobs |= {
        b for diffs in sides.values() for _, changes in diffs for c in changes for b in (c.new, *c.parents)
    }
    blobs.discard(ZERO)
    shas = [sha for sha, _, _ in commits] + sorted(set(sides) - {sha for sha, _, _ in commits})
    objects = cat_batch(root, shas + sorted(blobs | set(start.values())))
    found.missing += sum(1 for data in objects.values() if data is None)
    entries: dict[str, Entry | None] = {}

    def entry(path: str, blob: str) -> Entry | None:
        key = f"{path}\0{blob}"
        if key not in entries:
            entries[key] = _version(path, objects.get(blob))
        return entries[key]

    last: dict[str, dict] = {}  # path -> load-bearing fields of its last valid version
    holds: dict[str, frozenset[str]] = {}
    pending: dict[str, list[int]] = {}  # path -> indexes of unauthorized changes not yet decided afresh
    # path -> the trunk commit that last set the entry with authority (its arrival, the baseline, or an
    # authorized change): a merged side's authorization counts only when made after it (D-225)
    decided: dict[str, str] = {}
    for path, blob in start.items():
        first = entry(path, blob)
        if first is not None:
            last[path], holds[path] = load_bearing(first), held_units(first)
            decided[path] = base
    changed_at = {sha: (parents, changes) for sha, parents, changes in commits}
    for sha, parents, changes in _along(order, changed_at):
        email, message = _commit_fields(objects.get(sha))
        subject = message.split("\n", 1)[0]
        verdict: tuple[str | None, str] | None = None
        for change in changes:
            path = change.path
            if change.new == ZERO:
                continue  # deleted: the hold stays (tombstone-not-delete names the deletion)
            now = entry(path, change.new)
            if now is None:
                continue  # no valid finding: it keeps what it held
            fields, units = load_bearing(now), held_units(now)
            before, kept = last.get(path), holds.get(path, frozenset())
            changed = tuple(
                k for k in LOAD_BEARING if (before or {}).get(k, "" if k == "ack" else None) != fields[k]
            )
            if before is None:  # a new entry: only an ack needs authorization on arrival
                changed = ("ack",) if (fields["ack"] or "").strip() else ()
            # a version with the same fields as the last lifts nothing anew (what an earlier
            # unauthorized change failed to lift stays held, and is that change's error)
            lifts = tuple(sorted(kept - units)) if changed or before is None else ()
            if lifts and not changed:  # an entry deleted and brought back holding less
                changed = ("affects",)
            if not changed and not lifts and not pending.get(path):
                last[path], holds[path] = fields, kept | units
                if before is None:
                    decided[path] = sha
                continue
            if verdict is None:
                verdict = authorize(sha, email, message)
            who, how = verdict
            if who is None and len(parents) > 1 and (changed or lifts or pending.get(path)):
                who, how = _from_side(
                    root, sha, parents[0], path, fields, authorize, how, decided.get(path, "")
                )
            last[path] = fields
            if before is None or who is not None:
                decided[path] = sha
            if who is not None:
                holds[path] = units
                for k in pending.pop(path, []):
                    found.changes[k] = _superseded(found.changes[k], sha)
                if not changed and not lifts:
                    continue
            else:
                holds[path] = kept | units
                if not changed and not lifts:
                    continue
                pending.setdefault(path, []).append(len(found.changes))
            ack_removed = bool((before or {}).get("ack") or "") and not (fields["ack"] or "").strip()
            found.changes.append(
                TrunkChange(path, sha, subject, changed, lifts, who, how, ack_removed=ack_removed)
            )
        # a merge is judged against the lines it merges too: what a merged parent held, the merge
        # cannot drop unauthorized (trunk's own line merged in as a second parent and fast-forwarded
        # onto trunk: D-228)
        for parent, diffs in sides.get(sha, ()):
            for change in diffs:
                side = entry(change.path, change.parents[0]) if change.parents[0] != ZERO else None
                kept = holds.get(change.path, frozenset())
                extra = held_units(side) - kept
                if side is None or not extra:
                    continue
                if verdict is None:
                    verdict = authorize(sha, email, message)
                who, how = verdict
                if who is None:
                    held = ", ".join(sorted(extra))
                    how = (
                        f"{how}; {parent[:10]}, the parent it merges, held {held} there and no authorized "
                        "commit on the merge's own line lifted it since (a merge that drops what the line "
                        "it merges holds lifts nothing)"
                    )
                    # an entry the merge drops that its own line never held: no commit of that line can
                    # have lifted it, and no git is asked (a unit's thousands of such merges cost
                    # nothing: adversarial review of D-232)
                    if change.path in last or change.new != ZERO:
                        who, how = _lifted_since(root, sha, parent, change.path, extra, authorize, how)
                if who is not None:
                    continue
                mine = entry(change.path, change.new) if change.new != ZERO else None
                before_fields, now_fields = load_bearing(side), load_bearing(mine) if mine is not None else {}
                changed = tuple(
                    k for k in LOAD_BEARING if before_fields[k] != now_fields.get(k, before_fields[k])
                )
                holds[change.path] = kept | extra
                pending.setdefault(change.path, []).append(len(found.changes))
                found.changes.append(
                    TrunkChange(
                        change.path, sha, subject, changed or ("affects",), tuple(sorted(extra)), None, how
                    )
                )
    found.holds = holds
    return found


Order = list[tuple[str, list[str]]]  # trunk's first-parent line (base, tip], oldest first: (commit, parents)
Sides = dict[str, list[tuple[str, list["Change"]]]]  # merge -> (a merged parent, its findings' differences)


def _along(order: Order, changed_at: dict[str, tuple[list[str], list[Change]]]) -> Line:
    """The line's commits in order, each with the changes it brought to findings (none for a merge
    that brought none but is judged against its merged parents)."""
    return [(sha, parents, changed_at[sha][1] if sha in changed_at else []) for sha, parents in order]


def _order(log: TrunkLog, base: str) -> Order | None:
    """The first-parent line (base, tip] from trunk's one history pass, following first parents
    from its tip down to the baseline; None where the pass does not hold that line (the walk then
    reads its own)."""
    order: Order = []
    sha = log.tip
    while sha != base:
        got = log.commits.get(sha)
        if got is None:
            return None
        order.append((sha, got[0]))
        if not got[0]:
            if base:  # the line ended before reaching the baseline
                return None
            break
        sha = got[0][0]
    order.reverse()
    return order


def _own_order(root: Path, base: str, tip: str) -> Order | None:
    """The first-parent line (base, tip], oldest first, in one `git rev-list`."""
    done = _git(
        root, "rev-list", "--first-parent", "--parents", "--reverse", f"{base}..{tip}" if base else tip
    )
    if done.returncode != 0:
        return None
    return [
        (fields[0], fields[1:])
        for fields in (line.split() for line in done.stdout.decode().splitlines())
        if fields
    ]


def _sides(root: Path, order: Order) -> Sides | None:
    """For every merge on the line, each merged (non-first) parent and the findings that differ
    between it and the merge (`Change.parents[0]`: the parent's blob), in one `git diff-tree
    --stdin`; None when git cannot tell."""
    from registry.history import Change

    pairs = [(sha, parent) for sha, parents in order for parent in parents[1:]]
    if not pairs:
        return {}
    done = _git(
        root, "diff-tree", "--stdin", "--always", "-r", "-z", "--no-abbrev", "--no-renames", "--", f"{FOLDER}/",
        input="".join(f"{sha} {parent}\n" for sha, parent in pairs).encode(),
    )  # fmt: skip
    if done.returncode != 0:
        return None
    found: Sides = {}
    tokens = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    at, i = -1, 0
    current: tuple[str, list[Change]] | None = None
    while i < len(tokens):
        token = tokens[i].lstrip("\n")
        i += 1
        if not token:
            continue
        if not token.startswith(":"):  # the header of the next pair (--always: one for each)
            at += 1
            if at >= len(pairs) or token != pairs[at][0]:
                return None
            current = (pairs[at][1], [])
            found.setdefault(token, []).append(current)
            continue
        if current is None or i >= len(tokens):
            return None
        path, fields = tokens[i], token[1:].split()
        i += 1
        if _finding_path(path):
            current[1].append(Change(path, fields[-1], [fields[2]], fields[3]))
    if at != len(pairs) - 1:
        return None
    return {sha: [d for d in diffs if d[1]] for sha, diffs in found.items() if any(d[1] for d in diffs)}


def _lifted_since(
    root: Path,
    merge: str,
    parent: str,
    path: str,
    units: frozenset[str],
    authorize: Authorize,
    why: str,
    own: bool = False,
) -> tuple[str | None, str]:
    """A merge that does not hold `units` its merged `parent`'s version of the entry holds lifts them
    only where trunk's own side did so with authority since: the newest commit of `parent..merge`
    (the merge itself too with `own`) touching the entry whose version holds none of them, carrying
    a valid authorization, and made after the parent's own last change of the entry's load-bearing
    fields (which it contains: a person's older signed commit decides nothing the parent decided
    since, as D-225's rule for a merged side; an edit of the text is no decision). Else (None, `why`)."""
    from registry.history import ZERO

    touched = _touches(root, parent, merge, path, own)
    since = _last_decided(root, parent, path)
    if touched is None or since is None:
        return None, why
    for sha, blob in touched:
        if blob == ZERO:
            continue
        version, raw = _version_at(root, sha, path, blob)
        if version is None or held_units(version) & units:
            continue
        who, how = authorize(sha, *_commit_fields(raw))
        if who is None:
            continue
        if since and _git(root, "merge-base", "--is-ancestor", since, sha).returncode != 0:
            continue
        return who, f"{how} (in {parent[:10]}..{merge[:10]})"
    return None, why


Line = list[tuple[str, list[str], list["Change"]]]  # (commit, its parents, its changes to findings)


def _own_log(root: Path, base: str, tip: str) -> Line | None:
    """The walk's commits (base, tip] on trunk's first-parent line that change a finding, oldest
    first, in one `git log`; None when git cannot read them."""
    from registry.history import raw_log

    revisions = [f"{base}..{tip}"] if base else [tip]
    done = _git(
        root, "log", *revisions, "--first-parent", "--diff-merges=first-parent", "--reverse",
        "--format=%x00C%H %P", "--raw", "-z", "--no-abbrev", "--no-renames", "--", f"{FOLDER}/",
    )  # fmt: skip
    if done.returncode != 0:
        return None
    commits = []
    for header, changes in raw_log(done.stdout.decode("utf-8", errors="surrogateescape")):
        sha, *parents = header.split()
        mine = [c for c in changes if _finding_path(c.path)]
        if mine:
            commits.append((sha, parents, mine))
    return commits


def _line(log: TrunkLog, order: Order) -> Line:
    """The same commits as `_own_log`'s, read from trunk's one history pass along the line `_order`
    followed in it (first parents from its tip down to the baseline)."""
    line: Line = []
    for sha, parents in order:
        mine = [c for c in log.commits[sha][1] if _finding_path(c.path)]
        if mine:
            line.append((sha, parents, mine))
    return line


def _superseded(change: TrunkChange, sha: str) -> TrunkChange:
    return msgspec.structs.replace(change, superseded=sha)


def _start(root: Path, base: str) -> dict[str, str] | None:
    """finding path -> blob at the baseline (trusted as it stood: nothing before it is judged);
    None when git cannot list it."""
    if not base:
        return {}
    done = _git(root, "ls-tree", "-z", base, "--", f"{FOLDER}/")
    if done.returncode != 0:
        return None
    found = {}
    for item in done.stdout.decode("utf-8", errors="surrogateescape").split("\0"):
        if "\t" not in item:
            continue
        meta, path = item.split("\t", 1)
        if _finding_path(path):
            found[path] = meta.split()[2]
    return found


def _from_side(
    root: Path,
    merge: str,
    first: str,
    path: str,
    fields: dict,
    authorize: Authorize,
    why: str,
    decided: str = "",
) -> tuple[str | None, str]:
    """A merge brought the change: the newest commit of the merged side that touched the entry
    authorizes it when it carries the same load-bearing fields and a valid authorization, and was
    made after trunk's last decision on the entry (`decided`: that commit is its ancestor). A
    person's older signed commit that never landed (a squashed or abandoned branch), merged in
    after trunk decided the entry again, decides nothing (D-225)."""
    from registry.history import ZERO

    touched = _touches(root, first, merge, path)
    if touched is None:
        return None, why
    for sha, blob in touched:
        if blob == ZERO:
            return None, why
        version, raw = _version_at(root, sha, path, blob)
        if version is None or load_bearing(version) != fields:
            return None, why
        who, how = authorize(sha, *_commit_fields(raw))
        if who is None:
            return None, f"{why}; the merged commit {sha[:10]} that made it: {how}"
        if decided and _git(root, "merge-base", "--is-ancestor", decided, sha).returncode != 0:
            return None, (
                f"{why}; the merged commit {sha[:10]} that made it ({how}) was made before trunk's last "
                f"decision on the entry ({decided[:10]}), which it does not contain"
            )
        return who, f"{how} (merged by {merge[:10]})"
    return None, why


def _touches(
    root: Path, first: str, merge: str, path: str, own: bool = False
) -> list[tuple[str, str]] | None:
    """(commit, its blob of the entry: ZERO where it deleted it) for each commit of `first..merge`
    that touched the entry, newest first, the merge itself left out unless `own`; None when git
    cannot tell."""
    from registry.history import ZERO, raw_log

    done = _git(
        root, "log", f"{first}..{merge}", "--format=%x00C%H", "--raw", "-z", "--no-abbrev",
        "--no-renames", "--", f":(literal){path}",
    )  # fmt: skip
    if done.returncode != 0:
        return None
    found = raw_log(done.stdout.decode("utf-8", errors="surrogateescape"))
    return [
        (sha, next((c.new for c in changes if c.path == path), ZERO))
        for sha, changes in found
        if own or sha != merge
    ]


def _blobs_at(root: Path, revisions: list[str], path: str) -> set[str]:
    """The entry's object name at each of these commits (where it has one): one git process."""
    done = _git(root, "rev-parse", *(f"{rev}:{path}" for rev in revisions))
    return set(done.stdout.decode("ascii", errors="replace").split()) if done.returncode == 0 else set()


def _last_decided(root: Path, tip: str, path: str) -> str | None:
    """The newest commit of `tip`'s history that changed the entry's load-bearing fields (brought
    it, deleted it, made it valid or not, or changed resolved, affects or ack; a merge by its first
    parent's diff), "" where none did, None when git cannot tell (a version's object missing: a
    missing version is no evidence of no decision, adversarial review of D-232). An edit of an
    entry's text decides nothing (operator review of D-228: a unit's added evidence made a person's
    signed resolve, which did not contain it, count for nothing). Read a touch at a time, newest
    first: the newest is nearly always the decision, and git stops there instead of walking the
    whole history for older ones."""
    from registry.history import ZERO, cat_batch, raw_log

    for skip in range(64):
        done = _git(
            root, "log", tip, "-n", "1", f"--skip={skip}", "--format=%x00C%H %P", "--raw", "-z",
            "--no-abbrev", "--no-renames", "--diff-merges=first-parent", "--", f":(literal){path}",
        )  # fmt: skip
        if done.returncode != 0:
            return None
        found = raw_log(done.stdout.decode("utf-8", errors="surrogateescape"))
        if not found:
            return ""
        header, changes = found[0]
        sha, *parents = header.split()
        change = next((c for c in changes if c.path == path), None)
        if change is None:  # a merge touching it that its first parent's diff does not show
            continue
        old = change.parents[0] if change.parents else ZERO
        if (
            len(parents) > 1
            and old == ZERO
            and change.new != ZERO
            and change.new in _blobs_at(root, parents[1:], path)
        ):
            # a merge that brought the entry to a line that lacked it, taking another parent's version
            # whole (a branch merging trunk in): that version was decided where it was made, further
            # down this history (operator review of D-237: a signed resolve merged to trunk, then a
            # branch that had merged trunk before it, held the unit again). A merge that replaced
            # its line's own version with a side's is that line's decision (a reopen), never skipped
            # (adversarial review of the same: a person's signature from before it counted again)
            continue
        blobs = [b for b in (old, change.new) if b != ZERO]
        objects = cat_batch(root, blobs)
        if any(objects.get(b) is None for b in blobs):
            return None
        versions = []
        for blob in (old, change.new):
            version = _version(path, objects.get(blob) if blob != ZERO else None)
            versions.append(load_bearing(version) if version is not None else None)
        if versions[0] != versions[1]:
            return sha
    return None  # text edits past any limit: cannot tell, so nothing is lifted


def _version_at(root: Path, sha: str, path: str, blob: str) -> tuple[Entry | None, bytes | None]:
    """The entry a commit's blob holds (None: no valid finding), and the raw commit object."""
    from registry.history import cat_batch

    objects = cat_batch(root, [sha, blob])
    return _version(path, objects.get(blob)), objects.get(sha)


def _version(path: str, data: bytes | None) -> Entry | None:
    """A finding's version from its object's bytes: None where it is no valid finding (not UTF-8,
    unreadable, or missing)."""
    from registry.history import _utf8

    text = _utf8(data)
    return entry_or_none("finding", path, text) if text is not None else None


def carry(root: Path, found: TrunkFindings, before: TrunkFindings, authorize: Authorize) -> None:
    """Holds the host saw at trunk's earlier commit (`before`, its kept walk) that the walk of trunk
    now (`found`) no longer has stay held, unless a commit of `before.tip..found.tip` lifted them
    with authorization (`_lifted_since`). The walk follows trunk's first-parent line from the
    baseline, and a history can hide a hold from that line (a branch forked before the finding
    landed merging trunk in second and fast-forwarded onto it, a commit carrying the baseline
    trailer, a graft): the host's memory of what it held is not in that history (D-231)."""
    old, tip = before.tip, found.tip
    for path in sorted(before.holds):
        dropped = before.holds[path] - found.holds.get(path, frozenset())
        if not dropped:
            continue
        them = "them" if len(dropped) > 1 else "it"
        why = (
            f"trunk's history at {tip[:10]} no longer holds {', '.join(sorted(dropped))}, which the host "
            f"held at {old[:10]}, and no authorized commit of {old[:10]}..{tip[:10]} lifted {them} (a "
            "history that hides a hold from trunk's line lifts nothing)"
        )
        who, how = _lifted_since(root, tip, old, path, frozenset(dropped), authorize, why, own=True)
        if who is not None:
            continue
        found.holds[path] = found.holds.get(path, frozenset()) | dropped
        found.changes.append(
            TrunkChange(
                path, tip, f"trunk moved from {old[:10]}", ("affects",), tuple(sorted(dropped)), None, how
            )
        )
