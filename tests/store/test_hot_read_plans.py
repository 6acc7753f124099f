"""The hot reads' plans do not outlive the growth of the table they were made on.

The kept connections of store/hot_read.py prepare their statements from the
first call. After five executions PostgreSQL may switch a prepared statement
to its generic plan, and keeps it until the table's statistics change: without
autovacuum (or before it runs) that is never. A plan made while the table was
empty must not become a scan once it has grown (the duplicate check's defect:
tests/store/test_duplicate_check_plan.py). The look-up runs through the
product's own kept connection; the rows it read are counted by the server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from partition_notify.store import Store, TableInfo
from sqlalchemy import text

#: Set-done rows of the one table once it has grown (no ANALYZE).
GROWN = 20_000
TABLE = TableInfo(1, "d", "t", ("a",), "hcat.d.t", 86_400)
#: A valid set-done body for row ``g`` of spec ``a=<s>`` (the readers skip damaged ones).
_BODY = ("format('{\"server\":\"s\",\"db\":\"d\",\"table\":\"t\",\"timestamp\": 0,"
         "\"messageId\":\"m%s\",\"eventId\":%s,\"topic\":\"hcat.d.t\",\"topicSeq\":%s,"
         "\"eventType\":\"PARTITION_DONE\",\"partitionSpec\":{\"a\":\"%s\"},"
         "\"partitionSpecString\":\"a=%s\"}', g, g, g, SPEC, SPEC)")
_READ = ("SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) "
         "FROM pg_stat_xact_user_tables WHERE relname = %s")


def _rows_read(store: Store, read: Callable[[], object],
               table: str = "pn_set_done") -> tuple[object, int]:
    """``read()`` on the store's one kept connection, and the rows of ``table`` it read."""
    kept = store._hot._idle  # the product's own connection, not a new one
    assert len(kept) == 1, "one kept connection, reused by every look-up"
    conn = kept[0]
    conn.execute("BEGIN")  # the counters are per transaction
    try:
        before = conn.execute(_READ, (table,)).fetchone()
        found = read()
        after = conn.execute(_READ, (table,)).fetchone()
    finally:
        conn.execute("COMMIT")
    assert before is not None and after is not None
    return found, int(after[0]) - int(before[0])


def _warm(store: Store, read: Callable[[], object], empty: object) -> None:
    """The one table, then ``read()`` on it while empty until the plan is generic."""
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_tables (id, db, name, partition_keys, topic, "
            "retention_seconds, created_at) VALUES (1, 'd', 't', '[\"a\"]', 'hcat.d.t', 1, 0)"))
    for _ in range(12):  # prepared on the first, generic from about the sixth
        assert read() == empty


def test_the_set_done_look_up_s_plan_does_not_outlive_the_table_s_growth(pg_store: Store) -> None:
    wanted = ["a=019990", "a=*"]
    _warm(pg_store, lambda: pg_store.retention.set_done_covering(TABLE, wanted), [])
    now = time.time()
    with pg_store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_set_done (table_id, spec, event_id, body, published_at, "
            "expires_at) SELECT 1, 'a=' || lpad(g::text, 6, '0'), g, "
            + _BODY.replace("SPEC", "lpad(g::text, 6, '0')") + ", :now - g, "
            ":now + 86400 - g FROM generate_series(1, :n) AS g"), {"now": now, "n": GROWN})
    found, read = _rows_read(pg_store, lambda: pg_store.retention.set_done_covering(TABLE, wanted))
    assert isinstance(found, list) and [json.loads(b)["eventId"] for b in found] == [19990]
    assert read <= 10, f"read {read} rows of pn_set_done for one set-done"


def test_the_newest_covering_look_up_stays_an_index_read(pg_store: Store) -> None:
    """The waiters' read (newest first, one row) on a grown table reads its rows, not all."""
    wanted = ["a=019990", "a=*"]
    _warm(pg_store, lambda: pg_store.retention.newest_covering(TABLE, wanted), None)
    now = time.time()
    with pg_store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_set_done (table_id, spec, event_id, body, published_at, "
            "expires_at) SELECT 1, 'a=' || lpad((g % 10000)::text, 6, '0'), g, "
            + _BODY.replace("SPEC", "lpad((g % 10000)::text, 6, '0')") + ", "
            ":now - g, :now + 86400 - g FROM generate_series(1, :n) AS g"),
            {"now": now, "n": GROWN})
    # 'a=009990' done twice (event ids 9990 and 19990): the later one answers.
    found, read = _rows_read(pg_store, lambda: pg_store.retention.newest_covering(
        TABLE, ["a=009990", "a=*"]))
    assert isinstance(found, str) and json.loads(found)["eventId"] == 19990
    assert read <= 10, f"read {read} rows of pn_set_done for one set-done"
