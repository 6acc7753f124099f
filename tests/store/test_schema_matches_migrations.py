"""The migrations build store/schema.py's tables as declared (real SQLite and PostgreSQL).

Alembic's autogenerate comparison of a freshly migrated store with the declared
tables: a column type, index or constraint that one has and the other lacks is a
difference (e.g. ``pn_events.event_id`` as the SQLite rowid, migration 0021).
"""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from partition_notify.store import schema
from partition_notify.store.migrate import migrate
from partition_notify.store.schema import Base
from sqlalchemy import create_engine

# store/schema.py's own tables. Others share Base but are declared by their features'
# modules, present in Base.metadata only once imported: the result must not depend
# on which tests ran first.
OWN = frozenset(c.__tablename__ for c in (schema.TableRow, schema.PartitionRow,
                                          schema.EventRow, schema.SequenceRow,
                                          schema.SetDoneRow))


def _declared(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    if type_ == "table":
        return name in OWN
    table = getattr(obj, "table", None)
    return table is None or table.name in OWN


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
