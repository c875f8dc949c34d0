"""Field limits in UTF-8 bytes (docs/limits.md is the table). Over a limit is bad input, never a crash."""

from __future__ import annotations

from engine.base.errors import BadInput

KIB = 1024
LIMITS: dict[str, int] = {
    "subject": 1 * KIB,
    "title": 1 * KIB,
    "claim": 64 * KIB,
    "observation": 64 * KIB,
    "note": 64 * KIB,
    "rationale": 64 * KIB,
    "reason": 64 * KIB,
    "evidence": 4 * KIB,
    "content": 256 * KIB,
    "question": 4 * KIB,
    "summary": 64 * KIB,
    "name": 200,
    "id": 200,
}
MAX_LIST = {"evidence": 64, "affects": 256, "scope": 32, "options": 16}


def check_known(fields: dict, known: tuple[str, ...], flags: dict[str, str] | None = None) -> None:
    """No field `known` does not list (exit 2, the first named, with every field there is). `flags`:
    a command-line name -> its JSON field where the two differ, said where one was given by its
    flag's name (an operator's review: `{"affects": ...}` in --json-input, D-334)."""
    unknown = sorted(set(fields) - set(known))
    if unknown:
        flag = unknown[0].replace("_", "-")  # `observed_at` as `--observed-at`
        named = (flags or {}).get(flag)
        hint = f" (--{flag}'s JSON field is {named})" if named else ""
        raise BadInput(f"unknown field {unknown[0]!r}{hint}; the fields are {', '.join(known)}")


def check_required(fields: dict, names: tuple[str, ...]) -> None:
    """Every field of `names` that `fields` lacks (absent or null), named in one line (exit 2):
    "subject: required (and note, evidence)", not one per attempt."""
    missing = [name for name in names if fields.get(name) is None]
    if missing:
        more = f" (and {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise BadInput(f"{missing[0]}: required{more}")


def check_text(field: str, value: object, *, kind: str | None = None, required: bool = True) -> str:
    """Return the text if it is acceptable; otherwise raise BadInput naming the field and limit."""
    kind = kind or field
    if not isinstance(value, str):
        raise BadInput(f"{field}: expected text, got {type(value).__name__}")
    if required and not value.strip():
        # nothing at all is an option left out (a default of ""): say so (an operator's review:
        # `identity accept ID --by alice` said "--rationale: must not be empty", never given)
        raise BadInput(f"{field}: required" if value == "" else f"{field}: must not be empty")
    if "\x00" in value:
        raise BadInput(f"{field}: contains a NUL byte; remove it")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadInput(f"{field}: is not valid UTF-8") from None
    limit = LIMITS.get(kind, 64 * KIB)
    if size > limit:
        raise BadInput(f"{field}: {size} bytes is over the limit of {limit} bytes (docs/limits.md)")
    return value


def check_list(field: str, values: object, *, kind: str | None = None, minimum: int = 0) -> list[str]:
    if not isinstance(values, list):
        raise BadInput(f"{field}: expected a list of text")
    most = MAX_LIST.get(field, 256)
    if len(values) > most:
        raise BadInput(f"{field}: {len(values)} items is over the limit of {most} (docs/limits.md)")
    if len(values) < minimum:
        raise BadInput(f"{field}: at least {minimum} needed")
    return [check_text(field, v, kind=kind or field) for v in values]
