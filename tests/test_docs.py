"""The decisions log is a numbered log code can cite: numbers run 1..N once each, and every
`D-N` cited anywhere in the code, tests or docs names an entry that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_decisions_are_numbered_once_in_order_and_every_citation_resolves() -> None:
    log = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    numbers = [int(n) for n in re.findall(r"^### D-(\d+) · \d{4}-\d{2}-\d{2} · \S", log, re.M)]
    assert numbers == list(range(1, len(numbers) + 1))
    cited: set[int] = set()
    for folder in ("engine", "registry", "identity", "controlroom", "widgets", "tests", "bench", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md") and path.is_file():
                cited |= {int(n) for n in re.findall(r"\bD-(\d+)\b", path.read_text(encoding="utf-8"))}
    assert cited <= set(numbers), sorted(cited - set(numbers))
