"""Rewrite every citation of the original specification's sections as a citation of docs/design.md.

    python scripts/cite_design.py            # dry run: what would change, file by file, and the total
    python scripts/cite_design.py --write    # rewrite the files in place

docs/design.md keeps the specification's section numbers, so the rewrite is the word only: "SPEC"
directly followed by a section sign (on the same line, or on the next one after the indentation and
a comment's `#`) becomes "design"; the numbers stay. "the SPEC's list" and other mentions without a
section sign are left alone (the dry run lists them, for a person to reword). Bare "§N" citations
already name a section of docs/design.md and are not touched.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD, NEW = "SPEC", "design"
# the word, then the section sign: after spaces, or after a line break, indentation and a comment's #
CITATION = re.compile(r"\b" + OLD + r"(?=[ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?§)")
MENTION = re.compile(r"\b" + OLD + r"\b(?![ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?§)(?!\.md)")
SUFFIXES = (".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".tcss")
SKIP_DIRS = {
    ".git", ".venv", ".ci-venv", "__pycache__", "__snapshots__", "node_modules", "build", "dist",
    ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".import_linter_cache",
}  # fmt: skip
# this script and its test spell the pattern out; they are about citations, not citing
SKIP_FILES = {Path("scripts/cite_design.py"), Path("tests/test_docs_guide.py")}
EXTRA_FILES = (Path(".ci/run"),)


def files(root: Path = ROOT) -> Iterator[Path]:
    """The repository's text files that may cite: sources, docs, configuration, CI scripts. The
    skipped folders are never entered (a virtual environment, or a tool's cache that another
    process is writing meanwhile, such as hypothesis's)."""
    found = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in names:
            path = Path(folder) / name
            relative = path.relative_to(root)
            if relative in SKIP_FILES:
                continue
            if path.suffix in SUFFIXES or relative in EXTRA_FILES:
                found.append(path)
    yield from sorted(p for p in found if p.is_file())


def rewrite(text: str) -> tuple[str, int]:
    """The text with every citation rewritten, and how many were."""
    return CITATION.subn(NEW, text)


def mentions(text: str) -> list[int]:
    """Line numbers of the word used without a section sign (not rewritten)."""
    return [text.count("\n", 0, m.start()) + 1 for m in MENTION.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the files in place")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    total = changed = 0
    for path in files(args.root):
        text = path.read_text(encoding="utf-8")
        new, n = rewrite(text)
        relative = path.relative_to(args.root)
        for line in mentions(text):
            print(f"{relative}:{line}: mentions {OLD} without a section: reword by hand")
        if not n:
            continue
        total += n
        changed += 1
        print(f"{relative}: {n}")
        if args.write:
            path.write_text(new, encoding="utf-8")
    verb = "rewrote" if args.write else "would rewrite"
    print(f"{verb} {total} citations in {changed} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
