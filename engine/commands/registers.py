"""The registers as the engine composes them: lint with units and policy, views, ack, resolve."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_text
from engine.base.text import escape
from engine.checkout.gitconfig import trunk_of
from engine.checkout.workspace import Workspace
from engine.commands.actors import check_person, require_grant
from engine.read.ladder import registers_of, still_holds, trunk_findings, undecided_in, unratified
from engine.read.model import UNKNOWN_STATUS, State
from engine.read.queries import unit_status
from engine.read.rules import acking, refuse, resolving_finding
from engine.trust.ackers import lint_policy, policy_at, walk_policy
from identity import regular
from registry.entries import FINDING_ID, REGISTERS, Entry, Issue, load_fields
from registry.gitcall import branch_name
from registry.history import (
    History,
    RangeError,
    RangeHistory,
    TrunkLog,
    how_to_read,
    no_trunk_branch,
    read_history,
    read_range,
    resolve_trunk,
)
from registry.lint import LintResult, Policy, lint_entries, lint_history, lint_range, lint_trunk
from registry.trunkwalk import TrunkFindings
from registry.views import VIEWS


def trunk_policy(ws: Workspace, history: History | None) -> Policy:
    """In a clone (no decided policy), the policy trunk has now (its tip): a branch cannot grant
    itself the ack it uses, nor loosen intake debt, nor pick the rules it is judged by where it
    forks (an older trunk's, before signatures were required or a key was revoked: D-230). Without
    history, the checkout's."""
    from registry.gitcall import git, git_text

    base = None
    if history is not None and history.available:
        done = git_text(
            ws.tree, "rev-parse", "--verify", "--quiet", f"{history.trunk_ref}^{{commit}}", filters=False
        )
        base = done.stdout.strip() if done.returncode == 0 else None
    if base is None:
        return lint_policy(ws)

    def at_base(name: str) -> bytes | None:
        found = git(ws.tree, "cat-file", "blob", f"{base}:regulator/policy/{name}", filters=False)
        return found.stdout if found.returncode == 0 else None

    policy = policy_at(ws, at_base("interaction.yaml"), f"trunk at {base[:10]}")
    from identity.policy import PolicyError, parse_policy

    try:
        policy.intake_debt_days = parse_policy(
            "routing.yaml", (at_base("routing.yaml") or b"").decode()
        ).intake_debt_days
    except (PolicyError, UnicodeDecodeError):
        policy.intake_debt_days = ws.routing().intake_debt_days
    return policy


def lint(
    ws: Workspace,
    state: State,
    trunk: str | None = None,
    range_spec: str | None = None,
    require_history: bool = False,
) -> LintResult:
    """Lint the registers. Trunk history is read by git in a second process while this one parses
    the entries: on two cores the slower of the two sets the time, not their sum.

    With `range_spec` (A..B) the history checks are those of every commit in the range instead of
    the branch's against its merge-base. With `require_history`, history that cannot be read is an
    error, not a warning."""
    from engine.read.ladder import walk_trunk

    if trunk is not None and not branch_name(trunk):
        raise BadInput(f"--trunk {trunk!r} is no branch name")
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending: Future[RangeHistory] | Future[History]
        walking: Future[TrunkFindings] | None = None
        if range_spec is not None:
            pending = pool.submit(read_range, ws.tree, range_spec)
        else:
            shared: Future[TrunkLog | None] = Future()  # trunk's one history pass, for both (D-221)
            pending = pool.submit(read_history, ws.tree, trunk or trunk_of(ws), shared)
            if not isinstance(getattr(state.registers, "trunk", None), TrunkFindings):
                # design §26's walk, while the entries parse; it follows the history pass lint
                # reads anyway where it needs a fresh walk and the pass is of the same commit
                walking = pool.submit(walk_trunk, ws, shared.result, trunk)
        registers = registers_of(ws, state)
        known = ws.has_stores  # without the stores a unit's state is unknown (design §16.2)
        if known:
            policy = lint_policy(ws)
        else:  # a clone: not the checkout's policy files, which the branch itself may have edited
            found = pending.result() if range_spec is None else None
            policy = trunk_policy(ws, found if isinstance(found, History) else None)
        units = {
            unit_id: unit_status(state, unit) if known else UNKNOWN_STATUS
            for unit_id, unit in state.units.items()
            if unit.contract
        }
        result = LintResult()
        result.issues = lint_entries(registers, units, set(registers.records), policy, state.now.date())
        if registers.retro:
            from engine.commands.retro import check as check_retros

            result.issues += check_retros(ws, state, registers, policy_at)
        try:
            history = pending.result()
        except RangeError as exc:
            raise BadInput(str(exc)) from None
        if walking is not None and not isinstance(registers.trunk, TrunkFindings):
            registers.trunk = walking.result()
    ranged = isinstance(history, RangeHistory)
    result.issues += _trunk_moved(ws, trunk, ranged, require_history)
    if isinstance(history, RangeHistory):  # range_spec was given
        before = history.spec.partition("..")[0]
        result.issues += lint_range(history, policy_at(ws, history.policy, before))
    else:
        result.issues += lint_history(registers, registers.texts, history, policy)
        result.issues += lint_trunk(trunk_findings(ws, state), walk_policy(ws))
    result.history_checked = history.available
    result.history_why = history.why
    if require_history and not history.available:
        result.issues = [
            Issue("error", i.code, i.entry, f"{i.message} (--require-history: {how_to_read(history.why)})")
            if i.code == "history-unavailable"
            else i
            for i in result.issues
        ]
    return result


def stale_view(name: str) -> str:
    """What `registry views --check` and `--once --registers-only` say of a view that differs: a
    branch commits its views with the entries it changes (`registry resolve/ack --commit` do), and
    any hand edit of a view is overwritten (D-229)."""
    return (
        f"{name} differs from what `regulator registry views` generates: run `regulator registry views` "
        f"and commit {name} with the entries it lists (a hand edit of it is overwritten)"
    )


def views(ws: Workspace, state: State, check: bool) -> list[str]:
    """Write the views (or, with check, name those that differ from what would be generated); a view
    that is not UTF-8 text differs (and is written anew)."""
    registers = registers_of(ws, state)
    differing = []
    for name, render in VIEWS.items():
        text = render(registers, escape)
        path = ws.tree / name
        try:
            current = regular.read_text(path) if path.exists() else None
        except (UnicodeDecodeError, OSError):
            current = ""  # not text: it differs from any view
        if current != text:
            differing.append(name)
            if not check:
                regular.replace_text(path, text, ws.tree)
    return differing


ACK_LINE = re.compile(r"^ack:.*$", re.MULTILINE)
RESOLVED_LINE = re.compile(r"^resolved:.*$", re.MULTILINE)


def ack(ws: Workspace, state: State, finding_id: str, by: str | None, commit: bool = False) -> Path:
    """Write `ack: "YYYY-MM-DD <who>"` into the entry; the change still goes through review. With
    `commit`, commit it with the `Authorized-by:` trailer, SSH-signed with the person's key."""
    person = check_person(by)
    entry = _finding(ws, state, finding_id)
    require_grant(ws, person, "ack", "acknowledge a finding")
    _trusted_trunk(ws)
    signed = _commit_ready(ws, person, commit)
    if commit:  # first: an uncommitted edit is named as such, whatever else it does
        _clean_registers(ws)
    refuse(acking(ws.people(), person, entry, unratified(ws, state, entry)))
    value = f"{clock.today().isoformat()} {person}"
    line = "ack: " + json.dumps(value, ensure_ascii=False)

    def edit(head: str, rest: str) -> str:
        if ACK_LINE.search(head):
            return ACK_LINE.sub(line.replace("\\", "\\\\"), head, count=1) + rest
        return head + "\n" + line + rest

    path = _write_field(ws, entry, "ack", value, edit)
    if commit:
        _commit_entry(ws, state, path, f"registry: ack {finding_id} by {person}", person, signed, "ack")
    return path


def _write_field(
    ws: Workspace, entry: Entry, field: str, value: object, edit: Callable[[str, str], str]
) -> Path:
    """A person's one-field edit of an entry (`edit` of its frontmatter and the rest), read back
    before its one write: refused, nothing written, unless only `field` changed, to `value`."""
    path = ws.tree / entry.path
    text = regular.read_text(path)
    end = _head_end(entry.path, text)
    written = edit(text[:end], text[end:])
    _changes_only(entry.path, text, written, field, value)
    regular.replace_text(path, written, ws.tree)
    return path


def _trusted_trunk(ws: Workspace) -> None:
    """A person's ack or resolve judges what trunk holds (a narrowing, a change nobody authorized)
    by trunk's walk: refused where the trunk it would walk is the branch's own say-so (D-237)."""
    from engine.checkout.gitconfig import doubted_trunk

    why = doubted_trunk(ws)
    if why is not None:
        raise Refused(f"{why}; nothing written")


def _head_end(where: str, text: str) -> int:
    """Where the frontmatter ends: the newline before its closing line, found as every reader finds
    it (registry.entries.split_frontmatter: the first line after the first that is `---` once
    stripped, indented or not); Refused where there is none (nothing written)."""
    at = text.find("\n")
    while at >= 0:
        following = text.find("\n", at + 1)
        if text[at + 1 : following if following >= 0 else len(text)].strip() == "---":
            return at
        at = following
    raise Refused(f"{where}: its frontmatter is not closed by a --- line; nothing written")


def _same(a: object, b: object, seen: set[tuple[int, int]], budget: list[int]) -> bool:
    """Deep equality of two parsed YAML values, each pair of nodes compared once: an entry's
    aliases can share one node a billion ways (an alias bomb), and `==` would walk every path."""
    budget[0] -= 1
    if budget[0] < 0:
        raise Refused("the entry's frontmatter is too large to compare; nothing written")
    if a is b:
        return True
    key = (id(a), id(b))
    if key in seen:
        return True
    seen.add(key)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], seen, budget) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, seen, budget) for x, y in zip(a, b, strict=True))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return type(a) is type(b) and a == b


