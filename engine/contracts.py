"""Unit contracts: `contracts/<id>.json`, one unit each (an id with "/" is a subfolder)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import BadInput
from engine.workspace import UNIT_ID, Workspace


class Contract(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(pattern=UNIT_ID.pattern, max_length=200)
    type: str = Field(min_length=1, max_length=100)
    profile: str = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=1024)
    workload: str | None = None
    contract: str | None = None
    budget: object = None
    route: str | None = None
    priority: int = 100


def contract_path(ws: Workspace, unit_id: str) -> Path:
    return ws.root / "contracts" / f"{unit_id}.json"


def parse_contract(path: Path, text: str) -> Contract:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object")
    try:
        contract = Contract.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top)"
        raise BadInput(f"{path}: {where}: {err['msg']}") from None
    return contract


def load_contracts(ws: Workspace, problems: list[str] | None = None) -> dict[str, Contract]:
    """Every contract under contracts/; a bad file is named in `problems` and left out."""
    folder = ws.root / "contracts"
    found: dict[str, Contract] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*.json")):
        try:
            contract = parse_contract(path, path.read_text(encoding="utf-8"))
        except (BadInput, UnicodeDecodeError) as exc:
            if problems is not None:
                problems.append(str(exc))
            continue
        expected = path.relative_to(folder).with_suffix("").as_posix()
        if contract.id != expected:
            if problems is not None:
                problems.append(f"{path}: id {contract.id!r} does not match the file name {expected!r}")
            continue
        found[contract.id] = contract
    return found


def write_contract(ws: Workspace, contract: dict) -> Path:
    """Used by `demo` and tests: validate, then write the contract file."""
    checked = Contract.model_validate(contract)
    path = contract_path(ws, checked.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(contract, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
