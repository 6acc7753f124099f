"""Create or upgrade the store's schema with the bundled Alembic migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from partition_notify.store import pg_deadlines
from sqlalchemy import Engine, inspect

from partition_notify.core.errors import StoreError
from partition_notify.core.redact import redact_url

_SCRIPTS = Path(__file__).with_name("migrations")


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; safe to call on every start."""
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    # Concurrent starters must not both run a migration: SQLite takes the write
    # lock at BEGIN, PostgreSQL an advisory lock for the transaction.
    with engine.execution_options(pn_write=True).begin() as conn:
        # A migration's DDL on a large store may take longer than any other
        # statement: no reply deadline (the lock waits keep their lock_timeout), nor
        # the server's statement_timeout that follows it (until this transaction ends).
        raw = conn.connection.driver_connection
        previous = pg_deadlines.lifted(raw)
        try:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7244917)")
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
        finally:
            pg_deadlines.restore(raw, previous)


def require_read_only_store(url: str, engine: Engine) -> None:
    """A store opened read-only is never migrated: refuse, in one line, a schema
    other than the one this code needs (an older one lacks its tables and columns)."""
    script = ScriptDirectory(str(_SCRIPTS))
    head = script.get_current_head()
    with engine.connect() as conn:
        found = None
        if inspect(conn).has_table("alembic_version"):
            found = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    if found == head:
        return
    where = f"store {redact_url(url)} is opened read-only"
    if found is None:
        raise StoreError(f"{where} and has no partition-notify schema: create it with a "
                         "writable URL (serve or `partition-notify register`)")
    known = {rev.revision for rev in script.walk_revisions()}
    if found in known:
        raise StoreError(f"{where} and its schema is at revision {found}, older than the "
                         f"{head} this version needs; a read-only store is not upgraded: "
                         "start serve (or any write command) on it once with a writable URL")
    raise StoreError(f"{where} and its schema revision {found} is newer than this version "
                     f"knows (up to {head}): use the partition-notify that wrote it")
