"""A subscriber's start reads one index entry per followed topic, not the topics' events.

``EventLog.last_topic_seqs`` asks for the highest topicSeq of each topic a
subscriber starts following. As ``max(topic_seq) ... WHERE topic IN (...) GROUP
BY topic`` PostgreSQL read every logged event of those topics (all 10,000 of a
topic here, whatever the statistics): a cost that grew with the log. The
statement it really sends is captured and explained, no ANALYZE run, under both
of PostgreSQL's plan modes.
"""

from __future__ import annotations

from partition_notify.store import Store
from partition_notify.store.topic_seqs import TOPICS_PER_READ
from sqlalchemy import text

from tests.support.query_plans import captured, rows_read

TOPICS = 5
PER_TOPIC = 10_000


def test_the_last_topic_seqs_read_one_entry_per_topic(pg_store: Store) -> None:
    with pg_store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
            "message_id, headers, body, created_at, attempts, rejections) "
            "SELECT g, 't' || (g % :topics), g / :topics + 1, 'ADD_PARTITION', 1, 'm' || g, "
            "'{}', 'x', 0, 0, 0 FROM generate_series(0, :n - 1) AS g"),
            {"topics": TOPICS, "n": TOPICS * PER_TOPIC})
    topics = [f"t{k}" for k in range(TOPICS)] + ["never-logged"]
    sql, params, found = captured(pg_store, "pn_events",
                                  lambda: pg_store.log.last_topic_seqs(topics))
    assert found == {**{f"t{k}": PER_TOPIC for k in range(TOPICS)}, "never-logged": 0}
    for mode in ("force_custom_plan", "force_generic_plan"):
        read = rows_read(pg_store, sql, params, mode, "pn_events")
        assert read <= 2 * len(topics), f"{mode}: read {read} rows of pn_events"


def test_every_topic_s_last_seq_is_found_across_chunks(store_url: str) -> None:
    """More topics than one IN-list statement holds (SQLite), or one array (PostgreSQL)."""
    n = 2 * TOPICS_PER_READ + 1
    store = Store.open(store_url)
    try:
        with store.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
                "message_id, headers, body, created_at, attempts, rejections) "
                "VALUES (:g, :topic, :seq, 'ADD_PARTITION', 1, :m, '{}', 'x', 0, 0, 0)"),
                [{"g": g, "topic": f"t{g % n}", "seq": g // n + 1, "m": f"m{g}"}
                 for g in range(n + 3)])  # t0..t2 twice
        topics = [f"t{k}" for k in range(n)] + ["never-logged"]
        found = store.log.last_topic_seqs(topics)
        assert found == {**{t: 1 for t in topics}, "t0": 2, "t1": 2, "t2": 2, "never-logged": 0}
    finally:
        store.close()
