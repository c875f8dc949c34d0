"""Identity verified from git history, where the stores are absent (design §16.2).

A decision reaches git as a commit (engine.trust.gitsig.commit) whose message ends with the trailers
`Regulator-Decision: <id>` and `Regulator-Decided-By: <person>`, SSH-signed with that person's key
where the policy requires signatures: `regulator init` commits the baseline governed files so
(`Regulator-Decision: baseline`), `identity accept` each accepted file. Without the stores, each
governed file passes when its content equals its content at some such commit that counts, so
squash, rebase and merge commits made later (which carry no trailers) do not break it, and a hand
edit committed without a decision fails. store.yaml is governed where it exists: absent is fine
while no counted decision ever committed it.

Which commits count is folded like identity.ndjson (engine.checkout.authority), oldest first:
- the first baseline commit, which must be on trunk (a branch cannot bring its own root), is
  trusted on first use: `signed` when it is signed by the owner's key its own interaction.yaml
  lists, else `claimed` (init had no private key to sign with);
- every later decision commit counts when its person holds `accept` under the interaction policy
  decided before it and, where that policy requires signatures, the commit is SSH-signed by one of
  that person's keys there (checked in-process, engine.base.sshsig); it decides the governed files it
  changes. A second baseline, or a decision before any baseline, counts for nothing.

Whatever the history's length: one `git log`, one `cat-file --batch`, one `merge-base
--is-ancestor` for the baseline, and the `rev-parse` calls that find the repository's state and trunk.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import msgspec

from engine.checkout.authority import INTERACTION, People
from engine.checkout.workspace import Workspace
from engine.trust.gitsig import NAMESPACE, split_signature
from identity import regular
from identity.files import GOVERNED, OPTIONAL
from registry.gitcall import git

DECISION = "Regulator-Decision"
DECIDED_BY = "Regulator-Decided-By"
BASELINE = "baseline"
_TRAILER = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]*)\s*:\s*(.*)")


class HistoryCheck(msgspec.Struct, frozen=True):
    """One governed file judged against history (the interface of engine.commands.proposals.FileCheck)."""

    file: str
    decided: str | None  # the commit whose counted decision has this content
    actual: str | None  # the git blob id of the file on disk; None when it is missing
    how: str | None = None  # "signed" or "claimed" (an unsigned baseline: init had no private key)
    by: str | None = None
    why: str = ""  # when it fails and a commit with this content counts for nothing: why not

    @property
    def ok(self) -> bool:
        return self.decided is not None

    def problem(self) -> str:
        if self.actual is None:
            return f"{self.file}: missing"
        if self.why:
            return f"{self.file}: {self.why}"
        return (
            f"{self.file}: its content matches no decision in git history (a hand edit committed "
            f"without a decision?); propose the change on the host (`regulator identity propose --file "
            f"{self.file} --content-from FILE`), where it is accepted and committed"
        )

    def describe(self) -> str:
        if self.decided is None:
            return self.problem()
        return f"{self.file}: as decided by {self.by} in {self.decided[:12]} ({self.how})"


class HistoryVerdict(msgspec.Struct):
    available: bool
    why: str = ""  # why history is unavailable
    files: list[HistoryCheck] = msgspec.field(default_factory=list)
    uncounted: list[tuple[str, str]] = msgspec.field(
        default_factory=list
    )  # (commit, why it counts for nothing)

    @property
    def ok(self) -> bool | None:
        """True when every file is as decided, False when one is not, None when not checked."""
        if not self.available:
            return None
        return all(c.ok for c in self.files)

    def as_json(self) -> dict:
        return {
            "source": "history",
            "history": "available" if self.available else "unavailable",
            "why": self.why or None,
            "ok": self.ok,
            "files": [
                {
                    "file": c.file,
                    "ok": c.ok,
                    "decided": c.decided,
                    "actual": c.actual,
                    "how": c.how,
                    "by": c.by,
                    "problem": None if c.ok else c.problem(),
                }
                for c in self.files
            ],  # fmt: skip
            "uncounted": [{"commit": sha, "why": why} for sha, why in self.uncounted],
        }


class _Commit(msgspec.Struct):
    sha: str
    changed: dict[str, str]  # governed path -> its blob id after this commit


def _git(root: Path, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The decisions' history as its objects store it (registry.gitcall: no replace ref or graft)."""
    return git(root, *args, input=data, timeout=120, filters=False)


def trailers(message: bytes) -> dict[str, list[str]]:
    """The trailers of a commit message: its last paragraph, read only when every line of it is a
    `Key: value` trailer (or a continuation); anything else has none (fail closed)."""
    text = message.decode("utf-8", "replace").rstrip("\n")
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
    if len(paragraphs) < 2:  # the subject alone is never a trailer block
        return {}
    found: dict[str, list[str]] = {}
    last: str | None = None
    for line in paragraphs[-1].split("\n"):
        if line[:1] in (" ", "\t") and last is not None:
            continue  # a folded value: regulator's values never fold
        matched = _TRAILER.fullmatch(line.strip())
        if matched is None:
            return {}
        last = matched.group(1).lower()
        found.setdefault(last, []).append(matched.group(2).strip())
    return found


def blob_id(data: bytes, object_format: str) -> str:
    return hashlib.new(object_format, b"blob %d\0" % len(data) + data).hexdigest()