def _changes_only(where: str, before: str, after: str, field: str, value: object) -> None:
    """Refuse, before anything is written, an edit of one frontmatter line that does not read back
    as that field alone set to `value`: a line the substitution found inside a quoted or block value
    (an entry's title can hold `ack: x` on a line of its own) would write another field, or none,
    under a person's signature (D-237)."""
    old, new = load_fields("", before), load_fields("", after)
    if old is None or new is None or old.keys() - {field} != new.keys() - {field}:
        others = True
    else:  # each pair of nodes once, within a budget (an alias bomb must not hang the command)
        seen: set[tuple[int, int]] = set()
        others = not all(_same(old[k], new[k], seen, [100_000]) for k in old if k != field)
    if old is None or new is None or new.get(field) != value or others:
        raise Refused(
            f"{where}: writing its `{field}:` line would not change {field} alone (a `{field}:` line "
            "inside another value, or frontmatter that does not read); nothing written: edit the "
            "entry by hand and have it reviewed"
        )


def resolve_finding(
    ws: Workspace, state: State, finding_id: str, by: str | None, rationale: str, commit: bool = False
) -> Path:
    """Resolve a finding: `resolved: true` in the entry and, under its body, `Resolved DATE by
    PERSON: RATIONALE`. Like an ack it needs the `ack` grant (lint authorizes a change of
    `resolved` by that grant's `Authorized-by:` trailer) and still goes through review; with
    `commit`, it is committed with the trailer, SSH-signed with the person's key. The finding
    becomes history: the units it affects are no longer held by it (design §8.2)."""
    person = check_person(by, rationale=rationale)
    rationale = check_text("--rationale", rationale, kind="rationale")
    entry = _finding(ws, state, finding_id)
    require_grant(ws, person, "ack", "resolve a finding")
    _trusted_trunk(ws)
    signed = _commit_ready(ws, person, commit)
    if commit:  # first: an uncommitted edit is named as such, whatever else it does
        _clean_registers(ws)
    holding = still_holds(ws, state, entry.id)
    undecided = undecided_in(trunk_findings(ws, state), entry.path)  # walked once: still_holds walked it
    refuse(resolving_finding(ws.people(), person, entry, holding, undecided))
    # the rationale is text, never structure: a line break, an escape sequence or a bidi override in
    # it is written escaped, as a retro's title is (engine.base.text.escape), one line of the entry
    note = f"Resolved {clock.today().isoformat()} by {person}: {escape(rationale)}"

    def edit(head: str, rest: str) -> str:  # the schema makes `resolved:` present
        return RESOLVED_LINE.sub("resolved: true", head, count=1) + rest.rstrip("\n") + "\n\n" + note + "\n"

    path = _write_field(ws, entry, "resolved", True, edit)
    if commit:
        _commit_entry(
            ws, state, path, f"registry: resolve {finding_id} by {person}", person, signed, "resolution"
        )
    return path


