"""The highest topicSeq of each of a batch of topics: a subscriber's start.

``max(topic_seq) ... WHERE topic IN (...) GROUP BY topic`` read every logged
event of those topics on PostgreSQL (its GROUP BY aggregates all of them;
SQLite's plan reads the last entry of each topic's index range). So PostgreSQL
gets one ``max`` per topic as a subquery, which it answers from the end of the
(topic, topic_seq) index: one entry per topic, whatever the log's size or
statistics (tests/store/test_topic_seqs_plan.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Connection

#: Topics per IN-list statement: within SQLite's bound-parameter limit (999 in older builds).
#: PostgreSQL takes every topic as one array parameter, in one round trip.
TOPICS_PER_READ = 900
_IN_SQL = "SELECT topic, max(topic_seq) FROM pn_events WHERE topic IN ({}) GROUP BY topic"
_PG_SQL = ("SELECT t.topic, (SELECT max(e.topic_seq) FROM pn_events e WHERE e.topic = t.topic) "
           "FROM unnest(%s::varchar[]) AS t(topic)")


def last_seqs(conn: Connection, topics: Sequence[str]) -> dict[str, int]:
    """The highest topicSeq of each of ``topics`` that has been logged (absent: none)."""
    if not topics:
        return {}
    if conn.dialect.name == "postgresql":
        rows = list(conn.exec_driver_sql(_PG_SQL, (list(topics),)))
    else:
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        rows = []
        for i in range(0, len(topics), TOPICS_PER_READ):
            chunk = tuple(topics[i : i + TOPICS_PER_READ])
            rows += conn.exec_driver_sql(_IN_SQL.format(", ".join([mark] * len(chunk))), chunk)
    return {str(t): int(s) for t, s in rows if s is not None}
