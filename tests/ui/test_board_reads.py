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
from sqlalchemy import text

from partition_notify.http.ui.reads import StatusReadRepository, StatusReads
from tests.support.query_plans import captured
from tests.support.query_plans import plan as query_plan

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



def _recent(store: Store) -> list[Any]:
    with StatusReads(store).uow() as uow:
        return list(StatusReadRepository(uow.session).recent_partitions(1, 10))


def test_recent_partitions_read_the_index_newest_first(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        sql, params, found = captured(store, "pn_partitions", lambda: _recent(store))
        # Newest first, values as JSON text the board decodes itself.
        assert [f[0] for f in found] == [f"ds={i:05d}" for i in range(10)]
        assert [json.loads(f[1]) for f in found[:1]] == [{"ds": "00000"}]
        plan = query_plan(store, sql, params)
        assert "ix_pn_partitions_recent" in plan, plan
        # No sort of the table's partitions: the index gives them in order.
        assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan
    finally:
        store.close()