def _trunk_moved(
    ws: Workspace, trunk: str | None, ranged: bool = False, require: bool = False
) -> list[Issue]:
    """`trunk-moved` (D-224): regulator/config.yaml names another trunk than the one this run
    follows. On the host without `--trunk`, that is its record (`.regulator/trunk`); with `--trunk`
    (a CI job names trunk itself), the trunk the file names on that branch's own commit, so a branch
    that changes `trunk:` is named and linting against another base is not. In a clone without
    `--trunk` the file is all there is. A `--trunk` naming no branch here is history-unavailable:
    without `--range` lint's own history read says so; with it, this (an error under
    `--require-history`, D-229)."""
    from engine.checkout.gitconfig import CONFIG, configured_trunk, host_trunk, trunk_in
    from registry.history import cat_batch

    configured = configured_trunk(ws)
    if trunk is None and ws.has_stores and ws.url is None and host_trunk(ws) is None:
        message = (
            f"this host has no .regulator/trunk: it follows regulator/config.yaml's trunk ({configured!r}), "
            "which a merged branch can change; write the name of the branch this host follows into "
            f"{ws.state_dir / 'trunk'} (for main: echo main > {ws.state_dir / 'trunk'})"
        )
        return [Issue("warning", "trunk-unrecorded", ".regulator/trunk", message)]
    if trunk is None:
        followed, source = host_trunk(ws), ".regulator/trunk, the host's"
    else:
        ref = resolve_trunk(ws.tree, trunk)
        if ref is None:  # no such trunk here
            if not ranged:
                return []  # lint's history read names it (history-unavailable)
            why = no_trunk_branch(trunk)
            message = f"trunk unavailable ({why}): trunk-moved was not checked"
            if require:
                message += f" (--require-history: {how_to_read(why)})"
            return [Issue("error" if require else "warning", "history-unavailable", "(history)", message)]
        text = cat_batch(ws.tree, [f"{ref}:{CONFIG}"]).get(f"{ref}:{CONFIG}")
        followed = trunk_in(text.decode("utf-8", "replace") if text is not None else None)
        source = f"as {ref} names it"
    if followed is None or configured == followed:
        return []
    message = (
        f"regulator/config.yaml names trunk {configured!r}, but this lint follows {followed!r} ({source}): "
        f"a committed file does not move trunk: restore trunk: {followed} there if the change was not meant; "
        "to move trunk, a person edits .regulator/trunk on the host and trunk: in the same change"
    )
    return [Issue("error", "trunk-moved", "regulator/config.yaml", message)]


