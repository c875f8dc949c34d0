"""What a person's register commands write, and what the views show, against an adversarial unit
(D-237, an adversarial review of D-234..D-236): `ack` and `resolve` write their one field or refuse
with nothing written; an ack never ratifies a narrowing it cannot see; a merge on the branch that
changes an entry is judged as under --range; the views show entries' fields as data; odd dates,
views and file names give lines, never tracebacks. Real git, real signatures, the real command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.hardening.trunkfinding import FINDING, finding
from tests.helpers import Workspace, clone, git


@pytest.fixture
def filed(ws: Workspace) -> Workspace:
    """F-x, unresolved, affecting u1, committed on trunk."""
    ws.write(FINDING, finding())
    ws.commit("file F-x")
    return ws


# a title (no authorization needed to edit) whose second line reads `ack: x'`, and a notes key whose
# quoted lines would become fields if the title's closing quote went: resolved, affects narrowed
TRAP = """---
id: F-x
date: '2026-11-01'
title: 'the alerter is dead
ack: x'
affects: [u1]
ack: ""
resolved: false
notes: '
affects: []
resolved: true
ack: "2026-11-28 alice"
by: reviewer'
---
body
"""
DECOY = (
    "---\nid: F-x\ndate: '2026-11-01'\ntitle: 'the alerter is dead\nack: decoy\nresolved: decoy\nmore'\n"
    "affects: [u1]\nack: ''\nresolved: false\n---\nbody\n"
)


def committed_views(ws: Workspace, message: str) -> None:
    ws.run("registry", "views", check=True)
    ws.commit(message, sign=False)


def test_an_ack_or_resolve_that_would_write_another_field_is_refused_and_writes_nothing(
    filed: Workspace,
) -> None:
    """A unit retitled F-x so that the `ack:` line the command replaces sits inside the quoted title:
    alice's signed ack then read as `resolved: true, affects: []` and lifted u1. The command now
    reads the entry back before writing and refuses (exit 3) unless only its field changed."""
    ws = filed
    ws.write(FINDING, TRAP)
    committed_views(ws, "reword F-x's title")
    head, text = ws.git("rev-parse", "HEAD"), (ws.root / FINDING).read_text()
    done = ws.run("registry", "ack", "F-x", "--by", "alice", "--commit")
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    assert "would not change ack alone" in done.stderr and "nothing written" in done.stderr
    assert (ws.root / FINDING).read_text() == text and ws.git("rev-parse", "HEAD") == head
    assert ws.run("unit", "dispatch", "u1").returncode == 3  # still held
    # its first `resolved:` line is the field's own: a resolve writes it, and only it
    ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "fixed", "--commit", check=True)
    assert "title: 'the alerter is dead\nack: x'" in (ws.root / FINDING).read_text()


def test_a_decoy_line_in_a_title_makes_ack_and_resolve_refuse_not_report_success(filed: Workspace) -> None:
    """The substitution found `ack: decoy` inside the title and left the real field empty, while
    the command said "acknowledged F-x"."""
    ws = filed
    ws.write(FINDING, DECOY)
    committed_views(ws, "reword")
    for args in (
        ("registry", "ack", "F-x", "--by", "alice", "--commit"),
        ("registry", "resolve", "F-x", "--by", "alice", "--rationale", "fixed", "--commit"),
    ):
        done = ws.run(*args)
        assert done.returncode == 3 and "nothing written" in done.stderr, (done.stdout, done.stderr)
    assert ws.git("status", "--porcelain") == ""


def test_an_ack_on_a_branch_that_narrowed_the_finding_is_refused(filed: Workspace) -> None:
    """The unit narrowed `affects` on its branch; alice's ack there was not refused (the guard looked
    only at changes recorded on trunk) and, as the last commit touching the entry, authorized the
    narrowing unseen. An ack of an entry naming fewer units than trunk holds is refused."""
    ws = filed
    ws.git("checkout", "-q", "-b", "unit")
    ws.write(FINDING, finding(affects="[]"))
    committed_views(ws, "tidy the finding")
    done = ws.run("registry", "ack", "F-x", "--by", "alice", "--commit")
    assert done.returncode == 3, done.stdout
    assert "F-x names fewer units than trunk holds (u1 held by it on trunk" in done.stderr


def test_a_merge_on_the_branch_that_changes_an_entry_is_judged_as_its_own_change(filed: Workspace) -> None:
    """An evil merge after alice's signed ack on the branch set `resolved: true`: branch lint's log
    showed merges no diff, so her ack, the last commit it saw touching the entry, authorized it. A
    merge whose entry matches none of its parents now touches it (as under --range)."""
    ws = filed
    ws.git("checkout", "-q", "-b", "unit")
    ws.run("registry", "ack", "F-x", "--by", "alice", "--commit", check=True)
    ws.git("checkout", "-q", "-b", "side")
    ws.write("notes.txt", "x\n")
    ws.commit("notes", sign=False)
    ws.git("checkout", "-q", "unit")
    ws.git("merge", "-q", "--no-ff", "--no-commit", "side")
    ws.write(FINDING, (ws.root / FINDING).read_text().replace("resolved: false", "resolved: true"))
    ws.run("registry", "views", check=True)
    ws.git("add", "-A")
    ws.git("commit", "-q", "--no-edit")
    merge = ws.git("rev-parse", "HEAD").strip()
    errors = json.loads(ws.run("registry", "lint", "--json").stdout)["errors"]
    assert [e["code"] for e in errors] == ["unauthorized-change"]
    assert merge[:10] in errors[0]["message"]


def test_the_views_show_entries_fields_as_data(filed: Workspace) -> None:
    """A title carrying an escape sequence, a bidi override, HTML, Markdown (emphasis, a link, a
    code span's backtick) and a URL reached FINDINGS.md raw: `cat` ran the sequence, GitHub rendered
    the image, the bold and the link. Each field is now escaped text in an inline code span."""
    ws = filed
    title = 'title: "**fixed**\\e[8m \\u202e <img src=https://x.example/t.png> [ok](https://x.example) `x` @alice"'
    ws.write(FINDING, (ws.root / FINDING).read_text().replace("title: the alerter is dead", title))
    committed_views(ws, "retitle")
    view = (ws.root / "FINDINGS.md").read_text()
    row = next(line for line in view.splitlines() if "F-x" in line)
    assert "\x1b" not in view and "\u202e" not in view
    cell = (
        "``**fixed**\\x1b[8m \\u202e <img src=https://x.example/t.png> [ok](https://x.example) `x` @alice``"
    )
    assert f"| {cell} |" in row, row
    assert ws.run("registry", "views", "--check").returncode == 0


def test_a_date_with_a_time_is_a_schema_error_not_a_traceback(filed: Workspace) -> None:
    ws = filed
    ws.write("intake/I-a.md", "---\nid: I-a\ndate: 2026-11-01 10:00:00\ntitle: t\ndisposition: new\n---\n")
    committed_views(ws, "file I-a")
    done = ws.run("registry", "lint", "--json")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert ("schema", "intake/I-a.md") in [(e["code"], e["entry"]) for e in json.loads(done.stdout)["errors"]]
    for args in (("controlroom", "--once", "--registers-only"), ("controlroom", "--once")):
        done = ws.run(*args)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr)


def test_a_view_that_is_not_text_differs_and_is_written_anew(filed: Workspace) -> None:
    ws = filed
    (ws.root / "FINDINGS.md").write_bytes(b"\xff\xfe")
    ws.commit("view", sign=False)
    done = ws.run("registry", "views", "--check")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "FINDINGS.md differs" in done.stdout
    done = ws.run("controlroom", "--once", "--registers-only")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "fixed", "--commit", check=True)
    assert ws.git("status", "--porcelain") == "" and ws.run("registry", "views", "--check").returncode == 0


def test_a_register_file_whose_name_is_not_text_is_listed_escaped(filed: Workspace) -> None:
    ws = filed
    with open(os.fsencode(str(ws.root / "findings")) + b"/F-\xff.md", "wb") as handle:
        handle.write(b"---\nid: F-y\n---\n")
    ws.commit("odd name", sign=False)
    done = ws.run("registry", "views")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "F-\\udcff" in (ws.root / "FINDINGS.md").read_text()
    ws.run("registry", "ack", "F-x", "--by", "alice", "--commit", check=True)


def test_a_merge_keeping_the_units_version_gets_no_credit_from_an_ack_on_the_other_side(
    filed: Workspace,
) -> None:
    """A second review of D-237: the unit resolved F-x unsigned on a side line, alice acked on the
    branch, and a merge took the side's F-x whole (matching a parent, so not "touching" it), with a
    new intake entry to keep both lines in the log: her ack, listed first, authorized a resolve she
    never signed. The commit that authorizes must have made the version the branch ends with."""
    ws = filed
    base = ws.git("rev-parse", "HEAD").strip()
    ws.git("checkout", "-q", "-b", "evil")
    ws.write(FINDING, finding(resolved="true"))
    committed_views(ws, "tidy")
    ws.git("checkout", "-q", "-b", "unit", base)
    ws.run("registry", "ack", "F-x", "--by", "alice", "--commit", check=True)
    ws.git("checkout", "-q", "evil")
    ws.git("merge", "-q", "--no-ff", "--no-commit", "-s", "ours", "unit")
    ws.write("intake/I-merge.md", "---\nid: I-merge\ndate: '2026-11-01'\ntitle: t\ndisposition: new\n---\n")
    ws.run("registry", "views", check=True)
    ws.git("add", "-A")
    ws.git("commit", "-q", "--no-edit")
    ws.git("branch", "-f", "unit", "HEAD")
    ws.git("checkout", "-q", "unit")
    errors = json.loads(ws.run("registry", "lint", "--json", "--trunk", "main").stdout)["errors"]
    assert [e["code"] for e in errors] == ["unauthorized-change"]
    assert "the branch ends with another version of it" in errors[0]["message"]


def test_an_ack_in_a_clone_whose_branch_names_another_trunk_is_refused(
    filed: Workspace, tmp_path: Path
) -> None:
    """A second review of D-237: in a clone, trunk is what the checked-out branch's
    regulator/config.yaml names. The unit named an orphan branch of its own, whose history held
    nothing, so alice's ack there was not refused as a narrowing and lifted u1 once merged. Where the
    clone's origin names another default branch, her ack and resolve are refused."""
    ws = filed
    ws.git("checkout", "-q", "--orphan", "evil-trunk")
    ws.write(FINDING, finding(affects="[]"))
    committed_views(ws, "root")
    ws.git("checkout", "-q", "-f", "main")
    ws.git("checkout", "-q", "-b", "unit")
    ws.write(FINDING, finding(affects="[]"))
    ws.write("regulator/config.yaml", "trunk: evil-trunk\n")
    committed_views(ws, "tidy the finding")
    ws.git("checkout", "-q", "main")
    here = clone(ws, tmp_path / "alice")
    git(here, "checkout", "-q", "unit", env=ws.env)
    for args in (
        ("registry", "ack", "F-x", "--by", "alice", "--commit"),
        ("registry", "resolve", "F-x", "--by", "alice", "--rationale", "r", "--commit"),
    ):
        done = ws.run(*args, cwd=here)
        assert done.returncode == 3, (done.stdout, done.stderr)
        assert "names trunk 'evil-trunk' here, but this clone's origin names 'main'" in done.stderr
    assert git(here, "status", "--porcelain", env=ws.env) == ""


def test_an_indented_closing_line_is_the_frontmatters_end_for_ack_and_resolve(filed: Workspace) -> None:
    """Every reader takes an indented `---` as the frontmatter's end; ack and resolve looked for
    "\\n---" and failed with a traceback. They find it as the readers do."""
    ws = filed
    ws.write(FINDING, finding().replace("\n---\n", "\n  ---\n"))
    committed_views(ws, "reword")
    ws.run("registry", "ack", "F-x", "--by", "alice", "--commit", check=True)
    ws.run("registry", "resolve", "F-x", "--by", "alice", "--rationale", "fixed", "--commit", check=True)
    assert json.loads(ws.run("registry", "lint", "--json").stdout)["errors"] == []


def test_an_alias_bomb_in_an_extra_field_does_not_hang_ack(filed: Workspace) -> None:
    """An extra field built of nested aliases (twelve levels: 10^12 values from a few lines): every
    reader that walked it hung (the ack's read-back once walked every path through it). YAML whose
    aliases repeat that much is not read at all (D-253): the finding does not parse, lint says why
    and names the file, the ack is refused (exit 2) and writes nothing; none of it hangs."""
    ws = filed
    bomb = ["b0: &b0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 10) + "]" for i in range(1, 12)]
    ws.write(FINDING, finding().replace("resolved: false\n", "resolved: false\n" + "\n".join(bomb) + "\n"))
    committed_views(ws, "notes")
    before = ws.digest()
    done = ws.run("registry", "ack", "F-x", "--by", "alice", "--commit")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "does not parse: run registry lint" in done.stderr
    assert ws.digest() == before
    lint = ws.run("registry", "lint")
    assert lint.returncode == 1 and "aliases repeat" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
