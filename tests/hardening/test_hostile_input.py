"""Hostile input, property-tested in-process (design §11, §13): whatever arrives, the answer is one
line and exit 2, and no file in the workspace changes."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlroom.cli.root import main
from engine.commands.signals import FIELDS as REPORT_FIELDS
from tests import helpers
from tests.helpers import NOW, make_workspace, remember_args, report_args

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    os.environ["REGULATOR_NOW"] = NOW
    ws = make_workspace(tmp_path_factory.mktemp("hostile"))
    ws.write(
        "findings/F-real.md",
        "---\nid: F-real\ndate: '2026-11-01'\ntitle: t\naffects: [u3]\nack: ''\nresolved: false\n---\n",
    )
    ws.run(
        *report_args(
            subject="s",
            claim="c",
            observation="o",
            evidence=["e"],
            confidence="low",
            severity="advisory",
            affects=["u1"],
        ),
        "--by",
        "alice",
        check=True,
    )
    ws.run("signals", "route", check=True)
    ws.lease("u1")
    ws.lease("r1")
    yield ws
    os.environ.pop("REGULATOR_NOW", None)


def tree_digest(root: Path) -> str:
    """Every file under the workspace (stores, registers, contracts, identity): nothing may change."""
    h = hashlib.sha256()
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(name for name in folders if name != ".git")  # git's objects: not walked
        for name in sorted(files):
            path = Path(folder, name)
            if path.is_file():
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def call(argv: list[str], stdin: bytes | None = None, cwd: Path | None = None) -> tuple[int, str]:
    err = io.StringIO()
    out = io.StringIO()
    old_cwd = os.getcwd()
    if cwd:
        os.chdir(cwd)
    old_stdin = None
    if stdin is not None:
        import sys

        old_stdin = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    finally:
        os.chdir(old_cwd)
        if old_stdin is not None:
            import sys

            sys.stdin = old_stdin
    return code, err.getvalue()


def assert_refused(
    ws: helpers.Workspace, argv: Any, stdin: Any = None, cwd: Any = None, code: Any = 2
) -> Any:
    before = tree_digest(ws.root)
    got, err = call(argv, stdin, cwd)
    assert got == code, (argv, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("regulator: ") and "Traceback" not in err, err
    assert tree_digest(ws.root) == before
    return lines[0]


def report(ws: helpers.Workspace, **fields: Any) -> Any:
    base = {
        "--subject": "s",
        "--claim": "c",
        "--observation": "o",
        "--evidence": "e",
        "--confidence": "low",
        "--severity": "info",
    }
    base.update(fields)
    argv = ["--root", str(ws.root), "signals", "report", "--by", "alice"]
    for k, v in base.items():
        argv += [k, v]
    return argv


huge = st.integers(min_value=64 * 1024 + 1, max_value=200 * 1024).map(lambda n: "x" * n)


@SETTINGS
@given(field=st.sampled_from(["--claim", "--observation", "--rationale"]), value=huge)
def test_huge_fields_name_the_limit(hostile: Any, field: Any, value: Any) -> None:
    line = assert_refused(hostile, report(hostile, **{field: value}))
    assert "limit" in line and "65536" in line


@SETTINGS
@given(
    value=st.tuples(st.sampled_from(["x", "é", "✓", "𝄞", "[b]"]), st.integers(1025, 4000)).map(
        lambda t: t[0] * t[1]
    )
)
def test_huge_subject(hostile: Any, value: Any) -> None:
    assert "1024" in assert_refused(hostile, report(hostile, **{"--subject": value}))


# a report that is valid as it stands: each test below spoils one thing in it
VALID_REPORT = {
    "subject": "s",
    "claim": "c",
    "observation": "o",
    "evidence": ["e"],
    "confidence": "low",
    "reportedSeverity": "info",
}


def json_report(ws: helpers.Workspace) -> list[str]:
    return ["--root", str(ws.root), "signals", "report", "--by", "alice", "--json-input", "-"]


@SETTINGS
@given(
    field=st.sampled_from(["subject", "claim", "observation"]),
    prefix=st.text(max_size=20),
    suffix=st.text(max_size=20),
)
def test_nul_bytes_through_json_input(hostile: Any, field: Any, prefix: Any, suffix: Any) -> None:
    payload = dict(VALID_REPORT, **{field: prefix + "\x00" + suffix})
    assert_refused(hostile, json_report(hostile), stdin=json.dumps(payload).encode())


@SETTINGS
@given(junk=st.binary(min_size=1, max_size=40).filter(lambda b: not _utf8(b)))
def test_invalid_utf8_through_json_input(hostile: Any, junk: Any) -> None:
    body = b'{"subject": "' + junk + b'", "claim": "c"}'
    assert_refused(hostile, json_report(hostile), stdin=body)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


wrong = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@SETTINGS
@given(
    field=st.sampled_from([name for name in REPORT_FIELDS if name != "rationale"]),
    value=wrong,
)
def test_json_of_the_wrong_types(hostile: Any, field: Any, value: Any) -> None:
    if field in ("affectedUnits", "expiresAt", "observedAt", "prediction", "supersedes") and value is None:
        return  # optional: null is a valid absence
    if field == "affectedUnits" and value == []:
        return  # naming no unit is valid
    if field == "evidence" and isinstance(value, list) and not value:
        value = [1]
    payload = dict(VALID_REPORT, **{field: value})
    assert_refused(hostile, json_report(hostile), stdin=json.dumps(payload).encode())


METACHAR = st.text(alphabet=st.sampled_from(list("../\\;|&$`'\"<>*? \n~ÅéZ")), min_size=1, max_size=12)
traversal = st.sampled_from(
    [
        "../etc/passwd",
        "../../x",
        "u1/../../r1",
        "/abs",
        "u1;rm -rf /",
        "$(id)",
        "`id`",
        "a b",
        "U1",
        "u1/",
        "-u1",
        "..",
        "F-../x",
    ]
)
hostile_ids = st.one_of(traversal, METACHAR)


@SETTINGS
@given(unit=hostile_ids)
def test_hostile_unit_ids(hostile: Any, unit: Any) -> None:
    for argv in (
        ["unit", "dispatch", unit],
        ["unit", "close", unit],
        ["unit", "decide", unit, "--action", "retry", "--by", "alice", "--rationale", "r"],
        ["context", unit],
    ):
        assert_refused(hostile, ["--root", str(hostile.root), *argv])
    assert_refused(hostile, report(hostile, **{"--affects": unit}))


@SETTINGS
@given(ident=hostile_ids)
def test_hostile_obligation_memory_proposal_prefixes(hostile: Any, ident: Any) -> None:
    root = ["--root", str(hostile.root)]
    assert_refused(
        hostile,
        [
            *root,
            "obligation",
            "resolve",
            ident,
            "--by",
            "alice",
            "--disposition",
            "no-action",
            "--rationale",
            "r",
        ],
    )
    assert_refused(hostile, [*root, "obligation", "show", ident])
    assert_refused(hostile, [*root, "memory", "retract", ident, "--by", "alice", "--reason", "r"])
    assert_refused(hostile, [*root, "identity", "accept", ident, "--by", "alice", "--rationale", "r"])


@SETTINGS
@given(ident=hostile_ids)
def test_hostile_finding_ids(hostile: Any, ident: Any) -> None:
    assert_refused(hostile, ["--root", str(hostile.root), "registry", "ack", ident, "--by", "alice"])


BAD_DATES = [
    "0000-01-01",
    "9999-12-31",
    "2026-02-30",
    "2026-13-01",
    "tomorrow",
    "",
    "+10000-01-01",
    "2026-1-1x",
    "2026-11-29",
    "2026-11-28",
    "2027-02-28",
    "2100-01-01",
    "1969-12-31T99:00:00Z",
]


@SETTINGS
@given(date=st.one_of(st.sampled_from([*BAD_DATES, "2026-11-29T00:00:00Z"]), st.text(max_size=12)))
def test_review_by_out_of_range(hostile: Any, date: Any) -> None:
    worktree = hostile.root / "wt" / "u1"
    argv = remember_args(review_by=date)
    assert_refused(hostile, argv, cwd=worktree)


@SETTINGS
@given(
    when=st.one_of(
        st.sampled_from(
            [
                "9999-12-31",
                "2026-02-30",
                "2026-13-01",
                "tomorrow",
                "+10000-01-01",
                "2026-11-29T12:00:01Z",
                "2030-01-01T00:00:00+05:00",
                "x",
            ]
        ),
        st.text(min_size=1, max_size=12).filter(lambda s: not s[:1].isdigit()),
    )
)
def test_observed_at_out_of_range(hostile: Any, when: Any) -> None:
    assert_refused(hostile, report(hostile, **{"--observed-at": when}))


@SETTINGS
@given(
    tag=st.sampled_from(
        [
            "!!python/object/apply:os.system ['touch {m}']",
            "!!python/name:os.system",
            "!!python/object/new:os.system [touch {m}]",
            "!!binary aGVsbG8=",
        ]
    )
)
def test_yaml_tags_in_register_entries(
    hostile: Any, tag: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    marker = tmp_path_factory.mktemp("marker") / "pwned"
    path = hostile.root / "findings" / "F-tagged.md"
    path.write_text(
        f"---\nid: {tag.format(m=marker)}\ndate: '2026-11-01'\ntitle: x\naffects: []\nack: ''\n"
        "resolved: false\n---\n"
    )
    try:
        err = io.StringIO()
        out = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(["--root", str(hostile.root), "registry", "lint", "--json", "--trunk", "none"])
        data = json.loads(out.getvalue())
        assert code == 1
        # a tag safe_load refuses makes the file unreadable; !!binary reads, as no text id
        expected = "schema" if "binary" in tag else "unreadable"
        assert (expected, "findings/F-tagged.md") in {(e["code"], e["entry"]) for e in data["errors"]}
        assert not marker.exists()
    finally:
        path.unlink()
