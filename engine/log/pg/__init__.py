"""The stores on PostgreSQL (design §18): the same lines and chains, kept by the server.

The server holds every line of every store in one table, `regulator.events`, numbered per store
(`n`, 1, 2, 3 …: a reader resumes from a sequence number as a file reader resumes from a byte
offset). Triggers make the table INSERT/SELECT only, refuse an `at` more than 2 s from the
server's clock, record the server's clock and the session's role beside it (`recorded_at`,
`written_by`), check `prev` against the store's last line and the SHA-256 of the line text as
sent, refuse a host event from any role but regulator_host and a line over 1 MiB, and NOTIFY every
append. Appends take no lock (the primary key orders them; a conflict is sent again); exclusive
decisions hold a row of `regulator.locks` (engine.log.pg.sql has the tables and the roles).

Readers read a local mirror: `.regulator/<store>.ndjson` holds the server's lines byte for byte,
brought up to date from the last sequence number mirrored (`.regulator/postgresql.json`), so every
fold, reference, checkpoint and `verify` reads exactly what it reads on files. The mirror is a
disposable cache: the server is the store.

psycopg is imported only when a postgresql store is selected (`regulator[postgresql]`).
"""
