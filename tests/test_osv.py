"""OSV matching as the schema's evaluation defines it (engine.read.osv), and the lockfile readers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.read.osv import (
    Unordered,
    affects,
    feed_severity,
    normalize,
    parse_lockfile,
    pep440_key,
    read_feed,
    semver_key,
)


def test_semver_precedence_is_semver_section_11() -> None:
    ordered = [
        "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
        "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "2.0.0+build.7",
    ]  # fmt: skip
    keys = [semver_key(v) for v in ordered]
    assert all(k is not None for k in keys)
    assert keys == sorted(keys)  # type: ignore[type-var]
    assert semver_key("1.0.0+a") == semver_key("1.0.0+b")  # build metadata has no precedence
    assert semver_key("1.0") is None and semver_key("01.0.0") is None


def test_pep440_orders_as_packaging_does() -> None:
    ordered = ["1.0.dev1", "1.0a1", "1.0b2", "1.0rc1", "1.0", "1.0.post1", "1.1", "2!0.1"]
    keys = [pep440_key(v) for v in ordered]
    assert keys == sorted(keys)  # type: ignore[type-var]
    assert pep440_key("1.0") == pep440_key("1.0.0")
    assert pep440_key("not a version") is None


def test_names_compare_normalized_for_pypi_only() -> None:
    assert normalize("PyPI", "Django_REST.framework") == normalize("PyPI", "django-rest-framework")
    assert normalize("npm", "Lodash") != normalize("npm", "lodash")


def entry(*events: Any, kind: Any = "ECOSYSTEM", versions: Any = None) -> Any:
    found = {"ranges": [{"type": kind, "events": list(events)}]}
    if versions is not None:
        found["versions"] = versions
    return found


@pytest.mark.parametrize(
    ("version", "affected"),
    [("0.9", False), ("1.0", True), ("1.4.9", True), ("1.5", False), ("3.0", True), ("3.2.5", False)],
)
def test_multiple_intervals_in_one_range(version: Any, affected: Any) -> None:
    found = entry({"introduced": "1.0"}, {"fixed": "1.5"}, {"introduced": "3.0"}, {"fixed": "3.2.5"})
    assert affects(found, "PyPI", version) is affected


def test_last_affected_is_inclusive_and_limit_bounds_the_range() -> None:
    assert affects(entry({"introduced": "0"}, {"last_affected": "2.1.214"}), "PyPI", "2.1.214")
    assert not affects(entry({"introduced": "0"}, {"last_affected": "2.1.214"}), "PyPI", "2.1.215")
    limited = entry({"introduced": "1.0.0"}, {"limit": "2.0.0"}, kind="SEMVER")
    assert affects(limited, "npm", "1.9.9") and not affects(limited, "npm", "2.0.0")
    assert affects(entry({"introduced": "0"}, {"limit": "*"}), "npm", "9.9.9")


def test_events_are_judged_in_version_order_whatever_their_order_in_the_record() -> None:
    assert affects(entry({"fixed": "1.5"}, {"introduced": "1.0"}), "PyPI", "1.2")


def test_the_versions_list_alone_is_enough_and_git_ranges_are_not_read() -> None:
    found = {
        "versions": ["5.3.1"],
        "ranges": [{"type": "GIT", "repo": "r", "events": [{"introduced": "abc"}]}],
    }
    assert affects(found, "PyPI", "5.3.1") and not affects(found, "PyPI", "5.3.2")
    # a listed version is the pinned one by the ecosystem's equality, not as text (a review)
    assert affects({"versions": ["1.1"]}, "PyPI", "1.1.0") and not affects(
        {"versions": ["1.1"]}, "PyPI", "1.1.1"
    )


def test_an_unreadable_bound_is_said_not_guessed() -> None:
    with pytest.raises(Unordered):
        affects(entry({"introduced": "banana"}), "npm", "1.0.0")
    with pytest.raises(Unordered):
        affects(entry({"introduced": "1.0.0", "fixed": "2.0.0"}), "npm", "1.0.0")  # two in one event


def test_prereleases_of_npm_follow_semver() -> None:
    found = entry(
        {"introduced": "0"}, {"fixed": "7.23.2"}, {"introduced": "8.0.0-alpha.0"}, {"fixed": "8.0.0-alpha.4"}
    )
    assert affects(found, "npm", "8.0.0-alpha.3") and not affects(found, "npm", "8.0.0-alpha.4")
    assert affects(found, "npm", "7.23.2-rc.1")  # a prerelease of the fix comes before it


def test_requirements_pins_and_their_lines() -> None:
    text = "# c\nDjango==3.2.0\nrequests[socks] == 2.31.0 ; python_version>'3'\nflask>=2\nx===1\ny==1.*\n-r more.txt\n"
    assert [(p.name, p.version, p.line) for p in parse_lockfile("requirements", text)] == [
        ("Django", "3.2.0", 2),
        ("requests", "2.31.0", 3),
    ]


def test_package_lock_v1_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="only versions 2 and 3"):
        parse_lockfile("npm", json.dumps({"lockfileVersion": 1, "dependencies": {}}))
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_lockfile("npm", "{")
    with pytest.raises(ValueError, match="not valid TOML"):
        parse_lockfile("uv", "[[package]\n")


def test_package_lock_names_scoped_nested_and_aliased_packages() -> None:
    lock = {
        "lockfileVersion": 2,
        "packages": {
            "": {"name": "app"},
            "node_modules/@scope/pkg": {"version": "1.0.0"},
            "node_modules/a/node_modules/b": {"version": "2.0.0"},
            "node_modules/alias": {"name": "real", "version": "3.0.0"},
            "node_modules/linked": {"link": True},
        },
    }
    pins = parse_lockfile("npm", json.dumps(lock, indent=2))
    assert [(p.name, p.version) for p in pins] == [("@scope/pkg", "1.0.0"), ("b", "2.0.0"), ("real", "3.0.0")]
    assert pins[0].line == 7


def test_a_feeds_severity_in_any_case_and_a_missing_feed_said_missing(tmp_path: Any) -> None:
    """An operator's review: `"severity": "high"` said nothing more than the sensor, and a zip feed
    that did not exist was "neither a folder nor a zip"."""
    said = [feed_severity({"database_specific": {"severity": s}}) for s in ("high", " Critical ", "HIGH")]
    assert said == ["blocking", "critical", "blocking"]
    assert feed_severity({"database_specific": {"severity": "moderate"}}) is None
    missing = read_feed(tmp_path / "mirror.zip")
    assert missing.errors == [
        f"feed {tmp_path / 'mirror.zip'}: does not exist (a folder or a zip of OSV JSON files)"
    ]
    (tmp_path / "gone").symlink_to(tmp_path / "no-such-folder")
    assert read_feed(tmp_path / "gone").errors == [
        f"feed {tmp_path / 'gone'}: does not exist (a link to nothing)"
    ]
    (tmp_path / "notes.txt").write_text("x")
    assert read_feed(tmp_path / "notes.txt").errors == [
        f"feed {tmp_path / 'notes.txt'}: neither a folder nor a zip of OSV JSON files"
    ]
