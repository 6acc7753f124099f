"""One table's replay (SSE ``Last-Event-ID``) reads that table's rows, not the log.

The statement ``events_of_table_after`` really sends is captured and handed
to the database's own EXPLAIN, on SQLite and on PostgreSQL, with a log in
which the replayed table is a small minority (so a scan would be the wrong,
and a planner-visible, choice).
"""

from __future__ import annotations

from partition_notify.store import Store
from sqlalchemy import text

from partition_notify.http.store import HttpStore
from tests.support.query_plans import captured
from tests.support.query_plans import plan as query_plan

OTHER_EVENTS = 20_000


def _fill(store: Store) -> None:
    """20,000 events of table 2 and 5 of table 1 (ids 1..20005), straight into the log."""
    with store.engine.begin() as conn:
        rows = [
            {"id": i, "tid": 1 if i % 4000 == 0 else 2, "mid": f"m{i}"}
            for i in range(1, OTHER_EVENTS + 6)
        ]
        conn.execute(text(
            "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
            "message_id, headers, body, created_at, published_at, attempts, rejections) "
            "VALUES (:id, 't', :id, 'PARTITION_DONE', :tid, :mid, '{}', '{}', 0, 0, 0, 0)"
        ), rows)
        conn.execute(text("ANALYZE"))



def test_table_replay_uses_the_table_index(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        sql, params, found = captured(
            store, "pn_events", lambda: HttpStore(store).events_of_table_after(1, 0, 100))
        assert [e[0] for e in found] == [4000, 8000, 12000, 16000, 20000]
        plan = query_plan(store, sql, params)
        assert "ix_pn_events_table" in plan, plan
        assert "SCAN pn_events" not in plan and "Seq Scan" not in plan, plan
    finally:
        store.close()
