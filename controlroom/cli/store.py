"""`regulator store roles|upgrade` and `regulator store copy --to URL|DIR` (design §18, §22: fleet mode)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controlroom.cli.common import OPTIONS, JsonFlag, emit_json, escape, global_options, out, workspace
from engine.base.errors import BadInput, Refused

if TYPE_CHECKING:
    from engine.checkout.workspace import Workspace

store_app = typer.Typer(
    no_args_is_help=True, help="The stores' backend: PostgreSQL roles, copies between backends."
)
app = typer.Typer()
app.add_typer(store_app, name="store")


def _url(url: str | None) -> str:
    """--url, else the workspace's store; a postgresql:// URL or bad input. The schema's owner's
    work: refused under a lease, a unit `unit run` started included (exit 3, D-218)."""
    from engine.checkout.workspace import acting_lease
    from engine.commands.actors import host_only
    from engine.log.pg import connection as pg_connection

    host_only(acting_lease(Path(OPTIONS.lease) if OPTIONS.lease else None, Path.cwd()))
    if url is None:
        ws, _ = workspace()
        url = ws.url
        if url is None:
            raise BadInput("this workspace's stores are files; this is for a postgresql:// store (--url)")
    return pg_connection.check_url(url)


UrlOption = Annotated[
    str | None, typer.Option("--url", help="postgresql://… (default: the workspace's store).")
]
GRANTS = {
    "regulator_host": ["SELECT", "INSERT events", "UPDATE locks, leader", "INSERT, UPDATE leases"],
    "regulator_reader": ["SELECT"],
}


@store_app.command("roles")
@global_options
def roles(url: UrlOption = None, as_json: JsonFlag = False) -> None:
    """Create regulator_host (hosts, serve, persons' CLIs) and regulator_reader (SELECT); run as the owner."""
    from engine.log.pg import admin as pg_admin
    from engine.log.pg import connection as pg_connection

    url = _url(url)
    pg_admin.create_roles(url)
    if as_json:
        emit_json({"store": pg_connection.redact(url), "roles": GRANTS})
        return
    out(f"roles ready on {escape(pg_connection.redact(url))}:")
    out("  regulator_host: SELECT; INSERT on the events; UPDATE on the lock and leader rows; the leases")
    out("                  (serve, host commands, persons' CLIs: the only role that writes host events)")
    out("  regulator_reader: SELECT (CI, control rooms that only watch)")
    out("units hold no database role; UPDATE, DELETE and TRUNCATE of the events are refused by trigger")


@store_app.command("upgrade")
@global_options
def upgrade(url: UrlOption = None, as_json: JsonFlag = False) -> None:
    """Bring a database made by an earlier regulator to this schema; run as the schema's owner."""
    from engine.log.pg import admin as pg_admin
    from engine.log.pg import connection as pg_connection

    url = _url(url)
    done = pg_admin.upgrade(url)
    shown = pg_connection.redact(url)
    if as_json:
        emit_json(
            {
                "store": shown,
                "from": done.before,
                "schema": done.after,
                "upgraded": done.mark is not None,
                "mark": done.mark["id"] if done.mark else None,
                "marks": done.mark["marks"] if done.mark else None,
                "writerRevoked": done.writer_revoked,
            }
        )
        return
    if done.mark is None:
        out(f"{escape(shown)} is at schema {done.after} already; nothing written (its trigger made again)")
        return
    out(f"upgraded {escape(shown)} from schema {done.before} to {done.after}")
    marks = ", ".join(f"{name} {size}" for name, size in done.mark["marks"].items())
    out(f"upgrade mark {escape(done.mark['id'])} in units.ndjson; lines before it (bytes: {marks}) are")
    out("judged by the rules they were written under")
    if done.writer_revoked:
        out(
            "regulator_writer may no longer append: move every host to regulator_host, then DROP ROLE regulator_writer"
        )
    out(
        "next: `regulator store roles` (regulator_host, regulator_reader), then point the hosts at regulator_host"
    )


def _source_lines(ws: Workspace, name: str) -> list[bytes]:
    """The store's lines exactly as held; a store that does not verify is not copied."""
    from engine.log.store import verify

    store = ws.store(name)
    found = verify(store)
    if found:
        raise Refused(f"{found[0]}: the source does not verify; nothing copied (`regulator verify` names it)")
    data = store.whole()
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    return pieces


@store_app.command("copy")
@global_options
def copy(
    to: Annotated[
        str, typer.Option("--to", help="postgresql://HOST/DB (empty) or a folder (no stores yet).")
    ],
    as_json: JsonFlag = False,
) -> None:
    """Copy every store, line for line, to an empty PostgreSQL database or to a folder's .regulator/."""
    from engine.checkout.workspace import STATE_DIR, STORE_POLICY, committed_url
    from engine.log.events import STORES
    from engine.log.pg import admin as pg_admin
    from engine.log.pg import connection as pg_connection
    from engine.log.pg import sql as pg_sql

    ws, lease = workspace()
    if lease is not None:
        raise Refused("a unit does not copy the stores (host only)")
    if not ws.has_stores:
        raise Refused("no stores here to copy (a clone?)")
    source = ws.url or str(ws.state_dir)
    lines: dict[str, list[bytes]] = {name: _source_lines(ws, name) for name in STORES}
    if pg_connection.is_url(to):
        if ws.url is not None and pg_connection.redact(ws.url) == pg_connection.redact(to):
            raise BadInput("--to names the store this workspace is already on")
        conn = pg_connection.fresh(to)
        try:
            present = pg_admin.schema_present(conn)
        finally:
            conn.close()
        if not present:
            pg_admin.create_schema(to, ws.authority().clock)
        done = pg_admin.import_lines(to, lines)
        target = pg_connection.redact(to)
    else:
        folder = Path(to).resolve()
        if folder.exists() and not folder.is_dir():
            raise BadInput(f"--to {to}: not a folder")
        state = folder / STATE_DIR
        if state.is_symlink():
            raise Refused(f"{state} is a symlink; nothing copied")
        held = [
            n for n in STORES if (state / f"{n}.ndjson").exists() and (state / f"{n}.ndjson").stat().st_size
        ]
        if held or (state / pg_sql.MARKER).exists():
            raise Refused(
                f"{state} already holds stores ({', '.join(held) or 'a mirror'}); store copy writes only into an empty target"
            )
        try:
            state.mkdir(mode=0o700, parents=True, exist_ok=True)
            for name in STORES:
                path = state / f"{name}.ndjson"
                path.write_bytes(b"".join(raw + b"\n" for raw in lines[name]))
                path.chmod(0o600)
        except OSError as exc:
            raise BadInput(f"--to {to}: cannot write ({exc.strerror or exc})") from None
        from engine.checkout.workspace import Workspace
        from engine.read.checkpoint import host_key

        host_key(Workspace(folder), create=True)
        from engine.checkout.gitconfig import HOST_TRUNK, trunk_of

        # the trunk the copy's host follows: this one's (D-224), never what a branch may commit
        (state / HOST_TRUNK).write_text(f"{trunk_of(ws)}\n", encoding="utf-8")
        done = {name: len(lines[name]) for name in STORES}
        target = str(state)
    if as_json:
        emit_json(
            {
                "from": source if not pg_connection.is_url(source) else pg_connection.redact(source),
                "to": target,
                "lines": done,
            }
        )
        return
    total = sum(done.values())
    out(f"copied {total} line(s) to {escape(target)}: " + ", ".join(f"{n} {done[n]}" for n in STORES))
    if pg_connection.is_url(target):
        out("every line keeps its at, prev and hash; run `regulator verify` on both sides")
        out(
            "next: move .regulator/ aside, then select the store in every process: with "
            "REGULATOR_STORE set to it, propose and accept regulator/policy/store.yaml (url: …), "
            "which is governed; or keep setting REGULATOR_STORE"
        )
        return
    import shlex

    # back to files: the copy is read only where the files are selected (D-88)
    out("every line keeps its at, prev and hash; run `regulator verify` on both sides:")
    out("  this side, as this command ran:  regulator verify")
    there = escape(shlex.quote(str(folder)))
    out(f"  the copy, its files selected:    cd {there} && REGULATOR_STORE=files regulator verify")
    try:
        named = committed_url(folder) is not None
    except BadInput:  # a store.yaml there that names no URL it can use: it must change too
        named = True
    if named:
        out(
            f"next: select the files there for good: `url: files` in {STORE_POLICY} there, committed "
            "(it is read-only on disk: chmod u+w first), or REGULATOR_STORE=files in every process"
        )
    else:
        out("next: there the files are the stores wherever REGULATOR_STORE is unset or `files`")
