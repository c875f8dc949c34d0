"""Unit contracts: `contracts/<id>.json`, one unit each (an id with "/" is a subfolder)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import BadInput
from engine.workspace import UNIT_ID, Workspace

REQUIRED = ("id", "type", "profile", "title")


@dataclass(frozen=True)
class Contract:
    """A unit's contract. Plain and hand-checked: every command reads contracts, and a pydantic
    model here would cost the cold start more than the whole read does."""

    id: str
    type: str
    profile: str
    title: str
    priority: int = 100
    workload: str | None = None
    contract: str | None = None
    budget: object = None
    route: str | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> Contract:
        for name in REQUIRED:
            value = data.get(name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name}: required text")
            if len(value) > (1024 if name == "title" else 200):
                raise ValueError(f"{name}: too long")
        if not UNIT_ID.fullmatch(data["id"]):
            raise ValueError(f"id: {data['id']!r} is not a unit id")
        priority = data.get("priority", 100)
        if type(priority) is not int:
            raise ValueError("priority: expected a whole number")
        for name in ("workload", "contract", "route"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"{name}: expected text")
        known = {"id", "type", "profile", "title", "priority", "workload", "contract", "budget", "route"}
        return cls(
            id=data["id"],
            type=data["type"],
            profile=data["profile"],
            title=data["title"],
            priority=priority,
            workload=data.get("workload"),
            contract=data.get("contract"),
            budget=data.get("budget"),
            route=data.get("route"),
            extra={k: v for k, v in data.items() if k not in known},
        )


def contract_path(ws: Workspace, unit_id: str) -> Path:
    return ws.root / "contracts" / f"{unit_id}.json"


def parse_contract(path: Path | str, text: str) -> Contract:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object")
    try:
        return Contract.from_dict(data)
    except ValueError as exc:
        raise BadInput(f"{path}: {exc}") from None


def load_contracts(ws: Workspace, problems: list[str] | None = None) -> dict[str, Contract]:
    """Every contract under contracts/; a bad file is named in `problems` and left out."""
    folder = ws.root / "contracts"
    found: dict[str, Contract] = {}
    if not folder.is_dir():
        return found
    for expected, path in sorted(_contract_files(folder)):
        try:
            with open(path, "rb") as handle:
                contract = parse_contract(path, handle.read().decode("utf-8"))
        except (BadInput, UnicodeDecodeError, OSError) as exc:
            if problems is not None:
                problems.append(str(exc))
            continue
        if contract.id != expected:
            if problems is not None:
                problems.append(f"{path}: id {contract.id!r} does not match the file name {expected!r}")
            continue
        found[contract.id] = contract
    return found


def _contract_files(folder: Path) -> list[tuple[str, str]]:
    """(unit id the path implies, path) for every contracts/<id>.json and contracts/<a>/<b>.json."""
    files = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_file() and entry.name.endswith(".json"):
                files.append((entry.name[:-5], entry.path))
            elif entry.is_dir():
                with os.scandir(entry.path) as inner:
                    for sub in inner:
                        if sub.is_file() and sub.name.endswith(".json"):
                            files.append((f"{entry.name}/{sub.name[:-5]}", sub.path))
    return files


def write_contract(ws: Workspace, contract: dict) -> Path:
    """Used by `demo` and tests: validate, then write the contract file."""
    checked = Contract.from_dict(contract)
    path = contract_path(ws, checked.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(contract, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
