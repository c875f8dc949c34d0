"""The fast frontmatter reader answers exactly what yaml.safe_load answers, or steps aside."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from identity.yamlload import safe_load_strict
from registry.frontmatter import parse

words = st.sampled_from(
    [
        "F-alert-path-dead",
        "yes",
        "no",
        "true",
        "Off",
        "null",
        "~",
        "2026-08-11",
        "2026-13-45",
        "2026-02-30",
        "scoped:stream-a",
        "a: b",
        "x #y",
        "Idea 5",
        "release-hardening/manifest",
        "12",
        "1:20",
        "0x1f",
        "-x",
        "- x",
        "[a]",
        "'q'",
        '"d"',
        "it''s",
        "a,b",
        "",
        " ",
        "é",
        "!!python/name:os.system",
        "&anchor",
        "*ref",
        "|",
        ">",
        "a  b",
        "tab\tx",
        "v.1.0",
        "(paren)",
        "F-x: y",
        "a\rb",
        "a\x85b",
        "a\u2028b",
        "a\x07b",
        "a\x7fb",
        "\ufeffa",
        "...",
        "#c",
    ]
)
value = st.one_of(
    words,
    words.map(lambda w: f'"{w}"'),
    words.map(lambda w: f"'{w}'"),
    st.lists(words, max_size=3).map(lambda ws: "[" + ", ".join(ws) + "]"),
    st.lists(words.map(lambda w: f'"{w}"'), max_size=3).map(lambda ws: "[" + ", ".join(ws) + "]"),
)
keys = st.sampled_from(
    ["id", "date", "title", "affects", "ack", "resolved", "disposition", "reason", "yes", "x-y", "k" * 1100]
)
# how a block list item is written: mixed indentation within one list, nested lists, stray markers
item_prefixes = st.sampled_from(["- ", "  - ", "    - ", " - ", "-  ", "\t- ", "  - - ", "- - ", "  -", "-"])
extra_lines = st.sampled_from(["", "# comment", "  # indented comment", "  continued", "---x", "%YAML 1.1"])
pair_lines = st.tuples(keys, value).map(lambda kv: [f"{kv[0]}: {kv[1]}".rstrip()])
block_lines = st.tuples(
    keys, st.sampled_from(["", " "]), st.lists(st.tuples(item_prefixes, words), max_size=4)
).map(lambda b: [f"{b[0]}:{b[1]}"] + [f"{p}{w}" for p, w in b[2]])
plain_words = st.sampled_from(["u1", "F-a", "release-hardening/manifest", "yes", "'q'", '"d"', "é", ""])
uniform_block_lines = st.tuples(
    keys, item_prefixes, st.lists(st.one_of(plain_words, words), min_size=1, max_size=4)
).map(lambda b: [f"{b[0]}:"] + [f"{b[1]}{w}" for w in b[2]])
groups = st.lists(
    st.one_of(pair_lines, block_lines, uniform_block_lines, extra_lines.map(lambda x: [x])), max_size=7
)


def check_same_as_safe_load(head: str) -> None:
    fast = parse(head)
    if fast is None:
        return  # stepping aside is always allowed
    try:
        expected = yaml.safe_load(head)
    except (yaml.YAMLError, ValueError):
        raise AssertionError(f"fast reader accepted what YAML rejects: {head!r} -> {fast!r}") from None
    assert fast == expected, head
    assert type(fast) is type(expected), head
    # and it accepts nothing the strict loader refuses (a key given twice, a date that is no date)
    assert safe_load_strict(head) == fast, head


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(keys, value), min_size=1, max_size=6),
    st.lists(st.tuples(keys, st.lists(words, max_size=3)), max_size=2),
)
def test_same_as_safe_load_or_none(pairs: Any, blocks: Any) -> None:
    lines = [f"{k}: {v}".rstrip() for k, v in pairs]
    for k, items in blocks:
        lines.append(f"{k}:")
        lines += [f"  - {item}" for item in items]
    check_same_as_safe_load("\n".join(lines))


@settings(max_examples=1500, deadline=None)
@given(groups)
def test_same_as_safe_load_or_none_with_mixed_indentation_and_nested_lists(parts: Any) -> None:
    check_same_as_safe_load("\n".join(line for group in parts for line in group))


# design §26: every character Python's str methods take for whitespace or a line break, and every
# Unicode space and separator (YAML's whitespace is the space and the tab; its line breaks \n, \r,
# NEL, U+2028 and U+2029), plus the byte-order mark
SPACES_AND_BREAKS = [
    c for c in map(chr, range(0x3001)) if c.isspace() or unicodedata.category(c) in ("Zs", "Zl", "Zp")
] + ["\ufeff"]


@settings(max_examples=600, deadline=None)
@given(
    groups,
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(SPACES_AND_BREAKS)), min_size=1, max_size=3),
)
def test_same_as_safe_load_or_none_with_unicode_spaces_and_line_breaks(
    parts: list[list[str]], inserts: list[tuple[int, str]]
) -> None:
    """Issue 28: `resolved: true` + U+00A0 read True here, a string to YAML (14,702 of 20,020
    generated headers with Unicode spaces disagreed)."""
    head = "\n".join(line for group in parts for line in group)
    for position, char in inserts:
        at = position % (len(head) + 1)
        head = head[:at] + char + head[at:]
    check_same_as_safe_load(head)


@pytest.mark.parametrize("space", SPACES_AND_BREAKS)
def test_a_unicode_space_after_a_boolean_is_never_the_boolean(space: str) -> None:
    head = f"id: F-x\nresolved: true{space}\naffects: [u1]"
    check_same_as_safe_load(head)
    parsed = parse(head)
    assert parsed is None or parsed["resolved"] is True and space in " \n"


@pytest.mark.parametrize(
    "head",
    [
        "key:\n  - a\n- b\n",  # issue 13: YAML rejects it, the fast reader said ['a', 'b']
        "key:\n- a\n  - b",  # one scalar "a - b" to YAML
        "key:\n  - a\n    - b",
        "key:\n  - - a",
        "resolved: true\nresolved: false",  # a duplicate key: the strict loader names it
        "date: 2026-02-30",
        'title: "a\x85b"',  # NEL is a line break to YAML
        "",
        "# only a comment",
    ],
)
def test_the_fast_reader_steps_aside(head: Any) -> None:
    assert parse(head) is None
    check_same_as_safe_load(head)


def test_the_common_shapes_are_read_fast() -> None:
    head = (
        'id: F-alert-path-dead\ndate: "2026-08-11"\ntitle: "The post-merge leak alerter cannot run"\n'
        'affects: ["release-hardening/manifest"]\nack: ""\nresolved: false'
    )
    assert parse(head) == yaml.safe_load(head)
    assert parse("id: I-x\ndate: '2026-11-20'\ntitle: Cache the views\ndisposition: scoped:registers") == {
        "id": "I-x",
        "date": "2026-11-20",
        "title": "Cache the views",
        "disposition": "scoped:registers",
    }
    assert parse("id: !!python/object/apply:os.system ['x']") is None


@settings(max_examples=500)
@given(
    head=st.one_of(
        st.text(), st.text(st.characters(max_codepoint=127)), st.text(st.characters(max_codepoint=0x2030))
    )
)
def test_the_odd_character_check_answers_as_the_whole_class_does(head: str) -> None:
    """`odd` compiles the whole class only for text that is not all ASCII: same answer, any text."""
    import re

    from registry.frontmatter import ODD, odd

    assert odd(head) == (re.search(ODD, head) is not None)


shared = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(shared, st.integers(min_value=1, max_value=4))
def test_aliases_within_the_bound_read_as_safe_load_reads_them(value: Any, times: int) -> None:
    """A value written once with an anchor and repeated by aliases (yaml.safe_dump writes `&id001`
    and `*id001` for a shared object): the strict loader answers what safe_load answers, merge keys
    too, as long as the aliases repeat no more than MAX_REPEATED values."""
    document = {"shared": value, "again": [value] * times, "merged": {"<<": {"k": 1}, "j": 2}}
    text = yaml.safe_dump(document)
    text += "base: &base {a: 1, b: 2}\nmore:\n  <<: *base\n  c: 3\n"
    assert safe_load_strict(text) == yaml.safe_load(text)


def test_aliases_past_the_bound_and_an_alias_inside_its_own_value_are_errors() -> None:
    from identity.yamlload import MAX_REPEATED, YamlError

    def wide(aliases: int) -> str:  # a list of 1,000 values repeated by `aliases` aliases (1,001 values each)
        return "a: &a [" + ", ".join(["1"] * 1000) + "]\nb: [" + ", ".join(["*a"] * aliases) + "]\n"

    assert MAX_REPEATED == 100_000
    assert len(safe_load_strict(wide(99))["b"]) == 99  # type: ignore[index]
    with pytest.raises(
        YamlError, match=r"^aliases repeat 100,100 values \(at most 100,000\): write the values out$"
    ):
        safe_load_strict(wide(100))
    long = "a: &a " + "x" * 10_000 + "\nb: [" + ", ".join(["*a"] * 105) + "]\n"  # 1,050,000 characters again
    with pytest.raises(
        YamlError, match=r"^aliases repeat 1,050,000 characters of text \(at most 1,048,576\)"
    ):
        safe_load_strict(long)
    assert len(safe_load_strict(long.replace(", *a]", "]", 1))["b"]) == 104  # type: ignore[index]
    for itself in ("x: &a [*a]\n", "x: &a {k: *a}\n", "- &a [[*a]]\n"):
        with pytest.raises(YamlError, match="an alias refers to a value that contains it"):
            safe_load_strict(itself)


def test_a_number_of_more_than_64_characters_is_an_error_before_it_is_built() -> None:
    """PyYAML builds a sexagesimal integer by a multiplication per part (quadratic) and a hex one of
    any length (which `str` then refuses past 4,300 digits): a number past 64 characters is refused
    by the strict loader, naming its line; 64 characters and quoted text read as before."""
    from identity.yamlload import MAX_NUMBER, YamlError

    assert MAX_NUMBER == 64
    assert safe_load_strict("x: 0x7" + "f" * 15 + "\ny: -0x8" + "0" * 15 + "\n") == {
        "x": 2**63 - 1,
        "y": -(2**63),
    }
    for past in (
        "x: 0x8" + "0" * 15,
        "x: 9223372036854775808",
        "x: -9223372036854775809",
        "? 18446744073709551614\n: 1",
    ):
        with pytest.raises(YamlError, match=r"^line 1: an integer past 64 bits$"):
            safe_load_strict(past + "\n")
    colliding = "\n".join(f"{k * (2**61 - 1)}: {k}" for k in range(1, 2000))  # one hash, 1,999 keys
    with pytest.raises(YamlError, match="an integer past 64 bits"):
        safe_load_strict(colliding)
    assert safe_load_strict("x: 1:0:0\ny: 1.5\n") == {"x": 3600, "y": 1.5}
    assert safe_load_strict("x: '1" + ":0" * 100 + "'\n") == {"x": "1" + ":0" * 100}
    for text in (
        "a: 1\nx: 0x" + "f" * 63 + "\n",
        "a: 1\nx: 1" + ":0" * 40 + "\n",
        "a: 1\nx: 1." + "5" * 70 + "\n",
    ):
        with pytest.raises(YamlError, match=r"^line 2: a number of [0-9]+ characters \(at most 64\)$"):
            safe_load_strict(text)
