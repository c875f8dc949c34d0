"""Where trust starts (design §15.0): the governed content in force, folded from identity.ndjson's
decisions, never read from the files on disk; and the check that a person event counts (§15.1).

The first run of `baseline` decisions in identity.ndjson (written by `init`) is trusted on first
use. After it, a decision counts only when the person deciding holds the `accept` grant under the
policy in force just before it and, where that policy requires signatures, signed it with one of
their listed keys. A proposal by a person, a dismissal, and every person event of the other stores
are judged against the interaction policy in force at the event's own `at`, so a key retired by a
later decision still verifies what it signed before.
"""

from __future__ import annotations

import bisect
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from engine.log.store import Store, canonical
from engine.log.store import verify as verify_chain
from identity.files import GOVERNED, content_hash

if TYPE_CHECKING:
    from identity.policy import InteractionPolicy, RoutingPolicy

INTERACTION = "regulator/policy/interaction.yaml"
ROUTING = "regulator/policy/routing.yaml"
UNSIGNED_FIELDS = ("prev", "hash", "sig")  # what a signature does not cover
# the grant each person event of signals, units and memory needs (identity's are judged in _judge)
GRANT_OF = {"disposition": "resolve", "decision": "decide", "demote": "decide", "retraction": "retract",
            "signal": "report", "prediction-outcome": "resolve"}  # fmt: skip


class People(msgspec.Struct, frozen=True):
    """What the interaction policy says about persons, read without the policy models (status stays lean)
    by the loader every policy file is read with (identity.yamlload): the content was validated
    when it was proposed or written by init."""

    require_signatures: bool = False
    keys: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    grants: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    resolve: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)  # severities each may resolve

    @classmethod
    def closed(cls) -> People:
        """The policy when the policy in force cannot be known (its decided text fails its hash, or
        identity.ndjson does not verify): signatures required, no person listed, so no person event
        counts and every hold stays (design §16: what cannot be known is never shown as fine)."""
        return cls(require_signatures=True)

    @classmethod
    def parse(cls, text: str | None) -> People:
        if not text:
            return cls()
        from identity.yamlload import YamlError, safe_load_strict  # the one loader of every policy file

        try:
            data = safe_load_strict(text)
        except YamlError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        people = data.get("people")
        if not isinstance(people, dict):
            people = {}
        keys: dict[str, tuple[str, ...]] = {}
        grants: dict[str, tuple[str, ...]] = {}
        resolve: dict[str, tuple[str, ...]] = {}
        for name, entry in people.items():
            if not isinstance(entry, dict):
                continue
            keys[str(name)] = tuple(k for k in entry.get("keys") or () if isinstance(k, str))
            grants[str(name)] = tuple(g for g in entry.get("grants") or () if isinstance(g, str))
            resolve[str(name)] = tuple(r for r in entry.get("resolve") or () if isinstance(r, str))
        return cls(data.get("requireSignatures") is True, keys, grants, resolve)

    @classmethod
    def of(cls, policy: InteractionPolicy) -> People:
        """The persons of a parsed interaction policy: what the writes and the room judge by
        (Workspace.people), in the shape the fold judges by."""
        return cls(
            policy.require_signatures,
            {name: p.keys for name, p in policy.people.items()},
            {name: p.grants for name, p in policy.people.items()},
            {name: p.resolve for name, p in policy.people.items()},
        )

    def may(self, person: object, grant: str) -> bool:
        return isinstance(person, str) and grant in self.grants.get(person, ())


class Uncounted(msgspec.Struct, frozen=True):
    """An event in a store that counts for nothing, and why (`verify` names each)."""

    store: str
    offset: int  # where its line starts (verify turns it into a line number)
    reason: str  # "unsigned", "bad signature", "replayed id", ...
    id: str | None = None


