"""S5 changes only by decision: a proposal, then a named person's accept or reject (design §7)."""

from __future__ import annotations

import contextlib
import functools

import msgspec

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_text
from engine.base.lookup import by_prefix
from engine.checkout.workspace import Workspace
from engine.commands.actors import Actor, check_person, leased, require_grant
from engine.commands.deciding import deciding
from engine.commands.init import write_governed
from engine.commands.trunkfiles import reads_whole_top
from engine.commands.written import IdentityDecisionEvent, ProposalEvent
from engine.read.load import load
from engine.read.model import EventKind, State
from engine.read.rules import Denied, deciding_proposal, decision_in
from engine.trust.signing import person_event, signer_for
from identity.files import (
    GOVERNED,
    OPTIONAL,
    POLICY_DIR,
    SENSORS_POLICY,
    STORE_POLICY,
    content_hash,
    file_hash,
)
from identity.policy import POLICY_MODELS, PolicyError, duration_seconds, parse_policy

# proposals a unit may have awaiting a decision (D-243: each one makes every reader of the stores,
# the door's included, fold them again from the first byte, and each lands in a person's review)
MAX_PENDING_PER_UNIT = 10


def pending_of(ws: Workspace, unit: str | None) -> int:
    """How many of this unit's proposals no person has accepted or rejected yet (the rule's
    decision_in: pending while no counted decision names it)."""
    auth = ws.authority()
    return sum(
        1
        for p in auth.proposals.values()
        if p.get("unit") == unit and decision_in(auth.decisions, str(p.get("id"))) is None
    )


def governed_path(file: str) -> str:
    relative = file.strip()
    if relative.startswith("./"):
        relative = relative[2:]
    if relative not in GOVERNED:
        raise BadInput(f"--file {file!r} is not a governed file; one of: {', '.join(GOVERNED)}")
    return relative


def propose(ws: Workspace, file: str, content: bytes, rationale: str, actor: Actor) -> dict:
    relative = governed_path(file)
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("--content-from: not valid UTF-8") from None
    check_text("--content-from", text, kind="content")
    rationale = check_text("--rationale", rationale, kind="rationale")
    check_content(ws, relative, text, "proposed")
    state = load(ws, stores=("units",))
    signer = None
    if actor.lease is not None:
        leased(ws, state, actor.lease, "propose_policy_change")
    elif actor.person not in ws.interaction().people:
        raise Refused(f"{actor.person!r} is not a person in regulator/policy/interaction.yaml")
    else:
        signer = signer_for(ws, actor.person)
    event: ProposalEvent = {
        "kind": EventKind.PROPOSAL.value,
        "file": relative,
        "content": text,
        "contentHash": content_hash(content),
        "baseHash": _decided_hash(ws, relative),
        "rationale": rationale,
        "unit": actor.unit,
        "by": actor.person,
        "at": clock.iso(clock.now()),
    }
    if actor.person is not None:
        return ws.store("identity").append(person_event(ws, signer, event))
    # a unit's: counted and appended inside the decide lock, so that units racing from processes
    # of their own cannot pass the cap together (an adversarial review: 20 of 24 at once)
    with contextlib.nullcontext() if ws.deciding() else ws.exclusive():
        waiting = pending_of(ws, actor.unit)
        if waiting >= MAX_PENDING_PER_UNIT:
            raise Refused(
                f"{actor.unit} has {waiting} proposals awaiting a person's decision, the most a unit may "
                "have: ask a person to accept or reject them (`regulator identity show`) before proposing again"
            )
        return ws.store("identity").append(event, assign_id=True)


def check_store_policy(text: str) -> None:
    """A proposed store.yaml names files or a postgresql:// URL, and never a password (design §18:
    libpq's PGPASSFILE supplies credentials; the proposal's content lands in the log and in git)."""
    from urllib.parse import urlsplit

    from engine.checkout.workspace import store_policy_url

    try:
        url = store_policy_url(text)
    except ValueError as exc:
        raise BadInput(f"proposed {STORE_POLICY}: {exc} (or `url: files`)") from None
    try:
        password = urlsplit(url).password if url else None
    except ValueError:
        raise BadInput(f"proposed {STORE_POLICY}: url {url!r} does not parse") from None
    if password is not None:
        raise BadInput(
            f"proposed {STORE_POLICY}: the url carries a password; store.yaml records none "
            "(libpq's PGPASSFILE, or peer or certificate authentication, supplies it)"
        )


