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
