"""Lint of the registers (design §8.2, §8.4): schema, references, the ladder, intake debt, and the
history checks against trunk (tombstone-not-delete, the load-bearing guard).

Units, their statuses and the interaction policy come in as arguments: the registry knows no engine.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

import msgspec

from registry.entries import LOAD_BEARING, Entry, Issue, Registers, id_of, load_fields, parse_ack
from registry.history import ZERO, Commit, History, RangeHistory
from registry.trunkwalk import TrunkFindings

CODES = {
    "awaits-ack": "notice: an unresolved finding nobody has acknowledged yet",
    "regate": "error: an acknowledged unresolved finding names an in-progress unit",
    "regate-unknown": "warning: an acknowledged unresolved finding names a unit whose state is unknown "
    "(no stores here: a clone); the re-gate check did not run",
    "malformed-ack": "error: the ack of an unresolved finding is not `YYYY-MM-DD <person with ack>`",
    "intake-debt": "warning: a `new` intake entry older than intakeDebtDays",
    "tombstone-not-delete": "error: a register entry that landed on trunk is missing",
    "unauthorized-change": "error: a load-bearing field changed without authorization",
    "trunk-moved": "error: regulator/config.yaml names another trunk than the one this lint follows "
    "(the host's .regulator/trunk, or --trunk): a committed file does not move trunk",
    "trunk-unrecorded": "warning: a host on files without .regulator/trunk follows regulator/config.yaml, "
    "which a merged branch can change (a workspace made before D-224)",
    "ack-removed": "error: an ack was removed without authorization",
    "bad-ref": "error: a typed reference does not resolve",
    "observed-under-finding": "error: a record claims `observed` on an axis while an acknowledged, "
    "unresolved finding affects it",
    "retro-edited": "error: a RETRO entry's number differs from what the stores and git give for its period",
    "retro-unchecked": "warning: a RETRO entry's numbers could not be recomputed here (no stores: a clone, "
    "or no trunk history)",
    "schema": "error: the entry reads but a field is missing or wrong (an impossible date included)",
    "unreadable": "error: the file cannot be read (not UTF-8, a byte-order mark, merge conflict "
    "markers, no frontmatter, bad YAML, a key given twice); it keeps its last parseable trunk hold",
    "history-unavailable": "warning (error under --require-history): trunk history could not be "
    "read (no trunk, a shallow clone); the history checks did not run",
    "authorized-signed": "notice: a load-bearing change authorized by a commit SSH-signed by its person",
    "authorized-claimed": "notice: a load-bearing change authorized by an Authorized-by trailer on an "
    "unsigned commit (only where signatures are not required)",
}


class Policy(msgspec.Struct):
    """What lint needs of the interaction policy: who holds `ack`, and their emails."""

    ackers: dict[str, tuple[str, ...]]  # person -> emails (empty: any author)
    intake_debt_days: int = 14
    # design §15.1: (commit sha, person) -> whether the commit is SSH-signed by one of the person's
    # keys. Asked only of commits that authorize a load-bearing change. With require_signatures,
    # a trailer on an unsigned commit authorizes nothing.
    signed: Callable[[str, str], bool] | None = None
    require_signatures: bool = False
    note: str = ""  # where the grants come from when that is worth saying (--range: the policy at A)
    # what authorize_commit's answers depend on (grants, emails, keys, requireSignatures), as one
    # digest: "" when unknown (engine.read.trunkcache keeps no walk that asked such a policy)
    fingerprint: str = ""


class LintResult(msgspec.Struct):
    issues: list[Issue] = msgspec.field(default_factory=list)
    history_checked: bool = False
    history_why: str = ""  # why trunk history could not be read (history_checked False)

    def of(self, level: str) -> list[Issue]:
        return [i for i in self.issues if i.level == level]

    @property
    def errors(self) -> list[Issue]:
        return self.of("error")

    def as_json(self) -> dict:
        return {
            "errors": [i.as_json() for i in self.of("error")],
            "warnings": [i.as_json() for i in self.of("warning")],
            "notices": [i.as_json() for i in self.of("notice")],
            "historyChecked": self.history_checked,
            "historyUnavailable": None if self.history_checked else self.history_why or "unknown",
        }


def ack_problem(ack: str, policy: Policy, today: date) -> str | None:
    """Why an ack is malformed, or None when it is well formed."""
    parsed = parse_ack(ack)
    if parsed is None:
        return f"ack {ack!r} is not `YYYY-MM-DD <person>` with a real date"
    when, person = parsed
    if when > today:
        return f"ack {ack!r} is dated after today ({today})"
    if person not in policy.ackers:
        return f"ack {ack!r} names {person!r}, who does not hold the ack grant"
    return None


def lint_entries(
    registers: Registers, units: dict[str, str], record_ids: set[str], policy: Policy, today: date
) -> list[Issue]:
    """Everything but history: references, the ladder, malformed acks, intake debt."""
    issues = list(registers.issues)
    known = set(units) | set(registers.findings) | set(registers.intake) | record_ids
    for entry in registers.findings.values():
        issues += _finding(entry, units, record_ids, policy, today)
    for entry in registers.records.values():
        external = set(entry.fields.get("external") or [])
        for ref in entry.fields.get("relates") or []:
            if ref not in known and ref not in external:
                issues.append(
                    Issue(
                        "error",
                        "bad-ref",
                        entry.id,
                        f"{entry.id}: relates {ref!r}, which is no record, finding, intake or unit "
                        "(a record outside this workspace is listed under external)",
                    )
                )
    issues += _observed_under_finding(registers, policy, today)
    debt = timedelta(days=policy.intake_debt_days)
    for entry in registers.intake.values():
        when = entry.fields["date"]
        when = when if isinstance(when, date) else date.fromisoformat(when)
        if entry.fields["disposition"] == "new" and today - when > debt:
            issues.append(
                Issue(
                    "warning",
                    "intake-debt",
                    entry.id,
                    f"{entry.id} has been new since {when} (more than {policy.intake_debt_days} "
                    "days): triage it (parked, scoped:<stream> or rejected)",
                )
            )
    return issues


def record_findings(registers: Registers) -> dict[str, list[Entry]]:
    """record id -> the unresolved findings (acknowledged or not) that affect it, by id. A finding
    that cannot be read here counts as its last parseable version on trunk (as for units)."""
    findings = list(registers.findings.values()) + [held.entry for held in registers.held.values()]
    found: dict[str, list[Entry]] = {}
    for finding in sorted(findings, key=lambda e: e.id):
        if finding.fields.get("resolved"):
            continue
        for ref in finding.fields.get("affects") or []:
            if ref in registers.records:
                listed = found.setdefault(ref, [])
                if all(f.id != finding.id for f in listed):
                    listed.append(finding)
    return found


def _observed_under_finding(registers: Registers, policy: Policy, today: date) -> list[Issue]:
    """design §19: a record cannot claim `observed` on an axis while an acknowledged (well formed),
    unresolved finding affects it."""
    issues: list[Issue] = []
    for record_id, findings in sorted(record_findings(registers).items()):
        status = registers.records[record_id].fields.get("status") or {}
        observed = [axis for axis, value in status.items() if value == "observed"]
        for finding in findings:
            ack = finding.fields.get("ack") or ""
            if not observed or not ack.strip() or ack_problem(ack, policy, today):
                continue
            issues.append(
                Issue(
                    "error",
                    "observed-under-finding",
                    record_id,
                    f"{record_id} claims {', '.join(f'{a}: observed' for a in observed)} while acknowledged "
                    f"{finding.id} affects it unresolved: lower the status (wired, uninspected) or resolve "
                    "the finding",
                )
            )
    return issues


def _finding(
    entry: Entry, units: dict[str, str], record_ids: set[str], policy: Policy, today: date
) -> list[Issue]:
    issues: list[Issue] = []
    affects = entry.fields.get("affects") or []
    for unit_id in affects:
        if unit_id not in units and unit_id not in record_ids:
            issues.append(
                Issue(
                    "error",
                    "bad-ref",
                    entry.id,
                    f"{entry.id}: affects {unit_id!r}, which is no unit with a contract and no record",
                )
            )
    if entry.fields["resolved"]:
        return issues  # history: a malformed ack here is not an error
    ack = entry.fields["ack"]
    if not ack.strip():
        issues.append(Issue("notice", "awaits-ack", entry.id, f"unresolved {entry.id} awaits desk ack"))
        return issues
    problem = ack_problem(ack, policy, today)
    if problem:
        issues.append(Issue("error", "malformed-ack", entry.id, f"{entry.id}: {problem}"))
        return issues
    for unit_id in affects:
        if units.get(unit_id) == "unknown":  # a clone: the stores, and unit state, are on the host
            issues.append(
                Issue(
                    "warning",
                    "regate-unknown",
                    entry.id,
                    f"{entry.id} (acknowledged) affects {unit_id}: unit state unknown (no stores here), "
                    "so the re-gate check did not run; the host's `registry lint` runs it",
                )
            )
        if units.get(unit_id) == "in-progress":
            issues.append(
                Issue(
                    "error",
                    "regate",
                    entry.id,
                    f"{entry.id} (acknowledged) affects in-progress {unit_id}: "
                    "demote to todo (re-gate) or resolve the finding",
                )
            )
    return issues


def _load_bearing(fields: dict | None) -> dict:
    """The load-bearing fields of a version as it stood (unvalidated frontmatter). An ack that is
    not text (`ack: 2026-08-11` unquoted is a YAML date, `ack: 7` a number) is kept as a non-empty
    text: it arrives or changes as an ack does, needing the same authorization (fail closed)."""
    if fields is None:
        return {}
    found = {k: fields.get(k) for k in LOAD_BEARING}
    ack = found["ack"]
    if ack is not None and not isinstance(ack, str):
        found["ack"] = f"{ack!r} (not text)"
    return found


def authorize_commit(policy: Policy, sha: str, email: str, message: str) -> tuple[str | None, str]:
    """Whether one commit authorizes the load-bearing changes it makes: (the person, "authorized
    (signed) by ...") when SSH-signed by a person with the ack grant named in its `Authorized-by:`
    trailer, (the person, "authorized (claimed) by ...") for the trailer alone where signatures are
    not required; else (None, why not)."""
    seen = ""
    for name in Commit(sha, email, message, []).authorized_by():
        if name not in policy.ackers:
            seen = f"Authorized-by: {name} does not hold the ack grant"
            continue
        emails = policy.ackers[name]
        if emails and email not in emails:
            seen = f"Authorized-by: {name}, but the commit author {email} is not one of {name}'s emails"
            continue
        if policy.signed is not None and policy.signed(sha, name):
            return name, f"authorized (signed) by {name} in {sha[:10]}"
        if policy.require_signatures:
            seen = (
                f"Authorized-by: {name} on {sha[:10]}, but the commit is not SSH-signed by one of "
                f"{name}'s keys (requireSignatures); a commit signed by {name} decides it afresh: "
                f"`regulator registry resolve <F-id> --by {name} --rationale … --commit` (a resolution) or "
                f"`registry ack <F-id> --by {name} --commit` (an ack)"
            )
            continue
        return name, f"authorized (claimed) by {name} in {sha[:10]}: the commit is not signed"
    if seen:
        return None, seen
    if "authorized-by:" in message.lower():  # a trailer git would not read as one
        return None, (
            f"{sha[:10]} names Authorized-by:, but not as a line of its message's last paragraph "
            "(git's trailer block; a squash's default message indents it)"
        )
    return None, f"no Authorized-by: <person with the ack grant> trailer in {sha[:10]}"


def _authorizer(
    history: History | RangeHistory,
    path: str,
    policy: Policy,
    where: str = "on the branch",
    only: str | None = None,
) -> tuple[str | None, str]:
    """The person whose valid Authorized-by trailer covers this path on the branch (or in the
    range), if any, and how: "authorized (signed)" by a commit SSH-signed with their key, or
    "authorized (claimed)" by the trailer alone (only where signatures are not required)."""
    seen = ""
    # the commit that makes the change authorizes it (design §8.4): under --range, each commit's own;
    # on a branch, the last commit that touched the entry (newest first), so an ack signed in one
    # commit cannot carry someone else's later change to the same entry
    touching = [c for c in history.commits if path in c.paths and (only is None or c.sha == only)]
    for commit in touching[:1]:
        ends = history.head_blobs.get(path) if isinstance(history, History) else None
        if ends is not None and isinstance(commit, Commit) and commit.blobs.get(path) != ends:
            # the branch does not end with the version this commit made (a merge that took another
            # parent's whole, listed later): it authorizes nothing of what the branch brings (D-237)
            seen = (
                f"{commit.sha[:10]} is the newest commit touching it, but the branch ends with another "
                "version of it (a merge kept another parent's): the commit that makes the version the "
                "branch brings must carry Authorized-by"
            )
            break
        who, how = authorize_commit(policy, commit.sha, commit.email, commit.message)
        if who is not None:
            return who, how
        seen = how
        # an earlier commit that did authorize it, overtaken by this one: say so, and the way out
        for earlier in touching[1:]:
            name, _ = authorize_commit(policy, earlier.sha, earlier.email, earlier.message)
            if name is not None:
                seen += (
                    f"; {earlier.sha[:10]} authorized it ({name}), but the last commit touching the "
                    f"entry, {commit.sha[:10]}, decides: sign again after it (`regulator registry resolve "
                    f"<F-id> --by {name} --rationale … --commit` for a resolve; else a commit SSH-signed "
                    f"by {name} with Authorized-by: {name})"
                )
                break
    why = seen or f"no commit {where} carries Authorized-by: <person with the ack grant>"
    return None, f"{why} ({policy.note})" if policy.note else why


def _unauthorized(
    issues: list[Issue], path: str, changed: list[str], ack_removed: bool, where: str, when: str, why: str
) -> None:
    """An unauthorized load-bearing change, the removal of an ack named for what it does."""
    why = _named(path, why)
    if ack_removed:
        message = f"{path}: removing the ack{where} downgrades the hard re-gate problem to a notice; {why}"
        issues.append(Issue("error", "ack-removed", path, message))
        changed = [k for k in changed if k != "ack"]
    if changed:
        issues.append(
            Issue("error", "unauthorized-change", path, f"{path}: {', '.join(changed)} changed {when}; {why}")
        )


def _named(path: str, why: str) -> str:
    """The way out that `why` names, written with the finding's own id, not a placeholder."""
    if path.startswith("findings/"):
        return why.replace("<F-id>", id_of(path))
    return why


def _arrives_acked(issues: list[Issue], found: tuple[str | None, str], path: str, where: str) -> None:
    """A new entry that arrives acknowledged: authorized (a notice says how) or an error."""
    who, why = found
    if who is not None:
        _authorized(issues, path, why)
    else:
        issues.append(
            Issue(
                "error",
                "unauthorized-change",
                path,
                f"{path}: a new entry arrives with an ack{where}; {_named(path, why)}",
            )
        )


def _authorized(issues: list[Issue], path: str, how: str) -> None:
    code = "authorized-signed" if how.startswith("authorized (signed)") else "authorized-claimed"
    issues.append(Issue("notice", code, path, f"{path}: {how}"))


def lint_history(
    registers: Registers, worktree_texts: dict[str, str], history: History, policy: Policy
) -> list[Issue]:
    if not history.available:
        return [
            Issue(
                "warning",
                "history-unavailable",
                "(history)",
                f"no deletion observed (trunk history unavailable: {history.why}); "
                "the tombstone and load-bearing checks did not run",
            )
        ]
    issues: list[Issue] = []
    for path in sorted(history.landed - registers.paths):
        held = (
            "; while it is missing it holds what it held on trunk (a deletion lifts no hold)"
            if path.startswith("findings/")
            else ""
        )
        if path in history.gained:
            # never on the branch: yet a branch without it can delete it (a rebase replaying its own
            # commits, a merge once trunk moves), so it fails all the same, with the way out (D-234)
            why = (
                f"{path} landed on trunk after this branch forked, and the branch does not have it: "
                "merge trunk into the branch (a branch missing an entry trunk holds is read as "
                "deleting it)"
            )
        else:
            why = f"{path} landed on trunk; {tombstone_how(path)}"
        issues.append(
            Issue(
                "error",
                "tombstone-not-delete",
                path,
                f"register entry removed (tombstone-not-delete): {why}{held}",
            )
        )
    for path in sorted(registers.paths):
        now_text = worktree_texts.get(path, "")
        head_text = history.head.get(path)
        # an entry new since the merge-base that trunk has meanwhile: the branch's version replaces
        # trunk's when merged, so it is judged as a change of trunk's (D-226)
        base_text = history.base.get(path, history.trunk.get(path))
        if now_text == head_text == base_text:
            continue  # the same bytes at the merge-base, at HEAD and on disk: nothing changed
        now_read = load_fields("", now_text)
        if now_read is None:
            continue  # already an error (lint_entries); until it reads, it holds as on trunk
        now_fields = _load_bearing(now_read)
        head_fields = _load_bearing(load_fields("", head_text)) if head_text is not None else None
        if base_text is None:
            # a new entry: arriving with an ack needs the same authorization
            if (now_fields.get("ack") or "").strip():
                if head_fields is None or head_fields.get("ack") != now_fields.get("ack"):
                    issues.append(
                        Issue(
                            "error",
                            "unauthorized-change",
                            path,
                            f"{path}: a new entry arrives with an ack in an uncommitted change; "
                            "commit it with Authorized-by: <person with the ack grant>",
                        )
                    )
                else:
                    _arrives_acked(issues, _authorizer(history, path, policy), path, "")
            continue
        base_fields = _load_bearing(load_fields("", base_text))
        if head_fields is not None and head_fields != now_fields:
            changed = [k for k in LOAD_BEARING if head_fields.get(k) != now_fields.get(k)]
            issues.append(
                Issue(
                    "error",
                    "unauthorized-change",
                    path,
                    f"{path}: uncommitted change to {', '.join(changed)} of an entry on trunk; "
                    "commit it with Authorized-by: <person with the ack grant>",
                )
            )
            continue
        if base_fields == now_fields:
            continue
        who, why = _authorizer(history, path, policy)
        if who is not None:
            _authorized(issues, path, why)
            continue
        changed = [k for k in LOAD_BEARING if base_fields.get(k) != now_fields.get(k)]
        ack_removed = (
            bool((base_fields.get("ack") or "").strip()) and not (now_fields.get("ack") or "").strip()
        )
        _unauthorized(issues, path, changed, ack_removed, "", "since trunk", why)
    return issues


def lint_history_at(registers: Registers, landed: set[str]) -> list[Issue]:
    """The tombstone check at one trunk commit (RETRO counts it): every entry that landed before
    and is absent from that commit's tree."""
    return [
        Issue("error", "tombstone-not-delete", path, f"register entry removed (tombstone-not-delete): {path}")
        for path in sorted(landed - registers.paths)
    ]


def tombstone_how(path: str) -> str:
    """How to withdraw an entry instead of deleting it, by its register: a finding by the command
    that resolves it with a person's authorization (resolved: true by hand is itself unauthorized)."""
    if path.startswith("findings/"):
        return (
            "restore it and withdraw it in place: `regulator registry resolve "
            f"{id_of(path)} --by <person with the ack grant> --rationale … --commit`"
        )
    if path.startswith("intake/"):
        return "restore it and withdraw it in place (disposition: rejected, with a reason)"
    return "restore it (an entry that landed is kept: withdraw it in place)"


def lint_range(history: RangeHistory, policy: Policy) -> list[Issue]:
    """Every commit of A..B (a push to trunk) held to the branch's guard: no register entry
    deleted, and no load-bearing field changed unless the commit that changes it carries a valid
    Authorized-by, the grants and keys being those of the policy at A."""
    if not history.available:
        return [
            Issue(
                "warning",
                "history-unavailable",
                "(history)",
                f"no deletion observed (range {history.spec} unavailable: {history.why}); "
                "the tombstone and load-bearing checks did not run",
            )
        ]
    where = f"in {history.spec}"
    issues: list[Issue] = []

    def fields_of(blob: str) -> dict | None:
        text = history.blobs.get(blob)
        return load_fields("", text) if text is not None else None

    # each entry's last version in the range (oldest commit first): a deletion the range undid
    back = {change.path: change.new != ZERO for commit in history.commits for change in commit.changes}
    for commit in history.commits:
        by = f"{commit.sha[:12]} ({commit.subject})"
        for change in commit.changes:
            path = change.path
            before = [fields_of(sha) if sha != ZERO else None for sha in change.parents]
            present = [f for sha, f in zip(change.parents, before, strict=True) if sha != ZERO]
            if change.new == ZERO:
                if present:
                    issues.append(
                        Issue(
                            "error",
                            "tombstone-not-delete",
                            path,
                            f"register entry removed (tombstone-not-delete): {path} deleted by {by}; "
                            + (
                                "a later commit of the range brought it back, so nothing is left to "
                                "restore: the deleting commit stays in trunk's history (check a branch's "
                                "own commits before it lands: `registry lint --range "
                                "$(git merge-base origin/main HEAD)..HEAD`)"
                                if back.get(path)
                                else tombstone_how(path)
                            ),
                        )
                    )
                continue
            raw_after = fields_of(change.new)
            after = _load_bearing(raw_after)
            if not present:
                if (after.get("ack") or "").strip():
                    _arrives_acked(
                        issues, _authorizer(history, path, policy, where, only=commit.sha), path, f" in {by}"
                    )
                continue
            olds = [_load_bearing(f) for f in present]
            # a merge changes a field only where the result matches none of its parents: whatever
            # it took from a side was changed, and checked, in that side's own commits
            changed = [k for k in LOAD_BEARING if all(old.get(k) != after.get(k) for old in olds)]
            if not changed:
                continue
            who, why = _authorizer(history, path, policy, where, only=commit.sha)
            if who is not None:
                _authorized(issues, path, why)
                continue
            if raw_after is None:
                issues.append(
                    Issue(
                        "error",
                        "unauthorized-change",
                        path,
                        f"{path}: made unreadable by {by}, which hides its {', '.join(changed)}; {why}",
                    )
                )
                continue
            ack_removed = "ack" in changed and not (after.get("ack") or "").strip()
            _unauthorized(issues, path, changed, ack_removed, f" in {by}", f"by {by}", why)
    return issues


def lint_trunk(found: TrunkFindings, policy: Policy) -> list[Issue]:
    """design §26: every load-bearing change trunk holds since the baseline, authorized by the commit
    that brought it to trunk (or the merged commit that made it), or an error that keeps the hold
    it would have lifted. A change a later authorized commit decided afresh is no longer an error."""
    issues: list[Issue] = []
    for change in found.changes:
        path, by = change.path, f"{change.commit[:12]} ({change.subject})"
        if change.who is not None:
            if change.changed:
                _authorized(issues, path, f"{change.how} (on trunk: {', '.join(change.changed)})")
            continue
        if change.superseded:
            continue
        why = (
            change.how
            or "no Authorized-by: <person with the ack grant> on the commit that brought it to trunk"
        )
        if policy.note:
            why += f" ({policy.note})"
        if change.lifts:
            why += f"; it keeps the hold on {', '.join(change.lifts)} it would have lifted"
        elif path.startswith("findings/") and not found.holds.get(path) and "afresh" not in why:
            # it holds nothing now (resolved): resolving it again, signed, is the way out (D-235)
            why += (
                "; a commit signed by a person with the ack grant touching the entry decides it afresh "
                "as it stands: `regulator registry resolve <F-id> --by <person> --rationale … --commit` "
                "on trunk"
            )
        _unauthorized(
            issues, path, list(change.changed), change.ack_removed, " on trunk", f"on trunk by {by}", why
        )
    return issues
