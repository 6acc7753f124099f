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

_IN_SQL = "SELECT topic, max(topic_seq) FROM pn_events WHERE topic IN ({}) GROUP BY topic"
_PG_SQL = ("SELECT t.topic, (SELECT max(e.topic_seq) FROM pn_events e WHERE e.topic = t.topic) "
           "FROM unnest(%s::varchar[]) AS t(topic)")


def last_seqs_statement(dialect: str, mark: str,
                        topics: Sequence[str]) -> tuple[str, tuple[object, ...]]:
    """(SQL, parameters) of (topic, highest topicSeq or NULL) for ``topics``."""
    if dialect == "postgresql":
        return _PG_SQL, (list(topics),)
    return _IN_SQL.format(", ".join([mark] * len(topics))), tuple(topics)
