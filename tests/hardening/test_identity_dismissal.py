"""One forged identity line cannot stop a fleet forever (design §26, issue 28): a line of
identity.ndjson that fails its hash makes the policy unknown (every person action refused), and
`verify --dismiss identity:LINE`, signed by a person who held `accept` under the policy in force just
before that line, lifts it; nothing else does. Real keys (ssh-keygen), the real command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from engine.base import clock, sshsig
from engine.checkout.authority import signed_bytes
from engine.log.store import Store, event_hash
from tests.helpers import Workspace, make_key


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a refusal, beside the warning that REGULATOR_NOW is ignored (while the policy
    is unknown, so is its pinned clock), and no traceback."""
    lines = [x for x in done.stderr.splitlines() if "REGULATOR_NOW ignored" not in x]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def forge(ws: Workspace, event: dict, valid_hash: bool = False) -> int:
    """Append a line as a writer with the account's shell can; returns its line number."""
    path = ws.store("identity")
    prev, _, _ = Store(path)._tail()
    line = {**event, "prev": prev}
    line["hash"] = event_hash(line) if valid_hash else "0" * 64
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, separators=(",", ":")) + "\n")
    return len(path.read_text().splitlines())


FORGED = {
    "kind": "decision",
    "proposal": "x",
    "decision": "accepted",
    "by": "mallory",
    "at": "2026-11-29T12:00:00Z",
}


def test_a_forged_identity_line_is_dismissed_by_a_person_with_accept(ws: Workspace) -> None:
    line = forge(ws, FORGED)
    before = ws.digest()
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 3 and "unknown" in one_line(done) and ws.digest() == before
    assert ws.run("verify").returncode == 1
    done = ws.run(
        "verify", "--dismiss", f"identity:{line}", "--by", "alice", "--rationale", "forged by a writer"
    )
    assert done.returncode == 0, done.stderr
    verified = ws.run("verify")
    assert verified.returncode == 0 and f"identity.ndjson:{line}: content does not match" in verified.stdout
    assert "[dismissed by alice" in verified.stdout
    ws.run("unit", "dispatch", "u1", check=True)  # the policy is known again
    # the chain is checked on past the dismissed line: a second forgery is named and stops it again
    second = forge(ws, FORGED)
    verified = ws.run("verify")
    assert verified.returncode == 1 and f"identity.ndjson:{second}: content does not match" in verified.stdout
    assert ws.run("unit", "close", "u1").returncode == 3


def test_nobody_without_the_grant_and_the_key_can_dismiss_it(ws: Workspace, tmp_path: Path) -> None:
    line = forge(ws, FORGED)
    before = ws.digest()
    done = ws.run("verify", "--dismiss", f"identity:{line}", "--by", "mallory", "--rationale", "mine")
    assert done.returncode == 3 and "accept grant" in one_line(done) and ws.digest() == before
    # a dismissal forged straight into the store, signed by a key the policy never listed
    key = make_key(tmp_path / "keys", "mallory")
    signer = sshsig.load_signer(key)
    workspace = json.loads(ws.store("identity").read_text().splitlines()[0])["hash"]
    import hashlib

    raw = ws.store("identity").read_bytes().split(b"\n")[line - 1]
    event = {"id": "01M8KJT9G0AAAAAAAAAAAAAAAA", "kind": "dismissal", "store": "identity", "line": line,
             "lineHash": hashlib.sha256(raw).hexdigest(), "by": "alice", "rationale": "x",
             "at": "2026-11-29T12:00:00Z", "workspace": workspace}  # fmt: skip
    event["sig"] = signer.sign(signed_bytes(event))
    clock.configure(True)
    forge(ws, event, valid_hash=True)
    done = ws.run("unit", "dispatch", "u1")
    assert done.returncode == 3 and "unknown" in one_line(done)