@dataclass
class Authority:
    present: bool = False  # identity.ndjson exists: this is the host's workspace, not a clone
    workspace_id: str | None = None  # the hash of identity.ndjson's first event
    content: dict[str, str | None] = field(default_factory=dict)  # file -> decided text (None: unknown)
    decided_hash: dict[str, str] = field(default_factory=dict)
    times: list[str] = field(default_factory=list)  # `at` of each interaction policy in force
    marks: list[dict | None] = field(default_factory=list)  # ... the other stores' sizes then
    policies: list[People] = field(default_factory=list)  # ... and the policy from then on
    # (from `at`, decided routing.yaml, where its decision starts in identity.ndjson: -1 the baseline)
    routing: list[tuple[str, str | None, int]] = field(default_factory=list)
    proposals: dict[str, dict] = field(default_factory=dict)  # the proposals that count
    decisions: list[dict] = field(default_factory=list)  # the decisions that count, baseline first
    dismissals: dict[tuple[str, int], dict] = field(default_factory=dict)  # (store, line) -> event
    uncounted: list[Uncounted] = field(default_factory=list)
    # why the policy in force is unknown (identity.ndjson's first line that does not verify, or a
    # decided policy whose text fails its hash): then no person event counts (People.closed)
    unknown: str | None = None
    tampered: set[str] = field(default_factory=set)  # governed files whose baseline text fails its hash

    @property
    def people(self) -> People:
        return self.policies[-1] if self.policies else People()

    def people_at(self, at: object) -> People:
        """The interaction policy in force at `at` (ISO text compares in time order)."""
        if not self.policies:
            return People()
        if not isinstance(at, str):
            return self.policies[0]
        k = bisect.bisect_right(self.times, at) - 1
        return self.policies[max(k, 0)]

    def routing_then(self, at: object, seen: object = None) -> RoutingPolicy | None:
        """The routing policy a host event was written under: the last decided at what it saw of
        identity.ndjson (its `seen`, design §22: exactly, no time compared), or for one without
        `seen`, the last decided at or before its time; None where none was, or its text does
        not parse. What verify re-routes a routing record by, and a deadline mark is judged by."""
        mark = seen.get("identity") if isinstance(seen, dict) else None
        text = ""
        for since, content, offset in self.routing:
            if isinstance(mark, int) and not isinstance(mark, bool):
                if offset < mark:
                    text = content or ""
            elif not since or (isinstance(at, str) and at >= since):
                text = content or ""
        return _routing_policy(text) if text else None

    def ever_decided(self, relative: str) -> bool:
        """Whether a decision (the baseline included) ever recorded this governed file: one that
        never was declares nothing, whatever is on disk (sensors.yaml, D-286)."""
        return relative in self.decided_hash or relative in self.content

    def people_for(self, store: str, offset: int, at: object) -> People:
        """The interaction policy in force for the event at `offset` of `store`: a decision that
        recorded the stores' sizes (`marks`) governs every line at or past its mark, whatever
        that line's own `at` says, so a back-dated line cannot borrow an older policy (a retired
        key). A decision from before marks is placed by its time."""
        chosen = self.policies[0] if self.policies else People()
        for when, mark, people in zip(self.times, self.marks, self.policies, strict=True):
            if not when:
                continue  # the baseline: in force from the start
            if mark is not None and isinstance(mark.get(store), int):
                if offset >= mark[store]:
                    chosen = people
            elif isinstance(at, str) and at >= when:
                chosen = people
        return chosen

    @property
    def authentication(self) -> str:
        """ "signatures" when the policy in force requires them; else "names" (design §15.1)."""
        return "signatures" if self.people.require_signatures else "names"

    @functools.cached_property
    def clock(self) -> str:
        """`pinned` only when the decided routing policy says so unambiguously; else `system`."""
        text = self.content.get(ROUTING) or ""
        if "pinned" not in text:
            return "system"
        from identity.yamlload import YamlError, safe_load_strict

        try:
            data = safe_load_strict(text)
        except YamlError:
            return "system"
        return "pinned" if isinstance(data, dict) and data.get("clock") == "pinned" else "system"

    def check(self, event: dict, people: People | None = None, grant: str | None = None) -> str | None:
        """Why a person event counts for nothing, or None when it counts. A present but bad
        signature never counts; an unsigned one counts only where signatures are not required.
        A person event of the other stores also needs its grant (a key proves who, not may)."""
        people = people or self.people_at(event.get("at"))
        if grant is not None and not people.may(event.get("by"), grant):
            return f"by a person without the {grant} grant"
        sig = event.get("sig")
        if sig is None:
            return "unsigned" if people.require_signatures else None
        person = event.get("by")
        keys = people.keys.get(person, ()) if isinstance(person, str) else ()
        if not isinstance(sig, str) or not keys or event.get("workspace") != self.workspace_id:
            return "bad signature"
        from engine.base import sshsig

        return None if sshsig.verify(sig, signed_bytes(event), keys) else "bad signature"


def signed_bytes(event: dict) -> bytes:
    """What a person signs: the store's canonical JSON of the event without prev, hash and sig."""
    return canonical({k: v for k, v in event.items() if k not in UNSIGNED_FIELDS})


_CACHE: dict[tuple, Authority] = {}


_PATHS: dict[Path, Path] = {}


def of(root: Path) -> Authority:
    """The authority of the workspace at `root`, folded again only when identity.ndjson changed."""
    path = _PATHS.get(root)
    if path is None:
        if len(_PATHS) > 64:
            _PATHS.clear()
        path = _PATHS[root] = root / ".regulator" / "identity.ndjson"
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return Authority()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    found = _CACHE.get(key)
    if found is None:
        found = _trusted(Store(path))
        found.present = True
        _CACHE.clear()
        _CACHE[key] = found
    return found


