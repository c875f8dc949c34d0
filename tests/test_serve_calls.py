"""What the door answers to one call (design §22, §26): a report that supersedes another, found in
the door's kept read model; a request whose `id` is no id, answered with a JSON-RPC error. A real
`serve` and the mcp SDK's own client (tests/test_serve.py has the rest of serve on files)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.serving import REPORT, raw_post, sdk_call


def test_a_report_through_the_door_supersedes_a_signal_the_door_has_read(served: Any) -> None:
    """`supersedes` through the door is found in the door's kept read model (a fold of the whole
    signals store under the write lock for each such report let one unit stall every write and
    the routing: an adversarial review): a unique prefix of a signal reported just before is taken
    and recorded whole; a name of none is a tool error, exit 2, nothing written."""
    ws, serving, tokens = served
    first = sdk_call(serving.sock, tokens["r1"], "report_intelligence", REPORT).structured_content["id"]
    again = {**REPORT, "subject": "the same, again", "supersedes": first[:12]}
    second = sdk_call(serving.sock, tokens["r1"], "report_intelligence", again)
    assert not second.is_error, second.content
    event = next(e for e in ws.events("signals") if e.get("id") == second.structured_content["id"])
    assert event["supersedes"] == first
    before = ws.digest()
    missing = sdk_call(
        serving.sock, tokens["r1"], "report_intelligence", {**again, "supersedes": "01NOSUCHSIGNAL00"}
    )
    assert missing.is_error and "no signal" in str(missing.content), missing.content
    assert ws.digest() == before


@pytest.mark.parametrize("ident", [b'{"a":1}', b"1e400", b"1.5", b"true", b"null", b"[1]"])
def test_a_request_whose_id_is_no_id_gets_a_json_rpc_error(served: Any, ident: bytes) -> None:
    """An adversarial review: a tools/call whose `id` is an object or a float got 202 and an empty
    body from the SDK (read as a notification): a call left unanswered. Now a JSON-RPC error
    (-32600, HTTP 400), and nothing written."""
    ws, serving, tokens = served
    before = ws.digest()
    body = b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"report_intelligence","arguments":%s}}'
    status, answer = raw_post(serving.sock, tokens["r1"], body % (ident, json.dumps(REPORT).encode()))
    assert status == 400 and answer is not None
    assert answer["error"]["code"] == -32600 and answer["id"] is None
    assert ws.digest() == before
    ok, _ = raw_post(serving.sock, tokens["r1"], body % (b"7", json.dumps(REPORT).encode()))
    assert ok == 200  # the same call with an id is answered
