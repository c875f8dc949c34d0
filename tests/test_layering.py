"""The layering of design §2: the core imports no Textual; the CLI starts without it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests import helpers

ROOT = Path(__file__).resolve().parent.parent


def test_import_linter_contracts_hold() -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" not in done.stdout.lower().replace("0 broken", "")


def test_cli_and_engine_import_without_textual() -> None:
    code = (
        "import sys, controlroom.cli.root, engine.read.load, engine.commands.router, engine.commands.units, engine.doors.api\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'git', 'watchfiles', 'mcp'))\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_status_runs_without_importing_textual_git_or_pydantic(ws: helpers.Workspace) -> None:
    """`status` is the read every unit and operator runs most: its cold start stays lean (§12).
    Typer coerces every declared option but a given flag through pydantic; `status --json` runs
    on the lean root (controlroom.cli.root.build), which declares no other, so pydantic stays out."""
    done, heavy = helpers.imported(
        ws, ["status", "--json"], {"textual", "git", "watchfiles", "mcp", "pydantic"}
    )
    assert done.returncode == 0, done.stderr
    assert heavy == []
    assert '"units"' in done.stdout


def test_no_module_imports_the_cli_root_back() -> None:
    """The root imports its group modules by name (importlib, which import-linter cannot see):
    none of them, nor anything else, may import `controlroom.cli.root` back, so no circle hides there."""
    import ast

    importers = []
    for path in sorted(ROOT.glob("*/*.py")):
        if path.parts[-2] not in ("engine", "registry", "identity", "controlroom", "widgets"):
            continue
        if path.name == "cli.py" and path.parent.name == "controlroom":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(n == "controlroom.cli.root" for n in names):
                importers.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    assert importers == []


def test_once_renders_without_textual(ws: helpers.Workspace) -> None:
    """`controlroom --once` is the CI's reader: it draws the header's text (engine.base.cells) but
    never a widget, so it starts without Textual (~0.1 s of CPU), pydantic, watchfiles or mcp."""
    done, heavy = helpers.imported(
        ws, ["controlroom", "--once", "--json"], {"textual", "watchfiles", "mcp", "pydantic"}
    )
    assert done.returncode in (0, 1), done.stderr  # 1: the workspace has findings to act on
    assert heavy == [], done.stderr
    assert '"obligations"' in done.stdout


def test_no_module_is_over_800_lines() -> None:
    """Issue 30: a module that grows past 800 lines is split by what it holds (engine/base/forking.py
    took verification's forked children when verification passed it; tests/unit_run/ took
    test_unit_run.py's 1,576 lines as three modules). The product, its tests, the bench, the tools."""
    root = Path(__file__).resolve().parent.parent
    long = {
        str(path.relative_to(root)): count
        for package in (
            "engine",
            "controlroom",
            "registry",
            "identity",
            "widgets",
            "tests",
            "bench",
            "screenshots",
        )
        for path in sorted((root / package).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 800
    }
    assert long == {}


def test_git_is_run_by_one_function() -> None:
    """D-199: every git the product runs on a repository a unit can write goes through
    registry.gitcall (the repository -C names, objects as stored, none of the repository's code).
    An argument vector starting with "git" anywhere else is a second copy of that rule (the demo's
    own repository included: made from a git hook, it took the hook's GIT_INDEX_FILE)."""
    import ast

    allowed = {"registry/gitcall.py"}
    found = []
    for package in ("engine", "controlroom", "registry", "identity", "widgets"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.List | ast.Tuple) or not node.elts or name in allowed:
                    continue
                first = node.elts[0]
                if isinstance(first, ast.Constant) and first.value == "git":
                    found.append(f"{name}:{node.lineno}")
    assert found == []