BREAKS = ("content does not", "chain broken")
MAX_DISMISSED = 64  # identity lines dismissed before the store is judged unknown anyway


def _trusted(store: Store) -> Authority:
    """The authority identity.ndjson establishes, its chain checked on every read, not only by
    `verify`: a line edited in place (a unit sharing the account can) must not change the policy
    in force (small: one hash a line). A torn or garbage line readers skip is not a break; an edit
    or a gap is, and makes the policy unknown (_closed), unless a signed dismissal names that line
    (design §26): by a person who held `accept` under the policy in force just before it, its
    signature verifying under that policy. The dismissed line is then left out of the fold and
    the chain checked on past it, so one forged line cannot stop a fleet forever."""
    read = store.read()
    dismissed: dict[int, str] = {}
    dismissals: dict[tuple[str, int], dict] = {}
    lines: dict[int, tuple[int, bytes | None]] | None = None
    while True:
        broken = [f for f in verify_chain(store, dismissed=dismissed) if f.message.startswith(BREAKS)]
        broken = [f for f in broken if f.line not in dismissed]
        if not broken:
            break
        first = broken[0]
        why = f"identity.ndjson:{first.line}: {first.message}"
        if lines is None:
            lines = {n: (start, raw) for n, (start, raw) in enumerate(store.lines(), start=1)}
        found = _dismissal_of(read.events, read.starts, lines, first.line)
        if found is None or len(dismissed) >= MAX_DISMISSED:
            closed = _closed(fold(read.events, read.starts), why)
            closed.dismissals = dismissals  # those that counted: verify checks on past them
            return closed
        dismissed[first.line] = found["lineHash"]
        dismissals[("identity", first.line)] = found
    if not dismissed:
        return fold(read.events, read.starts)
    assert lines is not None
    left_out = {lines[n][0] for n in dismissed}
    kept = [(e, at) for e, at in zip(read.events, read.starts, strict=True) if at not in left_out]
    return fold([e for e, _ in kept], [at for _, at in kept])


def _dismissal_of(
    events: list[dict], starts: list[int], lines: dict[int, tuple[int, bytes | None]], number: int
) -> dict | None:
    """The later line that dismisses line `number` (store identity, that line, its SHA-256),
    signed by a person with `accept` under the policy folded from the lines before it; None when
    there is none."""
    import hashlib

    start, raw = lines.get(number, (-1, None))
    if raw is None:
        return None
    digest = hashlib.sha256(raw).hexdigest()
    before = fold(
        [e for e, at in zip(events, starts, strict=True) if at < start],
        [at for at in starts if at < start],
    )
    people = before.people
    for event, at in zip(events, starts, strict=True):
        if at <= start or event.get("kind") != "dismissal":
            continue
        if (event.get("store"), event.get("line"), event.get("lineHash")) != ("identity", number, digest):
            continue
        if "sig" in event and before.check(event, people, "accept") is None:
            return event
    return None


def before_line(root: Path, number: int) -> Authority:
    """The authority folded from identity.ndjson's lines before line `number` (the policy in force
    just before it): whom `verify --dismiss identity:N` asks for the grant and the key."""
    store = Store(root / ".regulator" / "identity.ndjson")
    read = store.read()
    start = next((at for n, (at, _) in enumerate(store.lines(), start=1) if n == number), None)
    if start is None:
        return fold(read.events, read.starts)
    keep = [k for k, at in enumerate(read.starts) if at < start]
    return fold([read.events[k] for k in keep], [read.starts[k] for k in keep])


def _closed(auth: Authority, why: str) -> Authority:
    """The authority of an identity store that does not verify: the workspace keeps its id, but no
    content is decided and no person event counts until the store verifies again."""
    return Authority(
        workspace_id=auth.workspace_id,
        content=dict.fromkeys(auth.content),  # nothing decided is known, not even by its hash
        decided_hash={},
        times=[""],
        marks=[None],
        policies=[People.closed()],
        routing=[("", None, -1)],
        unknown=why,
    )


