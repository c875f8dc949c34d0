"""The sdist carries what the README links and CI runs (tests, snapshots, docs, screenshots), and
the metadata says what the project is (licence, Python versions)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_sdist_carries_tests_docs_and_screenshots(tmp_path: Path) -> None:
    build = f"from setuptools import build_meta; print(build_meta.build_sdist({str(tmp_path)!r}))"
    done = subprocess.run(
        [sys.executable, "-c", build], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    name = done.stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / name) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
        info = sdist.extractfile(f"{name.removesuffix('.tar.gz')}/PKG-INFO")
        assert info is not None
        metadata = info.read().decode()
    for path in (
        "LICENSE",
        ".ci/run",
        "tests/conftest.py",
        "tests/hardening/test_trust.py",
        "docs/decisions.md",
        "docs/security.md",
        "screenshots/obligations.svg",
        "bench/run.py",
        "controlroom/app.tcss",
        "engine/py.typed",
    ):
        assert path in members, path
    assert any(m.startswith("tests/__snapshots__/") and m.endswith(".svg") for m in members)
    assert not any("__pycache__" in m for m in members)
    assert "License-Expression: LicenseRef-Proprietary" in metadata
    for version in ("3.11", "3.12", "3.13"):
        assert f"Classifier: Programming Language :: Python :: {version}" in metadata


PRODUCT = ("engine", "registry", "identity", "controlroom", "widgets")


def _requirement_names(requirements: list[str]) -> set[str]:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return {canonicalize_name(Requirement(text).name) for text in requirements}


def test_every_module_the_product_imports_is_declared_in_pyproject() -> None:
    """A module the product imports from outside the standard library comes from a distribution its
    pyproject declares (a dependency, or the extra that the importing feature needs): an install
    without the test extra must not lack one (`packaging`, for the OSV sensor's PEP 440 ranges, came
    only with pytest)."""
    import ast
    import importlib.metadata
    import tomllib

    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _requirement_names(project["dependencies"])
    for extra in ("mcp", "postgresql"):
        declared |= _requirement_names(project["optional-dependencies"][extra])
    providers = importlib.metadata.packages_distributions()
    undeclared: dict[str, list[str]] = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top in PRODUCT or top == "__future__":
                        continue
                    dists = {canonicalize_name(d) for d in providers.get(top, [])}
                    if not dists & declared:
                        undeclared.setdefault(top, []).append(str(path.relative_to(ROOT)))
    assert undeclared == {}, undeclared


def test_serve_finds_a_module_of_everything_the_sdk_requires_before_it_starts() -> None:
    """serve imports the mcp SDK only on its door's first call (D-248), so before it starts it looks
    for a module of the SDK and of every distribution the SDK requires here
    (controlroom.cli.serve.EXTRA_MODULES): a half-installed extra is one line at start (exit 2),
    not a door that refuses every call. A list that fell behind an SDK upgrade fails here."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from controlroom.cli.serve import EXTRA_MODULES

    modules_of: dict[str, set[str]] = {}
    for top, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(canonicalize_name(dist), set()).add(top)
    needed = {"mcp"}
    for text in importlib.metadata.requires("mcp") or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            needed.add(canonicalize_name(requirement.name))
    unchecked = sorted(dist for dist in needed if not modules_of.get(dist, set()) & set(EXTRA_MODULES))
    assert unchecked == []
