"""A client of `serve`'s door (design §22): MCP tool calls over Streamable HTTP with a bearer lease
token, for shells (`regulator door call`), the stdio forwarder (`regulator door stdio`) and agent
SDKs (`engine.doors.api.DoorClient`). Standard library only: it starts fast and needs no extra.

The door is stateless, so each call is one HTTP POST of one JSON-RPC request. A URL is
`unix:/path/to/door.sock` or `http://127.0.0.1:PORT` (`https://` where serve has a certificate).
Errors are the CLI's: a tool's refusal or bad input comes back with its exit code; a token the door
does not know (HTTP 401) and a door that cannot be reached are refusals (exit 3).
"""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import ssl
from typing import Any
from urllib.parse import urlsplit

from engine.base.errors import BadInput, Refused, RegulatorError

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
TIMEOUT_S = 60.0
UNAUTHORIZED = (
    "the door refused this token (HTTP 401): it is not the current lease of any unit; "
    "ask the host to dispatch the unit again"
)


class ToolError(RegulatorError):
    """A tool's refusal or bad input, with the exit code the door gave (design §17)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the door's default listen)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def check_door_url(url: str) -> str:
    """`unix:/absolute/path` or `http(s)://host:port`; anything else is bad input (exit 2)."""
    if url.startswith("unix:"):
        if not url[5:].startswith("/"):
            raise BadInput(
                f"door {url!r}: a unix: door names an absolute socket path (unix:/run/…/door.sock)"
            )
        return url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"door {url!r} is not unix:/PATH or http://127.0.0.1:PORT")
    return url


class DoorClient:
    """One unit's door, named by its URL and the unit's lease token. Thread-safe: each call opens
    its own connection (a closed loop of calls reuses none, as a stateless door expects)."""

    def __init__(
        self, url: str, token: str, *, timeout: float = TIMEOUT_S, cafile: str | None = None
    ) -> None:
        self.url = check_door_url(url)
        self.token = token
        self.timeout = timeout
        self.cafile = cafile
        self._ids = itertools.count(1)

    # ---- transport ---------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        if self.url.startswith("unix:"):
            return _UnixConnection(self.url[5:], self.timeout)
        parts = urlsplit(self.url)
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=self.cafile)
            return http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=self.timeout, context=context
            )
        return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)

    def _base(self) -> str:
        return "" if self.url.startswith("unix:") else urlsplit(self.url).path.rstrip("/")

    def _http(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        conn = self._connection()
        try:
            conn.request(method, self._base() + path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheader("content-type") or "", response.read()
        except TimeoutError:  # it was reached, or is listening, and said nothing in time
            raise Refused(
                f"the door at {self.url} did not answer within {self.timeout:g} s (serve busy or stuck: see its "
                "log); a write this call carried may still be made: look before calling again"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise Refused(f"no door at {self.url} ({exc}); is `regulator serve` running?") from None
        finally:
            conn.close()

    def rpc(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One JSON-RPC request to the door; its result (a JSON-RPC error is bad input, exit 2)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        body = json.dumps(message).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self.token}",
        }
        status, kind, data = self._http("POST", MCP_PATH, body, headers)
        if status == 401:
            raise Refused(UNAUTHORIZED)
        reply = _decode(kind, data)
        if reply is None:
            raise Refused(f"the door at {self.url} answered HTTP {status} with no JSON-RPC reply")
        error = reply.get("error")
        if isinstance(error, dict):
            raise BadInput(f"the door refused the request: {error.get('message')}")
        if isinstance(error, str):  # the door's own refusals (429 too many calls at once, 503)
            raise Refused(f"the door at {self.url} answered HTTP {status}: {error}")
        result = reply.get("result")
        if not isinstance(result, dict):
            raise Refused(f"the door at {self.url} answered HTTP {status} without a result")
        return result

    # ---- MCP ------------------------------------------------------------------------------------
    def tools(self) -> list[dict[str, Any]]:
        """The door's tools, as tools/list gives them."""
        return list(self.rpc("tools/list").get("tools") or [])

    def call_raw(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """tools/call's result as the door gave it (content, structuredContent, isError)."""
        return self.rpc("tools/call", {"name": tool, "arguments": arguments or {}})

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """A tool's structured result; a tool error raises with its exit code (design §13, §17)."""
        result = self.call_raw(tool, arguments)
        data = result.get("structuredContent")
        if result.get("isError"):
            error = data if isinstance(data, dict) else {}
            message = str(error.get("error") or _text(result) or "the tool failed")
            code = error.get("exitCode")
            raise ToolError(message, code if isinstance(code, int) and code in (1, 2, 3) else 1)
        if isinstance(data, dict):
            return data
        text = _text(result)
        try:
            parsed = json.loads(text)
        except ValueError:
            return {"text": text}
        return parsed if isinstance(parsed, dict) else {"value": parsed}

    def healthz(self) -> dict[str, Any]:
        """GET /healthz (no token needed): {"leader", "lag", "lastTick", "units"}."""
        status, kind, data = self._http("GET", HEALTH_PATH, None, {"Accept": "application/json"})
        try:
            found = json.loads(data)
        except ValueError:
            found = None
        if status != 200 or not isinstance(found, dict):
            raise Refused(f"the door at {self.url} answered /healthz with HTTP {status}")
        return found

    # ---- the tools by name ----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return self.call("status")

    def context(self, budget: int | None = None) -> dict[str, Any]:
        return self.call("context", {} if budget is None else {"budget": budget})

    def obligations(self, include_closed: bool = False) -> dict[str, Any]:
        return self.call("obligations", {"all": include_closed})

    def report(self, fields: dict[str, Any]) -> dict[str, Any]:
        return self.call("report_intelligence", fields)

    def remember(self, fields: dict[str, Any]) -> dict[str, Any]:
        return self.call("remember", fields)

    def ask(self, question: str, options: list[str] | None = None) -> dict[str, Any]:
        return self.call("ask_human", {"question": question, **({"options": options} if options else {})})

    def report_result(
        self, summary: str, outcome: str, usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {"summary": summary, "outcome": outcome}
        if usage is not None:
            fields["usage"] = usage
        return self.call("report_result", fields)


def _text(result: dict[str, Any]) -> str:
    parts = result.get("content") or []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _decode(kind: str, data: bytes) -> dict[str, Any] | None:
    """The JSON-RPC reply in a JSON body, or in the last `data:` event of an event stream."""
    text = data.decode("utf-8", "replace")
    if "text/event-stream" in kind:
        found = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = found[-1] if found else ""
    try:
        reply = json.loads(text)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None