def fold(events: list[dict], starts: list[int]) -> Authority:
    """Fold identity.ndjson's events (whole dicts, log order) into the authority they establish."""
    auth = Authority()
    if not events:
        return auth
    auth.workspace_id = events[0].get("hash") if isinstance(events[0].get("hash"), str) else None
    seen: set[str] = set()
    decided: set[str] = set()
    leading = True
    for offset, event in zip(starts, events, strict=True):
        kind, verdict = event.get("kind"), event.get("decision")
        if leading and kind == "decision" and verdict == "baseline":
            _baseline(auth, event)
            continue
        if leading:
            leading = False
            auth.policies.append(_baseline_people(auth))
            auth.times.append("")
            auth.marks.append(None)
            auth.routing.append(("", auth.content.get(ROUTING), -1))
        reason = _judge(auth, event, kind, verdict, seen, decided)
        if reason is not None:
            auth.uncounted.append(Uncounted("identity", offset, reason, event.get("id")))
            continue
        if isinstance(event.get("id"), str):
            seen.add(event["id"])
        if kind == "proposal":
            auth.proposals[event["id"]] = event
        elif kind == "decision":
            decided.add(event["proposal"])
            auth.decisions.append(event)
            if verdict == "accepted":
                proposal = auth.proposals[event["proposal"]]
                auth.content[proposal["file"]] = proposal["content"]
                auth.decided_hash[proposal["file"]] = proposal["contentHash"]
                if proposal["file"] == INTERACTION:
                    auth.policies.append(People.parse(proposal["content"]))
                    auth.times.append(at if isinstance(at := event.get("at"), str) else "")
                    auth.marks.append(event.get("marks") if isinstance(event.get("marks"), dict) else None)
                if proposal["file"] == ROUTING:
                    auth.routing.append(
                        (at if isinstance(at := event.get("at"), str) else "", proposal["content"], offset)
                    )
        elif kind == "dismissal":
            store, line = event.get("store"), event.get("line")
            if isinstance(store, str) and isinstance(line, int):  # else it names no line verify names
                auth.dismissals[(store, line)] = event
    if leading:
        auth.policies.append(_baseline_people(auth))
        auth.times.append("")
        auth.marks.append(None)
        auth.routing.append(("", auth.content.get(ROUTING), -1))
    return auth


def _baseline_people(auth: Authority) -> People:
    """The interaction policy the baseline puts in force. A baseline whose text fails its hash
    (edited) puts none that anyone can meet; one that carries only its hash (the first round's)
    keeps that round's reading."""
    if INTERACTION in auth.tampered:
        auth.unknown = auth.unknown or f"the baseline's {INTERACTION} does not match its hash (edited)"
        return People.closed()
    return People.parse(auth.content.get(INTERACTION))


def _baseline(auth: Authority, event: dict) -> None:
    """Trusted on first use: the content init wrote (a first-round baseline carries only its hash)."""
    file, digest = event.get("file"), event.get("contentHash")
    if file not in GOVERNED or not isinstance(digest, str):
        return
    text = event.get("content")
    ok = isinstance(text, str) and content_hash(text.encode()) == digest
    if isinstance(text, str) and not ok:
        auth.tampered.add(file)
    auth.content[file] = text if ok else None
    auth.decided_hash[file] = digest
    auth.decisions.append(event)


def _judge(
    auth: Authority, event: dict, kind: object, verdict: object, seen: set[str], decided: set[str]
) -> str | None:
    """Why an identity event after the baseline counts for nothing, or None."""
    event_id = event.get("id")
    if isinstance(event_id, str) and event_id in seen:
        return "replayed id (an event with this id came earlier)"
    if kind == "proposal":
        if not isinstance(event_id, str):
            return "a proposal without an id"
        if event.get("file") not in GOVERNED or not all(
            isinstance(event.get(k), str) for k in ("content", "contentHash")
        ):
            return "proposes no content of a governed file"
        if event.get("by") is None:
            return None  # a unit's, stamped by the host from its lease
        return auth.check(event, auth.people_at(event.get("at")))
    if kind == "decision":
        if verdict == "baseline":
            return "a baseline after the first events (only init writes one)"
        people = auth.people  # the policy in force just before this decision
        proposal_id = event.get("proposal")
        proposal = auth.proposals.get(proposal_id) if isinstance(proposal_id, str) else None
        if proposal is None or verdict not in ("accepted", "rejected"):
            return "decides no proposal that counts"
        if event["proposal"] in decided:
            return "a second decision on the same proposal"
        if not people.may(event.get("by"), "accept"):
            return "decided by a person without the accept grant"
        if verdict == "accepted" and event.get("contentHash") != proposal.get("contentHash"):
            return "accepts content other than the proposal's"
        return auth.check(event, people)
    if kind == "dismissal":
        if not auth.people.may(event.get("by"), "accept"):
            return "dismissed by a person without the accept grant"
        return auth.check(event, auth.people)
    return None


@functools.lru_cache(maxsize=16)
def _routing_policy(text: str) -> RoutingPolicy | None:
    """routing.yaml's text as its policy, parsed once per process; None where it does not parse."""
    from identity.policy import PolicyError, parse_policy

    try:
        return parse_policy("routing.yaml", text)
    except PolicyError:
        return None