def check_sensors_policy(ws: Workspace, text: str) -> None:
    """A proposed sensors.yaml names severities of the routing policy in force and unit ids
    (design §24); its shape was checked when it parsed."""
    from engine.checkout.workspace import check_unit_id

    severities = ws.routing().severities
    for name, sensor in parse_policy("sensors.yaml", text).sensors.items():
        if sensor.severity not in severities:
            raise BadInput(
                f"proposed {SENSORS_POLICY}: sensor {name}: severity {sensor.severity!r} is not one of "
                f"{', '.join(severities)}"
            )
        for path, units in sensor.lockfiles.items():
            for unit in units:
                check_unit_id(unit, f"proposed {SENSORS_POLICY}: sensor {name}: lockfile {path}")
        never = reads_whole_top(ws, sensor.command) if sensor.command else None
        if never is not None:  # D-310: it would never run; said at review, not at each run
            raise BadInput(f"proposed {SENSORS_POLICY}: sensor {name}: command {never}")


def _decided_hash(ws: Workspace, relative: str) -> str | None:
    """The content a proposal changes: the decided one (a hand edit on disk is not the base)."""
    return ws.authority().decided_hash.get(relative) or file_hash(ws.root / relative)


def check_content(ws: Workspace, relative: str, text: str, what: str) -> None:
    """BadInput unless `text` is content the governed file may hold: a policy that parses, a
    store.yaml and a sensors.yaml that pass their checks. Asked when a change is proposed and again
    when it is accepted (a proposal made under an older parser, or appended by hand, is never put
    in force unread: a policy in force that cannot be read would refuse every later proposal)."""
    name = relative.rsplit("/", 1)[-1]
    if relative.startswith(POLICY_DIR) and name in POLICY_MODELS:
        try:
            parse_policy(name, text)
        except PolicyError as exc:
            raise BadInput(f"{what} {exc}; a policy that cannot be read is not put in force") from None
    if relative == STORE_POLICY:
        check_store_policy(text)
    if relative == SENSORS_POLICY:
        check_sensors_policy(ws, text)
    if relative == f"{POLICY_DIR}/routing.yaml":
        check_escalate(ws, text)


def check_escalate(ws: Workspace, text: str) -> None:
    """A proposed routing.yaml escalates to people of the interaction policy in force (an operator's
    review: `escalate: [nobody]` was accepted, and every overdue obligation went to no one)."""
    people = ws.interaction().people
    policy = parse_policy("routing.yaml", text)
    never = reads_whole_top(ws, policy.notify) if policy.notify else None
    if never is not None:  # D-310: it would never run; said at review, not at each escalation
        raise BadInput(f"proposed routing.yaml: notify {never}")
    strangers = [name for name in policy.escalate if name not in people]
    if strangers:
        raise BadInput(
            f"proposed routing.yaml: escalate names {', '.join(repr(n) for n in strangers)}, not a person "
            f"of regulator/policy/interaction.yaml ({', '.join(sorted(people))})"
        )


def decide(ws: Workspace, prefix: str, by: str | None, rationale: str, verdict: str) -> dict:
    person = check_person(by, rationale=rationale)
    rationale = check_text("--rationale", rationale, kind="rationale")
    require_grant(ws, person, "accept", f"{'accept' if verdict == 'accepted' else 'reject'} a proposal")

    def rule(state: State) -> Denied | None:
        proposal = by_prefix(state.proposals, prefix, "proposal")
        denied = deciding_proposal(ws.people(), person, state, proposal["id"], verdict)
        if denied is None and verdict == "accepted":
            denied = _stale(ws, proposal)
        if denied is None and verdict == "accepted":
            check_content(ws, proposal["file"], proposal["content"], f"proposal {proposal['id']}:")
        return denied

    with deciding(ws, rule, stores=("identity",), person=person, route=False) as turn:
        proposal = by_prefix(turn.state.proposals, prefix, "proposal")
        event: IdentityDecisionEvent = {
            "kind": EventKind.DECISION.value,
            "decision": "accepted" if verdict == "accepted" else "rejected",
            "proposal": proposal["id"],
            "file": proposal["file"],
            "contentHash": proposal["contentHash"] if verdict == "accepted" else None,
            "by": person,
            "rationale": rationale,
            # where in the other stores this decision takes effect: a line appended later is judged
            # under it, whatever time it claims (engine.checkout.authority.people_for)
            "marks": ws.marks(but="identity"),
            "at": clock.iso(clock.now()),
        }
        # the decision is judged under the policy it replaces: where that required signatures, its
        # commit is signed, even when it turns them off (a clone's verify asks the policy before it)
        signed_before = ws.authority().people.require_signatures
        written = ws.store("identity").append(turn.signed(event))
        if verdict == "accepted":  # the decision is the truth; the file follows it
            write_governed(ws.root / proposal["file"], proposal["content"])
        if verdict == "accepted" and ws.url is not None and ws.authority().clock == "system":
            # design §26: on PostgreSQL the insert trigger's clock mode follows the decided policy
            from engine.log.pg.admin import follow_clock

            follow_clock(ws.url)
    if verdict == "accepted":
        commit(ws, proposal, person, rationale, written, signed_before)
    return written


def _stale(ws: Workspace, proposal: dict) -> Denied | None:
    """An accept applies a proposal to the content it was made against, as decided and on disk."""
    if _decided_hash(ws, proposal["file"]) != proposal["baseHash"]:
        text = f"{proposal['file']} changed since proposal {proposal['id']} was made; propose again"
        return Denied(text, text)
    if file_hash(ws.root / proposal["file"]) != proposal["baseHash"]:
        text = (
            f"{proposal['file']} on disk differs from its decided content (a hand edit): restore it "
            f"(`git checkout -- {proposal['file']}`) or propose again"
        )
        return Denied(text, text)
    return None


def commit(
    ws: Workspace,
    proposal: dict,
    person: str,
    rationale: str,
    decision: dict | None = None,
    signed_before: bool = False,
) -> bool:
    """Commit the accepted file when the workspace is a git repository, with the decision's
    trailers, signed by the person where signatures are required, by the policy in force after the
    decision or by the one it replaced (`signed_before`); False when it is not committed."""
    from engine.trust.gitsig import commit as git_commit

    decision_id = (decision or {}).get("id")
    message = (
        f"regulator: accept proposal {proposal['id']} for {proposal['file']}\n\n"
        f"Accepted by {person}: {rationale}\n\nAuthorized-by: {person}\n"
        + (f"Regulator-Decision: {decision_id}\nRegulator-Decided-By: {person}\n" if decision_id else "")
    )
    sign = signed_before or ws.authority().people.require_signatures
    return git_commit(ws, [proposal["file"]], message, person, sign)


class FileCheck(msgspec.Struct, frozen=True):
    file: str
    decided: str | None
    actual: str | None
    history: str = ""  # store.yaml: why git history does not bear the content out ("": it does)

    @property
    def ok(self) -> bool:
        return self.decided is not None and self.decided == self.actual and not self.history

    def problem(self) -> str:
        if self.decided is None:
            if self.file in OPTIONAL:
                return f"{self.file}: no decision records it (added by hand?); remove it, or propose it"
            return f"{self.file}: no decision records it; accept a proposal for it"
        if self.actual is None:
            return f"{self.file}: missing; its last decided content has hash {self.decided}"
        if self.decided != self.actual:
            return (
                f"{self.file}: hand-edited (content differs from its last decided hash); propose the change"
            )
        return f"{self.file}: {self.history}"


def verify_identity(ws: Workspace, state: State) -> list[FileCheck]:
    """Each governed file against its last counted decision in the stores. A governed file a
    workspace may lack (store.yaml) is left out while it is absent and undecided. store.yaml names
    the stores that judge it, so where git history is at hand it must also be borne out there (a
    commit that repointed the workspace at other stores, which could hold a baseline of their own,
    is named even though those stores agree with it)."""
    checks = []
    for f in GOVERNED:
        check = file_check(ws, f)
        if check is None:
            continue
        if f == STORE_POLICY and check.ok:
            check = FileCheck(f, check.decided, check.actual, _store_history(ws))
        checks.append(check)
    return checks


def file_check(ws: Workspace, relative: str) -> FileCheck | None:
    """One governed file on disk against its last counted decision (engine.checkout.authority);
    None for a file a workspace may lack (sensors.yaml, store.yaml) while it is absent and undecided."""
    check = FileCheck(relative, ws.authority().decided_hash.get(relative), file_hash(ws.root / relative))
    if relative in OPTIONAL and check.decided is None and check.actual is None:
        return None
    return check


