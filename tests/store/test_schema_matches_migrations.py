"""The migrations build what store/schema.py declares (real SQLite and PostgreSQL).

Alembic's autogenerate comparison of a freshly migrated store with the declared
tables: a column type, index or constraint that one has and the other lacks is a
difference (e.g. ``pn_events.event_id`` as the SQLite rowid, migration 0021).
"""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from partition_notify.store.migrate import migrate
from partition_notify.store.schema import Base
from sqlalchemy import create_engine


def _declared(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    # Other features declare their tables in their own modules: judged by their tests.
    if type_ == "table":
        return name in Base.metadata.tables
    table = getattr(obj, "table", None)
    return table is None or table.name in Base.metadata.tables


def test_the_migrated_store_is_the_declared_schema(store_url: str) -> None:
    engine = create_engine(store_url)
    try:
        migrate(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={
                "compare_type": True, "include_object": _declared})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []
