"""The log: append-only stores (files, engine.log.store; PostgreSQL, engine.log.pg) and events by reference."""