def _finding(ws: Workspace, state: State, finding_id: str) -> Entry:
    if not isinstance(finding_id, str) or not FINDING_ID.fullmatch(finding_id):
        raise BadInput(f"{finding_id!r} is not a finding id (F-<slug>)")
    registers = registers_of(ws, state)
    entry = registers.findings.get(finding_id)
    if entry is None:
        linked = next((i.message for i in registers.issues if i.entry == "findings/"), None)
        if linked is not None:  # the folder is a link: nothing is read, nor written, through it (D-230)
            raise Refused(linked)
        raise BadInput(f"no finding {finding_id} under findings/ (or it does not parse: run registry lint)")
    return entry


def _commit_ready(ws: Workspace, person: str, commit: bool) -> bool:
    """Before anything is written: can a `--commit` be made, and is it signed?"""
    if not commit:
        return False
    from engine.trust.ackers import trunk_people
    from engine.trust.signing import signer_for

    # in a clone, the keys trunk's policy lists, by which lint will judge the commit (there are no
    # decisions here: unsigned, it would be made and then refused by lint)
    signer = signer_for(ws, person, trunk_people(ws))  # refused (exit 3) when the person must sign and cannot
    if not (ws.tree / ".git").exists():
        raise BadInput("--commit: the workspace is not a git repository")
    return signer is not None


def _commit_entry(
    ws: Workspace, state: State, path: Path, subject: str, person: str, signed: bool, what: str
) -> None:
    """Commit an entry a person changed with the views that follow it (so `views --check` holds),
    with `Authorized-by:` as the message's last paragraph."""
    from engine.trust.gitsig import commit as git_commit

    relative = path.relative_to(ws.tree).as_posix()
    state.registers = None
    views(ws, state, check=False)
    paths = [relative, *(name for name in VIEWS if (ws.tree / name).exists())]
    message = f"{subject}\n\nAuthorized-by: {person}\n"
    if not git_commit(ws, paths, message, person, sign=signed, root=ws.tree):
        raise Refused(f"the {what} is written in {relative} but git did not commit it; commit it by hand")


def _clean_registers(ws: Workspace) -> None:
    """A signed ack commit carries the ack line and the views only: where the findings or intake
    (the views' sources) hold changes git has not committed, they would ride along under the
    person's signature, so the ack is refused until they are committed or discarded (exit 3)."""
    from registry.gitcall import git_text

    # the person's process: no fsmonitor or filter of the repository's runs (registry.gitcall)
    # the tree this checkout is, whatever core.worktree says; a submodule's own filters never run
    done = git_text(
        ws.tree,
        f"--work-tree={ws.tree}",
        "status",
        "--porcelain",
        "--untracked-files=all",
        "--ignore-submodules=all",
        "--",
        *REGISTERS,
    )
    if done.returncode == 127:
        raise Refused("--commit: git cannot say whether the registers hold uncommitted changes")
    changed = [line[3:] for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or changed:
        what = ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "") if changed else "unknown"
        raise Refused(
            f"--commit: the registers hold changes git has not committed ({what}); an ack commits only "
            "its own line: commit or discard them first"
        )


assert set(REGISTERS) == {"findings", "intake", "records", "retro"}
