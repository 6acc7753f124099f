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
