"""The board's reads (partition_notify/http/ui/reads.py) on SQLite and PostgreSQL.

The statement ``board_partitions`` really sends is captured and handed to the
database's own EXPLAIN, with a big table beside the one read: without
``ix_pn_partitions_recent`` (migration 0012) the database sorted every
partition of the table on each board render (bench/ui_render.py). The board's
rows are picked in the database, so only the cells it can show are sent.
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


def _board(store: Store, rows: int, limit: int) -> list[Any]:
    with StatusReads(store).uow() as uow:
        return StatusReadRepository(uow.session).board_partitions(
            1, ("ds", "region"), rows, limit)


def _assert_indexed(store: Store, sql: str, params: Any) -> None:
    plan = query_plan(store, sql, params)
    assert "ix_pn_partitions_recent" in plan, plan
    # No sort of the table's partitions: the index gives the newest in order; only the
    # picked first-key values (at most ``limit``) are grouped and sorted.
    assert "FOR ORDER BY" not in plan and "Sort Key: pn_partitions" not in plan, plan


def test_the_board_reads_the_rows_of_the_greatest_first_key_values(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        sql, params, found = captured(store, "pn_partitions", lambda: _board(store, 3, 10))
        # Of the newest 10 partitions (days 00000-00004, two regions each), the three
        # greatest days, both regions; days 5 and later are older than the newest 10.
        assert sorted(f[0] for f in found) == [
            f"ds={d}/region={r}" for d in ("00002", "00003", "00004") for r in ("eu", "us")]
        # Each key's value beside the stored JSON text, nothing to decode.
        assert {(f[5], f[6]) for f in found} == {
            (d, r) for d in ("00002", "00003", "00004") for r in ("eu", "us")}
        assert json.loads(found[0][1]) == {"ds": found[0][5], "region": found[0][6]}
        _assert_indexed(store, sql, params)
    finally:
        store.close()


def test_first_key_values_order_by_code_point(store_url: str) -> None:
    """As Python's sorted: "b" > "a" > "Z" > "10" > "1" (a locale collation differs)."""
    store = Store.open(store_url)
    try:
        store.catalog.register_table("b", "small", ["ds", "region"], topic="b.small",
                                     retention_seconds=86400)
        days = ["1", "10", "Z", "a", "b", "é"]
        with store.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO pn_partitions (table_id, spec, \"values\", event_id, created_at) "
                "VALUES (1, :s, :v, 1, 1)"),
                [{"s": f"ds={d}/region=x", "v": json.dumps({"ds": d, "region": "x"})}
                 for d in days])
        got = {f[5] for f in _board(store, 3, 100)}
        assert got == set(sorted(days, reverse=True)[:3])
    finally:
        store.close()
