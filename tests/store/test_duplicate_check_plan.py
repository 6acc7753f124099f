"""An announce's duplicate check probes the unique index, whatever the planner knows.

``PartitionRepository.existing`` asks which of a batch's specs a table already
has. On PostgreSQL, before this was fixed, the statement's plan depended on the
table's statistics: with none yet (a new store's first backfill, or autovacuum
off) and with psycopg's server-side prepared statement (its generic plan), the
server read every partition of the table and compared each with the 500 specs.
A bench announce into a table of 270,000 partitions spent 2-3 s per chunk of
500 there. The statement it really sends is captured and explained by the
database itself, with no ANALYZE run, under both of PostgreSQL's plan modes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from partition_notify.store import Store
from partition_notify.store.existing_specs import existing_specs
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import text

from tests.support.query_plans import captured
from tests.support.query_plans import plan as query_plan

PRESENT = 20_000
BATCH = 500


def _fill(store: Store) -> None:
    """Table 1 with PRESENT partitions ``a=000001``..., straight into the table, no ANALYZE."""
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_tables (id, db, name, partition_keys, topic, retention_seconds, "
            "created_at) VALUES (1, 'd', 't', '[\"a\"]', 'hcat.d.t', 1, 0)"))
        conn.execute(text(
            'INSERT INTO pn_partitions (table_id, spec, "values", event_id, created_at) '
            "VALUES (1, :spec, '{}', :n, :n)"),
            [{"spec": f"a={n:06d}", "n": n} for n in range(1, PRESENT + 1)])


def _rows_touched(node: dict[str, Any]) -> int:
    """Rows the plan read from pn_partitions or its indexes: returned, filtered out, rechecked."""
    own = 0
    if "pn_partitions" in (node.get("Relation Name", ""), node.get("Alias", "")) or \
            node.get("Index Name", "").startswith(("ux_pn_partitions", "ix_pn_partitions")):
        loops = int(node.get("Actual Loops", 1))
        own = (int(node.get("Actual Rows", 0)) + int(node.get("Rows Removed by Filter", 0))
               + int(node.get("Rows Removed by Index Recheck", 0))) * loops
    return own + sum(_rows_touched(child) for child in node.get("Plans", []))


def _postgres_rows_touched(store: Store, sql: str, params: Any, mode: str) -> int:
    import psycopg

    n = iter(range(1, 10_000))
    prepared = re.sub(r"%s", lambda _m: f"${next(n)}", sql)
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        cur = psycopg.ClientCursor(raw)
        cur.execute(f"SET plan_cache_mode = {mode}")
        cur.execute(f"PREPARE pn_dup_check AS {prepared}")
        marks = ", ".join(["%s"] * len(params))
        cur.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pn_dup_check({marks})", params)
        (doc,), = cur.fetchall()
        cur.execute("DEALLOCATE pn_dup_check")
        cur.execute("RESET plan_cache_mode")
        conn.rollback()
    return _rows_touched(doc[0]["Plan"])


def test_the_duplicate_check_reads_only_the_batch_s_own_index_entries(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        # 200 present (the table's newest), 300 new.
        specs = [f"a={n:06d}" for n in range(PRESENT - 199, PRESENT + 301)]
        assert len(specs) == BATCH

        def check() -> set[str]:
            with UnitOfWork(store.engine, write=False) as uow:
                return uow.partitions.existing(1, specs)

        sql, params, found = captured(store, "pn_partitions", check)
        assert found == set(specs[:200])
        if store.dialect == "sqlite":
            plan = query_plan(store, sql, params)
            assert "ux_pn_partitions_table_spec" in plan and "SCAN pn_partitions" not in plan, plan
            return
        for mode in ("force_custom_plan", "force_generic_plan"):
            touched = _postgres_rows_touched(store, sql, params, mode)
            assert touched <= 2 * BATCH, f"{mode}: read {touched} rows of pn_partitions"
    finally:
        store.close()


@pytest.mark.parametrize("n", [0, 1, BATCH, BATCH + 1, 3 * BATCH + 7])
def test_every_present_spec_is_found_across_chunks(store_url: str, n: int) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        specs = [f"a={k:06d}" for k in range(PRESENT - n // 2, PRESENT - n // 2 + n)]
        with UnitOfWork(store.engine, write=False) as uow:
            found = uow.partitions.existing(1, specs)
        assert found == {s for s in specs if int(s[2:]) <= PRESENT}
    finally:
        store.close()


def test_a_plan_made_while_the_table_was_small_does_not_outlive_its_growth(pg_store: Store) -> None:
    # psycopg prepares a statement on its fifth run, and PostgreSQL keeps the prepared
    # statement's generic plan until the table's statistics change: a plan made while
    # the table was empty (a new store) read all of it per spec once it had grown.
    specs = [f"a={n:06d}" for n in range(PRESENT - 199, PRESENT + 301)]
    with pg_store.engine.connect() as conn:
        conn.execute(text(
            "INSERT INTO pn_tables (id, db, name, partition_keys, topic, "
            "retention_seconds, created_at) VALUES (1, 'd', 't', '[\"a\"]', 'x', 1, 0)"))
        conn.commit()
        for _ in range(12):
            assert existing_specs(conn, 1, specs) == set()
        conn.commit()
        with pg_store.engine.begin() as other:
            other.execute(text(
                'INSERT INTO pn_partitions (table_id, spec, "values", event_id, created_at) '
                "VALUES (1, :spec, '{}', :n, :n)"),
                [{"spec": f"a={n:06d}", "n": n} for n in range(1, PRESENT + 1)])
        fetched = ("SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) "
                   "FROM pg_stat_xact_user_tables WHERE relname = 'pn_partitions'")
        before = conn.exec_driver_sql(fetched).scalar_one()
        assert existing_specs(conn, 1, specs) == set(specs[:200])
        touched = conn.exec_driver_sql(fetched).scalar_one() - before
        conn.rollback()
    assert touched <= 2 * BATCH, f"read {touched} rows of pn_partitions for {BATCH} specs"
