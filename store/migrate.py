"""Create or upgrade the store's schema with the bundled Alembic migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

_SCRIPTS = Path(__file__).with_name("migrations")


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; safe to call on every start."""
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    # Concurrent starters must not both run a migration: SQLite takes the write
    # lock at BEGIN, PostgreSQL an advisory lock for the transaction.
    with engine.execution_options(pn_write=True).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7244917)")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
