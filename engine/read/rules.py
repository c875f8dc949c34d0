"""Each rule once: may this person take this action on this thing, and what a recovery decision
disposes of and opens. The write refuses with these, the fold counts by them, the control room
shows an action disabled with their words and previews a decision with them (docs/codebase.md).

A rule answers None (yes) or a `Denied`: `short` is what the room shows beside a disabled action,
`full` what the command refuses with (exit 3, or 2 for a thing in the wrong state to act on).
Whether a unit is held, and by what, is engine.read.vetoes'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.checkout.authority import Uncounted
from engine.log.events import INDEX
from engine.read.model import (
    OWED_TO,
    PERSON_DISPOSITIONS,
    WAITING_ACTIONS,
    Closing,
    Disposition,
    MemoryEntry,
    Obligation,
    ObligationKind,
    ObligationStatus,
    RecoveryAction,
    State,
    UnitState,
    UnitStatus,
)
from engine.read.queries import STARTED, unit_status

if TYPE_CHECKING:
    from engine.checkout.authority import People
    from registry.entries import Entry
    from registry.trunkwalk import TrunkChange


class Denied(msgspec.Struct, frozen=True):
    """Why not: `short` beside a disabled action in the room, `full` as the command refuses."""

    short: str
    full: str
    bad_input: bool = False  # exit 2 (the thing is in no state for the action), else 3 (refused)

    def refuse(self) -> NoReturn:
        raise (BadInput if self.bad_input else Refused)(self.full)


def refuse(denied: Denied | None) -> None:
    """Raise the refusal a rule gave, if it gave one (the writes' way of asking a rule)."""
    if denied is not None:
        denied.refuse()


# ---- who: a named person holding a grant ------------------------------------------------------


def lacks(people: People, person: str, grant: str, doing: str) -> Denied | None:
    """A person acts only when named in the interaction policy in force with the grant."""
    if person not in people.grants:
        return Denied(
            f"{person} is not a person in interaction.yaml",
            f"{person!r} is not a person in regulator/policy/interaction.yaml; "
            f"only a named person with the {grant} grant may {doing}",
        )
    if not people.may(person, grant):
        return Denied(
            f"{person} lacks the {grant} grant",
            f"{person} lacks the {grant} grant needed to {doing} (interaction.yaml)",
        )
    return None


# ---- what a leased unit may do: its profile's tools, its one result per lease ----------------------


def tool_lacking(unit_id: str, profile: str, tools: tuple[str, ...], tool: str) -> Denied | None:
    """A leased unit calls a door tool only when the profile its dispatch recorded grants it."""
    if tool in tools:
        return None
    text = f"unit {unit_id}'s profile {profile} does not grant {tool}"
    return Denied(f"profile {profile} does not grant {tool}", text)


def lease_current(state: State, unit_id: str, lease_hash: str | None) -> bool:
    """The lease is the unit's current one and the unit is in progress: what every way in asks of a
    lease (check_lease: serve's door, the stdio door, a command given --lease, `unit run`'s judge of
    its own lease), the door's token lookup (current_unit), report_result, and `unit run`'s refusal
    of a second run while the first still stops."""
    unit = state.units.get(unit_id)
    return (
        unit is not None
        and lease_hash is not None
        and unit.lease == lease_hash
        and unit_status(state, unit) == UnitStatus.IN_PROGRESS
    )


def reporting_result(state: State, unit_id: str, lease_hash: str | None) -> Denied | None:
    """report_result (the unit's, or `unit run`'s for it): the unit's current lease, in progress,
    and no result recorded under it yet (one per lease, design §23)."""
    unit = state.units.get(unit_id)
    if unit is None or not lease_current(state, unit_id, lease_hash):
        return Denied(
            "not the unit's current lease",
            f"unit {unit_id}: this lease is not its current one; no result recorded",
        )
    if unit.result is not None:
        return Denied(
            f"already reported ({unit.result.outcome})",
            f"unit {unit_id} has already reported its result ({unit.result.outcome}) under this lease",
        )
    return None


# ---- resolve: a disposition of an open obligation (signals.ndjson) ---------------------------


def may_resolve(people: People, person: object, severity: str) -> Denied | None:
    """Whether the person may resolve an obligation of this severity (the interaction policy's
    `resolve` list). The fold counts a disposition only when this says yes under the policy in
    force at its place in the log; where no policy is known (a store without its identity) every
    disposition counts, as before policies named severities."""
    if not people.grants:
        return None
    allowed = people.resolve.get(person, ()) if isinstance(person, str) else ()
    if severity in allowed:
        return None
    return Denied(
        f"{person} may not resolve {severity} (resolve: {', '.join(allowed) or 'none'})",
        f"{person} may not resolve a {severity} obligation (interaction.yaml lets them "
        f"resolve: {', '.join(allowed) or 'no severity'})",
    )


def refused_severity(people: People, person: object, ob: Obligation) -> str | None:
    """The first of `ob`'s severities the person may not resolve: its own, then, for a recovery
    decision's obligation, each it escalated (D-292: an escalation lowered a critical hold to a
    blocking one, which a person allowed only blocking then closed: an adversarial review)."""
    return next((s for s in (ob.severity, *ob.escalated) if may_resolve(people, person, s) is not None), None)


def may_resolve_ob(people: People, person: object, ob: Obligation) -> Denied | None:
    """may_resolve for `ob`, every severity it holds (refused_severity)."""
    severity = refused_severity(people, person, ob)
    if severity is None or severity == ob.severity:
        return None if severity is None else may_resolve(people, person, severity)
    allowed = people.resolve.get(person, ()) if isinstance(person, str) else ()
    return Denied(
        f"{person} may not resolve {severity} (escalated into it)",
        f"{person} may not resolve {ob.id}: its recovery decision escalated a {severity} obligation "
        f"into it (interaction.yaml lets them resolve: {', '.join(allowed) or 'no severity'})",
    )


def unresolvable(severity: str) -> str:
    """What `verify` says of a disposition `may_resolve` refused: it counts for nothing."""
    return f"by a person who may not resolve {severity}"


def dispositions_for(ob: Obligation | None) -> tuple[str, ...]:
    """What a person may dispose of this obligation with: `answered` on questions only (design §22;
    an obligation not yet folded is a recovery decision's, no question)."""
    if ob is not None and ob.kind == ObligationKind.QUESTION:
        return tuple(PERSON_DISPOSITIONS)
    return tuple(d for d in PERSON_DISPOSITIONS if d != Disposition.ANSWERED)


def disposing(ob: Obligation | None, disposition: object) -> Denied | None:
    """A disposition this obligation's kind allows (`answered` on questions only): `obligation
    resolve` refuses another as bad input, the fold counts one for nothing."""
    allowed = dispositions_for(ob)
    if disposition in allowed:
        return None
    if disposition not in PERSON_DISPOSITIONS:  # absent, or no disposition a person writes
        return Denied(
            "not a disposition a person writes",
            f"--disposition: not one of {', '.join(PERSON_DISPOSITIONS)}",
            bad_input=True,
        )
    kind = ob.kind if ob is not None else "recovery-decision"
    ob_id = ob.id if ob is not None else "?"
    return Denied(
        f"{disposition}: a disposition of questions only",
        f"--disposition {disposition}: allowed on questions only; obligation {ob_id} is of kind "
        f"{kind} (use one of {', '.join(allowed)})",
        bad_input=True,
    )


def resolving(people: People, person: str, ob: Obligation, disposition: str | None = None) -> Denied | None:
    """`obligation resolve`: a disposition the obligation's kind allows (when named), the resolve
    grant, the obligation's severity, and still open."""
    denied = disposing(ob, disposition) if disposition is not None else None
    denied = (
        denied
        or lacks(people, person, "resolve", "resolve an obligation")
        or may_resolve_ob(people, person, ob)
    )
    if denied is None and ob.status != ObligationStatus.OPEN:
        denied = Denied(
            f"already {ob.status} by {ob.by}",
            f"obligation {ob.id} is already {ob.status} ({ob.disposition}) by {ob.by} at {ob.closed_at}",
        )
    return denied


def disposition_counts(state: State, ref: int, when: object, by: object, ob: Obligation) -> bool:
    """A disposition (at `ref` in signals.ndjson, stamped `when`, by `by`) of `ob` counts only from a
    person the policy in force at its place lets resolve `ob`'s severity (may_resolve: what
    `obligation resolve` asks); one that does not is marked, for `verify`, as counting for nothing."""
    people = state.auth.people_for("signals", ref >> 2, when)
    severity = refused_severity(people, by, ob)
    if severity is None:
        return True
    state.uncounted.append(Uncounted("signals", ref >> 2, unresolvable(severity)))
    return False


def close_pending(state: State, ob: Obligation) -> bool:
    """What closes `ob` that was folded before `ob` opened, applied as it opens, in log order, as if
    it had been known: signals.ndjson is folded before units.ndjson, which opens recovery
    obligations (advisory ones too), and a store read first may hold what closes an obligation
    another opens. A disposition (signals.ndjson) is judged at `ob`'s own severity
    (disposition_counts, as when its obligation is known); the first that counts closes it; one that
    does not is marked in its history and counts for nothing."""
    late = False
    waiting = state.pending.pop(ob.id, None)
    for closing in waiting or ():
        signals = closing.at & 3 == INDEX["signals"]
        if signals and not disposition_counts(state, closing.at, closing.closed_at, closing.by, ob):
            ob.history.append(closing.at)
            continue
        if not signals and not decision_closes(state, closing, ob):
            ob.history.append(closing.at)
            continue
        if ob.status == ObligationStatus.OPEN:
            ob.close(closing)
            late = carry_escalated(state, ob) or late
    return late


def carry_escalated(state: State, ob: Obligation) -> bool:
    """`ob` was escalated into a recovery obligation after that one opened (a decision folded before
    the obligation it names: rules.close_pending): its severities join that obligation's
    `escalated`, and the next one's up the chain of escalations, as a fold in the other order
    records them when it opens it (an adversarial review of D-292: the checkpoint's recovery
    obligation escalated nothing, the cold fold's a critical, D-294). True where it grew one that
    is closed already: its closing was judged without them. A routed obligation so escalated late
    exists only in a fold that read units.ndjson before it (a kept state): the caller folds again
    from the first byte, as a cold fold judges it (D-295); an obligation units.ndjson opens is met
    in the same order by every fold, and the closing is judged again here (judged_again).
    """
    carried = {ob.severity, *ob.escalated}
    seen: set[str] = set()
    target = ob.into
    grew_closed = False
    while target is not None and target not in seen:
        seen.add(target)
        into = state.obligations.get(target)
        if into is None:
            break
        grown = tuple(sorted(carried | set(into.escalated)))
        grew = grown != into.escalated
        into.escalated = grown
        if grew and into.status != ObligationStatus.OPEN:
            grew_closed = True
            if not judged_again(state, into):
                break  # open again: it escalates nothing further up
        carried = {into.severity, *into.escalated}
        target = into.into
    return grew_closed


def judged_again(state: State, ob: Obligation) -> bool:
    """`ob`'s closing, judged again now that it escalates more (carry_escalated): a disposition by
    disposition_counts, a recovery decision by decision_closes, each under the policy in force at
    its place. One that no longer counts is marked for `verify` and `ob` is open again (a chain of
    escalations closed a critical hold through a person allowed blocking only: D-296)."""
    ref = ob.closed_by
    if ref < 0:
        return True
    if ref & 3 == INDEX["signals"]:
        counts = disposition_counts(state, ref, ob.closed_at, ob.by, ob)
    else:
        closing = Closing(ob.status, ob.disposition, ob.by, ob.rationale, ob.closed_at, ref, unit=ob.unit)
        counts = decision_closes(state, closing, ob)
    if not counts:
        ob.status, ob.disposition, ob.by, ob.rationale = ObligationStatus.OPEN, None, None, None
        ob.closed_at, ob.closed_by, ob.into = None, -1, None
    return counts


# ---- retract: a memory entry, once -----------------------------------------------------------


def retracting(people: People, person: str, entry: MemoryEntry) -> Denied | None:
    """`memory retract`: the retract grant, and an entry not retracted yet."""
    denied = lacks(people, person, "retract", "retract a memory entry")
    if denied is None and entry.retraction is not None:
        r = entry.retraction
        denied = Denied(
            "already retracted",
            f"memory entry {entry.event['id']} was already retracted by {r['by']} at {r['at']}",
        )
    return denied


# ---- decide and demote: a unit's recovery ----------------------------------------------------

# a recovery decision applies (a lost unit's lease expired: a person may decide what next, §23)
DECIDABLE = (UnitStatus.TODO, UnitStatus.IN_PROGRESS, UnitStatus.WAITING, UnitStatus.LOST)


def deciding_unit(people: People, person: str, state: State, unit: UnitState) -> Denied | None:
    """`unit decide`: the decide grant, a unit todo, in progress, waiting or lost, and every
    obligation the decision disposes of (recovery: whatever the action) of a severity the person may
    resolve (may_resolve, as `obligation resolve` asks): a decision closes them, or escalates them
    into a blocking one, so it is their disposition (an operator's review: a `decide` grant released
    a critical hold its holder was refused to resolve)."""
    denied = lacks(people, person, "decide", "record a recovery decision")
    status = unit_status(state, unit)
    if denied is None and status not in DECIDABLE:
        denied = Denied(
            f"the unit is {status}",
            f"unit {unit.id} is {status}; a recovery decision needs todo, in-progress, waiting or lost",
            bad_input=True,
        )
    if denied is None:
        beyond = [
            ob
            for ob in recovery(state, unit.id, RecoveryAction.RETRY).disposes
            if disposes_of(people, person, unit.id, ob)
        ]
        if beyond:
            allowed = people.resolve.get(person, ())
            named = ", ".join(
                f"{ob.id} ({'/'.join(dict.fromkeys((ob.severity, *ob.escalated)))})" for ob in beyond[:5]
            )
            more = f" and {len(beyond) - 5} more" if len(beyond) > 5 else ""
            denied = Denied(
                f"{person} may not resolve {beyond[0].severity} (it would dispose of {len(beyond)})",
                f"{person} may not resolve what a recovery decision on {unit.id} disposes of: {named}{more} "
                f"(interaction.yaml lets them resolve: {', '.join(allowed) or 'no severity'}); "
                "a person who may resolve them decides, or resolves them first",
            )
    return denied


def disposes_of(people: People, person: object, unit_id: object, ob: Obligation) -> str | None:
    """Why a recovery decision by `person` on `unit_id` does not dispose of `ob`, or None where it
    does: what `unit decide` lists (recovery: the unit's own obligations owed to S3), each of a
    severity the person may resolve. The write refuses a decision with one it does not; the fold
    leaves such an obligation open (decision_closes)."""
    if ob.unit != unit_id:
        return f"does not dispose of {ob.id}: not unit {unit_id}'s"
    if ob.owed_to != OWED_TO:
        return f"does not dispose of {ob.id}: owed to {ob.owed_to}, not {OWED_TO}"
    severity = refused_severity(people, person, ob)
    return None if severity is None else f"does not dispose of {ob.id}: {unresolvable(severity)}"


def decision_closes(state: State, closing: Closing, ob: Obligation) -> bool:
    """A recovery decision (units.ndjson, `closing`) closes `ob` only where disposes_of says it
    does under the policy in force at its place in the log; one that does not is marked, for
    `verify`, and `ob` stays open."""
    people = state.auth.people_for("units", closing.at >> 2, closing.closed_at)
    reason = disposes_of(people, closing.by, closing.unit, ob)
    if reason is None:
        return True
    state.uncounted.append(Uncounted("units", closing.at >> 2, reason))
    return False


def demoting(people: People, person: str, state: State, unit: UnitState) -> Denied | None:
    """`unit demote`: the decide grant, and a unit in progress or lost (§23)."""
    denied = lacks(people, person, "decide", "demote a unit")
    status = unit_status(state, unit)
    if denied is None and status not in STARTED:
        denied = Denied(
            f"the unit is {status}",
            f"unit {unit.id} is {status}; only an in-progress or lost unit can be demoted",
            bad_input=True,
        )
    return denied


def disposition_of(action: str) -> Disposition:
    """The disposition a recovery decision writes on the obligations it closes."""
    if action in WAITING_ACTIONS:
        return Disposition.ESCALATED
    return Disposition.REJECTED if action == RecoveryAction.ABORT else Disposition.REWORK


class Recovery(msgspec.Struct, frozen=True):
    """What recording a recovery decision does (design §4.4): `unit decide` writes it, the room's
    decide dialog previews it."""

    unit: str
    action: str
    disposes: list[Obligation]  # the unit's open obligations owed to S3, closed by it
    disposition: Disposition  # what it writes on each of them
    opens: bool  # a waiting action opens a blocking obligation the unit then waits on
    releases_lease: bool  # the unit is in progress: its lease ends, its lease file is removed


def recovery(state: State, unit_id: str, action: str) -> Recovery:
    owed = [
        ob
        for ob in state.obligations.values()
        if ob.unit == unit_id and ob.status == ObligationStatus.OPEN and ob.owed_to == OWED_TO
    ]
    unit = state.units.get(unit_id)
    return Recovery(
        unit_id,
        action,
        owed,
        disposition_of(action),
        action in WAITING_ACTIONS,
        unit is not None and unit.status == UnitStatus.IN_PROGRESS,
    )


# ---- accept and reject: a proposal, once -----------------------------------------------------


def decision_of(state: State, proposal_id: str) -> dict[str, Any] | None:
    """The decision that counted on a proposal, or None while it is pending."""
    return decision_in(state.decisions, proposal_id)


def decision_in(decisions: list[dict[str, Any]], proposal_id: str) -> dict[str, Any] | None:
    """decision_of for the counted decisions as a list (the authority's, before a fold)."""
    for event in decisions:
        if event.get("proposal") == proposal_id:
            return event
    return None


def undecided(proposals: dict[str, Any], decisions: list[dict[str, Any]]) -> list[str]:
    """The proposals no counted decision names yet (decision_in is None for each), in one pass over
    the decisions: the room counts their marks on every fold, where a scan per proposal grew as
    proposals times decisions."""
    decided = {event.get("proposal") for event in decisions}
    return [ident for ident in proposals if ident not in decided]


def deciding_proposal(
    people: People, person: str, state: State, proposal_id: str, verdict: str
) -> Denied | None:
    """`identity accept` and `identity reject`: the accept grant, and a proposal not decided yet."""
    denied = lacks(people, person, "accept", f"{'accept' if verdict == 'accepted' else 'reject'} a proposal")
    earlier = decision_of(state, proposal_id)
    if denied is None and earlier is not None:
        denied = Denied(
            f"already {earlier['decision']} by {earlier['by']}",
            f"proposal {proposal_id} was already {earlier['decision']} by {earlier['by']} at {earlier['at']}",
        )
    return denied


# ---- a prediction's outcome: once, and that it did not come true only once it is due -----------


def recording_outcome(
    people: People, person: str, state: State, signal_id: str, came_true: bool | None = None
) -> Denied | None:
    """`signals resolve-prediction` (and the room's `o`): the resolve grant, a signal that makes a
    prediction, no outcome recorded yet, and, for "did not come true" (`came_true` False), its
    time come (design §24); `came_true` None asks all but the last (the room, before the answer)."""
    from engine.read.worldfold import outcome, resolves_at

    denied = lacks(people, person, "resolve", "record a prediction's outcome")
    if denied is not None:
        return denied
    due = resolves_at(state.signals[signal_id])
    if due is None:
        return Denied(
            "the signal makes no prediction",
            f"signal {signal_id} makes no prediction (report_intelligence's `prediction`)",
            bad_input=True,
        )
    earlier = outcome(state, signal_id)
    if earlier is not None:
        said = "came true" if earlier.get("cameTrue") else "did not come true"
        return Denied(
            f"already recorded: {said} (by {earlier.get('by')})",
            f"signal {signal_id}'s prediction already {said}: recorded by {earlier.get('by')} at "
            f"{earlier.get('at')}",
        )
    if came_true is False and due > state.now:
        return Denied(
            f"it resolves at {clock.iso(due)}",
            f"signal {signal_id}'s prediction resolves at {clock.iso(due)}: that it did not come true "
            "can be recorded only then (that it came true, at any time)",
        )
    return None


# ---- dismiss: a line verify names ----------------------------------------------------------------


def dismissing(people: People, person: str, identity_line: int | None = None) -> Denied | None:
    """`verify --dismiss`: the accept grant. An identity line that fails its hash leaves the policy
    unknown: `people` is then the policy in force just before that line (`identity_line`), and only
    a person holding accept under it may dismiss the line (design §26)."""
    if identity_line is None:
        return lacks(people, person, "accept", "dismiss a line verify names")
    if people.may(person, "accept"):
        return None
    return Denied(
        f"{person} lacked the accept grant before identity line {identity_line}",
        f"{person} did not hold the accept grant under the policy in force before identity.ndjson "
        f"line {identity_line}: only such a person may dismiss it",
    )


# ---- ack: a finding, once, while it is unresolved --------------------------------------------


# where a person means the change a unit made: her own signed commit touching the entry (the
# operator review of D-237 found "commit it as it stands" had nothing to commit)
_BY_HAND = (
    "If the change is meant, write your ack into the entry by hand, run `regulator registry views`, "
    "and commit both SSH-signed with Authorized-by: <you> (`git -c gpg.format=ssh -c "
    "user.signingkey=<your key> commit -S`)"
)


def acking(people: People, person: str, finding: Entry, pending: TrunkChange | None = None) -> Denied | None:
    """`registry ack`: the ack grant, and a finding neither resolved nor acknowledged, with no
    unauthorized change on trunk still lifting nothing (`pending`, engine.read.ladder.unratified):
    the ack's signed commit decides the entry afresh as it stands (D-136), so it would authorize
    that change unseen (D-225)."""
    denied = lacks(people, person, "ack", "acknowledge a finding")
    if denied is not None:
        return denied
    if finding.fields["resolved"]:
        return Denied(
            "the finding is resolved: history needs no ack",
            f"{finding.id} is resolved: history needs no ack",
        )
    if finding.fields["ack"].strip():
        return Denied(
            f"already acknowledged ({finding.fields['ack']})",
            f"{finding.id} is already acknowledged ({finding.fields['ack']})",
        )
    if pending is not None and not pending.commit:  # the entry here names fewer units than trunk holds
        text = (
            f"{finding.id} names fewer units than trunk holds ({', '.join(pending.lifts)} held by it on "
            "trunk, not named here): a signed ack would authorize that narrowing unseen; restore "
            f"affects first. {_BY_HAND}"
        )
        return Denied("the entry names fewer units than trunk holds", text)
    if pending is not None:
        text = (
            f"{finding.id}: trunk holds an unauthorized change a signed ack would authorize "
            f"({', '.join(pending.changed)} changed by {pending.commit[:12]}, which would lift "
            f"{', '.join(pending.lifts)}); restore those fields in the entry and commit them first. "
            f"{_BY_HAND}"
        )
        return Denied("an unauthorized change on trunk would be authorized with it", text)
    return None


def resolving_finding(
    people: People, person: str, finding: Entry, still_holds: bool = False, undecided: bool = False
) -> Denied | None:
    """`registry resolve`: the ack grant (lint authorizes a change of `resolved` by it), and a
    finding not resolved yet, or resolved where that counted for nothing: `still_holds`, it holds a
    unit all the same (engine.read.ladder.stale_knowledge: a resolve on trunk without authorization,
    or one not committed); or `undecided`, trunk holds a load-bearing change to it that nobody
    authorized (lint's unauthorized-change, engine.read.ladder.undecided_in: an `affects` edited
    after it was resolved). Resolving it again is the way out: a commit touching it, authorized,
    which decides the entry afresh as it stands (D-235)."""
    denied = lacks(people, person, "ack", "resolve a finding")
    if denied is None and finding.fields["resolved"] and not (still_holds or undecided):
        denied = Denied("the finding is resolved: it is history", f"{finding.id} is already resolved")
    return denied
