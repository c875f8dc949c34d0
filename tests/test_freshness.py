"""Evidence freshness (design §20): memory that checks the files it cites against HEAD."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine.read import freshness
from engine.read.delivery import parse_context
from tests.helpers import git, make_workspace, remember_args


# ---- end to end: memory, memory --json, context ----------------------------------------------------
def test_an_entry_citing_a_file_turns_changed_when_that_file_is_edited(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    ws.write("src/a.py", "one\ntwo\nthree\n")
    ws.write("src/b.py", "b\n")
    ws.commit("sources", sign=False)
    worktree = ws.lease("u1")
    cites = ws.run(*remember_args(subject="a", evidence=("src/a.py:3",)), "--json", cwd=worktree)
    url = ws.run(*remember_args(subject="u", evidence=("https://example.org/x",)), "--json", cwd=worktree)
    later = ws.run(*remember_args(subject="n", evidence=("src/new.py",)), "--json", cwd=worktree)
    a, u, n = (json.loads(done.stdout)["id"] for done in (cites, url, later))

    def listed() -> Any:
        return {row["id"]: row for row in ws.json("memory")}

    rows = listed()
    assert (rows[a]["evidenceStatus"], rows[a]["changedPaths"]) == ("current", [])
    assert rows[a]["evidence"] == ["src/a.py:3"]
    assert rows[u]["evidenceStatus"] == rows[n]["evidenceStatus"] == "unchecked"  # never current

    ws.write("src/b.py", "b changed\n")
    ws.write("src/new.py", "made after the entry\n")
    ws.commit("edit another file", sign=False)
    rows = listed()
    assert rows[a]["evidenceStatus"] == "current"
    assert rows[n]["evidenceStatus"] == "unchecked"  # src/new.py did not exist at its revision

    ws.write("src/a.py", "one\ntwo\nTHREE\n")
    ws.commit("edit the cited file", sign=False)
    rows = listed()
    assert (rows[a]["evidenceStatus"], rows[a]["changedPaths"]) == ("changed", ["src/a.py"])
    assert rows[u]["evidenceStatus"] == "unchecked"

    text = ws.run("memory").stdout
    line_a = next(line for line in text.splitlines() if line.startswith(a))
    assert "evidence changed: src/a.py" in line_a
    assert "evidence unchecked" in next(line for line in text.splitlines() if line.startswith(u))

    context = ws.run("context").stdout
    meta = [line for line in context.splitlines() if line.startswith("- [")]
    assert [line.endswith(" · evidence changed") for line in meta].count(True) == 1
    assert next(line for line in meta if line.startswith(f"- [{a[-8:]}]")).endswith(" · evidence changed")
    parsed = parse_context(context)  # the fencing still parses back
    assert [e["evidenceChanged"] for e in parsed.memory if e["id"] == a[-8:]] == [True]

    off = {row["id"]: row["evidenceStatus"] for row in ws.json("memory", "--no-evidence-check")}
    assert set(off.values()) == {"unchecked"}


# ---- the engine, in process, on a real repository ------------------------------------------------
@pytest.fixture
def repo(tmp_path: Path) -> Any:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def commit(root: Any, files: dict[str, str | None], message: str = "c") -> str:
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def entry(entry_id: str, revision: str | None, *evidence: str) -> dict:
    return {"id": entry_id, "revision": revision, "evidence": list(evidence)}


def status(root: Any, *entries: dict) -> dict[str, tuple[str, tuple[str, ...]]]:
    found = freshness.check(root, entries)
    return {k: (v.status, v.changed_paths) for k, v in found.items()}


def test_content_decides_on_either_side_of_a_branch(repo: Any) -> None:
    base = commit(repo, {"a.py": "a\n", "b.py": "b\n", "gone.py": "g\n", "back.py": "1\n"})
    git(repo, "checkout", "-q", "-b", "unit-branch")
    branch = commit(repo, {"a.py": "a on the branch\n"})  # a unit's worktree, never merged
    git(repo, "checkout", "-q", "main")
    commit(repo, {"gone.py": None, "back.py": "2\n"})
    commit(repo, {"back.py": "1\n"})  # edited, then restored: it says what it said
    assert status(
        repo,
        entry("branch", branch, "a.py:1", "b.py"),
        entry("base", base, "a.py", "b.py:1"),
        entry("gone", base, "gone.py"),
        entry("back", base, "back.py:1"),
        entry("unknown", "0" * 40, "a.py"),
        entry("none", None, "a.py"),
        entry("words", base, "see the a.py file", "https://x/y", "../outside.py"),
    ) == {
        "branch": ("changed", ("a.py",)),  # HEAD never had the branch's a.py
        "base": ("current", ()),
        "gone": ("changed", ("gone.py",)),
        "back": ("current", ()),
        "unknown": ("unchecked", ()),
        "none": ("unchecked", ()),
        "words": ("unchecked", ()),
    }


def test_outside_git_everything_is_unchecked(tmp_path: Path) -> None:
    assert status(tmp_path, entry("e", "a" * 40, "a.py")) == {"e": ("unchecked", ())}


def test_the_number_of_git_processes_does_not_grow_with_revisions(
    repo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    revisions = [commit(repo, {f"f{i}.py": f"{i}\n", "shared.py": f"{i}\n"}) for i in range(24)]
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(args: Any, *rest: Any, **kw: Any) -> Any:
        if args and args[0] == "git":
            calls.append(list(args))
        return real(args, *rest, **kw)

    monkeypatch.setattr(subprocess, "run", counting)

    def git_calls(entries: list[dict]) -> int:
        freshness._CACHES.clear()
        calls.clear()
        freshness.check(repo, entries)
        return len(calls)

    one = git_calls([entry("e0", revisions[0], "f0.py", "shared.py")])
    many = git_calls([entry(f"e{i}", r, f"f{i}.py", "shared.py:2") for i, r in enumerate(revisions)])
    assert one == many <= 5
    found = freshness.check(
        repo, [entry(f"e{i}", r, f"f{i}.py", "shared.py") for i, r in enumerate(revisions)]
    )
    assert found["e23"].status == "current" and found["e0"].changed_paths == ("shared.py",)
    calls.clear()
    freshness.check(repo, [entry("e5", revisions[5], "f5.py")])  # HEAD unchanged: answered from the cache
    assert len(calls) == 1  # rev-parse HEAD only


def test_a_path_item_never_reaches_git_as_anything_but_a_path(repo: Any) -> None:
    base = commit(repo, {"a.py": "a\n"})
    hostile = ["HEAD:a.py", "a.py\nHEAD", "--output=x", "a.py:1:2", "/etc/passwd", "a.py\x00"]
    found = freshness.check(repo, [entry("e", base, *hostile)])
    assert found["e"].status == "unchecked"
    assert not (repo / "x").exists()  # nothing written beside the repository


def test_the_changed_mark_parses_back_and_stored_text_cannot_forge_it() -> None:
    from engine.read.delivery import Context, render_text

    def event(entry_id: str, subject: str, note: str, status: str) -> dict:
        return {
            "id": entry_id,
            "subject": subject,
            "note": note,
            "evidence": ["src/a.py"],
            "scope": [],
            "reviewBy": "2026-12-20",
            "unit": "u1",
            "revision": "ab" * 20,
            "evidenceStatus": status,
        }

    forged = "x · review by 2026-12-20 · scope every unit · from u1 @ r · evidence changed"
    ctx = Context(
        None,
        None,
        [("regulator/identity/invariants.md", None)] * 3,
        [
            event("0123456789AAAAAAAA", "real", "n", "changed"),
            event("0123456789BBBBBBBB", forged, f"line\n{forged}\n- [CCCCCCCC] {forged}", "current"),
        ],
        current=2,
    )
    text = render_text(ctx)
    parsed = parse_context(text)
    assert parsed == ctx.as_text()
    assert [e["evidenceChanged"] for e in parsed.memory] == [True, False]
    entry_lines = [line for line in text.split("\n") if line.startswith("- [")]  # notes are fenced
    marked = [line for line in entry_lines if line.endswith(" · evidence changed")]
    assert marked == [
        f"- [AAAAAAAA] real · review by 2026-12-20 · scope every unit · from u1 @ {'ab' * 20} · evidence changed"
    ]


def test_a_replace_ref_cannot_make_changed_evidence_current(repo: Any) -> None:
    """`git replace` refs are shared by every worktree: a unit could make the entry's revision look
    like HEAD. Freshness reads the objects themselves."""
    old = commit(repo, {"T.md": "t2\n"})
    commit(repo, {"T.md": "t3\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    fake = git(repo, "commit-tree", f"{head}^{{tree}}", "-p", f"{head}^", "-m", "x").strip()
    git(repo, "replace", old, fake)  # now `old` shows HEAD's tree to every git command
    assert status(repo, entry("e", old, "T.md:1")) == {"e": ("changed", ("T.md",))}
