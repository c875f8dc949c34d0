"""The fast frontmatter reader answers exactly what yaml.safe_load answers, or steps aside."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

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
        "scoped:stream-a",
        "a: b",
        "x #y",
        "Idea 5",
        "release-hardening/manifest",
        "12",
        "1:20",
        "0x1f",
        "-x",
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
    ["id", "date", "title", "affects", "ack", "resolved", "disposition", "reason", "yes", "x-y"]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(keys, value), min_size=1, max_size=6),
    st.lists(st.tuples(keys, st.lists(words, max_size=3)), max_size=2),
)
def test_same_as_safe_load_or_none(pairs, blocks):
    lines = [f"{k}: {v}".rstrip() for k, v in pairs]
    for k, items in blocks:
        lines.append(f"{k}:")
        lines += [f"  - {item}" for item in items]
    head = "\n".join(lines)
    fast = parse(head)
    if fast is None:
        return
    try:
        expected = yaml.safe_load(head)
    except yaml.YAMLError:
        raise AssertionError(f"fast reader accepted what YAML rejects: {head!r} -> {fast!r}") from None
    assert fast == expected, head


def test_the_common_shapes_are_read_fast():
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