def verify_history(ws: Workspace, trunk: str | None = None) -> HistoryVerdict:
    """Each governed file against the decisions git history holds (see the module's docstring)."""
    from engine.checkout.gitconfig import trunk_of
    from registry.history import ZERO, cat_batch, no_trunk_branch, raw_log, resolve_trunk

    root = ws.tree
    done = _git(root, "rev-parse", "--is-shallow-repository", "--show-object-format")
    if done.returncode != 0:
        return HistoryVerdict(False, "not a git repository")
    answer = done.stdout.decode().split()
    if answer[:1] == ["true"]:
        return HistoryVerdict(False, "the clone is shallow")
    object_format = answer[1] if len(answer) > 1 and answer[1] in ("sha1", "sha256") else "sha1"
    trunk = trunk or trunk_of(ws)
    trunk_ref = resolve_trunk(root, trunk)
    if trunk_ref is None:
        return HistoryVerdict(False, f"{no_trunk_branch(trunk)} to anchor the baseline")
    done = _git(
        root, "log", "HEAD", "--reverse", "--topo-order", "--full-history", "--root", "--raw", "-z",
        "--no-abbrev", "--no-renames", "--format=%x00C%H", f"--grep=^{DECISION}:",
        "--", *(f":(literal){path}" for path in GOVERNED),
    )  # fmt: skip
    if done.returncode != 0:
        return HistoryVerdict(False, "git log could not read HEAD (no commit yet?)")
    commits = []
    for sha, changes in raw_log(done.stdout.decode("utf-8", errors="surrogateescape")):
        changed = {c.path: c.new for c in changes if c.path in GOVERNED and c.new != ZERO}
        commits.append(_Commit(sha, changed))
    wanted = [c.sha for c in commits] + sorted(
        {c.changed[INTERACTION] for c in commits if INTERACTION in c.changed}
    )
    objects = cat_batch(root, wanted)
    verdict = HistoryVerdict(True)
    decided: dict[str, dict[str, tuple[str, str, str]]] = {}  # path -> blob -> (commit, person, how)
    refused: dict[str, dict[str, tuple[str, str]]] = {}  # path -> blob -> (commit, why not)
    policy: People | None = None
    for commit in commits:
        raw = objects.get(commit.sha)
        if raw is None:
            verdict.uncounted.append((commit.sha, "git could not read the commit"))
            continue
        payload, signature = split_signature(raw)
        found = trailers(payload.partition(b"\n\n")[2])
        ids, people = found.get(DECISION.lower(), []), found.get(DECIDED_BY.lower(), [])
        why, how, person = None, None, people[0] if len(people) == 1 else None
        if not ids or person is None:
            why = f"its trailers name no single person ({DECISION} and one {DECIDED_BY})"
        elif policy is None:
            if ids != [BASELINE]:
                why = "a decision before any baseline commit: no decided policy to judge it by"
            elif INTERACTION not in commit.changed:
                why = "a baseline commit without interaction.yaml"
            elif _git(root, "merge-base", "--is-ancestor", commit.sha, trunk_ref).returncode != 0:
                why = f"a baseline commit not on trunk ({trunk_ref}): a branch cannot bring its own root"
            else:
                here = People.parse(_text(objects.get(commit.changed[INTERACTION])))
                how = "signed" if _signed(payload, signature, here.keys.get(person, ())) else "claimed"
                policy = here
        elif BASELINE in ids:
            why = "a baseline after the first (only init writes one)"
        elif "accept" not in policy.grants.get(person, ()):
            why = f"decided by {person}, who lacks the accept grant under the policy decided before it"
        else:
            signed = _signed(payload, signature, policy.keys.get(person, ()))
            if policy.require_signatures and not signed:
                why = f"not SSH-signed by one of {person}'s keys, and signatures are required"
            else:
                how = "signed" if signed else "claimed"
                if INTERACTION in commit.changed:
                    policy = People.parse(_text(objects.get(commit.changed[INTERACTION])))
        if why is not None:
            verdict.uncounted.append((commit.sha, why))
            for path, blob in commit.changed.items():
                refused.setdefault(path, {}).setdefault(blob, (commit.sha, why))
            continue
        assert person is not None and how is not None  # every branch that leaves `why` None sets both
        for path, blob in commit.changed.items():
            best = decided.setdefault(path, {}).get(blob)
            if best is None or (best[2] == "claimed" and how == "signed"):
                decided[path][blob] = (commit.sha, person, how)
    for path in GOVERNED:
        try:
            actual = blob_id(regular.read_bytes(ws.tree / path), object_format)
        except OSError:
            if path in OPTIONAL and not decided.get(path):
                continue  # a workspace on files has no store.yaml, and never decided one
            verdict.files.append(HistoryCheck(path, None, None))
            continue
        hit = decided.get(path, {}).get(actual)
        if hit is not None:
            verdict.files.append(HistoryCheck(path, hit[0], actual, hit[2], hit[1]))
            continue
        miss = refused.get(path, {}).get(actual)
        why = (
            ""
            if miss is None
            else (
                f"its content is that of commit {miss[0][:12]}, whose decision counts for nothing: {miss[1]}"
            )
        )
        verdict.files.append(HistoryCheck(path, None, actual, why=why))
    return verdict


def _text(data: bytes | None) -> str | None:
    return data.decode("utf-8", "replace") if data is not None else None


def _signed(payload: bytes, signature: str | None, keys: tuple[str, ...]) -> bool:
    if signature is None or not keys:
        return False
    from engine.base import sshsig

    return sshsig.verify(signature, payload, keys, NAMESPACE) is not None
