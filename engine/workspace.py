"""Finding the workspace and the lease, and reading what it holds (policy, contracts)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import BadInput, Refused
from engine.store import Store, locked
from identity.files import POLICY_DIR

if TYPE_CHECKING:  # the policy models are pydantic: imported only by commands that read policy
    from identity.policy import InteractionPolicy, Profiles, RoutingPolicy

LEASE_FILE = ".regulator-lease.json"
STATE_DIR = ".regulator"
STORE_NAMES = ("signals", "memory", "units", "identity")
_POLICY_CACHE: dict[tuple, object] = {}
_DECIDING: set[Path] = set()  # workspaces whose decide lock this process holds
UNIT_ID = re.compile(r"[a-z0-9][a-z0-9-]*(/[a-z0-9-]+)?")


@dataclass(frozen=True)
class Lease:
    """A lease file as found on disk; honoured only while it matches the unit's current lease."""

    unit: str
    lease: str
    workspace: Path
    leased_at: str
    path: Path

    @property
    def worktree(self) -> Path:
        return self.path.parent


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    def store(self, name: str) -> Store:
        return Store(self.state_dir / f"{name}.ndjson")

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """One decider at a time: routing, dispositions and unit transitions check, then write."""
        with locked(self.state_dir / "decide.lock"):
            _DECIDING.add(self.root)
            try:
                yield
            finally:
                _DECIDING.discard(self.root)

    def deciding(self) -> bool:
        """Inside exclusive(): this command writes (readers never do, SPEC §13)."""
        return self.root in _DECIDING

    # ---- policy ----------------------------------------------------------------------------
    def _policy(self, name: str):
        """Parsed policy, read again only when the file changed (a long-lived control room asks
        for it on every append; an accepted proposal changes the file and so the answer)."""
        from identity.policy import PolicyError, load_policy

        path = self.root / POLICY_DIR / name
        try:
            stat = path.stat()
            key = (str(path), stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except OSError:
            key = None
        if key is not None and key in _POLICY_CACHE:
            return _POLICY_CACHE[key]
        try:
            parsed = load_policy(self.root / POLICY_DIR, name)
        except PolicyError as exc:
            raise BadInput(f"policy {exc}") from None
        if key is not None:
            _POLICY_CACHE[key] = parsed
        return parsed

    def routing(self) -> RoutingPolicy:
        return self._policy("routing.yaml")

    def interaction(self) -> InteractionPolicy:
        return self._policy("interaction.yaml")

    def profiles(self) -> Profiles:
        return self._policy("profiles.yaml")

    def revision(self, where: Path | None = None) -> str | None:
        """HEAD of the given worktree (or the workspace); None outside git."""
        try:
            done = subprocess.run(
                ["git", "-C", str(where or self.root), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() or None if done.returncode == 0 else None


def check_unit_id(value: str, field: str = "unit") -> str:
    if not isinstance(value, str) or not UNIT_ID.fullmatch(value) or len(value) > 200:
        raise BadInput(
            f"{field}: {value!r} is not a unit id (lowercase letters, digits and '-', "
            "optionally one '/stream-part')"
        )
    return value


def read_lease(path: Path) -> Lease:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        lease = Lease(
            unit=check_unit_id(data["unit"]),
            lease=str(data["lease"]),
            workspace=Path(data["workspace"]),
            leased_at=str(data["leasedAt"]),
            path=path.resolve(),
        )
    except FileNotFoundError:
        raise BadInput(f"lease file {path} does not exist") from None
    except (ValueError, KeyError, TypeError, BadInput):
        raise Refused(f"lease file {path} is not a valid lease; ask the host to dispatch again") from None
    return lease


def _walk_up(start: Path) -> Iterator[Path]:
    here = start.resolve()
    yield here
    yield from here.parents


def find_lease(cwd: Path) -> Path | None:
    for folder in _walk_up(cwd):
        candidate = folder / LEASE_FILE
        if candidate.is_file():
            return candidate
    return None


def is_workspace(folder: Path) -> bool:
    """A folder with stores, or a clone of one (CI): the tracked policy is there, the stores are
    not (`.regulator/` is never committed), and readers then see empty stores."""
    return (folder / STATE_DIR).is_dir() or (folder / POLICY_DIR).is_dir()


def locate(
    root: Path | None = None, lease_file: Path | None = None, cwd: Path | None = None
) -> tuple[Workspace, Lease | None]:
    """Find the workspace (SPEC §3 order: --root, --lease, a lease walking up, .regulator/ walking up)."""
    cwd = cwd or Path.cwd()
    lease = read_lease(lease_file) if lease_file else None
    if lease is None:
        found = find_lease(cwd)
        if found is not None:
            lease = read_lease(found)
    if root is not None:
        if not is_workspace(root):
            raise BadInput(f"{root} is not a regulator workspace (no {STATE_DIR}/); run `regulator init`")
        ws = Workspace(root.resolve())
        if lease is not None and lease.workspace.resolve() != ws.root:
            lease = None if lease_file is None else lease
        return ws, lease
    if lease is not None:
        if not (lease.workspace / STATE_DIR).is_dir():
            raise Refused(f"lease {lease.path} names {lease.workspace}, which is not a workspace")
        return Workspace(lease.workspace.resolve()), lease
    for folder in _walk_up(cwd):
        if is_workspace(folder):
            return Workspace(folder), None
    raise BadInput("no regulator workspace here or above; run `regulator init` or pass --root DIR")
