"""report_intelligence: the typed intake of seed 000. It appends a signal and does nothing else."""

from __future__ import annotations

from collections.abc import Callable, Container
from datetime import datetime

from engine.base import clock
from engine.base.errors import BadInput, Refused
from engine.base.limits import check_known, check_list, check_required, check_text
from engine.base.lookup import check_prefix
from engine.checkout.workspace import Lease, Workspace, check_unit_id
from engine.commands.actors import Actor, check_person, leased, require_grant
from engine.commands.written import SignalEvent
from engine.read.load import load
from engine.read.model import EventKind, State
from engine.trust.signing import person_event, signer_for

FIELDS = (
    "subject",
    "claim",
    "observation",
    "evidence",
    "confidence",
    "reportedSeverity",
    "affectedUnits",
    "observedAt",
    "expiresAt",
    "rationale",
    "prediction",  # design §24: {resolvesAt} for a claim about the future
    "supersedes",  # design §24: the id of an earlier signal this report re-asks or replaces
)
CONFIDENCE = ("low", "medium", "high")
# `signals report`'s flags whose JSON field is named otherwise (seed 000's names are the JSON's)
_FLAGS = {
    "severity": "reportedSeverity",
    "affects": "affectedUnits",
    "observed-at": "observedAt",
    "expires-at": "expiresAt",
    "resolves-at": 'prediction: {"resolvesAt": TIME}',
}


def _listed(fields: dict, name: str) -> object:
    """An absent or null list is empty; anything else must be a list (0, "" or {} are not)."""
    value = fields.get(name)
    return [] if value is None else value


def validate_report(
    fields: dict, severities: tuple[str, ...], known_units: Container[str], now: datetime | None = None
) -> dict:
    """Check every field of seed 000's report (exit 2 on the first problem, every missing field named
    at once); return the signal body.
    `now` is the host's clock, or the routing time of a what-if case (engine.commands.whatif)."""
    check_known(fields, FIELDS, _FLAGS)
    check_required(fields, ("subject", "claim", "observation", "evidence", "confidence", "reportedSeverity"))
    subject = check_text("subject", fields["subject"])
    claim = check_text("claim", fields["claim"])
    observation = check_text("observation", fields["observation"])
    evidence = check_list("evidence", _listed(fields, "evidence"), minimum=1)
    confidence = check_text("confidence", fields["confidence"], kind="name")
    if confidence not in CONFIDENCE:
        raise BadInput(f"confidence: {confidence!r} is not one of {', '.join(CONFIDENCE)}")
    severity = check_text("reportedSeverity", fields["reportedSeverity"], kind="name")
    if severity not in severities:
        raise BadInput(f"severity: {severity!r} is not one of {', '.join(severities)}")
    affected = check_list("affectedUnits", _listed(fields, "affectedUnits"), kind="id")
    for unit_id in affected:
        check_unit_id(unit_id, "affectedUnits")
        if unit_id not in known_units:
            raise BadInput(f"affectedUnits: unit {unit_id!r} has no contract under contracts/")
    if len(set(affected)) != len(affected):
        raise BadInput("affectedUnits: a unit is named twice")
    now = now or clock.now()
    observed_raw = fields.get("observedAt")
    observed = clock.parse_time(observed_raw, "observedAt") if observed_raw is not None else now
    if observed > now:
        raise BadInput(f"observedAt {clock.iso(observed)} is in the future (now is {clock.iso(now)})")
    expires = None
    if fields.get("expiresAt") is not None:
        expires = clock.parse_time(fields["expiresAt"], "expiresAt")
        if expires <= observed:
            raise BadInput(f"expiresAt {clock.iso(expires)} is not after observedAt {clock.iso(observed)}")
    rationale = fields.get("rationale")
    if rationale is not None:
        rationale = check_text("rationale", rationale)
    extra: dict = {}
    if fields.get("prediction") is not None:
        extra["prediction"] = _prediction(fields["prediction"], observed, now)
    if fields.get("supersedes") is not None:
        extra["supersedes"] = check_prefix(fields["supersedes"], "supersedes: signal")
    return {
        "subject": subject,
        "claim": claim,
        "observation": observation,
        "evidence": evidence,
        "confidence": confidence,
        "reportedSeverity": severity,
        "affectedUnits": affected,
        "observedAt": clock.iso(observed),
        "expiresAt": clock.iso(expires) if expires else None,
        "rationale": rationale,
        **extra,
    }