def _store_history(ws: Workspace) -> str:
    """Why git history does not bear out store.yaml as it is on disk; "" when it does, or when
    there is no history to read (outside git, a shallow clone, no trunk)."""
    from engine.trust.idhistory import verify_history

    verdict = verify_history(ws)
    if not verdict.available:
        return ""
    for check in verdict.files:
        if check.file == STORE_POLICY and not check.ok:
            return check.problem().removeprefix(f"{STORE_POLICY}: ") + " (git history)"
    return ""


def review(ws: Workspace, proposal: dict) -> list[str]:
    """What accepting a proposal would change, for a person deciding: its marked lines (`_flagged`),
    then a unified diff of the decided content against the proposed one. Plain text lines (escape
    them)."""
    import difflib

    file, before, after, author, routing = _sides(ws, proposal)
    old, new = _lines(before), _lines(after)
    diff = list(difflib.unified_diff(old, new, f"{file} (decided)", f"{file} (proposed)", lineterm=""))
    if old == new and before != after:
        diff.append("(only the newline at the end of the file differs)")
    return _flagged(file, before, after, author, routing) + diff


def _lines(text: str) -> list[str]:
    """A file's lines as its diff shows them: split on \\n only (a \\r, \\x1c or U+2028 stays in its
    line, escaped), the newline that ends the last line opening no empty line after it (an
    operator's review: a 7-line file read as 8, the last an empty `+`)."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def marks(ws: Workspace, proposal: dict) -> int:
    """How many things accepting a proposal would grant, run, move, loosen or hasten (its review's `!` lines): the
    number `identity show`'s list, `--once` and the room show beside a pending proposal (`pending`
    text). An adversarial review: a unit's proposal widening profiles.yaml read as an ordinary row."""
    return _marks(*_sides(ws, proposal))


def proposal_json(p: dict, decision: dict | None, marks: int | None) -> dict:
    """A proposal as `identity show --json` and `controlroom --once --json` list it; `marks` (what
    accepting it would grant, run, move, loosen or hasten: `marks`) of a pending one, null once decided."""
    return {
        "id": p["id"],
        "file": p["file"],
        "by": p.get("by"),
        "unit": p.get("unit"),
        "rationale": p.get("rationale"),  # a line written by hand may lack it: null, never a KeyError
        "status": decision["decision"] if decision else "pending",
        "decidedBy": decision["by"] if decision else None,
        "marks": marks,
    }


def pending(marks: int) -> str:
    """A pending proposal's status as every list shows it (marks < 0: not known, so marked)."""
    if marks < 0:
        return "pending, ? !"
    return f"pending, {marks} !" if marks else "pending"


def _sides(ws: Workspace, proposal: dict) -> tuple[str, str, str, str, str]:
    """(file, decided content, proposed content, who proposed it, the decided routing.yaml: whose
    severities, in their order, say what a lower one is)."""
    content = ws.authority().content
    return (
        proposal["file"],
        content.get(proposal["file"]) or "",
        proposal["content"],
        proposed_by(proposal),
        content.get(f"{POLICY_DIR}/routing.yaml") or "",
    )


def proposed_by(proposal: dict) -> str:
    """Who proposed it, in words: `unit r1` or `person alice`."""
    return f"unit {proposal['unit']}" if proposal.get("unit") else f"person {proposal.get('by')}"


@functools.lru_cache(maxsize=1024)
def _marks(file: str, before: str, after: str, author: str, routing: str) -> int:
    return len(_flagged(file, before, after, author, routing))


