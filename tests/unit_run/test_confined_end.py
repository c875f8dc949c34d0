"""What a confined run (`unit run --user`, design §23) leaves behind when it ends: nothing of its
account's. Every process of the account is killed (a setsid leftover, one whose first thread
exited, a kill helper the account stopped, and under SIGTERM while the account is checked); a
set-user-id or set-group-id bit it made or inherited is gone; its worktree is closed to other
accounts; the next run takes a lease folder of its own; no filter, no confined run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from engine.base.errors import Refused
from engine.doors.client import UNAUTHORIZED, DoorClient
from engine.host.accounts import account_processes
from tests import scratch
from tests.helpers import REGULATOR, one_line
from tests.serving import wait_for
from tests.unit_run.common import LEFTOVER, NOTE, ROOT, alive, row, run_unit, script, start_unit


def test_a_confined_units_set_user_id_file_loses_its_bit_when_the_run_ends(confined: Any) -> None:
    """A set-user-id file the account left would let anyone run code as it after its processes are
    gone (and race what root does for its next run): the bits go when the run ends."""
    ws, serving, account, shared = confined
    planted = ws.root / ".worktrees" / "b1" / "planted"
    # the unit cannot set the bits itself (D-213): the file gets them meanwhile, as it might by a
    # way this host does not foresee
    go, ready = shared / "go", shared / "ready"
    agent = script(
        shared, "plant.sh", f"cp /bin/true planted\ntouch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n"
    )
    host = start_unit(ws, "b1", "--user", account.pw_name, "--", str(agent))
    wait_for(ready.exists, "the unit ready")
    planted.chmod(0o6755)
    go.touch()
    _, err = host.communicate(timeout=60)
    assert host.returncode == 0, err
    mode = planted.stat().st_mode
    assert planted.stat().st_uid == account.pw_uid and not mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)
    assert mode & 0o755 == 0o755  # only the set-id bits went


def test_another_accounts_set_user_id_file_linked_into_the_worktree_keeps_its_bit(
    confined: Any, tmp_path: Any
) -> None:
    """An adversarial review: where fs.protected_hardlinks is 0 (the kernel's default), a unit
    could hard-link root's /usr/bin/sudo into its worktree, and the end of its run, stripping
    every set-id bit there as root, took sudo's. Only the account's own files are changed; a
    file of another's is named and left as it is."""
    ws, serving, account, shared = confined
    victim = tmp_path / "victim"  # root's set-user-id program, outside the worktree (same filesystem)
    shutil.copy("/bin/true", victim)
    victim.chmod(0o4755)
    link = ws.root / ".worktrees" / "b1" / "deep" / "linked\x1b[31m"
    go, ready = shared / "go", shared / "ready"
    agent = script(shared, "link.sh", f"mkdir deep\ntouch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n")
    host = start_unit(ws, "b1", "--user", account.pw_name, "--", str(agent))
    wait_for(ready.exists, "the unit ready")
    os.link(victim, link)  # as the unit would, where the kernel lets an account link another's file
    go.touch()
    _, err = host.communicate(timeout=60)
    assert host.returncode == 0, err
    assert victim.stat().st_mode & stat.S_ISUID and victim.stat().st_nlink == 2  # sudo keeps its bit
    assert (
        "regulator: b1: warning: 'deep/linked\\x1b[31m' in its worktree is set-user-id or set-group-id and not "
        in err
    ), err
    assert "\x1b" not in err


def test_a_confined_unit_can_neither_give_nor_gain_a_set_id_bit(confined: Any) -> None:
    """A set-user-id file the unit made (anywhere it may write, /tmp included) would let another
    account start a process as the unit, beyond the account's own kill(-1), and run code as it
    after its run; a set-user-id program of another account would let the unit's process take that
    account's uid as its real one. Neither (D-213): every way to give a mode a set-id bit is EPERM,
    and so are a namespace and a mount (a file system mounted in its own user namespace could show a
    set-user-id file for overlayfs to copy up onto the disk: the review); clone3 is ENOSYS and
    threads start all the same; another account's set-user-id program runs without its rights."""
    ws, serving, account, shared = confined
    numbers = {"x86_64": (240, 272, 165), "aarch64": (180, 97, 40)}.get(os.uname().machine)
    if numbers is None:
        pytest.skip("the raw system calls' numbers are known here for x86_64 and aarch64 only")
    mq_open, unshare, mount = numbers
    theirs = shared / "theirs"  # another account's set-user-id program: `id -u` says whose rights it has
    shutil.copy("/usr/bin/id", theirs)
    os.chown(theirs, 65534, 65534)
    theirs.chmod(0o4755)
    report = shared / "report"
    child = (
        "import os, subprocess\n"
        "out = []\n"
        "open('made', 'w').close()\n"
        "def attempt(name, call):\n"
        "    try:\n"
        "        call()\n"
        "        out.append(name + ' ok')\n"
        "    except OSError as exc:\n"
        "        out.append(name + ' ' + str(exc.errno))\n"
        "attempt('chmod', lambda: os.chmod('made', 0o4755))\n"
        "attempt('chmod-g', lambda: os.chmod('made', 0o2755))\n"
        "attempt('fchmod', lambda: os.fchmod(os.open('made', os.O_RDONLY), 0o6755))\n"
        "attempt('open', lambda: os.open('new', os.O_CREAT | os.O_WRONLY, 0o4755))\n"
        f"attempt('tmp', lambda: os.open({str(shared / 'tmpfile')!r}, os.O_CREAT | os.O_WRONLY, 0o4755))\n"
        "attempt('mkdir', lambda: os.mkdir('dir', 0o4755))\n"
        "attempt('mkdir-g', lambda: os.mkdir('gdir', 0o2755))\n"
        "import ctypes, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def raw(*args):\n"
        "    if libc.syscall(*args) == -1: raise OSError(ctypes.get_errno(), 'refused')\n"
        f"attempt('mq', lambda: raw({mq_open}, b'/regt', os.O_CREAT | os.O_RDWR, 0o4755, None))\n"
        f"attempt('userns', lambda: raw({unshare}, 0x10000000))\n"
        f"attempt('mount', lambda: raw({mount}, b'none', b'.', b'tmpfs', 0, None))\n"
        "attempt('clone3', lambda: raw(435, None, 0))\n"
        "ran = []\n"
        "t = threading.Thread(target=lambda: ran.append(1)); t.start(); t.join()\n"
        "out.append('thread ' + str(ran))\n"
        "attempt('plain', lambda: os.chmod('made', 0o755))\n"
        f"out.append('euid ' + subprocess.run([{str(theirs)!r}, '-u'], capture_output=True, text=True).stdout.strip())\n"
        f"open({str(report)!r}, 'w').write('\\n'.join(out))\n"
    )
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", child)
    assert done.returncode == 0, done.stderr
    lines = report.read_text().splitlines()
    assert lines == [
        "chmod 1", "chmod-g 1", "fchmod 1", "open 1", "tmp 1", "mkdir 1", "mkdir-g ok", "mq 1", "userns 1",
        "mount 1", "clone3 38", "thread [1]", "plain ok", f"euid {account.pw_uid}",
    ], lines  # fmt: skip
    assert not (shared / "tmpfile").exists()
    made = ws.root / ".worktrees" / "b1" / "made"
    assert stat.S_IMODE(made.stat().st_mode) == 0o755


def test_a_confined_run_is_refused_where_no_filter_is_known_for_the_architecture() -> None:
    """No confined run starts unfiltered (D-213): the filter is built for x86_64 and aarch64 only,
    and each is a whole number of BPF instructions ending in a return."""
    from engine.host.confine import program

    with pytest.raises(Refused, match=r"no filter for this machine's architecture \(riscv64\)"):
        program("riscv64")
    for machine in ("x86_64", "aarch64"):
        code = program(machine)
        assert len(code) % 8 == 0 and code[:2] == b"\x20\x00" and code[-8:-6] == b"\x06\x00"


def test_a_confined_worktree_is_closed_to_other_accounts_when_its_run_ends(confined: Any) -> None:
    """A set-user-id file 300 folders deep is past any walk's depth: the worktree the account was
    given is 0700 again when the run ends, so no other account passes into it to start one. A
    folder of root's that `--worktree` named is neither closed nor stripped (D-211, sixth review)."""
    ws, serving, account, shared = confined
    go, ready = shared / "go", shared / "ready"
    agent = script(
        shared, "deep.sh",
        "chmod 755 .\nd=deep; for i in $(seq 300); do d=$d/d; done\nmkdir -p $d\ncp /bin/true $d/planted\n"
        f"touch {ready}\nwhile [ ! -e {go} ]; do sleep 0.1; done\n",
    )  # fmt: skip
    worktree = ws.root / ".worktrees" / "b1"
    planted = worktree.joinpath("deep", *["d"] * 300, "planted")
    host = start_unit(ws, "b1", "--user", account.pw_name, "--", str(agent))
    wait_for(ready.exists, "the unit ready")
    os.chmod(
        os.path.join(*planted.parts[len(worktree.parts) :]), 0o6755, dir_fd=os.open(worktree, os.O_RDONLY)
    )
    go.touch()
    _, err = host.communicate(timeout=60)
    assert host.returncode == 0, err
    assert planted.exists()  # root sees it
    other = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-e", str(planted)], check=False)
    assert other.returncode == 1  # nobody else passes into the worktree
    assert (worktree.stat().st_uid, stat.S_IMODE(worktree.stat().st_mode)) == (account.pw_uid, 0o700)
    # a folder of root's, named by --worktree: its files and mode are not the run's to change, and
    # a confined unit could not write in it: refused before anything (D-215, its review)
    theirs = ws.root.parent / "roots"
    theirs.mkdir(mode=0o755)
    kept = theirs / "kept"
    shutil.copy("/bin/true", kept)
    kept.chmod(0o4755)
    done = run_unit(ws, "u1", "--user", account.pw_name, "--worktree", str(theirs), "--", "true")
    assert done.returncode == 3, done.stderr
    assert one_line(done) == (
        f"regulator: the worktree {theirs} is the host's (made for an unconfined run, or a folder you named): a "
        f"confined unit could not write in it; remove it (`rm -rf {theirs} && git worktree prune`) for a fresh "
        "one, or run the unit unconfined"
    )
    assert stat.S_IMODE(kept.stat().st_mode) == 0o4755 and stat.S_IMODE(theirs.stat().st_mode) == 0o755


def test_a_process_whose_first_thread_exited_is_killed_with_its_account(confined: Any) -> None:
    """A process whose main thread exits (raw SYS_exit) while another thread runs shows `Z` in its
    status: it is still alive, found and killed when the run ends, and blocks a later claim
    meanwhile (D-166, D-168; a seventh review)."""
    ws, serving, account, shared = confined
    number = {"x86_64": 60, "aarch64": 93}.get(os.uname().machine)
    if number is None:
        pytest.skip("SYS_exit's number is known here for x86_64 and aarch64 only")
    beat = shared / "beat"
    beat.touch()
    beat.chmod(0o666)
    child = (
        "import ctypes, os, threading, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        def beating():\n"
        "            while True:\n"
        f"                with open({str(beat)!r}, 'a') as handle: handle.write('x')\n"
        "                time.sleep(0.05)\n"
        "        threading.Thread(target=beating).start()\n"
        "        time.sleep(0.3)\n"
        f"        ctypes.CDLL(None).syscall({number}, 0)  # the main thread alone\n"
        "    os._exit(0)\n"
        "time.sleep(1)\n"
    )
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", child)
    assert done.returncode == 0, done.stderr

    assert account_processes(account.pw_uid) == []
    size = beat.stat().st_size
    assert size > 0  # it did beat while the run lasted
    time.sleep(0.5)
    assert beat.stat().st_size == size  # and beats no more


def on_a_terminal(ws: Any, account: Any, probe: str) -> bytes:
    """`unit run b1 --user ACCOUNT -- python3 -c PROBE` with a pty on its three streams, as from
    root's terminal: everything the terminal received (the run exits 0)."""
    master, slave = os.openpty()
    try:
        host = subprocess.Popen(
            [REGULATOR, "unit", "run", "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe],
            cwd=ws.root, env=ws.env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        said = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's other end is closed: the run is over
                break
            if not chunk:
                break
            said += chunk
        assert host.wait(timeout=60) == 0, said
    finally:
        os.close(master)
    return said


def test_a_confined_child_never_holds_the_hosts_terminal(confined: Any) -> None:
    """Run from a terminal, a confined child gets none of it (its own session; no terminal on its
    streams, its output relayed): it could push keystrokes into root's shell or hand the terminal
    to another account that reads what root types (D-211, eighth review)."""
    ws, serving, account, shared = confined
    probe = "import os; print('tty', os.isatty(0), os.isatty(1), os.isatty(2), os.getsid(0) == os.getpid())"
    said = on_a_terminal(ws, account, probe)
    assert b"tty False False False True" in said, said


def test_a_confined_childs_output_reaches_the_terminal_with_its_controls_escaped(confined: Any) -> None:
    """A confined child's output relayed to root's terminal: an adversarial review's unit retitled
    the window (OSC), coloured and erased lines (`ESC[1A ESC[2K`: `unit run`'s own warning) and could
    ask the terminal for answers that land in root's shell. Every control and invisible character
    is written as an escape; newlines, tabs, carriage returns and text (UTF-8 whole across the
    relay's reads; bytes that are no UTF-8 as \\xNN) pass."""
    ws, serving, account, shared = confined
    probe = (
        "import sys, time; out = sys.stdout.buffer; "
        "out.write('\\x1b]0;PWNED\\x07\\x1b[31mRED\\x1b[0m\\x1b[1A\\x1b[2K\\u202eevil\\tcol\\r\\n'.encode()); "
        "out.write('caf'.encode() + b'\\xc3'); out.flush(); time.sleep(0.3); "
        "out.write(b'\\xa9 \\xff done\\n'); out.flush()"
    )
    said = on_a_terminal(ws, account, probe)
    assert b"\x1b" not in said and b"\x07" not in said and "\u202e".encode() not in said, said
    # the terminal's own line discipline turns each newline into \r\n
    assert b"\\x1b]0;PWNED\\x07\\x1b[31mRED\\x1b[0m\\x1b[1A\\x1b[2K\\u202eevil\tcol\r\r\n" in said, said
    assert "café \\xff done\r\n".encode() in said, said
    # the same where the host's output is a pipe (`unit run … | tee log` ends on a terminal too)
    ws.run(
        "unit", "new", "b2", "--type", "research", "--profile", "intelligence", "--title", "B2", check=True
    )
    ws.commit("b2", sign=False)
    piped = run_unit(ws, "b2", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert piped.returncode == 0, piped.stderr
    assert "\x1b" not in piped.stdout and "\u202e" not in piped.stdout, piped.stdout
    assert "\\x1b]0;PWNED\\x07\\x1b[31mRED" in piped.stdout and "café \\xff done\n" in piped.stdout


def test_a_lease_folder_an_earlier_run_left_is_never_reused(confined: Any) -> None:
    """What a killed host left in a unit's lease folder (a folder the unit made, open to all) is
    moved aside whole; the run gets a fresh folder of the host's making (D-211, eighth review)."""
    ws, serving, account, shared = confined
    left = ws.root / ".worktrees" / ".leases" / "b1"
    (left / "keep").mkdir(parents=True)
    left.chmod(0o777)
    os.chown(left, account.pw_uid, account.pw_gid)
    seen = shared / "seen"
    probe = f"import os; open({str(seen)!r}, 'w').write(repr(sorted(os.listdir({str(left)!r}))))"
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "/usr/bin/python3", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert "keep" not in seen.read_text() and ".regulator-lease.json" in seen.read_text(), seen.read_text()


def test_a_fifo_left_in_a_lease_folder_does_not_hang_the_next_run(confined: Any) -> None:
    """A unit can leave anything in its lease folder; a dead host leaves it there: the next run
    removes what is not a folder before it writes the harness's files (never blocked on a FIFO)."""
    ws, serving, account, shared = confined
    leases = ws.root / ".worktrees" / ".leases"
    (leases / "b1").mkdir(parents=True)
    os.mkfifo(leases / "b1" / "mcp.json")
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", "true")
    assert done.returncode == 0, done.stderr
    assert row(ws, "b1")["status"] == "closed"


def test_a_setsid_leftover_of_a_confined_unit_is_killed_when_its_run_ends(confined: Any) -> None:
    ws, serving, account, shared = confined
    token, pid, go, out, note = (shared / n for n in ("token", "pid", "go", "out", "note.json"))
    note.write_text(json.dumps(NOTE))
    note.chmod(0o644)
    text = LEFTOVER.format(token=token, pid=pid, go=go, out=out, note=note, reg=REGULATOR)
    agent = script(shared, "escape.sh", text)
    done = run_unit(ws, "u1", "--user", account.pw_name, "--", str(agent))
    assert done.returncode == 1, done.stderr  # failed: u1 stays in progress, a person decides
    assert row(ws, "u1")["status"] == "in-progress"
    assert not alive(int(pid.read_text()))  # escaped the process group, not the account

    assert account_processes(account.pw_uid) == []
    before = ws.digest()
    with pytest.raises(Refused) as refused:  # and its lease acts no more
        DoorClient(serving.url, token.read_text().strip()).status()
    assert str(refused.value) == UNAUTHORIZED
    go.touch()
    assert not out.exists() and ws.digest() == before


def test_a_folder_handed_over_loses_a_set_group_id_bit_it_inherited(confined: Any) -> None:
    """Under a set-group-id folder every folder git makes inherits the bit, which the unit may not
    pass back (D-213): `chmod u+w` of one would fail in its hands. The hand-over takes it off."""
    ws, serving, account, shared = confined
    top = ws.root / ".worktrees"
    top.mkdir(exist_ok=True)
    top.chmod(0o2755)
    report = shared / "report"
    agent = script(shared, "mode.sh", f"chmod u+w contracts && echo ok > {report}\n")
    done = run_unit(ws, "b1", "--user", account.pw_name, "--", str(agent))
    assert done.returncode == 0, done.stderr
    assert report.read_text() == "ok\n"
    assert not (top / "b1" / "contracts").stat().st_mode & stat.S_ISGID


def test_a_kill_helper_the_account_stopped_is_killed_not_waited_for() -> None:
    """kill_account's helper is the account's once it has switched, so a leftover of the unit may
    stop it (SIGSTOP, which nothing ignores); root waited for it with a plain waitpid, and `unit run`
    hung for good (the review of D-213). Root waits a second, then kills it and goes on."""
    from engine.host.accounts import _reap

    pid = os.fork()
    if pid == 0:  # a helper, stopped before its kill
        os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(0)
    _reap(pid)  # returns: the helper is killed and reaped
    assert not Path(f"/proc/{pid}").exists() or not alive(pid)


def test_sigterm_while_the_account_is_checked_leaves_none_of_its_processes(account: Any) -> None:
    """`unit run` stopped (SIGTERM) while it checks the account can run regulator: every process of
    the account is killed on the way out, as on SIGINT, and it says so in one line; the account is
    not left running what the check started (the review of D-215)."""

    folder = Path(tempfile.mkdtemp(prefix="regprobe-", dir=scratch.root()))
    try:
        folder.chmod(0o777)
        marker = folder / "started"
        program = folder / "regulator"
        program.write_text(
            f"#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\ntouch {marker}\nsleep 60\n"
        )
        program.chmod(0o755)
        check = (
            "import sys\n"
            "from engine.base.errors import Refused\n"
            "from engine.host.accounts import Account, cannot_run\n"
            f"unit = Account({account.pw_name!r}, {account.pw_uid}, {account.pw_gid}, '/')\n"
            "try:\n"
            f"    cannot_run(unit, {str(program)!r}, '/usr/bin:/bin')\n"
            "except Refused as exc:\n"
            "    print(exc)\n"
            "    sys.exit(3)\n"
        )
        host = subprocess.Popen([sys.executable, "-c", check], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            wait_for(marker.exists, "the check started as the account")
            host.send_signal(signal.SIGTERM)
            out, _ = host.communicate(timeout=60)
        finally:
            if host.poll() is None:
                host.kill()
        assert host.returncode == 3, out
        assert out.strip() == "stopped by SIGTERM while the account was checked; nothing written"
        assert account_processes(account.pw_uid) == []
    finally:
        shutil.rmtree(folder)


def test_a_confined_units_output_into_a_pipe_closed_early_does_not_hang_the_run(confined: Any) -> None:
    """`unit run … | head -2`: once `head` is gone the relay cannot write, and a relay that stopped
    reading left the child blocked on a full pipe forever (the third adversarial review of D-255).
    The relay drains what is left unread: the child runs to its end and the run records its result."""
    ws, serving, account, shared = confined
    loop = "i=0; while [ $i -lt 100000 ]; do echo line $i; i=$((i+1)); done"
    command = f"{REGULATOR} unit run b1 --user {account.pw_name} -- /bin/sh -c '{loop}' | head -2; echo ${{PIPESTATUS[0]}} >&2"
    done = subprocess.run(
        ["/bin/bash", "-c", command], cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "line 0\nline 1\n", done.stdout[:200]
    assert done.stderr.strip().splitlines()[-1] == "0", done.stderr
    assert row(ws, "b1")["status"] == "closed"
