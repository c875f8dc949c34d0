"""The docs for the next engineer hold: every path and module docs/codebase.md names exists;
docs/design.md has every section the original specification has (where it is beside the repository,
as in CI: ../shared/SPEC.md); and every citation of a design section anywhere in the repository
names a section docs/design.md has, including those scripts/cite_design.py would rewrite."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
GUIDE = ROOT / "docs" / "codebase.md"
PACKAGES = ("engine", "registry", "identity", "controlroom", "widgets", "tests", "bench")
# paths in a user's workspace (design §3), not in this repository
WORKSPACE = (".regulator/", "regulator/", "contracts/", "findings/", "intake/", "records/", "retro/")
FILE_SUFFIX = r"\.(py|md|toml|json|ndjson|yaml|tcss|svg|txt|lock)$"

# a section heading: "## §22. The host…" in the design, "## 22. The host…" in the specification
DESIGN_HEADING = re.compile(r"^#{2,3} §(\d+(?:\.\d+)?)\.? ", re.M)
SPEC_HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.M)
NUMBER = r"§(\d+(?:\.\d+)?)"
# "design §16, §18", "design §17–§21": the word (or the specification's, not yet rewritten), then a
# list of section numbers; the word may end a line and the section start the next (docstrings)
SPEC = "SP" + "EC"  # the specification's word, spelled apart so that no rewrite ever touches it here
CITED = re.compile(
    rf"\b(?:design|{SPEC})[ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?{NUMBER}((?:[ \t]*(?:,|–|-|/|and|or)[ \t]*{NUMBER})*)"
)


def spec_path(repo: Path = ROOT) -> Path:
    """Where CI keeps the original specification: beside the repository, in shared/."""
    return repo.parent / "shared" / "SPEC.md"


def design_sections(text: str | None = None) -> set[str]:
    return set(DESIGN_HEADING.findall(DESIGN.read_text(encoding="utf-8") if text is None else text))


def _cite_design() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cite_design", ROOT / "scripts" / "cite_design.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def citations(text: str) -> list[tuple[int, str]]:
    """(line, section number) of every design citation in the text, each number of a list too."""
    found: list[tuple[int, str]] = []
    for match in CITED.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, match.group(1)))
        found += [(line, n) for n in re.findall(NUMBER, match.group(2) or "")]
    return found


# ---- docs/codebase.md ------------------------------------------------------------------------


def named_paths(text: str) -> set[str]:
    """Everything in backticks or a link that reads as a repository path: it has a slash or a file
    suffix, no spaces, and is not a URL or an option."""
    spans = set(re.findall(r"`([^`\n]+)`", text)) | set(re.findall(r"\]\(([^)\s]+)\)", text))
    paths: set[str] = set()
    for span in spans:
        span = span.strip()
        if " " in span or "://" in span or span.startswith(("-", "$", "~", *WORKSPACE)):
            continue
        if "/" in span or re.search(FILE_SUFFIX, span):
            paths.add(span.rstrip("/"))
    return paths


def named_modules(text: str) -> set[str]:
    """Every dotted name in backticks that starts with one of the project's packages."""
    names = set(re.findall(r"`((?:" + "|".join(PACKAGES) + r")(?:\.\w+)+)", text))
    return {name for name in names if not re.search(FILE_SUFFIX, name)}


def exists(path: str) -> bool:
    """A path, or a pattern with a <placeholder> standing for one path segment's part."""
    if "<" in path:
        pattern = re.sub(r"<[^>]+>", "*", path)
        return any(ROOT.glob(pattern))
    return (ROOT / path).exists()


def defines(module_file: Path, name: str) -> bool:
    text = module_file.read_text(encoding="utf-8")
    return re.search(rf"^\s*(?:def|class|async def)\s+{name}\b|^\s*{name}\s*[:=]", text, re.M) is not None


