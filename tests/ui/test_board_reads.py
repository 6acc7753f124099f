"""The board's reads (partition_notify/http/ui/reads.py) on SQLite and PostgreSQL.

The statement ``recent_partitions`` really sends is captured and handed to the
database's own EXPLAIN, with a big table beside the one read: before
``ix_pn_partitions_recent`` (migration 0012) the database sorted every
partition of the table on each board render (bench/ui_render.py).
"""

from __future__ import annotations

import json
from typing import Any

from partition_notify.store import Store
from sqlalchemy import event, text

from partition_notify.http.ui.reads import StatusReadRepository, StatusReads

BIG = 20_000


def _fill(store: Store) -> None:
    """Table 2 with 20,000 partitions, table 1 with 30 (created in reverse spec order)."""
    for name in ("small", "big"):
        store.catalog.register_table("b", name, ["ds"], topic=f"b.{name}", retention_seconds=86400)
    small = [{"t": 1, "s": f"ds={i:05d}", "v": json.dumps({"ds": f"{i:05d}"}), "at": 1000 - i}
             for i in range(30)]
    big = [{"t": 2, "s": f"ds={i:05d}", "v": json.dumps({"ds": f"{i:05d}"}), "at": i}
           for i in range(BIG)]
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_partitions (table_id, spec, \"values\", event_id, created_at) "
            "VALUES (:t, :s, :v, 1, :at)"), small + big)
        conn.execute(text("ANALYZE"))


def _captured(store: Store) -> tuple[str, Any, list[tuple[str, str, int, int | None, float]]]:
    seen: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "pn_partitions" in statement:
            seen.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", grab)
    try:
        with StatusReads(store).uow() as uow:
            found = StatusReadRepository(uow.session).recent_partitions(1, 10)
    finally:
        event.remove(store.engine, "before_cursor_execute", grab)
    assert len(seen) == 1, seen
    return seen[0][0], seen[0][1], found


def test_recent_partitions_read_the_index_newest_first(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        sql, params, found = _captured(store)
        # Newest first, values as JSON text the board decodes itself.
        assert [f[0] for f in found] == [f"ds={i:05d}" for i in range(10)]
        assert [json.loads(f[1]) for f in found[:1]] == [{"ds": "00000"}]
        with store.engine.connect() as conn:
            if store.dialect == "sqlite":
                plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(
                    "EXPLAIN QUERY PLAN " + sql, params))
            else:
                plan = " ".join(str(r[0]) for r in conn.exec_driver_sql(
                    "EXPLAIN " + sql, params))
        assert "ix_pn_partitions_recent" in plan, plan
        # No sort of the table's partitions: the index gives them in order.
        assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan
    finally:
        store.close()
