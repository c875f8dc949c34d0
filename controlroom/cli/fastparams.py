"""Command-line strings without pydantic: Typer 0.29 coerces every parameter that is not a given
flag through a pydantic TypeAdapter, and importing pydantic and building the adapters costs ~70 ms
of CPU on every start of a command that declares a string, or any option the command line leaves
out (D-171). A string, or a list of strings, as Click hands it over needs no coercion, a path only
Typer's own checks, and an absent option none at all: this answers exactly what Typer's adapter
answers for them (tests/test_fastparams.py proves it) and builds Typer's adapter only for any other
value given.

It replaces one private function of Typer (`typer.core.build_runtime_param`), pinned below 0.30 in
pyproject.toml. Where Typer moved it or the names this module builds on, nothing is replaced
(`install` answers False, or importing this module fails and `controlroom.cli.root.main` goes on
without it) and every command pays the import as before; tests/test_fastparams.py fails then, so a
Typer upgrade cannot slow the start silently."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer.core
from typer import _coercion, _param_types

_typer_build: Any = getattr(typer.core, "build_runtime_param", None)  # Typer's own, kept as the fallback


def plain(descriptor: Any) -> str | None:
    """'str', 'list', 'path' or 'int' for a parameter this module coerces (a plain string, a list of
    them, a `Path` with no parser and no other path type, an int); None for any other (Typer's
    adapter)."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or getattr(info, "parser", None) is not None:
        return None
    if descriptor.annotation is str:
        return "str"
    if descriptor.annotation == list[str]:
        return "list"
    if descriptor.annotation is Path and getattr(info, "path_type", None) in (None, Path):
        return "path"
    if descriptor.annotation is int:
        return "int"
    return None


@dataclass(frozen=True)
class PlainParam(_coercion.RuntimeParam):
    """A parameter's coercion: nothing for an absent option (Typer's `RuntimeParam.coerce` answers
    None or () before asking), the value itself where a string parameter got a string (or a list
    of them), Typer's own coercion for anything else (built only then)."""

    descriptor: Any
    kind: str

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        if self.kind == "str" and type(value) is str:
            return value
        if self.kind == "list" and isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
            return list(value)
        if self.kind == "int" and type(value) is int:
            # an int option's default (`context --budget` left out): Typer's int adapter answers it
            # unchanged. A number given is text, which Typer's adapter parses and checks
            return value
        if self.kind == "path" and type(value) is str and str(Path(value)) == value and "\0" not in value:
            # Typer's path adapter converts the text with pydantic, then asks coerce_cli_path (its
            # checks: exists, file or folder, readable, ...), which takes a Path as it is. Its
            # messages quote the text given: a text the Path would change ('', 'a/', './a') is
            # left to Typer's adapter, so that they quote it as given; so is a NUL (os.stat raises
            # ValueError, which pydantic turns into Typer's message).
            return _param_types.coerce_cli_path(
                Path(value), self.parameter_info, path_type=Path, param=param, ctx=ctx
            )
        return _typer_build(self.descriptor)._coerce_value(value, param=param, ctx=ctx)


def build_runtime_param(descriptor: Any) -> Any:
    """Typer's `build_runtime_param`, built only for a value that needs it: plain strings and lists
    of strings, and any option left out, are spared the adapter. A file parameter is Typer's."""
    if descriptor.file_annotation is not None:
        return _typer_build(descriptor)
    kind = plain(descriptor) or "other"
    return PlainParam(
        parameter_info=descriptor.parameter_info,
        annotation=descriptor.annotation,
        descriptor=descriptor,
        kind=kind,
    )


def install() -> bool:
    """Use build_runtime_param for every parameter Typer coerces from now on; False where this Typer
    has no such function to replace (then nothing changes)."""
    if (
        _typer_build is None
        or not hasattr(_coercion, "RuntimeParam")
        or not hasattr(_param_types, "coerce_cli_path")
    ):
        return False
    typer.core.build_runtime_param = build_runtime_param
    return True
