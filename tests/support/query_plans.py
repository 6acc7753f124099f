"""Index tests: capture the one statement a read sends, and ask the database for its plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from partition_notify.store import Store
from sqlalchemy import event

T = TypeVar("T")


def captured(store: Store, table: str, read: Callable[[], T]) -> tuple[str, Any, T]:
    """``read()``'s result and the single statement it sent that names ``table``."""
    seen: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if table in statement:
            seen.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", grab)
    try:
        found = read()
    finally:
        event.remove(store.engine, "before_cursor_execute", grab)
    assert len(seen) == 1, seen
    return seen[0][0], seen[0][1], found


def plan(store: Store, sql: str, params: Any) -> str:
    """The database's own plan of ``sql``: EXPLAIN QUERY PLAN on SQLite, EXPLAIN on PostgreSQL."""
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            return " ".join(str(r[-1]) for r in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN " + sql, params))
        return " ".join(str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + sql, params))
