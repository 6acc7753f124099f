"""The board's reads (partition_notify/http/ui/reads.py) on SQLite and PostgreSQL.

The statements ``first_values`` and ``row_partitions`` really send are captured
and handed to the database's own EXPLAIN, with a big table beside the one
read: without ``ix_pn_partitions_recent`` (migration 0012) the database sorted
every partition of the table on each board render (bench/ui_render.py). The
board's rows are picked in the database, so only the cells shown are sent.
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
    """Table 2 with 20,000 partitions; table 1 with 30 days x 2 regions, the newest
    day created first (so creation order and value order disagree)."""
    for name, keys in (("small", ["ds", "region"]), ("big", ["ds"])):
        store.catalog.register_table("b", name, keys, topic=f"b.{name}", retention_seconds=86400)
    small = [{"t": 1, "s": f"ds={i:05d}/region={r}",
              "v": json.dumps({"ds": f"{i:05d}", "region": r}), "at": 1000 - i}
             for i in range(30) for r in ("eu", "us")]
    big = [{"t": 2, "s": f"ds={i:05d}", "v": json.dumps({"ds": f"{i:05d}"}), "at": i}
           for i in range(BIG)]
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_partitions (table_id, spec, \"values\", event_id, created_at) "
            "VALUES (:t, :s, :v, 1, :at)"), small + big)
        conn.execute(text("ANALYZE"))


def _first_values(store: Store) -> list[str]:
    with StatusReads(store).uow() as uow:
        return StatusReadRepository(uow.session).first_values(1, "ds", 10)


def _row_partitions(store: Store) -> list[Any]:
    with StatusReads(store).uow() as uow:
        return StatusReadRepository(uow.session).row_partitions(
            1, "ds", ["00003", "00004", "00029"], 10)


def _assert_indexed(store: Store, sql: str, params: Any) -> None:
    plan = query_plan(store, sql, params)
    assert "ix_pn_partitions_recent" in plan, plan
    # No sort of the table's partitions by time: the index gives them in order.
    assert "FOR ORDER BY" not in plan and "Sort Key: pn_partitions.created_at" not in plan, plan


def test_board_rows_are_the_first_key_of_the_newest_partitions(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        sql, params, values = captured(store, "pn_partitions", lambda: _first_values(store))
        # The newest 10 partitions are days 00000-00004 (two regions each), once each.
        assert sorted(values) == [f"{i:05d}" for i in range(5)]
        _assert_indexed(store, sql, params)
    finally:
        store.close()


def test_board_cells_are_only_the_rows_shown(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        sql, params, found = captured(store, "pn_partitions", lambda: _row_partitions(store))
        # Days 3 and 4, both regions; day 29 is not among the newest 10 partitions.
        assert sorted(f[0] for f in found) == [
            "ds=00003/region=eu", "ds=00003/region=us", "ds=00004/region=eu",
            "ds=00004/region=us"]
        # Values as JSON text the board decodes itself.
        assert {json.loads(f[1])["region"] for f in found} == {"eu", "us"}
        _assert_indexed(store, sql, params)
    finally:
        store.close()