def _prediction(value: object, observed: datetime, now: datetime) -> dict:
    """`prediction: {resolvesAt}`: when the claim about the future can be judged (after observedAt)."""
    if not isinstance(value, dict) or set(value) != {"resolvesAt"}:
        raise BadInput('prediction: expected {"resolvesAt": "<time>"} (when the claim can be judged)')
    resolves = clock.parse_time(value["resolvesAt"], "prediction.resolvesAt")
    if resolves <= observed:
        raise BadInput(
            f"prediction.resolvesAt {clock.iso(resolves)} is not after observedAt {clock.iso(observed)}"
        )
    # observedAt is the reporter's word: a claim already judgeable at `now` (the host's clock, or a
    # what-if case's routedAt) is no prediction
    if resolves <= now:
        raise BadInput(
            f"prediction.resolvesAt {clock.iso(resolves)} is not after now ({clock.iso(now)}): a prediction is a claim about the future"
        )
    return {"resolvesAt": clock.iso(resolves)}


def check_supersedes(ws: Workspace, body: dict, signal_id: Callable[[str], str] | None = None) -> dict:
    """A report that supersedes an earlier signal names one that exists (a unique prefix is taken,
    and the whole id recorded): exit 2 otherwise. `signal_id` finds it (a door's kept read model,
    which folds only what the store gained: a fold of the whole store under the write lock for each
    such report let one unit hold every write and the routing of the fleet, an adversarial review);
    without one the signals store is read, only then."""
    named = body.get("supersedes")
    if named is None:
        return body
    from engine.base.lookup import key_by_prefix

    if signal_id is None:
        return {
            **body,
            "supersedes": key_by_prefix(load(ws, stores=("signals",)).signals.refs, named, "signal"),
        }
    return {**body, "supersedes": signal_id(named)}


def report_intelligence(ws: Workspace, fields: dict, actor: Actor) -> dict:
    """Validate (exit 2), then authorize (exit 3), then append one signal with source S4 → S3."""
    state = load(ws, stores=("units",))
    lease = actor.lease
    if lease is not None:
        event = unit_signal(
            ws, fields, lease, state, set(state.contracts), lambda: ws.revision(lease.worktree)
        )
        return ws.store("signals").append(event, assign_id=True)
    body = check_supersedes(ws, validate_report(fields, ws.routing().severities, set(state.contracts)))
    person = check_person(actor.person)  # an Actor holds a lease or a person
    require_grant(ws, person, "report", "report intelligence")
    signer = signer_for(ws, person)
    return ws.store("signals").append(
        person_event(ws, signer, stamped(body, None, person, ws.revision()))
    )  # signed, its own id


def unit_signal(
    ws: Workspace,
    fields: dict,
    lease: Lease,
    state: State,
    known_units: Container[str],
    revision: Callable[[], str | None],
    signal_id: Callable[[str], str] | None = None,
) -> dict:
    """The signal a leased unit reports, ready to append (with a new id): validated (exit 2), then
    authorized (exit 3) on `state` (its units store read): the lease is the unit's current one,
    its profile grants report_intelligence, it is a research unit. `known_units` are the units
    with contracts; `revision` gives the worktree's HEAD, asked only once authorized;
    `signal_id` finds the signal it supersedes (check_supersedes)."""
    body = check_supersedes(ws, validate_report(fields, ws.routing().severities, known_units), signal_id)
    unit_type, _ = leased(ws, state, lease, "report_intelligence")
    if unit_type != "research":
        raise Refused(f"unit {lease.unit} is of type {unit_type}; only a research unit reports intelligence")
    return dict(stamped(body, lease.unit, None, revision()))


def stamped(
    body: dict, unit: str | None, person: str | None, revision: str | None, at: str | None = None
) -> SignalEvent:
    """The signal a validated report becomes (validate_report's body, with its prediction and
    the signal it supersedes where it names them), stamped with who reported it and when."""
    event: SignalEvent = {
        "kind": EventKind.SIGNAL.value,
        "subject": body["subject"],
        "claim": body["claim"],
        "observation": body["observation"],
        "evidence": body["evidence"],
        "confidence": body["confidence"],
        "reportedSeverity": body["reportedSeverity"],
        "affectedUnits": body["affectedUnits"],
        "observedAt": body["observedAt"],
        "expiresAt": body["expiresAt"],
        "rationale": body["rationale"],
        "unit": unit,
        "by": person,
        "revision": revision,
        "source": "S4",
        "destination": "S3",
        "at": at or clock.iso(clock.now()),
    }
    if "prediction" in body:  # design §24: a claim about the future
        event["prediction"] = body["prediction"]
    if "supersedes" in body:
        event["supersedes"] = body["supersedes"]
    return event
