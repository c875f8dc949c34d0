"""controlroom/cli/fastparams.py: a string, list-of-string or Path parameter coerced without
pydantic answers exactly what Typer's own adapter answers (property tests over any text Click can
hand over), every other parameter still goes to Typer, a real command that takes strings starts
without importing pydantic, and a Typer without the private names it builds on runs every command
as before (D-171)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.main import get_command

from controlroom.cli import fastparams
from tests import helpers

app = typer.Typer()


@app.command()
def sample(
    name: str,
    maybe: Annotated[str | None, typer.Option("--maybe")] = None,
    many: Annotated[list[str] | None, typer.Option("--many")] = None,
    count: Annotated[int, typer.Option("--count")] = 1,
    where: Annotated[Path | None, typer.Option("--where")] = None,
    there: Annotated[Path, typer.Option("--there", exists=True, dir_okay=False, resolve_path=True)] = Path(
        "x"
    ),
    folder: Annotated[Path, typer.Option("--folder", file_okay=False, writable=True)] = Path("x"),
) -> None:
    """A command with each kind of parameter the CLI declares."""


def params() -> dict[str, Any]:
    return {p.name: p for p in command().params}


@functools.cache
def command() -> Any:
    """The sample command, built once (as a command line builds it once and coerces each value)."""
    return get_command(app)


@functools.cache
def runtime(build: Any, name: str) -> Any:
    """The runtime param `build` makes of the sample's parameter `name`, built once."""
    return build(params()[name].type_descriptor)


def same(param: Any, value: Any) -> bool:
    """fastparams answers `value` exactly as Typer's own coercion does."""
    return coerced(fastparams.build_runtime_param, param, value) == coerced(
        fastparams._typer_build, param, value
    )


def coerced(build: Any, param: Any, value: Any) -> tuple[str, Any]:
    """What a runtime param built by `build` makes of `value`: ('ok', value) or ('error', message)."""
    ctx = typer.Context(command())
    try:
        return "ok", runtime(build, param.name).coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as exc:
        return "error", exc.format_message()


# what Click hands a parameter: text (any code point but the surrogates argv never decodes to) or a
# tuple of it, and None where the option is absent
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


@settings(max_examples=300)
@given(value=st.one_of(st.none(), TEXT))
def test_a_string_is_what_typers_adapter_makes_of_it(value: str | None) -> None:
    for name in ("name", "maybe"):
        param = params()[name]
        assert fastparams.plain(param.type_descriptor) == "str"
        assert same(param, value)


@settings(max_examples=300)
@given(value=st.one_of(st.none(), st.tuples(), st.lists(TEXT, max_size=5).map(tuple), TEXT))
def test_a_list_of_strings_is_what_typers_adapter_makes_of_it(value: Any) -> None:
    param = params()["many"]
    assert fastparams.plain(param.type_descriptor) == "list"
    assert same(param, value)


@pytest.mark.parametrize("value", [b"bytes", 7, ["a", 1], ("a", None), Path("p")])
def test_anything_else_handed_to_a_string_parameter_goes_to_typers_adapter(value: Any) -> None:
    for name in ("name", "many", "where"):
        param = params()[name]
        assert same(param, value)


@settings(max_examples=100)
@given(
    value=st.one_of(
        st.none(),
        TEXT,
        st.sampled_from(
            ["", ".", "/", "-", "~", "a/", "./a", "a//b", "a\0b", "/etc/shadow", "/nonexistent/x"]
        ),
    )
)
def test_a_path_is_what_typers_adapter_makes_of_it(value: str | None) -> None:
    """Text, and the paths Typer's checks answer differently (a folder where a file is wanted, a
    missing path where one must exist, an unwritable one, `-`)."""
    for name in ("where", "there", "folder"):
        param = params()[name]
        assert fastparams.plain(param.type_descriptor) == "path"
        assert same(param, value)


@settings(max_examples=200)
@given(value=st.one_of(st.none(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70)))
def test_an_int_is_what_typers_adapter_makes_of_it(value: int | None) -> None:
    """An int option's default, as Click hands it over when the option is left out."""
    param = params()["count"]
    assert same(param, value)
    assert coerced(fastparams.build_runtime_param, param, value) == ("ok", value)


def test_a_path_typer_checks_is_checked_the_same(tmp_path: Path) -> None:
    readonly = tmp_path / "readonly"
    readonly.mkdir(mode=0o500)
    (tmp_path / "file").write_text("x")
    for value in (str(tmp_path), str(tmp_path / "file"), str(readonly), str(tmp_path / "missing"), "-"):
        for name in ("where", "there", "folder"):
            assert same(params()[name], value), (name, value)
    assert coerced(fastparams.build_runtime_param, params()["there"], str(tmp_path))[0] == "error"
    assert coerced(fastparams.build_runtime_param, params()["where"], str(tmp_path)) == ("ok", tmp_path)


@pytest.mark.parametrize("value", [None, "x", "12", "-3", " 4 ", "1e3", "/tmp/x", "", True, 1.5, b"1"])
def test_numbers_given_as_anything_but_an_int_keep_typers_coercion(value: Any) -> None:
    param = params()["count"]
    assert fastparams.plain(param.type_descriptor) == "int"
    assert same(param, value)
    assert coerced(fastparams.build_runtime_param, params()["count"], "x")[0] == "error"
    assert coerced(fastparams.build_runtime_param, params()["count"], "12") == ("ok", 12)


def test_this_typer_has_the_function_replaced() -> None:
    """A Typer upgrade that moves it fails here instead of slowing every start silently."""
    assert callable(fastparams._typer_build)
    assert fastparams.install() is True


def test_a_command_that_takes_strings_starts_without_pydantic(ws: helpers.Workspace) -> None:
    """`obligation show ID` takes a string argument; a refused `--by` value, a usage error and a
    command whose int option is left out too."""
    for args, code in (
        (["obligation", "show", "no-such-obligation"], 2),
        (["memory", "retract", "no-such-entry", "--by", "alice", "--reason", "wrong"], 2),
        (["identity", "propose"], 2),
        (["signals", "route"], 0),  # its --last, an int option, left out
        (["unit", "dispatch", "u1", "--worktree", "no-such-folder"], 2),  # a Path option
        (["context", "u1"], 0),  # its --budget, an int option with a default, left out
    ):
        done, heavy = helpers.imported(ws, args, {"pydantic"})
        assert done.returncode == code, done.stderr
        assert heavy == [], (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_typer_without_the_names_fastparams_builds_on_runs_commands_as_before(
    ws: helpers.Workspace,
) -> None:
    """Where Typer moved `RuntimeParam` (so fastparams cannot even be imported), a command still
    runs, paying pydantic's import."""
    moved = "import typer._coercion\ndel typer._coercion.RuntimeParam"
    done, heavy = helpers.imported(ws, ["signals", "route", "--json"], {"pydantic"}, before=moved)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # nothing to route
    assert heavy == ["pydantic"]