def _flagged(file: str, before: str, after: str, author: str, routing: str) -> list[str]:
    """The `! ` lines of a review: for interaction.yaml, who gains or loses a key or a grant (a unit
    proposing to add a key is the attack to catch); the stores moved; a profile widened; a command
    the host would run."""
    from engine.checkout.authority import INTERACTION, People

    lines: list[str] = []
    if file == INTERACTION:
        old, new = People.parse(before), People.parse(after)
        for person in sorted(set(old.keys) | set(new.keys) | set(old.grants) | set(new.grants)):
            gained = set(new.keys.get(person, ())) - set(old.keys.get(person, ()))
            lost = set(old.keys.get(person, ())) - set(new.keys.get(person, ()))
            for key, verb in [
                *((k, "adds") for k in sorted(gained)),
                *((k, "removes") for k in sorted(lost)),
            ]:
                lines.append(f"! {verb} signing key {_fingerprint(key)} for {person} (proposed by {author})")
            grants = set(new.grants.get(person, ())) ^ set(old.grants.get(person, ()))
            if grants:
                lines.append(
                    f"! changes {person}'s grants: {sorted(old.grants.get(person, ()))} -> "
                    f"{sorted(new.grants.get(person, ()))} (proposed by {author})"
                )
            resolves = set(new.resolve.get(person, ())) ^ set(old.resolve.get(person, ()))
            if resolves:  # which severities the person may resolve (an adversarial review: unmarked)
                lines.append(
                    f"! changes what {person} may resolve: {sorted(old.resolve.get(person, ()))} -> "
                    f"{sorted(new.resolve.get(person, ()))} (proposed by {author})"
                )
        sent, sends = _emails(before), _emails(after)
        for person in sorted(set(sent) | set(sends)):
            if set(sent.get(person, ())) != set(sends.get(person, ())):  # lint's Authorized-by trusts these
                lines.append(
                    f"! changes {person}'s emails: {sorted(sent.get(person, ()))} -> "
                    f"{sorted(sends.get(person, ()))} (a commit by any of them may carry Authorized-by: "
                    f"{person}; proposed by {author})"
                )
        if old.require_signatures != new.require_signatures:
            lines.append(f"! requireSignatures: {old.require_signatures} -> {new.require_signatures}")
    if file == STORE_POLICY:  # where every host reads and writes the stores (design §18)
        from engine.checkout.workspace import store_policy_url

        try:
            was, will = store_policy_url(before) or "files", store_policy_url(after) or "files"
        except ValueError:
            was, will = "?", "?"  # propose refuses such text; a line appended by hand may hold it
        if was != will:
            lines.append(f"! moves the stores: {was} -> {will} (proposed by {author})")
    if file == f"{POLICY_DIR}/profiles.yaml":
        lines += _wider_tools(before, after, author)
    if file == f"{POLICY_DIR}/routing.yaml":
        lines += _fewer_holds(before, after, author)
    if file == f"{POLICY_DIR}/sensors.yaml":
        lines += _less_sensed(before, after, author, routing)
    for command, where in added_commands(file, before, after):
        lines.append(f"! runs {command} on the host ({where}, proposed by {author})")
    return lines


def _emails(text: str) -> dict[str, tuple[str, ...]]:
    """Each person's `emails` in an interaction policy's text, read leniently (People.parse's way):
    propose refuses a policy that does not read; a line appended by hand may hold anything."""
    from identity.yamlload import YamlError, safe_load_strict

    try:
        data = safe_load_strict(text) if text else None
    except YamlError:
        return {}
    people = data.get("people") if isinstance(data, dict) else None
    if not isinstance(people, dict):
        return {}
    return {
        str(name): tuple(e for e in entry.get("emails") or () if isinstance(e, str))
        for name, entry in people.items()
        if isinstance(entry, dict)
    }