def module_resolves(dotted: str) -> bool:
    """The longest prefix that is a module of the repository exists, and what follows it (one
    name at most, e.g. a function) is defined there."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                rest = parts[cut:]
                if not rest:
                    return True
                return len(rest) == 1 and defines(candidate, rest[0])
    return False


def test_every_path_the_codebase_guide_names_exists() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    paths = named_paths(text)
    assert len(paths) > 40  # the guide names the files it guides to
    missing = sorted(p for p in paths if not exists(p))
    assert not missing, f"docs/codebase.md names paths that do not exist: {missing}"


def test_every_module_the_codebase_guide_names_exists() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    modules = named_modules(text)
    assert modules  # e.g. engine.read.load.load
    missing = sorted(m for m in modules if not module_resolves(m))
    assert not missing, f"docs/codebase.md names modules or names that do not exist: {missing}"


def test_the_guides_checks_catch_a_wrong_path_and_a_wrong_name() -> None:
    assert not exists("engine/nowhere.py") and exists("controlroom/cli/<group>.py")
    assert not exists("controlroom/nowhere/<group>.py")
    assert module_resolves("engine.read.load.load") and module_resolves("engine.read")
    assert not module_resolves("engine.read.load.nothing_here")
    assert not module_resolves("engine.nowhere")
    assert named_paths("`a/b.py`, `--json`, `x y/z`, [guide](docs/x.md), `https://a/b`") == {
        "a/b.py",
        "docs/x.md",
    }


# ---- docs/design.md --------------------------------------------------------------------------


def test_design_has_every_section_of_the_specification() -> None:
    spec = spec_path()
    if not spec.is_file():
        pytest.skip(f"the original specification is not beside the repository ({spec})")
    wanted = set(SPEC_HEADING.findall(spec.read_text(encoding="utf-8")))
    assert len(wanted) >= 26
    have = design_sections()
    assert not sorted(wanted - have, key=_order), "docs/design.md lacks these sections"


def _order(number: str) -> tuple[int, ...]:
    return tuple(int(n) for n in number.split("."))


def test_design_sections_are_numbered_in_order_once_each() -> None:
    numbers = DESIGN_HEADING.findall(DESIGN.read_text(encoding="utf-8"))
    assert {str(n) for n in range(1, 27)} <= set(numbers)
    assert len(numbers) == len(set(numbers)), "a section number is used twice"
    assert numbers == sorted(numbers, key=_order), "sections out of order"


def test_every_section_the_design_refers_to_is_in_the_design() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    have = design_sections(text)
    body = re.sub(r"^#.*$", "", text, flags=re.M)
    referred = set(re.findall(NUMBER, body))
    assert not sorted(referred - have, key=_order)


def test_every_design_citation_in_the_repository_names_a_section_of_the_design() -> None:
    """Citations written as design sections, and those the rewrite will turn into them."""
    have = design_sections()
    tool = _cite_design()
    broken: list[str] = []
    total = 0
    for path in tool.files(ROOT):
        text = path.read_text(encoding="utf-8")
        rewritten, _ = tool.rewrite(text)
        for line, number in citations(rewritten):
            total += 1
            if number not in have:
                broken.append(f"{path.relative_to(ROOT)}:{line}: §{number}")
    assert total > 0
    assert not broken, broken


def test_citations_are_found_in_lists_across_lines_and_checked() -> None:
    text = f"see design §16, §18 and §99\n# ({SPEC}\n    # §4.2's rule) and design §17–§21\n"
    assert citations(text) == [(1, "16"), (1, "18"), (1, "99"), (2, "4.2"), (3, "17"), (3, "21")]
    assert citations(f"the {SPEC}'s list, RFC 4251 §5, design notes") == []


def test_the_rewrite_changes_the_word_only_and_leaves_other_mentions() -> None:
    tool = _cite_design()
    old = SPEC
    text = f"({old} §16, §18) and ({old}\n    §22): the {old}'s list; {old}.md §3\n"
    new, n = tool.rewrite(text)
    assert n == 2
    assert new == f"(design §16, §18) and (design\n    §22): the {old}'s list; {old}.md §3\n"
    assert tool.mentions(text) == [2]  # "the SPEC's list"; SPEC.md is a file name, not a mention
