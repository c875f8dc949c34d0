"""A new user defines a unit and runs it from docs/units.md alone: the blocks it marks
`docs-test:` run verbatim (in bash, in a workspace made by `regulator init`), `serve` in the
background as the doc says to start it in another terminal. And `regulator unit schema` is a JSON
Schema that accepts exactly what the engine accepts on the cases below."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from engine.read.contracts import Contract
from tests.helpers import REGULATOR, make_workspace, one_line
from tests.serving import wait_for

DOC = Path(__file__).resolve().parents[1] / "docs" / "units.md"


def blocks() -> dict[str, str]:
    """The doc's ```sh blocks each marked by `<!-- docs-test: NAME -->` just before it."""
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(r"<!-- docs-test: (\w+) -->\n```sh\n(.*?)```", text, re.S)
    return dict(found)


def test_the_documented_commands_run_verbatim(tmp_path: Any) -> None:
    ws = make_workspace(tmp_path, now=None, clock="system")
    ws.env.pop("REGULATOR_NOW", None)
    env = dict(ws.env, PATH=f"{Path(REGULATOR).parent}{os.pathsep}{ws.env.get('PATH', '')}")
    found = blocks()
    assert set(found) == {"define", "serve", "run"}
    define = subprocess.run(
        ["bash", "-e", "-c", found["define"]], cwd=ws.root, env=env, capture_output=True, text=True
    )
    assert define.returncode == 0, define.stderr
    assert found["serve"].strip() == "regulator serve"
    serve = subprocess.Popen(
        ["bash", "-c", f"exec {found['serve'].strip()}"],
        cwd=ws.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (ws.root / ".regulator" / "serve.json").exists(), "serve started", 60)
        run = subprocess.run(
            ["bash", "-e", "-c", found["run"]], cwd=ws.root, env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=30)
    assert '"status": "in-progress"' in run.stdout  # the agent asked the door for its status
    line = next(li for li in run.stdout.splitlines() if li.startswith("research-left-pad "))
    assert line.split()[:3] == ["research-left-pad", "research", "closed"]
    assert "result done: vendor/left-pad.js matches upstream 1.3.0" in run.stdout
    contract = json.loads((ws.root / "contracts" / "research-left-pad.json").read_text())
    assert contract["budget"] == {"wallSeconds": 1800}
    clean = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ws.root, env=env, capture_output=True, text=True
    )
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout  # the example leaves nothing behind


SCHEMA_CASES = [
    {"id": "a", "type": "research", "profile": "intelligence", "title": "t"},
    {"id": "a/b-1", "type": "t", "profile": "p", "title": "t", "budget": {"wallSeconds": 60, "tokens": 0}},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "budget": "2 hours of a person"},  # from before
    {"id": "a", "type": "t", "profile": "p", "title": "t", "budget": 30},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "checks": ["pytest -q", "ruff check ."]},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "priority": 5, "route": "r", "extra": {"kept": 1}},
    {"id": "A", "type": "t", "profile": "p", "title": "t"},
    {"id": "a", "type": " ", "profile": "p", "title": "t"},
    {"id": "a", "type": "t", "profile": "p"},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "budget": {"wallSeconds": 0}},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "budget": {"wallSeconds": "30m"}},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "budget": {"minutes": 30}},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "budget": {"costUsd": -1}},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "budget": ["x"]},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "checks": "pytest"},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "checks": [""]},
    {"id": "a", "type": "t", "profile": "p", "title": "t", "priority": "1"},
    {"id": "a", "type": "t", "profile": "p", "title": "x" * 1025},
]


@pytest.mark.parametrize("case", SCHEMA_CASES)
def test_the_schema_accepts_what_the_engine_accepts(case: Any) -> None:
    schema = json.loads(
        subprocess.run([REGULATOR, "unit", "schema"], capture_output=True, text=True, check=True).stdout
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    by_schema = jsonschema.Draft202012Validator(schema).is_valid(case)
    try:
        Contract.from_dict(case)
        by_engine = True
    except ValueError:
        by_engine = False
    assert by_schema == by_engine


def test_unit_new_writes_a_valid_contract_and_refuses_bad_input(tmp_path: Any) -> None:
    ws = make_workspace(tmp_path)
    schema = json.loads(ws.run("unit", "schema", check=True).stdout)
    done = ws.run(
        "unit", "new", "release/manifest", "--type", "bookkeeping of a kind nobody listed", "--profile", "bookkeeper",
        "--title", "Check the manifest", "--budget-wall", "2h",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads((ws.root / "contracts" / "release" / "manifest.json").read_text())
    jsonschema.validate(written, schema)
    assert written["budget"] == {"wallSeconds": 7200} and "contract" not in written
    before = ws.digest()
    for args, needle in (
        (["release/manifest", "--type", "t", "--profile", "bookkeeper", "--title", "t"], "exists"),
        (
            ["n1", "--type", "t", "--profile", "nobody", "--title", "t"],
            "--profile 'nobody' is not in profiles.yaml",
        ),
        (
            ["n1", "--type", "t", "--profile", "bookkeeper", "--title", "t", "--budget-wall", "90"],
            "not a duration",
        ),
        (["N1", "--type", "t", "--profile", "bookkeeper", "--title", "t"], "is not a unit id"),
        (["n1", "--type", "t", "--profile", "bookkeeper", "--title", ""], "--title: required"),
        (["n1", "--type", "t", "--profile", "bookkeeper", "--title", "  "], "--title: must not be empty"),
    ):
        refused = ws.run("unit", "new", *args)
        assert refused.returncode == 2 and needle in one_line(refused), (args, refused.stderr)
    assert not (ws.root / "contracts" / "n1.json").exists() and ws.digest() == before


def test_every_reader_names_an_invalid_contract_in_one_line(tmp_path: Any) -> None:
    ws = make_workspace(tmp_path)
    ws.write("contracts/slow.json", json.dumps({"id": "slow", "type": "t", "profile": "bookkeeper", "title": "t",
                                                "budget": {"wallSeconds": 0}}))  # fmt: skip
    line = "budget.wallSeconds: expected a whole number of seconds, 1 or more"
    for args in (["status"], ["obligations"], ["registry", "next-up"], ["signals"], ["context", "u1"],
                 ["controlroom", "--once", "--json"]):  # fmt: skip
        done = ws.run(*args)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (args, done.stderr)
        warned = [w for w in done.stderr.splitlines() if "slow.json" in w]
        assert len(warned) == 1 and line in warned[0], (args, done.stderr)
    for args in (["unit", "dispatch", "slow"], ["unit", "run", "slow", "--", "true"], ["context", "slow"]):
        refused = ws.run(*args)
        assert (
            refused.returncode == 2
            and one_line(refused) == f"regulator: invalid contract contracts/slow.json: {line}"
        )
