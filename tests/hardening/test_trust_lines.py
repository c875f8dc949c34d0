"""Who acted, proven in the stores' lines (design §15, §26): what the host writes unsigned is derived
again by `verify` and `--once`; the passes verification begins beside the fold are used only for
the bytes the fold read; a close past its vetoes, an identity line edited in place or a signal
restated under its id counts for nothing, and a dismissal says what is still read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.log.store import event_hash
from tests import helpers
from tests.hardening.trust import (
    FUTURE_MEMORY,
    KILLED_ALONE,
    append_forged,
    begun_and_read,
    edited_in_place,
    forged_host_lines,
    forged_shorter,
    held,
)
from tests.helpers import (
    NOW,
    make_workspace,
    one_line,
    remember_args,
    report_args,
)


def test_verify_re_derives_what_the_host_writes_unsigned(tmp_path: Path) -> None:
    ws, _ = forged_host_lines(tmp_path)
    done = ws.run("verify")
    assert done.returncode == 1
    assert "the router writes obligations/blocking (forged?)" in done.stdout
    assert "in the future" in done.stdout


def test_once_names_what_verify_names_whether_or_not_it_routes_first(tmp_path: Path) -> None:
    """--once begins verify's passes over every line before its fold (engine.commands.verification
    .begin) and uses them where they read what it folded: with nothing to route it reports exactly
    what `verify` names; when it routes a signal first (a line they did not read), it ends them,
    begins again, and still reports exactly that."""
    ws, worktree = forged_host_lines(tmp_path)
    for routes_first in (False, True):
        if routes_first:
            ws.run(*report_args(subject="another", affects=["u1"]), cwd=worktree, check=True)
        once = ws.run("controlroom", "--once", "--json")
        assert once.returncode == 1, once.stderr
        data = json.loads(once.stdout)
        assert data["routed"] == (1 if routes_first else 0)
        done = ws.run("verify", "--json")
        named = [f"{f['store']}:{f['line']}: {f['message']}" for f in json.loads(done.stdout)["findings"]]
        assert done.returncode == 1
        assert any("the router writes obligations/blocking (forged?)" in n for n in named)
        assert any("in the future" in n for n in named)
        assert [f"{v['store']}:{v['line']}: {v['message']}" for v in data["verify"]] == named


def test_passes_begun_before_a_line_was_appended_are_not_used_for_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """What verify's passes begun before the fold did not read (a line appended in between) is
    judged all the same: they are ended and begun again (`Begun.covers`)."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.commands.verification import begin, findings, findings_later
    from engine.read.load import load

    ws = make_workspace(tmp_path, now=None, clock="system")
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    engine_ws = EngineWorkspace(ws.root)
    begun = begun_and_read(engine_ws)
    append_forged(ws, "memory", FUTURE_MEMORY)
    state = load(engine_ws, cached=False)
    assert not begun.covers(engine_ws, state)
    found = findings_later(engine_ws, state, host_events=True, begun=begun)()
    assert [str(f) for f in found] == [str(f) for f in findings(engine_ws, state, host_events=True)]
    assert any("memory.ndjson:1: stamped 2029-12-01T00:00:00Z, in the future" in str(f) for f in found)
    time.sleep(0.06)
    again = begin(engine_ws)  # begun after the append: used, and it names the same
    assert again is not None and again.covers(engine_ws, state)
    assert [str(f) for f in findings_later(engine_ws, state, host_events=True, begun=again)()] == [
        str(f) for f in found
    ]


def test_once_holding_the_decide_lock_cannot_show_its_passes_other_bytes_than_its_fold(
    tmp_path: Path,
) -> None:
    """A unit holds the decide lock (a plain flock anyone on the account may take) while --once
    waits for it, and edits signals.ndjson in place before letting go: --once begins verify's
    passes only once the lock is its own, so they read what its fold reads and name the edit."""
    import fcntl

    ws = make_workspace(tmp_path)
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    edited = edited_in_place(ws)
    lock = os.open(ws.root / ".regulator" / "decide.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        once = subprocess.Popen([helpers.REGULATOR, "controlroom", "--once", "--json"], cwd=ws.root, env=ws.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(1.5)  # it is waiting for the lock
        assert once.poll() is None
        ws.store("signals").write_bytes(edited)
    finally:
        os.close(lock)
    out, err = once.communicate(timeout=60)
    assert once.returncode == 1, err
    named = [f"{v['store']}:{v['line']}: {v['message']}" for v in json.loads(out)["verify"]]
    assert any("content does not match its hash (edited)" in n for n in named), named
    done = ws.run("verify", "--json")
    assert named == [f"{f['store']}:{f['line']}: {f['message']}" for f in json.loads(done.stdout)["findings"]]


@pytest.mark.parametrize("how", ["in place, the same size", "shorter, then appended to after the fold"])
def test_passes_that_read_a_store_later_written_are_judged_again(tmp_path: Path, how: str) -> None:
    """A store written after verify's passes read it and before the fold read it: what they read
    is not taken for what was folded (`Begun.covers`), and the lines are judged again as they are.
    Written in place at the same size; or rewritten shorter, then appended to once the fold is
    done (as the second adversarial review did), which by its size alone looks like a file
    appended to."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.commands.verification import findings, findings_later
    from engine.read.load import load

    ws = make_workspace(tmp_path)
    ws.run(*report_args(affects=["u1"]), "--by", "alice", check=True)
    ws.run("signals", "route", check=True)
    written = edited_in_place(ws) if how.startswith("in place") else forged_shorter(ws)
    engine_ws = EngineWorkspace(ws.root)
    begun = begun_and_read(engine_ws)
    size = begun.stamps["signals"][2]
    ws.store("signals").write_bytes(written)
    state = load(engine_ws, cached=False)
    if how.startswith("shorter"):
        assert state.obligations == {}  # the fold obeyed the forged record
        ws.run(*report_args(subject="later", affects=["u1"]), "--by", "alice", check=True)
        assert ws.store("signals").stat().st_size > size
    assert not begun.covers(engine_ws, state)
    found = [str(f) for f in findings_later(engine_ws, state, host_events=True, begun=begun)()]
    assert any("content does not match its hash (edited)" in f or "(forged?)" in f for f in found), found
    assert found == [str(f) for f in findings(engine_ws, state, host_events=True)]


def test_a_once_killed_alone_leaves_no_child_reading_the_stores(tmp_path: Path) -> None:
    """verify's passes run in forked children; killed alone (SIGKILL to its pid, not its group),
    --once leaves none of them running on (they die with their parent)."""
    ws = make_workspace(tmp_path)
    time.sleep(0.06)  # begin leaves a store changed in the last 50 ms to after the fold
    done = subprocess.run([sys.executable, "-c", KILLED_ALONE, str(ws.root)], capture_output=True, text=True,
                          env=ws.env, timeout=60)  # fmt: skip
    assert done.returncode == -9, done.stderr
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = (Path("/proc") / str(child) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return  # gone
        if state == "Z":
            return  # dead, waiting to be reaped
        time.sleep(0.05)
    raise AssertionError(f"child {child} still runs after its parent was killed")


def test_passes_begun_under_the_decide_lock_do_not_hold_it_after_once_lets_go(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """--once begins verify's passes inside its decide lock; the children keep no descriptor of
    the parent's but their pipe, so the lock is free for the next writer as soon as --once lets
    go, however long they still read."""
    from engine.checkout.workspace import Workspace as EngineWorkspace
    from engine.commands import verification
    from engine.log.files import lock_held

    def slow(*args: Any) -> list[list[Any]]:  # a pass over stores far larger than these
        time.sleep(10)
        return [[], []]

    monkeypatch.setattr(verification, "_chains_and_lines", slow)
    ws = make_workspace(tmp_path)
    engine_ws = EngineWorkspace(ws.root)
    time.sleep(0.06)  # begin leaves a store changed in the last 50 ms to after the fold
    with engine_ws.exclusive():
        begun = verification.begin(engine_ws)
    assert begun is not None and begun.child.pid is not None
    try:
        deadline = time.monotonic() + 5  # a child lets go of what it inherited as soon as it runs
        while lock_held(ws.root / ".regulator" / "decide.lock"):
            assert time.monotonic() < deadline, "the decide lock is still held by a child"
            time.sleep(0.02)
        assert os.waitpid(begun.child.pid, os.WNOHANG) == (0, 0)  # still reading
    finally:
        begun.cancel()


def test_a_close_past_its_vetoes_counts_for_nothing_and_once_names_it(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    _, obligations = held(ws)
    # what a unit sharing the account can append: its own close while held, an hour on, saying it
    # saw the stores as they are (design §22: re-derived there, it is vetoed); b1's close
    seen = {name: ws.store(name).stat().st_size for name in ("signals", "memory", "identity")}
    append_forged(
        ws,
        "units",
        {"kind": "close", "unit": "u1", "leaseHash": None, "seen": seen, "at": "2026-11-29T13:00:00Z"},
    )
    append_forged(
        ws,
        "units",
        {"kind": "close", "unit": "b1", "leaseHash": None, "seen": seen, "at": "2026-11-29T13:00:00Z"},
    )
    status = {u["id"]: u for u in ws.json("status")["units"]}
    assert status["u1"]["status"] == "in-progress" and status["u1"]["blockedBy"] == [obligations["u1"]]
    assert status["b1"]["status"] == "todo"
    done = ws.run("verify")
    assert done.returncode == 1
    assert f"close of u1 while held by blocking obligation {obligations['u1']}" in done.stdout
    assert "close of b1 while it was todo" in done.stdout
    once = ws.run("controlroom", "--once", "--json")
    assert once.returncode == 1
    reasons = json.loads(once.stdout)["exitReasons"]
    assert any("close of u1 while held" in r for r in reasons) and any(
        r.startswith("u1 is in progress") for r in reasons
    )


def test_an_identity_store_edited_in_place_lifts_no_hold(tmp_path: Path) -> None:
    """A unit sharing the account edits identity.ndjson in place (six bytes: `requireSignatures:
    true` -> `ture`, so the baseline's text no longer matches its hash) and appends an unsigned
    disposition of its own hold. Before, every read then folded an empty policy that required
    nothing, and the disposition counted. Now the policy in force is unknown: no person event
    counts, the hold stays, reads say why and `verify` names the edited line."""
    ws = make_workspace(tmp_path)
    worktrees, obligations = held(ws)
    identity = ws.store("identity")
    data = identity.read_bytes()
    assert data.count(b"requireSignatures: true") == 1
    identity.write_bytes(data.replace(b"requireSignatures: true", b"requireSignatures: ture"))
    append_forged(
        ws,
        "signals",
        {"kind": "disposition", "obligation": obligations["u1"], "disposition": "no-action", "by": "alice",
         "rationale": "fine", "at": NOW},
    )  # fmt: skip
    rows = {o["id"]: o["status"] for o in ws.json("obligations", "--all")}
    assert rows[obligations["u1"]] == "open"
    done = ws.run("status")
    assert "the policy in force is unknown (identity.ndjson:" in done.stderr
    assert "names unauthenticated" not in done.stderr + done.stdout
    before = ws.digest()
    done = ws.run("unit", "close", "u1", cwd=worktrees["u1"])
    assert done.returncode == 3 and "the policy in force is unknown" in one_line(done)
    assert ws.digest() == before  # nothing written
    done = ws.run("verify")
    assert done.returncode == 1
    named = [line for line in done.stdout.splitlines() if ".ndjson:" in line]
    assert named[0].startswith("identity.ndjson:") and "edited" in named[0], done.stdout
    assert not any(line.startswith("signals.ndjson:") for line in named)  # not judged one by one
    identity.write_bytes(data)  # restored: the policy is known again, the forged line counts for nothing
    rows = {o["id"]: o["status"] for o in ws.json("obligations", "--all")}
    assert rows[obligations["u1"]] == "open"
    assert "person event unsigned" in ws.run("verify").stdout


def test_a_signal_restated_under_its_id_before_routing_changes_nothing(tmp_path: Path) -> None:
    """A unit sharing the account sees a blocking signal that names it (u1, u3) arrive, and before
    the host routes it appends a well-chained copy with the same id naming only u3. Before, the
    copy replaced the signal: the router held u3 alone and `verify` was clean. Now the first line
    is routed, the copy counts for nothing and `verify` names it."""
    ws = make_workspace(tmp_path)
    worktrees = {u: ws.lease(u) for u in ("u1", "u3", "r1")}
    done = ws.run(*report_args(), "--json", cwd=worktrees["r1"], check=True)
    signal_id = json.loads(done.stdout)["id"]
    original = next(e for e in ws.events("signals") if e.get("id") == signal_id)
    copy = {k: v for k, v in original.items() if k not in ("prev", "hash")}
    copy["affectedUnits"] = ["u3"]
    append_forged(ws, "signals", copy)
    ws.run("signals", "route", check=True)
    held_units = sorted(o["unit"] for o in ws.json("obligations") if o["blocks"])
    assert held_units == ["u1", "u3"]
    assert ws.run("unit", "close", "u1", cwd=worktrees["u1"]).returncode == 3  # still held
    done = ws.run("verify")
    assert done.returncode == 1
    assert "a signal id already recorded" in done.stdout, done.stdout


def test_dismissing_an_edited_line_says_it_is_still_read_as_it_stands(tmp_path: Path) -> None:
    """Readers do not hash every line again: a memory line edited in place is read as it stands,
    and `verify --dismiss` says so (a malformed line's dismissal says it counts for nothing)."""
    ws = make_workspace(tmp_path)
    worktree = ws.lease("u1")
    ws.run(*remember_args("TZ", "tests run in UTC"), cwd=worktree, check=True)
    path = ws.store("memory")
    path.write_text(path.read_text().replace("tests run in UTC", "tests run in EST"))
    with open(path, "ab") as handle:
        handle.write(b"not json at all\n")
    done = ws.run("verify")
    assert done.returncode == 1 and "memory.ndjson:1: content does not match its hash" in done.stdout, (
        done.stdout
    )
    edited = ws.run("verify", "--dismiss", "memory:1", "--by", "alice", "--rationale", "seen", check=True)
    assert edited.stdout.strip() == (
        "dismissed memory:1 by alice; readers still take it as it stands: dismissing undoes nothing "
        "(retract, resolve or decide what the line says)"
    )
    malformed = ws.run("verify", "--dismiss", "memory:2", "--by", "alice", "--rationale", "seen", check=True)
    assert malformed.stdout.strip() == "dismissed memory:2 by alice; it still counts for nothing"
    checked = ws.run("verify")
    assert (
        checked.returncode == 0
        and "verify: ok: nothing undismissed; 2 bad line(s) dismissed" in checked.stdout
    )
    assert [e["note"] for e in ws.json("memory")] == ["tests run in EST"]  # what the message says


def test_a_dismissal_reads_every_finding_on_its_line(tmp_path: Path) -> None:
    """A line stamped in the future and hashed again is still read (its dismissal says so); a signed
    retraction edited in place fails its hash and its signature: it counts for nothing, and its
    dismissal says that, not that it is read as it stands."""
    ws = make_workspace(tmp_path, now=None, clock="system")  # times are judged on the system clock
    worktree = ws.lease("u1")
    review_by = str(datetime.now(UTC).date() + timedelta(days=30))
    first = ws.json(*remember_args("TZ", "tests run in UTC", review_by), cwd=worktree)["id"]
    ws.run("memory", "retract", first, "--by", "alice", "--reason", "wrong", check=True)
    path = ws.store("memory")
    lines = path.read_text().splitlines()
    remembered = json.loads(lines[0])
    remembered["at"], remembered["note"] = "2027-06-01T00:00:00Z", "EDITED: tests run in EST"
    remembered["hash"] = event_hash(remembered)
    retraction = json.loads(lines[1])
    retraction["prev"] = remembered["hash"]  # chained to the edited line, its own hash left as it was
    retraction["reason"] = "edited"
    path.write_text(json.dumps(remembered) + "\n" + json.dumps(retraction) + "\n")
    said = ws.run("verify").stdout
    assert "memory.ndjson:1: stamped 2027-06-01T00:00:00Z, in the future" in said, said
    assert "memory.ndjson:2: content does not match its hash" in said and "counts for nothing" in said, said
    future = ws.run("verify", "--dismiss", "memory:1", "--by", "alice", "--rationale", "seen", check=True)
    assert "readers still take it as it stands" in future.stdout
    signed = ws.run("verify", "--dismiss", "memory:2", "--by", "alice", "--rationale", "seen", check=True)
    assert signed.stdout.strip() == "dismissed memory:2 by alice; it still counts for nothing"
    listed = ws.json("memory")
    assert [(e["note"], e["status"]) for e in listed] == [("EDITED: tests run in EST", "current")]
