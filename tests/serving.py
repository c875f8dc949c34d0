"""Helpers for the tests of `regulator serve` (design §22): a real serve subprocess on a short Unix
socket path, the SDK's own Streamable HTTP client over that socket, and hard-deadline polling.

Every serve started here is killed when the test ends (`Serving.close`, called by the fixtures)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests import forkserver, scratch
from tests.helpers import REGULATOR, Workspace, made_folder

DEADLINE_S = 20.0  # a hard timeout that proves something finished; never a speed assertion


def short_folder() -> Path:
    """A folder with a short path (a Unix socket path may hold ~107 bytes), removed with what it
    holds when the test session ends (tests.helpers.made_folder)."""
    return made_folder("r-", scratch.root())


def wait_for(check: Callable[[], Any], what: str, deadline: float = DEADLINE_S, every: float = 0.02) -> Any:
    """Poll `check` until it returns something true, or fail after `deadline` seconds."""
    end = time.monotonic() + deadline
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline} s: {what}")
        time.sleep(every)


class Serving:
    """One running `regulator serve` of a workspace (or of a clone of it, as another host)."""

    def __init__(
        self,
        ws: Workspace,
        cwd: Path | None = None,
        env: dict | None = None,
        args: tuple[str, ...] = (),
        open_files: int | None = None,
        sock: Path | None = None,
        fork: bool = True,
    ) -> None:
        """`fork`: start it through the worker's serve fork server where that starts it as executing
        the script would (tests/forkserver.py, D-327): False where a test looks at what serve has
        imported."""
        self.ws = ws
        self.cwd = cwd or ws.root
        self.folder = short_folder()
        self.sock = sock or self.folder / "d.sock"  # a serve started again listens where it did
        self.log = self.folder / "serve.err"
        merged = dict(ws.env)
        merged.update(env or {})
        self.env = merged
        self._log_handle = open(self.log, "wb")  # noqa: SIM115 - closed in close()

        argv = ["serve", "--listen", f"unix:{self.sock}", *args]
        self.proc: subprocess.Popen | forkserver.Forked
        if fork and open_files is None and forkserver.serves(REGULATOR, merged, str(self.cwd), "serve"):
            with open(os.devnull, "wb") as devnull:
                self.proc = forkserver.spawn(
                    REGULATOR,
                    argv,
                    cwd=str(self.cwd),
                    env=merged,
                    stdout=devnull.fileno(),
                    stderr=self._log_handle.fileno(),
                    start_new_session=True,
                )
        else:
            self.proc = self._executed(argv, merged, open_files)
        try:
            wait_for(self._ready, f"serve listening at {self.sock} (log: {self.log})", deadline=60)
        except BaseException:
            self.close()  # never leave a serve running behind a failed start
            raise

    def _executed(self, argv: list[str], env: dict, open_files: int | None) -> subprocess.Popen:
        def limit() -> None:  # serve's open-file limit (soft and hard), where a test sets one
            import resource

            assert open_files is not None
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        return subprocess.Popen(
            [REGULATOR, *argv],
            cwd=self.cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._log_handle,
            start_new_session=True,
            preexec_fn=limit if open_files is not None else None,  # noqa: PLW1509 - no threads here yet
        )

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"serve exited {self.proc.returncode}: {self.log.read_text()}")
        info = self.cwd / ".regulator" / "serve.json"
        try:
            data = json.loads(info.read_text())
        except (OSError, ValueError):
            return False
        return data.get("pid") == self.proc.pid and self.sock.exists()

    @property
    def url(self) -> str:
        return f"unix:{self.sock}"

    def lines(self) -> list[dict]:
        """serve's stderr, one JSON object per line (other lines skipped)."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                found.append(data)
        return found

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def close(self) -> None:
        if self._log_handle.closed:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                self.kill()
        self._log_handle.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def http(sock: Path, token: str | None) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(sock)), headers=headers, timeout=60)


def sdk_calls(sock: Path, token: str, calls: list[tuple[str, dict]]) -> list[Any]:
    """Tool calls through the mcp SDK's own Streamable HTTP client, one session, in order."""

    async def main() -> list[Any]:
        async with (
            http(sock, token) as client,
            Client(streamable_http_client("http://door/mcp", http_client=client)) as session,
        ):
            return [await session.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def sdk_call(sock: Path, token: str, name: str, args: dict | None = None) -> Any:
    return sdk_calls(sock, token, [(name, args or {})])[0]


def raw_post(sock: Path, token: str | None, body: dict | bytes) -> tuple[int, dict | None]:
    """One POST to /mcp, as any HTTP client would send it: (status, JSON body or None). A body of
    bytes is sent as it is (JSON that no encoder writes: `1e400`)."""

    async def main() -> tuple[int, dict | None]:
        async with http(sock, token) as client:
            response = await client.post(
                "http://door/mcp",
                content=body if isinstance(body, bytes) else json.dumps(body).encode(),
                headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
            )
            try:
                return response.status_code, response.json()
            except ValueError:
                return response.status_code, None

    return anyio.run(main)


def healthz(sock: Path) -> dict:
    async def main() -> dict:
        async with http(sock, None) as client:
            response = await client.get("http://door/healthz")
            assert response.status_code == 200
            return response.json()

    return anyio.run(main)


def lock_waiters(*paths: Path) -> int:
    """How many flock waiters /proc/locks lists on these files (by inode)."""
    inodes = {str(path.stat().st_ino) for path in paths}
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and line.split()[-3].rsplit(":", 1)[-1] in inodes)


def token_of(worktree: Path) -> str:
    return json.loads((worktree / ".regulator-lease.json").read_text())["lease"]


REPORT = {
    "subject": "vendor/left-pad.js",
    "claim": "The vendored helper is a modified copy.",
    "observation": "diff against upstream 1.3.0 shows a patched padStart",
    "evidence": ["vendor/left-pad.js"],
    "confidence": "high",
    "reportedSeverity": "blocking",
    "affectedUnits": ["u1"],
}