def _fewer_holds(before: str, after: str, author: str) -> list[str]:
    """What a proposed routing.yaml loosens: a higher blocksAtOrAbove (fewer severities hold a
    unit), a floor taken away or lowered, the clock pinned (REGULATOR_NOW then dates what is
    written). An adversarial review: raising blocksAtOrAbove read as a plain `pending`, its
    effect only in the replay below the diff."""
    try:
        old = parse_policy("routing.yaml", before) if before else None
        new = parse_policy("routing.yaml", after)
    except PolicyError:
        return []  # propose refuses such text; a line appended by hand may hold it
    if old is None:
        return []
    lines = []
    if new.severities != old.severities or new.rank(new.blocks_at_or_above) > new.rank(
        old.blocks_at_or_above
    ):
        lines.append(
            f"! blocksAtOrAbove: {old.blocks_at_or_above} -> {new.blocks_at_or_above}"
            f" (fewer findings hold a unit; proposed by {author})"
            if new.severities == old.severities
            else f"! severities: {', '.join(old.severities)} -> {', '.join(new.severities)} (proposed by {author})"
        )
    floors = {f.name: f for f in new.floors}
    for floor in old.floors:
        kept = floors.get(floor.name)
        if kept is None or kept.pattern != floor.pattern or kept.fields != floor.fields:
            lines.append(f"! removes or changes floor {floor.name} (proposed by {author})")
        elif new.severities == old.severities and new.rank(kept.at_least) < new.rank(floor.at_least):
            lines.append(
                f"! lowers floor {floor.name}: {floor.at_least} -> {kept.at_least} (proposed by {author})"
            )
    if old.clock != new.clock:
        lines.append(
            f"! clock: {old.clock} -> {new.clock} (pinned honours REGULATOR_NOW; proposed by {author})"
        )
    # an adversarial review: raising the intelligence rule's atOrAbove to critical made every
    # blocking signal `noted` (nothing held), unmarked; so were deadlines and escalation taken away
    for name, rule in old.rules.items():
        kept_rule = new.rules.get(name)
        if kept_rule == rule:
            continue
        if kept_rule is None or kept_rule.owed_to != rule.owed_to or new.severities != old.severities:
            lines.append(f"! removes or changes rule {name} (proposed by {author})")
        elif new.rank(kept_rule.at_or_above) > new.rank(rule.at_or_above):
            lines.append(
                f"! rule {name}: atOrAbove {rule.at_or_above} -> {kept_rule.at_or_above}"
                f" (fewer signals open an obligation; proposed by {author})"
            )
    for severity, text in old.deadlines.items():
        later = new.deadlines.get(severity)
        if later is None or duration_seconds(later) > duration_seconds(text):
            lines.append(
                f"! deadline for {severity}: {text} -> {later or 'none'}"
                f" (later or no escalation; proposed by {author})"
            )
    # an operator's review: a deadline cut from 48h to 20s made every older obligation overdue at
    # once, and the first tick escalated them all and ran notify for each, with no word at review
    for severity, text in new.deadlines.items():
        earlier = old.deadlines.get(severity)
        if earlier is None or duration_seconds(text) < duration_seconds(earlier):
            lines.append(
                f"! deadline for {severity}: {earlier or 'none'} -> {text} (sooner: each open {severity} obligation"
                f" older than {text} is escalated at serve's next tick"
                + (", notify run for each" if new.notify else "")
                + f"; proposed by {author})"
            )
    if new.intake_debt_days > old.intake_debt_days:
        lines.append(
            f"! intakeDebtDays: {old.intake_debt_days} -> {new.intake_debt_days}"
            f" (a new intake entry waits longer before lint warns; proposed by {author})"
        )
    was, will = old.memory.max_current_per_unit, new.memory.max_current_per_unit
    if will > was:
        lines.append(
            f"! memory.maxCurrentPerUnit: {was} -> {will} (each unit may hold more memory that every later"
            f" unit receives; proposed by {author})"
        )
    if old.notify and old.notify != new.notify and not new.notify:
        lines.append(f"! removes notify: escalations notify no one (proposed by {author})")
    if set(old.escalate) - set(new.escalate):
        lines.append(
            f"! escalate: {', '.join(old.escalate)} -> {', '.join(new.escalate) or 'no one'}"
            f" (proposed by {author})"
        )
    return lines


