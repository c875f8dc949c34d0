"""README's "Your first fleet" runs verbatim: its ```sh blocks, in one bash in a fresh folder with a
fresh HOME and no git identity but the one they set, take a new user from the Quick start to a unit
defined, run under `serve` and closed, as `regulator status` shows."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from tests.helpers import REGULATOR, clean_env

README = Path(__file__).resolve().parents[1] / "README.md"


def section_blocks() -> list[str]:
    """The ```sh blocks of README's "Your first fleet" section, in order."""
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Your first fleet\n(.*?)^## ", text, re.S | re.M)
    assert section is not None, "README has no 'Your first fleet' section"
    return re.findall(r"^```sh\n(.*?)^```", section.group(1), re.S | re.M)


def fresh_env(home: Path) -> dict[str, str]:
    """A new user's environment: regulator on PATH, an empty HOME, no git identity from the tests
    or the machine (the README's own `git config` must give it), no signing key, the system clock."""
    env = clean_env(HOME=str(home), PATH=f"{Path(REGULATOR).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        env.pop(name, None)
    return env


def test_the_first_fleet_section_runs_verbatim_and_closes_the_unit(tmp_path: Path) -> None:
    blocks = section_blocks()
    assert len(blocks) == 2 and sum(len(b.splitlines()) for b in blocks) <= 40, blocks
    home = tmp_path / "home"
    home.mkdir()
    script = "".join(blocks)
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    # Files, not pipes: a serve left running (the script failed before `kill %1`) would hold a pipe
    # open. serve, started with `&`, is in the shell's new session: its group is killed whatever happens.
    with out_path.open("wb") as out_file, err_path.open("wb") as err_file:
        shell = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=tmp_path,
            env=fresh_env(home),
            stdout=out_file,
            stderr=err_file,
            start_new_session=True,
        )
        try:
            shell.wait(timeout=180)
        finally:
            try:
                os.killpg(shell.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shell.wait(timeout=30)
    out, err = out_path.read_text(), err_path.read_text()
    assert shell.returncode == 0, err
    assert "Traceback" not in err, err
    assert "baseline committed as alice's decision, signed" in out
    assert "regulator: closed hello" in err
    row = next(line for line in out.splitlines() if line.startswith("hello "))
    assert row.split()[:3] == ["hello", "research", "closed"], out
    assert "result done: hello from hello" in row  # the agent's report reached the door as its unit
    fleet = tmp_path / "my-fleet"
    assert (fleet / ".regulator" / "serve.log").read_text().strip()
    clean = subprocess.run(
        ["git", "status", "--porcelain"], cwd=fleet, env=fresh_env(home), capture_output=True, text=True
    )
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout


def test_the_quick_start_installs_what_serve_needs() -> None:
    text = README.read_text(encoding="utf-8")
    quick = re.search(r"^## Quick start\n(.*?)^## ", text, re.S | re.M)
    assert quick is not None and "pip install -e '.[mcp]' && regulator demo" in quick.group(1)


def test_the_wait_for_serve_ends_when_serve_dies_and_trusts_no_stale_serve_json(tmp_path: Path) -> None:
    """The README's wait, from `regulator serve … &` to the loop's end, with a serve that cannot start
    (no `mcp`: a sitecustomize on PYTHONPATH hides it as if not installed) and a serve.json a crashed serve left:
    the loop ends (a hard deadline, not a speed assertion) and does not take the stale file for ready."""
    from tests.helpers import make_workspace

    ws = make_workspace(tmp_path)
    block = section_blocks()[1]
    wait = block[: block.index("regulator unit run")]
    assert wait.startswith("regulator serve ") and "kill -0" in wait, wait
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text('import sys\nsys.modules["mcp"] = None  # not installed\n')
    (ws.root / ".regulator" / "serve.json").write_text('{"pid": 1, "door": "unix:/nonexistent/d.sock"}\n')
    check = 'grep -qs "\\"pid\\": $SERVE," .regulator/serve.json && echo ready || echo "not ready"\n'
    env = dict(
        ws.env,
        PYTHONPATH=str(site),
        PATH=f"{Path(REGULATOR).parent}{os.pathsep}{os.environ['PATH']}",
    )
    done = subprocess.run(
        ["bash", "-e", "-c", wait + check], cwd=ws.root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout == "not ready\n", done.stdout + done.stderr
    assert "pip install -e '.[mcp]'" in (ws.root / ".regulator" / "serve.log").read_text()
