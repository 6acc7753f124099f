"""The migrations build store/schema.py's tables as declared (real SQLite and PostgreSQL).

Alembic's autogenerate comparison of a freshly migrated store with the declared
tables: a column type, index or constraint that one has and the other lacks is a
difference (e.g. ``pn_events.event_id`` as the SQLite rowid, migration 0021).
"""

from __future__ import annotations

import importlib

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from partition_notify.store.migrate import migrate
from partition_notify.store.schema import Base
from sqlalchemy import create_engine

# Every module that declares a table on Base: imported here, so that the
# comparison covers them all whichever tests ran first.
DECLARING = (
    "partition_notify.deadlines.schema", "partition_notify.http.schema",
    "partition_notify.rules.schema", "partition_notify.serve.housekeeping",
    "partition_notify.revisions.schema", "partition_notify.store.cursor_schema",
    "partition_notify.store.existing_specs", "partition_notify.store.idempotency_schema",
    "partition_notify.store.push_letters", "partition_notify.store.retention",
    "partition_notify.store.schema", "partition_notify.writers.commit_refusals",
    "partition_notify.writers.commit_schema", "partition_notify.writers.lakehouse.schema",
)
for _name in DECLARING:
    importlib.import_module(_name)


def test_every_module_declaring_a_table_is_compared() -> None:
    declaring = {t.name for t in Base.metadata.sorted_tables}
    migrated = set(_migrated_tables())
    assert declaring == migrated, (declaring ^ migrated)


def _migrated_tables() -> list[str]:
    engine = create_engine("sqlite://")
    try:
        migrate(engine)
        with engine.connect() as conn:
            names = conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'table'").scalars().all()
    finally:
        engine.dispose()
    return [n for n in names if n.startswith("pn_")]


def test_the_migrated_store_is_the_declared_schema(store_url: str) -> None:
    engine = create_engine(store_url)
    try:
        migrate(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []
