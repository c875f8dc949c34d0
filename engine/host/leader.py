"""Leadership among the hosts that run `serve` on one PostgreSQL store (design §22): a lease row.

`regulator.leader` holds one row (holder, expires). A host claims or renews it every RENEW_S with
one `UPDATE … WHERE holder = me OR expires < now()`: it holds leadership while the row names it, and
a leader that dies or hangs stops renewing, so another host takes the row once `expires` passes
(TTL_S after its last renewal; failover within TTL_S + RENEW_S, under SPEC's 10 s). Times are the
server's clock, so the hosts' clocks never matter. On files there is one `serve` per workspace
(its file lock), and it leads.

The table is created here when missing (LEADER_SQL, one place, to move into the schema's upgrade).
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import Any

from engine.base.errors import Refused

RENEW_S = 2.0
TTL_S = 6.0

LEADER_SQL = """
CREATE TABLE IF NOT EXISTS regulator.leader (
    id int PRIMARY KEY CHECK (id = 1),
    holder text NOT NULL,
    expires timestamptz NOT NULL
);
INSERT INTO regulator.leader (id, holder, expires) VALUES (1, '', '-infinity') ON CONFLICT (id) DO NOTHING;
REVOKE ALL ON regulator.leader FROM PUBLIC;
DO $$ BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_host') THEN
        GRANT SELECT, UPDATE ON regulator.leader TO regulator_host;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_writer') THEN
        GRANT SELECT, UPDATE ON regulator.leader TO regulator_writer;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regulator_reader') THEN
        GRANT SELECT ON regulator.leader TO regulator_reader;
    END IF;
END $$;
"""

CLAIM_SQL = """
UPDATE regulator.leader SET holder = %(me)s, expires = clock_timestamp() + make_interval(secs => %(ttl)s)
WHERE id = 1 AND (holder = %(me)s OR expires < clock_timestamp())
RETURNING holder
"""
RELEASE_SQL = "UPDATE regulator.leader SET expires = '-infinity' WHERE id = 1 AND holder = %(me)s"


def new_holder() -> str:
    """This host's name in the row: host, process and a random part (a restart is a new holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def ensure_table(url: str) -> None:
    """Create regulator.leader where it is missing (needs CREATE on the schema: its owner)."""
    from engine.log.pg import connection as pg_connection

    def present(conn: Any) -> bool:
        return bool(conn.execute("SELECT to_regclass('regulator.leader') IS NOT NULL").fetchone()[0])

    if pg_connection._run(url, present, tx=False):
        return
    try:
        pg_connection._run(url, lambda conn: conn.execute(LEADER_SQL))
    except Refused:
        if not pg_connection._run(url, present, tx=False):  # another host may have created it meanwhile
            raise


def claim(url: str, me: str, ttl: float = TTL_S) -> bool:
    """Claim or renew leadership; True while this host holds it."""
    from engine.log.pg import connection as pg_connection

    row = pg_connection._run(
        url, lambda conn: conn.execute(CLAIM_SQL, {"me": me, "ttl": ttl}).fetchone(), "leader"
    )
    return row is not None and row[0] == me


def release(url: str, me: str) -> None:
    """Give leadership up at once (a clean stop), so another host need not wait for it to expire."""
    from engine.log.pg import connection as pg_connection

    pg_connection._run(url, lambda conn: conn.execute(RELEASE_SQL, {"me": me}), "leader")


def holder(url: str) -> tuple[str, bool] | None:
    """(who holds the row, whether it is still in force), or None where there is no row."""
    from engine.log.pg import connection as pg_connection

    row = pg_connection._run(
        url,
        lambda conn: conn.execute(
            "SELECT holder, expires > clock_timestamp() FROM regulator.leader WHERE id = 1"
        ).fetchone(),
        tx=False,
    )
    return None if row is None else (str(row[0]), bool(row[1]))
