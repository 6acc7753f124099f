"""The purge of aborted revisions reads their own rows, not every revision's.

``pn_revision_files`` and ``pn_revision_replacements`` keep a row per file and per
overwritten partition of every committed revision for good (a pinned snapshot must
learn that its files went). The purge's batch named the aborted revisions it reads
and deletes as a row-value list, ``(table_name, revision) IN (VALUES ...)``:
SQLite answered that by scanning the whole table, at every pass that found an aged
aborted revision (one kept for an operator is found at every pass). Both tables
have an index on (table_name, revision). The statements really sent are explained
by the database itself: SQLite's plan, PostgreSQL's rows read in both plan modes
with no ANALYZE.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from partition_notify.revisions.retention import purge_aborted
from partition_notify.store import Store
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import event, text

from tests.support.query_plans import plan as query_plan
from tests.support.query_plans import rows_read

#: Committed revisions, one file and one overwritten partition each.
ROWS = 20_000
TABLES = ("pn_revision_files", "pn_revision_replacements")
APPEND, PLACED = ROWS + 1, ROWS + 2  # aborted long ago: purged; kept (placed an overwrite)


def _fill(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO pn_revision_tables (table_name, last_revision, "
                          "created_at) VALUES ('d.t', :n, 0), ('d.u', 1, 0)"), {"n": PLACED})
        conn.execute(text(
            "INSERT INTO pn_revision_files (table_name, revision, write_id, partition, name, "
            "remove_failures) VALUES ('d.t', :v, :w, :p, 'part-0.parquet', 0)"),
            [{"v": v, "w": f"w{v}", "p": f"ds={v}"} for v in range(1, PLACED + 1)])
        # Another table's aborted write: one batch names revisions of both.
        conn.execute(text(
            "INSERT INTO pn_revision_files (table_name, revision, write_id, partition, name, "
            "remove_failures) VALUES ('d.u', 1, 'u1', 'ds=1', 'part-0.parquet', 0)"))
        conn.execute(text(
            "INSERT INTO pn_revision_replacements (table_name, revision, write_id, partition, "
            "retired_to, committed_at, vacuumed_at) VALUES ('d.t', :v, :w, :p, :r, :c, :c)"),
            [{"v": v, "w": f"w{v}", "p": f"ds={v}", "r": f"_pn_retired/w{v}",
              "c": None if v == PLACED else 1.0} for v in [*range(1, ROWS + 1), PLACED]])
        conn.execute(text(
            "INSERT INTO pn_revision_txns (table_name, revision, families, state, "
            "keep_alive_seconds, started_at, expires_at, ended_at, reason) "
            "VALUES (:t, :v, '[\"data\"]', 'aborted', 60, 1, 61, 2, 'aborted')"),
            [{"t": "d.t", "v": APPEND}, {"t": "d.t", "v": PLACED}, {"t": "d.u", "v": 1}])


def _count(store: Store, sql: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def test_a_purge_of_aborted_revisions_reads_only_their_rows(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        sent: list[tuple[str, Any]] = []

        def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
            if any(t in statement for t in TABLES):
                sent.append((statement, params))

        event.listen(store.engine, "before_cursor_execute", grab)
        try:
            purged = purge_aborted(partial(UnitOfWork, store.engine, write=True), 100.0,
                                   batch_size=100)
        finally:
            event.remove(store.engine, "before_cursor_execute", grab)
        assert purged == 2, "the aborted appends go, the placed overwrite stays"
        assert _count(store, "SELECT count(*) FROM pn_revision_txns") == 1
        assert _count(store, "SELECT count(*) FROM pn_revision_files") == ROWS + 1
        assert _count(store, "SELECT count(*) FROM pn_revision_replacements") == ROWS + 1
        assert sent, "no statement named the revision tables"
        for sql, params in sent:
            for table in (t for t in TABLES if t in sql):
                if store.dialect == "sqlite":
                    plan = query_plan(store, sql, params)
                    assert f"SCAN {table}" not in plan, f"{plan}: {sql}"
                    continue
                for mode in ("force_custom_plan", "force_generic_plan"):
                    read = rows_read(store, sql, params, mode, table)
                    assert read <= 10, f"{mode}: read {read} rows of {table}: {sql}"
    finally:
        store.close()
