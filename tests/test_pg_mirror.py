"""The PostgreSQL mirror (design §18) holds the server's lines byte for byte, however they are fetched.

The mirror catches up through a binary COPY of blocks of lines joined by the server; these tests
cross block boundaries (a small block), resume in the middle of a block, fetch several stores at
once, and put every awkward character a line can hold through it: backslashes and JSON escapes,
tabs (escaped inside strings, raw between tokens), U+2028/U+2029, non-ASCII, astral characters.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.log.events import STORES

pytestmark = pytest.mark.usefixtures("pg_server")

AWKWARD = [
    "\\",
    '"',
    "\t",
    "\n",
    "\r",
    "\\n",
    "\\\\",
    "\u2028",
    "\u2029",
    "é",
    "\U0001f600",
    "\x01",
    "\x7f",
    "}",
]
# (no NUL: the server refuses a line holding \u0000 — PostgreSQL's json cannot take it out as text;
# no lone surrogate: every writer refuses one, and so does the store, a BadInput: no UTF-8 holds it)


def held(url: str, name: str) -> bytes:
    """Every line the server holds for a store, each with its newline: what a mirror must hold."""
    from engine.log.pg import server as pg_srv

    return b"".join(line.encode() + b"\n" for _, line in pg_srv.lines(url, name))


def fresh_mirror(url: str, folder: Path) -> dict[str, bytes]:
    """A new host's mirror of every store: its files after the first sync."""
    from engine.log.pg import mirror as pg_mirror

    mirror = pg_mirror.Mirror(url, folder)
    mirror.prepare()
    return {name: mirror.path(name).read_bytes() for name in STORES}


@pytest.fixture
def pinned_url(pg_url: str) -> Any:
    """An empty database on a pinned clock (no `at` check: the lines are about their text)."""
    from engine.log.pg import admin as pg_admin

    pg_admin.create_schema(pg_url, "pinned")
    return pg_url


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.log.pg import server as pg_srv

    monkeypatch.setattr(pg_srv, "BLOCK", 3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(
        st.lists(
            st.sampled_from(AWKWARD) | st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
            max_size=20,
        ).map("".join),
        min_size=1,
        max_size=8,
    )
)
def test_a_mirror_holds_every_awkward_line_byte_for_byte(
    pinned_url: str, small_blocks: Any, tmp_path: Path, texts: Any
) -> None:
    """Appended lines, fetched by a new host and by a host that had part of them, are the server's
    bytes and the canonical lines as written (the same bytes a file store would hold)."""
    from engine.log.pg import mirror as pg_mirror
    from engine.log.pg import store as pg_store

    writer = pg_store.PgStore(pinned_url, tmp_path / "writer", "memory", mirrored=False)
    old_host = pg_mirror.Mirror(pinned_url, tmp_path / "old-host")
    old_host.prepare()  # mirrored before this example's lines: it catches up from the middle
    written = [writer.append({"kind": "note", "text": text, "keys": {text: [text]}}) for text in texts]
    old_host.sync()
    with tempfile.TemporaryDirectory(dir=tmp_path) as new_host:
        mirrored = fresh_mirror(pinned_url, Path(new_host))
    server = held(pinned_url, "memory")
    assert mirrored["memory"] == server == old_host.path("memory").read_bytes()
    tail = b"".join(pg_store.line_text(event).encode() + b"\n" for event in written)
    assert server.endswith(tail)
    lines = server.split(b"\n")[:-1]
    assert [json.loads(line)["hash"] for line in lines[-len(texts) :]] == [e["hash"] for e in written]


def test_raw_lines_as_imported_come_back_as_they_are_across_blocks_and_stores(
    pg_url: str, small_blocks: Any, tmp_path: Path
) -> None:
    """`store copy` imports lines as the bytes they are (any JSON whitespace, escapes as written);
    a mirror of several stores at once, and `verify`'s read of the server, give back those bytes."""
    from engine.log.pg import admin as pg_admin
    from engine.log.pg import server as pg_srv

    pg_admin.create_schema(pg_url, "pinned")
    stores: dict[str, list[bytes]] = {}
    for s, name in enumerate(("signals", "identity", "units")):
        prev, lines = "", []
        for i in range(7 + 5 * s):  # 7, 12, 17 lines: whole blocks, part blocks
            digest = f"{name}-{i}"
            text = AWKWARD[i % len(AWKWARD)]
            body = json.dumps(text)  # escaped as JSON writes it ...
            raw = json.dumps(text, ensure_ascii=False)  # ... and as raw as JSON allows
            line = f'{{"prev":"{prev}",\t"hash":"{digest}" , "a":{body},"b":{raw},"c":"\\\\\\t\\u2028"}}'
            lines.append(line.encode())
            prev = digest
        stores[name] = lines
    pg_admin.import_lines(pg_url, stores)
    mirrored = fresh_mirror(pg_url, tmp_path / "host")
    for name in STORES:
        expected = b"".join(line + b"\n" for line in stores.get(name, []))
        assert mirrored[name] == expected == held(pg_url, name)
        assert pg_srv.server_bytes(pg_url, name) == expected  # what `verify` checks: the server's


def test_a_reader_role_fetches_the_mirror(pg_server: Any, tmp_path: Path) -> None:
    """COPY of the server's lines needs only SELECT: CI's regulator_reader mirrors everything."""
    from engine.log.pg import admin as pg_admin
    from engine.log.pg import store as pg_store
    from tests.pg import ADMIN

    db = pg_server.database()
    owner = pg_server.url(db)
    pg_admin.create_schema(owner, "pinned")
    pg_admin.create_roles(owner)
    writer = pg_store.PgStore(pg_server.url(db, "regulator_host"), tmp_path / "w", "signals", mirrored=False)
    for i in range(5):
        writer.append({"kind": "note", "n": i, "text": "\\ \u2028 é"})
    reader = pg_server.url(db, "regulator_reader")
    assert ADMIN not in reader
    mirrored = fresh_mirror(reader, tmp_path / "ci")
    assert mirrored["signals"] == held(owner, "signals")
    assert len(mirrored["signals"].splitlines()) == 5


def test_an_edited_or_cut_mirror_is_fetched_again(pinned_url: str, small_blocks: Any, tmp_path: Path) -> None:
    """The mirror is a cache: a file that is not what was mirrored is read again from line 1, and a
    fetch that fails leaves the files as they were mirrored."""
    from engine.log.pg import mirror as pg_mirror
    from engine.log.pg import store as pg_store

    writer = pg_store.PgStore(pinned_url, tmp_path / "w", "signals", mirrored=False)
    for i in range(8):
        writer.append({"kind": "note", "n": i})
    mirror = pg_mirror.Mirror(pinned_url, tmp_path / "host")
    mirror.prepare()
    path = mirror.path("signals")
    path.write_bytes(path.read_bytes()[:-10])  # cut
    assert mirror.sync() == 8
    assert path.read_bytes() == held(pinned_url, "signals")
    with path.open("ab") as handle:
        handle.write(b'{"forged":true}\n')  # a line the server never held
    assert mirror.sync() == 8
    assert path.read_bytes() == held(pinned_url, "signals")
    assert mirror.sync() == 0
