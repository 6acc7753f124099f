"""Index tests: capture the one statement a read sends, and ask the database for its plan."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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


def rows_read(store: Store, sql: str, params: Any, mode: str, table: str,
              settings: Sequence[str] = ()) -> int:
    """Rows of ``table`` that PostgreSQL reads running ``sql`` as a prepared statement
    under ``plan_cache_mode = mode``: returned, filtered out or rechecked, per loop.

    ``params`` as SQLAlchemy's psycopg dialect sends them: a dict (``%(name)s``) or a
    sequence (``%s``). ``settings``: ``SET LOCAL ...`` statements the product sent in
    the statement's transaction, run first. Run in a transaction that is rolled back.
    """
    import psycopg  # the [postgres] extra: only a PostgreSQL store gets here

    names: list[str] = []

    def mark(m: re.Match[str]) -> str:
        names.append(m.group(1) or str(len(names)))
        return f"${len(names)}"

    prepared = re.sub(r"%\(([^)]+)\)s|%s", mark, sql)
    values = [params[n] for n in names] if isinstance(params, dict) else list(params)
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        cur = psycopg.ClientCursor(raw)
        cur.execute(f"SET LOCAL plan_cache_mode = {mode}")
        for setting in settings:
            cur.execute(setting)
        cur.execute(f"PREPARE pn_rows_read AS {prepared}")
        args = f"({', '.join(['%s'] * len(values))})" if values else ""
        cur.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pn_rows_read{args}", values)
        (doc,), = cur.fetchall()
        cur.execute("DEALLOCATE pn_rows_read")  # a session's, not the transaction's
        conn.rollback()
    return _touched(doc[0]["Plan"], table)


def _touched(node: dict[str, Any], table: str) -> int:
    own = 0
    # A ModifyTable node's rows are the ones it wrote (with RETURNING, handed back),
    # not reads: the scan beneath it that found them is counted already.
    if node.get("Relation Name") == table and node.get("Node Type") != "ModifyTable":
        own = (int(node.get("Actual Rows", 0)) + int(node.get("Rows Removed by Filter", 0))
               + int(node.get("Rows Removed by Index Recheck", 0)))
        own *= int(node.get("Actual Loops", 1))
    return own + sum(_touched(child, table) for child in node.get("Plans", []))
