"""`regulator unit run --user` end to end (design §23): a unit confined to a throwaway account of its
own runs as it, cannot read `.regulator/`, reaches the host only through the door, and leaves no
process, set-id bit or open folder behind when its run ends; an account another run or process
holds, a worktree another account owns and an account that cannot run `regulator` are refused
before anything is written."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.host.accounts import account_processes
from engine.host.folders import private_group
from tests import scratch
from tests.helpers import REGULATOR, accounts, one_line, report_args
from tests.serving import Serving, wait_for
from tests.unit_run.common import (
    ALLOWED,
    ROOT,
    account_cli,
    row,
    run_unit,
    script,
    serve_back_and_finish,
    start_unit,
    system_workspace,
    tcp_serve,
)


def test_a_confined_unit_runs_as_its_account_and_cannot_read_the_stores(account: Any, tmp_path: Any) -> None:
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir=scratch.root()))
    try:
        home.chmod(0o755)  # the account passes through to its worktree, never into .regulator/
        ws = system_workspace(home)
        serving = Serving(ws)
        try:
            out, go = home / "seen", home / "go"
            out.touch()
            out.chmod(0o666)
            probe = (
                "import os, sys, json, pathlib, time\n"
                f"sys.path.insert(0, {str(ROOT)!r})\n"
                "from engine.doors.client import DoorClient\n"
                "found = {'uid': os.getuid(), 'env': sorted(os.environ)}\n"
                f"try:\n    open({str(ws.root / '.regulator' / 'units.ndjson')!r}).read(); found['stores'] = 'read'\n"
                "except OSError as exc:\n    found['stores'] = type(exc).__name__\n"
                "found['door'] = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN']).status()['status']\n"
                f"pathlib.Path({str(out)!r}).write_text(json.dumps(found))\n"
                f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.1)\n"
            )
            plain = {"LANG": "C.UTF-8", "TERM": "dumb", "TZ": "UTC", "SECRET_TOKEN": "do-not-leak"}
            host = start_unit(
                ws, "r1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe, env=plain
            )
            found = wait_for(
                lambda: out.read_text() and json.loads(out.read_text()), "the confined child's report"
            )
            assert found["uid"] == account.pw_uid
            assert found["stores"] == "PermissionError"  # .regulator/ is the host's alone
            assert found["door"] == "in-progress"  # the door is its way in
            assert set(found["env"]) == ALLOWED
            lease = ws.root / ".worktrees" / ".leases" / "r1" / ".regulator-lease.json"
            st = lease.stat()
            assert (st.st_uid, st.st_mode & 0o777) == (account.pw_uid, 0o600)
            assert row(ws, "r1")["confined"] is True
            assert "UNCONFINED" not in ws.run("controlroom", "--once").stdout
            go.touch()
            _, err = host.communicate(timeout=60)
            assert host.returncode == 0, err
            assert f"confined, as {account.pw_name}" in err
        finally:
            serving.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_an_account_that_cannot_read_the_stores_gets_one_line_naming_the_door(account: Any) -> None:
    """Every direct `regulator` command of a confined unit meets the stores it may not read before
    any rule: one line, exit 3, the door named where the environment holds a lease; never a
    traceback (found by an operator's review: 40 lines ending in PermissionError)."""
    cli = account_cli()
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir=scratch.root()))
    try:
        home.chmod(0o755)
        ws = system_workspace(home)
        assert (ws.root / ".regulator").stat().st_mode & 0o777 == 0o700

        def as_account(*args: str, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [*cli, *args], cwd=ws.root, env={"PATH": "/usr/bin:/bin", **env},
                user=account.pw_uid, group=account.pw_gid, extra_groups=[], capture_output=True, text=True,
            )  # fmt: skip

        before = ws.digest()
        plain = as_account("status")
        assert plain.returncode == 3 and "Traceback" not in plain.stderr, plain.stderr
        assert (
            "permission denied; run regulator as an account that may use the workspace's files"
            in one_line(plain)
        )
        unit = {"REGULATOR_DOOR_TOKEN": "t", "REGULATOR_UNIT": "r1"}
        for args in (["status"], report_args(), ["unit", "dispatch", "u1"]):
            done = as_account(*args, **unit)
            assert done.returncode == 3 and "Traceback" not in done.stderr, (args, done.stderr)
            assert "a confined unit cannot read the stores" in one_line(done) and "door call" in done.stderr
        assert ws.digest() == before
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_permission_met_after_a_write_is_not_said_as_a_refusal(account: Any) -> None:
    """Exit 3 says "refused, nothing written": a PermissionError met once a command has written
    (here `init`, stopped by a folder of root's in the account's repository) is one line and exit 1,
    saying the command stopped there (the review of D-220)."""
    cli = account_cli()
    home = Path(tempfile.mkdtemp(prefix="regconf-", dir=scratch.root()))
    try:
        home.chmod(0o755)
        repo = home / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / "key")], check=True)
        subprocess.run(["chown", "-R", f"{account.pw_uid}:{account.pw_gid}", str(repo)], check=True)
        (repo / "records").mkdir(mode=0o755)  # root's: init cannot write its records there
        who = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org"}
        who |= {"GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org"}
        done = subprocess.run(
            [*cli, "init", "--owner", "alice", "--owner-key", str(home / "key.pub")],
            cwd=repo, env={"PATH": "/usr/bin:/bin", "HOME": str(home), **who},
            user=account.pw_uid, group=account.pw_gid, extra_groups=[], capture_output=True, text=True,
        )  # fmt: skip
        line = one_line(done)
        assert done.returncode == 1, done.stderr
        assert f"{repo / 'records'}/" in line and "permission denied" in line
        assert line.endswith("the command stopped there (exit 1)")
        assert (repo / "regulator").is_dir()  # what it wrote before stays: hence not exit 3
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_user_refuses_stores_the_account_could_read(account: Any, tmp_path: Any) -> None:
    ws = system_workspace(tmp_path)
    serving = Serving(ws)
    try:
        (ws.root / ".regulator").chmod(0o755)
        before = ws.digest()
        done = run_unit(ws, "r1", "--user", account.pw_name, "--", "true")
        assert done.returncode == 3 and "could read" in one_line(done) and "chmod 700" in done.stderr
        assert ws.digest() == before
    finally:
        (ws.root / ".regulator").chmod(0o700)
        serving.close()