def _less_sensed(before: str, after: str, author: str, routing: str) -> list[str]:
    """What a proposed sensors.yaml takes away from what the world brings in (an adversarial
    review: each was a plain `pending`): a sensor removed, its severity lowered, a lockfile or a
    unit it served dropped, its feed moved (the feed decides what it raises), or it run less often.
    A severity is lower as the decided routing.yaml orders them (RoutingPolicy.rank); one it does
    not name, or no readable routing.yaml, marks any change of severity."""
    try:
        old = parse_policy("sensors.yaml", before).sensors if before else None
        new = parse_policy("sensors.yaml", after).sensors
    except PolicyError:
        return []  # propose refuses such text; a line appended by hand may hold it
    if old is None:
        return []
    lines = []
    try:
        order = parse_policy("routing.yaml", routing).severities if routing else ()
    except PolicyError:
        order = ()

    def rank(severity: str) -> int:
        return order.index(severity) if severity in order else -1

    for name, sensor in sorted(old.items()):
        kept = new.get(name)
        if kept is None:
            lines.append(f"! removes sensor {name} (proposed by {author})")
            continue
        if kept.severity != sensor.severity and rank(kept.severity) <= rank(sensor.severity):
            lines.append(
                f"! lowers sensor {name}'s severity: {sensor.severity} -> {kept.severity} (proposed by {author})"
            )
        if kept.feed != sensor.feed:
            lines.append(f"! moves sensor {name}'s feed: {sensor.feed} -> {kept.feed} (proposed by {author})")
        for path, units in sorted(sensor.lockfiles.items()):
            dropped = sorted(set(units) - set(kept.lockfiles.get(path, ())))
            if path not in kept.lockfiles:
                lines.append(f"! sensor {name} no longer reads {path} (proposed by {author})")
            elif dropped:
                lines.append(
                    f"! sensor {name}: {path} no longer serves {', '.join(dropped)} (proposed by {author})"
                )
        if sensor.stale_after is not None and (
            kept.stale_after is None
            or duration_seconds(kept.stale_after) > duration_seconds(sensor.stale_after)
        ):
            lines.append(
                f"! sensor {name}'s staleAfter: {sensor.stale_after} -> {kept.stale_after or 'none'}"
                f" (a stalled feed said later or never; proposed by {author})"
            )
        if kept.kind == "command" and kept.timeout_seconds < sensor.timeout_seconds:
            lines.append(
                f"! sensor {name}'s timeout: {sensor.timeout} -> {kept.timeout} (proposed by {author})"
            )
        if kept.every_seconds > sensor.every_seconds:
            lines.append(
                f"! sensor {name} runs less often: every {sensor.every} -> {kept.every} (proposed by {author})"
            )
    return lines


def _wider_tools(before: str, after: str, author: str) -> list[str]:
    """What a proposed profiles.yaml grants that the decided one does not: a profile's added tools,
    and a harness's names mapped under an abstract tool (every profile granting it gets them). An
    adversarial review: a unit's proposal mapping Bash and Write under `read` read as a four-line
    diff with no mark."""
    try:
        old = parse_policy("profiles.yaml", before) if before else None
        new = parse_policy("profiles.yaml", after)
    except PolicyError:
        return []  # propose refuses such text; a line appended by hand may hold it
    lines = []
    had = old.profiles if old is not None else {}
    for name, profile in sorted(new.profiles.items()):
        gained = sorted(set(profile.tools) - set(had[name].tools if name in had else ()))
        if gained:
            lines.append(f"! grants profile {name}: {', '.join(gained)} (proposed by {author})")
    harnesses = {"claude-code", *(new.harness_tools or {}), *((old.harness_tools or {}) if old else {})}
    for harness in sorted(harnesses):
        was = old.harness(harness) if old is not None else {}
        for tool, names in sorted(new.harness(harness).items()):
            more = sorted(set(names) - set(was.get(tool, ())))
            if more:
                lines.append(
                    f"! maps {harness}'s {', '.join(more)} under {tool}: every profile granting {tool} "
                    f"gets {'it' if len(more) == 1 else 'them'} (proposed by {author})"
                )
    return lines


def added_commands(file: str, before: str, after: str) -> list[tuple[str, str]]:
    """The commands a proposal adds or changes that the host would run (design §24): routing.yaml's
    `notify`, sensors.yaml's command sensors; each as (the command, where it is declared). A text
    that does not parse declares none here (propose refuses it)."""
    import shlex

    from identity.files import POLICY_DIR, SENSORS_POLICY

    def commands(text: str) -> dict[str, tuple[str, ...]]:
        from identity.yamlload import YamlError, safe_load_strict

        try:
            data = safe_load_strict(text) if text else None
        except YamlError:
            return {}
        if not isinstance(data, dict):
            return {}
        found: dict[str, tuple[str, ...]] = {}
        if file == f"{POLICY_DIR}/routing.yaml" and isinstance(data.get("notify"), list):
            found["notify in routing.yaml"] = tuple(str(a) for a in data["notify"])
        if file == SENSORS_POLICY and isinstance(data.get("sensors"), dict):
            for name, sensor in data["sensors"].items():
                if isinstance(sensor, dict) and isinstance(sensor.get("command"), list):
                    found[f"sensor {name} in sensors.yaml"] = tuple(str(a) for a in sensor["command"])
        return found

    old, new = commands(before), commands(after)
    return [(shlex.join(argv), where) for where, argv in new.items() if argv and old.get(where) != argv]


def _fingerprint(key: str) -> str:
    from engine.base import sshsig

    try:
        return sshsig.fingerprint(key)
    except ValueError:
        return "(not a key)"
