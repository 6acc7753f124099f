"""Which of a batch's partition specs a table already has: an announce's duplicate check.

Driver SQL on the unit of work's connection (an ORM IN list cost 4x). SQLite's plan of
an IN list uses the unique index. On PostgreSQL an IN list read every partition of the
table and compared each with the whole list: without statistics (a new store's
backfill, autovacuum off), and under the generic plan of psycopg's prepared statement,
which PostgreSQL keeps until the table's statistics change, so a plan made while the
table was empty outlived its growth. So PostgreSQL gets one probe of the unique index
per spec, as a subplan the planner cannot turn into a scan, never prepared: planned for
the table as it is (~0.03 ms) (tests/store/test_duplicate_check_plan.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partition_notify.store.schema import PartitionRow
from sqlalchemy import Connection

#: Specs per SQLite statement: well under its variable limit.
CHUNK = 500

_IN_SQL = (f"SELECT spec FROM {PartitionRow.__tablename__} "
           "WHERE table_id = {mark} AND spec IN ({marks})")
_PG_SQL = (
    "SELECT s.spec FROM unnest(%s::varchar[]) AS s(spec) WHERE (SELECT 1 FROM "
    f"{PartitionRow.__tablename__} p WHERE p.table_id = %s AND p.spec = s.spec) IS NOT NULL")


def existing_specs(conn: Connection, table_id: int, specs: Sequence[str]) -> set[str]:
    """The ``specs`` of ``table_id`` present."""
    if not specs:
        return set()
    if conn.dialect.name == "postgresql":
        # One array parameter: the chunks are SQLite's variable limit, not PostgreSQL's.
        return {str(spec) for spec, in _unprepared(conn, _PG_SQL, (list(specs), table_id))}
    found: set[str] = set()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    for i in range(0, len(specs), CHUNK):
        chunk = specs[i:i + CHUNK]
        sql = _IN_SQL.format(mark=mark, marks=", ".join([mark] * len(chunk)))
        found.update(str(spec) for spec, in conn.exec_driver_sql(sql, (table_id, *chunk)))
    return found


def _unprepared(conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """``sql`` run without psycopg's server-side prepared statement (and its cached plan)."""
    raw: Any = conn.connection.dbapi_connection
    threshold = raw.prepare_threshold
    raw.prepare_threshold = None
    try:
        return list(conn.exec_driver_sql(sql, params))
    finally:
        raw.prepare_threshold = threshold