def test_user_refuses_a_workspace_the_account_cannot_reach(account: Any, tmp_path: Any) -> None:
    """pytest's folders are 0700 (root's): a unit confined to another account could not enter its
    worktree there. Refused before anything is written, not dispatched into a failed start."""
    ws = system_workspace(tmp_path)
    assert tmp_path.stat().st_mode & 0o777 == 0o700
    serving = Serving(ws)
    try:
        before = ws.digest()
        done = run_unit(ws, "r1", "--user", account.pw_name, "--", "true")
        assert done.returncode == 3 and f"--user {account.pw_name} cannot enter" in one_line(done)
        assert "nothing was written" in done.stderr and "namei -l" in done.stderr
        assert ws.digest() == before and not (ws.root / ".worktrees").exists()
        assert row(ws, "r1")["status"] == "todo"
    finally:
        serving.close()


def test_a_process_of_the_account_cannot_stop_the_reach_check(account: Any, tmp_path: Any) -> None:
    """The reach check runs a child as the account: a process of the account that stopped it
    (kill(-1, SIGSTOP) in a loop) hung `unit run` for good, and one that killed it made the check
    answer "enterable" (the review of D-219). It now runs once the account is claimed, so such a
    process is found first: refused at once, nothing written."""
    ws = system_workspace(tmp_path)  # under pytest's 0700 folder: the account cannot reach it
    serving = Serving(ws)
    stopper = subprocess.Popen(
        ["/usr/bin/python3", "-c", "import os, signal, time\nend = time.time() + 60\n"
         "while time.time() < end:\n    try: os.kill(-1, signal.SIGSTOP)\n    except OSError: pass\n"],
        user=account.pw_uid, group=account.pw_gid, extra_groups=[], cwd="/",
    )  # fmt: skip
    try:
        wait_for(lambda: account_processes(account.pw_uid), "the account's stopper")
        before = ws.digest()
        done = subprocess.run(  # it hung here for good before
            [REGULATOR, "unit", "run", "r1", "--user", account.pw_name, "--", "true"],
            cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 3 and "the account runs processes already" in one_line(done)
        assert ws.digest() == before and not (ws.root / ".worktrees").exists()
    finally:
        stopper.kill()
        stopper.wait()
        serving.close()


def test_user_refuses_an_account_another_run_or_process_holds_and_root(confined: Any) -> None:
    ws, serving, account, shared = confined
    go, ready = shared / "go", shared / "ready"
    agent = script(shared, "hold.sh", f"touch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n")
    first = start_unit(ws, "r1", "--user", account.pw_name, "--", str(agent))
    wait_for(ready.exists, "the first confined child started")
    before = ws.digest()
    second = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert second.returncode == 3, second.stderr
    assert f"another `unit run` (pid {first.pid}) is confined as {account.pw_name} now" in one_line(second)
    assert "each confined unit needs an account of its own" in second.stderr
    assert ws.digest() == before and row(ws, "b1")["status"] == "todo"  # nothing started, nothing written
    go.touch()
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    # a process of the account outside any run: refused as well
    stray = subprocess.Popen(["sleep", "600"], user=account.pw_uid, group=account.pw_gid, extra_groups=[])
    try:
        before = ws.digest()
        done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
        assert done.returncode == 3, done.stderr
        assert f"the account runs processes already (pid {stray.pid})" in one_line(done)
        assert ws.digest() == before
    finally:
        stray.kill()
        stray.wait(timeout=30)
    done = run_unit(ws, "b1", "--user", "root", "--", "true")
    assert done.returncode == 2 and "that is this host's own account" in one_line(done)
    assert run_unit(ws, "b1", "--user", account.pw_name, "--", "true").returncode == 0  # free again


def test_a_confined_units_dispatch_and_memory_carry_its_worktrees_revision(confined: Any) -> None:
    """git refuses a worktree another account owns ("dubious ownership"): the host reads the
    confined unit's HEAD from its own side, so its dispatch and what it remembers name the revision,
    and the memory's evidence is checked against trunk (not "unchecked" for ever)."""
    ws, serving, account, shared = confined
    out = shared / "remembered"
    probe = (
        "import os, sys, json, pathlib\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from engine.doors.client import DoorClient\n"
        "door = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN'])\n"
        "said = door.remember({'subject': 'pad', 'note': 'pinned', 'evidence': ['vendor/pad.js'],"
        f" 'reviewBy': {str(datetime.now(UTC).date() + timedelta(days=30))!r}}})\n"
        f"pathlib.Path({str(out)!r}).write_text(json.dumps(said))\n"
    )
    ws.write("vendor/pad.js", "// 1\n")
    ws.commit("pad")
    head = ws.git("rev-parse", "HEAD").strip()
    done = run_unit(ws, "u1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert out.exists(), done.stderr
    dispatched = [e for e in ws.events("units") if e["kind"] == "dispatch" and e["unit"] == "u1"]
    assert [e["revision"] for e in dispatched] == [head]
    (entry,) = [e for e in ws.events("memory") if e.get("subject") == "pad"]
    assert (entry["unit"], entry["revision"]) == ("u1", head)
    ws.write("vendor/pad.js", "// 2\n")
    ws.commit("pad changed")
    listed = ws.run("memory")
    assert listed.returncode == 0 and "evidence changed: vendor/pad.js" in listed.stdout, listed.stdout


def test_user_refuses_a_worktree_under_a_folder_another_account_owns(confined: Any) -> None:
    ws, serving, account, shared = confined
    theirs = shared / "theirs"
    theirs.mkdir()
    os.chown(theirs, account.pw_uid, account.pw_gid)
    before = ws.digest()
    done = run_unit(ws, "b1", "--user", account.pw_name, "--worktree", str(theirs / "wt"), "--", "true")
    assert done.returncode == 3, done.stderr
    assert f"{theirs} belongs to another account (uid {account.pw_uid})" in one_line(done)
    assert ws.digest() == before and not (theirs / "wt").exists() and row(ws, "b1")["status"] == "todo"
    # root's, but others may write in it: another account could make the worktree's folder first
    for mode in (0o777, 0o1777):  # sticky (as /tmp) protects what exists, not what is still to be made
        open_to_all = ws.root.parent / f"open-{mode:o}"  # in a folder of root's, 0755
        open_to_all.mkdir()
        open_to_all.chmod(mode)
        done = run_unit(
            ws, "b1", "--user", account.pw_name, "--worktree", str(open_to_all / "wt"), "--", "true"
        )
        assert done.returncode == 3, done.stderr
        assert f"{open_to_all} is writable by other accounts, which could make" in one_line(done)
        assert ws.digest() == before and not (open_to_all / "wt").exists()


def test_user_walks_a_worktrees_links_where_they_stand_and_refuses_acls(confined: Any) -> None:
    """A link on the way is checked where it stands and followed once: one another account made (in
    a folder it may write to) is refused; a folder with an ACL is refused whatever its mode; a link
    of root's to a folder of root's is resolved, and the run uses the folder it names (D-211)."""
    ws, serving, account, shared = confined
    home = ws.root.parent  # root's, 0755, in /tmp
    target = home / "target"
    target.mkdir()
    (shared / "real").symlink_to(target)  # shared: 0777, and the link is the other account's
    os.lchown(shared / "real", account.pw_uid, account.pw_gid)
    (home / "lnk").symlink_to(shared / "real")  # root's link, through the other account's
    before = ws.digest()
    done = run_unit(ws, "b1", "--user", account.pw_name, "--worktree", str(home / "lnk" / "wt"), "--", "true")
    assert done.returncode == 3 and f"{shared / 'real'} belongs to another account" in one_line(done)
    assert ws.digest() == before and not (target / "wt").exists()
    if shutil.which("setfacl"):
        acl = home / "acl"
        acl.mkdir(mode=0o755)
        subprocess.run(["setfacl", "-d", "-m", f"u:{account.pw_name}:rwx", str(acl)], check=True)
        done = run_unit(ws, "b1", "--user", account.pw_name, "--worktree", str(acl / "wt"), "--", "true")
        assert done.returncode == 3 and f"{acl} is writable by other accounts" in one_line(done)
        assert ws.digest() == before and not (acl / "wt").exists()
    (home / "safe").symlink_to(target)  # root's link to root's folder: followed once, then not again
    seen = shared / "pwd"
    done = run_unit(
        ws, "b1", "--user", account.pw_name, "--worktree", str(home / "safe" / "wt"), "--",
        "/bin/sh", "-c", f"pwd > {seen}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert seen.read_text().strip() == str(target / "wt")


def test_a_confined_unit_cannot_borrow_another_worktrees_revision_or_crash_the_host(confined: Any) -> None:
    """The unit owns its worktree: a `.git` made a link to another worktree's `.git`, or holding a
    NUL, gives no revision (never the other's HEAD, never a traceback): what it remembers then is
    `evidence unchecked`, not current (D-207, after review)."""
    ws, serving, account, shared = confined
    older = ws.git("rev-parse", "HEAD").strip()
    ws.write("vendor/pad.js", "// 1\n")
    ws.commit("pad")
    other = ws.root / ".worktrees" / "other"
    ws.git("worktree", "add", "-q", "--detach", str(other), older)  # the host's, at an older commit
    # a colluding unit that owned `other` left its `.git` a link to u3's: `other`'s git dir names it back
    (other / ".git").unlink()
    (other / ".git").symlink_to(ws.root / ".worktrees" / "u3" / ".git")
    # a worktree whose recorded path runs through a link that another account turned to u3's folder
    relinked = ws.root.parent / "relinked"
    ws.git("worktree", "add", "-q", "--detach", str(relinked), older)
    (ws.root / ".git" / "worktrees" / "relinked" / "gitdir").write_text(f"{shared / 'via' / '.git'}\n")
    out = shared / "said"
    probe = (
        "import os, sys, json, pathlib\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from engine.doors.client import DoorClient\n"
        "door = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN'])\n"
        f"review = {str(datetime.now(UTC).date() + timedelta(days=30))!r}\n"
        "def note(subject):\n"
        "    return door.remember({'subject': subject, 'note': 'n', 'evidence': ['vendor/pad.js'], 'reviewBy': review})\n"
        "said = [note('honest')]\n"
        "os.rename('.git', '.git.real')\n"
        f"os.symlink({str(other / '.git')!r}, '.git')\n"
        "said.append(note('linked'))\n"
        "os.remove('.git')\n"
        "pathlib.Path('.git').write_bytes(b'gitdir: \\x00\\n')\n"
        "said.append(note('nul'))\n"
        f"pathlib.Path('.git').write_text('gitdir: {ws.root / '.git' / 'worktrees' / 'other'}\\n')\n"
        "said.append(note('named back through a link'))\n"
        f"os.symlink(os.getcwd(), {str(shared / 'via')!r})\n"  # the unit's link, where it may write
        f"pathlib.Path('.git').write_text('gitdir: {ws.root / '.git' / 'worktrees' / 'relinked'}\\n')\n"
        "said.append(note('named back by a path through a link'))\n"
        f"pathlib.Path({str(out)!r}).write_text(json.dumps(said))\n"
    )
    done = run_unit(ws, "u3", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert out.exists(), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in out.read_text()
    revisions = {e["subject"]: e["revision"] for e in ws.events("memory")}
    newer = ws.git("rev-parse", "HEAD").strip()
    assert revisions["honest"] == newer  # u3's worktree was made at trunk
    assert revisions["linked"] is None and revisions["nul"] is None  # never the other's `older`
    assert revisions["named back through a link"] is None
    assert revisions["named back by a path through a link"] is None


def test_a_confined_units_report_records_its_worktrees_revision(confined: Any) -> None:
    """The worktree is the account's: git run there by the host refuses it ("dubious ownership"),
    so the host reads its HEAD from the repository's worktree metadata instead."""
    from tests.serving import REPORT

    ws, serving, account, shared = confined
    report = shared / "report.json"
    report.write_text(json.dumps(REPORT))
    report.chmod(0o644)
    probe = (
        f"import json, os, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from engine.doors.client import DoorClient\n"
        "door = DoorClient(os.environ['REGULATOR_DOOR'], os.environ['REGULATOR_DOOR_TOKEN'])\n"
        f"door.call('report_intelligence', json.loads(open({str(report)!r}).read()))\n"
    )
    done = run_unit(ws, "r1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert done.returncode == 0, done.stderr
    trunk = subprocess.run(
        ["git", "-C", str(ws.root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    signal_event = next(e for e in ws.events("signals") if e.get("subject") == REPORT["subject"])
    assert signal_event["revision"] == trunk


def test_a_worktree_another_account_holds_is_refused_before_anything(confined: Any) -> None:
    """A worktree an earlier confined run's account holds: a unit under another account could not
    work in it, and an unconfined one would work, as the host, in a folder that account can change.
    Refused (exit 3) naming whose it is, nothing dispatched; the same account runs in it again."""
    ws, serving, account, shared = confined
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert done.returncode == 0, done.stderr
    worktree = ws.root / ".worktrees" / "b1"
    events = (ws.root / ".regulator" / "units.ndjson").read_bytes()
    other = run_unit(ws, "u1", "--worktree", str(worktree), "--", "true")
    assert other.returncode == 3, other.stderr
    assert one_line(other) == (
        f"regulator: the worktree {worktree} is {account.pw_name}'s (an earlier confined run's): run the unit "
        f"with `--user {account.pw_name}`, or remove it (`rm -rf {worktree} && git worktree prune`) for a fresh one"
    )
    assert (ws.root / ".regulator" / "units.ndjson").read_bytes() == events  # nothing dispatched
    again = run_unit(ws, "u1", "--user", account.pw_name, "--worktree", str(worktree), "--", "true")
    assert again.returncode == 0, again.stderr


def test_an_account_that_cannot_run_regulator_is_said_before_the_run(account: Any, tmp_path: Any) -> None:
    """The `regulator` a confined unit's harness names must be one its account can run: asked of the
    account itself, as the unit will be confined (a virtualenv under root's 0700 home is not)."""
    from engine.host.accounts import Account, cannot_run

    unit = Account(account.pw_name, account.pw_uid, account.pw_gid, "/")
    locked = Path(tempfile.mkdtemp(prefix="reglocked-", dir=scratch.root()))  # 0700, root's
    try:
        program = locked / "regulator"
        program.write_text("#!/bin/sh\necho regulator 0\n")
        program.chmod(0o755)
        assert cannot_run(unit, str(program), "/usr/bin:/bin") == "Permission denied"
        assert cannot_run(unit, "/bin/true", "/usr/bin:/bin") is None
        locked.chmod(0o755)
        assert cannot_run(unit, str(program), "/usr/bin:/bin") is None
        program.write_text("#!/bin/sh\necho 'no module named controlroom' >&2\nexit 1\n")
        assert (
            cannot_run(unit, str(program), "/usr/bin:/bin") == "`--version` said: no module named controlroom"
        )
        # what the account may put in the probe (a .pth in its home's user site): its output is
        # bounded, and nothing it starts outlives the probe (the review of D-215)
        program.write_text(
            "#!/bin/sh\nsetsid sleep 600 </dev/null >/dev/null 2>&1 &\nhead -c 20000000 /dev/zero\n"
            "head -c 20000000 /dev/zero | tr '\\0' x >&2\necho >&2\necho last >&2\nexit 1\n"
        )
        assert cannot_run(unit, str(program), "/usr/bin:/bin") == "`--version` said: last"
        from engine.host.accounts import account_processes

        assert account_processes(account.pw_uid) == []
    finally:
        shutil.rmtree(locked)


def test_claude_codes_harness_is_refused_for_an_account_that_cannot_run_regulator(confined: Any) -> None:
    """The harness's hooks and MCP server name the `regulator` running `unit run`: an account that
    cannot run it would get a harness whose every hook fails (and a failing hook does not block the
    tool it guards). Refused (exit 3), nothing dispatched; the env harness runs, with a warning."""
    from engine.host.accounts import Account, cannot_run

    ws, serving, account, shared = confined
    unit = Account(account.pw_name, account.pw_uid, account.pw_gid, "/")
    why = cannot_run(unit, REGULATOR, "/usr/local/bin:/usr/bin:/bin")
    if why is None:
        pytest.skip(f"{account.pw_name} can run {REGULATOR} on this machine")
    events = (ws.root / ".regulator" / "units.ndjson").read_bytes()
    done = run_unit(ws, "b1", "--user", account.pw_name, "--harness", "claude-code", "--", "true")
    assert done.returncode == 3, done.stderr
    line = one_line(done)
    assert line.startswith(f"regulator: --user {account.pw_name} cannot run {REGULATOR} ({why}")
    assert line.endswith(
        "): the harness's hooks and MCP server name it; install regulator where every account can read "
        "and execute it (docs/units.md)"
    )
    assert (ws.root / ".regulator" / "units.ndjson").read_bytes() == events
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert done.returncode == 0, done.stderr
    assert f"warning: --user {account.pw_name} cannot run {REGULATOR} ({why}" in done.stderr
    assert "): the unit's `regulator door call` names it" in done.stderr


def test_a_script_whose_interpreter_the_account_cannot_reach_says_so(account: Any) -> None:
    """A virtualenv made from a pyenv or conda Python links its python3 under root's home: the
    script is readable, its interpreter is not, and `Permission denied` alone misleads."""
    from engine.host.accounts import Account
    from engine.host.unitrun import _interpreter_note

    home = Path(tempfile.mkdtemp(prefix="regconf-", dir=scratch.root()))
    try:
        home.chmod(0o755)
        hidden, bin_ = home / "hidden", home / "bin"
        hidden.mkdir(mode=0o700)
        bin_.mkdir(mode=0o755)
        (hidden / "python3.11").write_text("")
        (bin_ / "python3").symlink_to(hidden / "python3.11")
        script = bin_ / "regulator"
        script.write_text(f"#!{bin_ / 'python3'}\n")
        unit = Account(account.pw_name, account.pw_uid, account.pw_gid, "/")
        note = _interpreter_note(unit, str(script))
        assert note == (
            f"; its interpreter {bin_ / 'python3'} is {hidden / 'python3.11'}, in a folder the account cannot enter"
        )
        hidden.chmod(0o755)  # reachable: nothing to add
        assert _interpreter_note(unit, str(script)) == ""
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_an_unconfined_worktree_is_never_reached_through_a_link_another_account_may_turn(
    confined: Any,
) -> None:
    """An unconfined unit runs as the host: `--worktree` through a link in a folder another account
    may write would let that account choose, at any time, where the host works. Refused as for a
    confined run (exit 3, nothing written; the review of D-215)."""
    ws, serving, account, shared = confined
    link = shared / "wt"
    link.symlink_to(ws.root / ".worktrees")
    events = (ws.root / ".regulator" / "units.ndjson").read_bytes()
    done = run_unit(ws, "u1", "--worktree", str(link / "u1"), "--", "true")
    assert done.returncode == 3, done.stderr
    assert one_line(done).startswith(f"regulator: --worktree {link / 'u1'}: ")
    assert (ws.root / ".regulator" / "units.ndjson").read_bytes() == events


def test_a_confined_child_enters_its_worktree_as_its_account(account: Any) -> None:
    """The worktree is entered after the switch to the account, never as root: a worktree the
    account turned into a link to a folder only root may enter (while the host checked it can run
    regulator) gives no way in; the run does not start (the review of D-215)."""
    from engine.host.confine import lock_down

    secret = Path(tempfile.mkdtemp(prefix="regsecret-", dir=scratch.root()))  # root's, 0700
    shared = Path(tempfile.mkdtemp(prefix="regopen-", dir=scratch.root()))
    try:
        shared.chmod(0o755)
        link = shared / "wt"
        link.symlink_to(secret)

        def pwd_in(folder: Path) -> subprocess.CompletedProcess:
            return subprocess.run(
                ["/bin/pwd"], user=account.pw_uid, group=account.pw_gid, extra_groups=[],
                preexec_fn=lock_down(str(folder)), capture_output=True, text=True, check=False,
            )  # fmt: skip

        with pytest.raises(subprocess.SubprocessError):
            pwd_in(link)
        assert pwd_in(shared).stdout.strip() == str(shared)
    finally:
        shutil.rmtree(secret)
        shutil.rmtree(shared)


def test_a_group_no_one_else_is_in_and_a_read_only_acl_let_no_account_in(confined: Any) -> None:
    """Group write counts only where another account is in the group (umask 002 and a user's own
    group, the default on Debian, Ubuntu and Fedora, refused every run before), and an ACL only
    where it lets another account write: the review of D-215."""
    ws, serving, account, shared = confined
    if not private_group(0, 0):
        pytest.skip("root's group has other members here")
    home = ws.root.parent
    team = home / "team"
    team.mkdir()
    team.chmod(0o775)  # root:root, no one else in root's group
    done = run_unit(ws, "u1", "--worktree", str(team / "wt"), "--", "true")
    assert done.returncode == 0, done.stderr
    os.chown(team, 0, account.pw_gid)  # the unit account's group: another account may write here
    done = run_unit(ws, "b1", "--worktree", str(team / "wt2"), "--", "true")
    assert done.returncode == 3
    assert one_line(done) == (
        f"regulator: --worktree {team / 'wt2'}: {team} is writable by other accounts, which could make "
        f"{team / 'wt2'} first (a link; `chmod go-w {team}`, and `getfacl {team}` for an ACL); give a folder "
        "under one of yours (`--worktree DIR`)"
    )
    if shutil.which("setfacl"):
        read_only = home / "readable"
        read_only.mkdir(mode=0o755)
        subprocess.run(["setfacl", "-m", f"u:{account.pw_name}:rx", str(read_only)], check=True)
        done = run_unit(ws, "b1", "--worktree", str(read_only / "wt"), "--", "true")
        assert done.returncode == 0, done.stderr


def test_a_group_another_account_shares_by_gid_is_not_private(account: Any, tmp_path: Any) -> None:
    """A group is a user's own only when nothing else lets another account in: a second group with
    the same gid (`groupadd -o`) that the account is in made a group-writable folder pass (the
    review of D-217)."""
    if shutil.which("groupadd") is None:
        pytest.skip("needs groupadd")
    from engine.host.folders import others_may_write

    name = f"regg{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "-M", "-r", "-U", "-s", "/usr/sbin/nologin", name], check=True, capture_output=True
    )
    try:
        owner = pwd.getpwnam(name)
        folder = tmp_path / "team"
        folder.mkdir()
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        folder.chmod(0o775)
        assert private_group(owner.pw_gid, owner.pw_uid) and not others_may_write(folder.stat())
        twin = f"{name}d"
        accounts("groupadd", "-o", "-g", str(owner.pw_gid), twin)
        try:
            accounts("usermod", "-aG", twin, account.pw_name)
            assert not private_group(owner.pw_gid, owner.pw_uid) and others_may_write(folder.stat())
        finally:
            accounts("groupdel", "-f", twin)
    finally:
        accounts("userdel", name)
        import grp

        if any(group.gr_name == name for group in grp.getgrall()):  # userdel removes it, where it made it
            accounts("groupdel", name)


def test_unit_run_refuses_a_door_on_plain_tcp(confined: Any) -> None:
    """An adversarial review: with serve's door on 127.0.0.1:PORT, a confined unit took the port as
    soon as serve stopped, answered another unit's heartbeats (so its run saw no outage) and
    collected its lease token; a later review did it from another workspace. `unit run`, confined
    or not, is refused (exit 3, nothing written) while serve's door is plain TCP: a Unix socket (the
    default) or TLS."""
    import signal

    ws, serving, account, shared = confined
    serving.close()
    tcp, door = tcp_serve(ws)
    try:
        assert door.startswith("http://127.0.0.1:")
        before = ws.digest()
        for user in (["--user", account.pw_name], []):
            done = run_unit(ws, "b1", *user, "--", "true")
            assert (done.returncode, done.stdout) == (3, ""), done.stderr
            assert one_line(done) == (
                f"regulator: serve's door is plain TCP ({door}): any local account (a confined unit of any "
                "workspace too) may take its port while serve is stopped, answer the run's calls and read its "
                "token; run serve on a Unix socket (its default) or with --tls-cert/--tls-key (D-259)"
            )
            assert ws.digest() == before
    finally:
        tcp.send_signal(signal.SIGTERM)
        tcp.wait(timeout=60)


def test_serve_refuses_plain_tcp_while_a_confined_unit_is_started(confined: Any) -> None:
    """The third adversarial review: a confined run that outlived serve's restart onto plain TCP
    took the port at the next stop and collected an unconfined unit's token (`unit run --user`
    refuses such a door only as it starts). serve refuses to start on plain TCP while a confined
    unit is in progress or lost (exit 3, naming it); on its Unix socket it starts and the run goes on."""
    ws, serving, account, shared = confined
    ready, finish = shared / "ready", shared / "finish"
    host = start_unit(
        ws, "b1", "--user", account.pw_name, "--", "/bin/sh", "-c",
        f"touch {ready}; while [ ! -e {finish} ]; do sleep 0.1; done",
    )  # fmt: skip
    wait_for(ready.exists, "the confined child started")
    serving.close()
    done = ws.run("serve", "--listen", "127.0.0.1:0")
    assert (done.returncode, done.stdout) == (3, ""), done.stderr
    assert one_line(done) == (
        "regulator: --listen 127.0.0.1:0: confined units are started (b1): their accounts could take a plain "
        "TCP port while serve is stopped and read the other units' tokens; serve on a Unix socket (the "
        "default) or with --tls-cert/--tls-key, or close or demote them first (D-259)"
    )
    serve_back_and_finish(ws, serving.sock, finish, host)
    assert host.returncode == 0
