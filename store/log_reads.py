"""The event log's reads: what followers, subscribers and the relay read back.

The hottest run on every live message or wake-up, so they are one statement
on a kept raw connection (store/hot_read.py) where one is free, not a pool
checkout and an ORM session.
"""

from __future__ import annotations

from collections.abc import Sequence

from partition_notify.store.hot_read import HotReader
from partition_notify.store.log_headers import checked_headers
from partition_notify.store.records import LoggedEvent
from partition_notify.store.repositories import TOPIC_EVENTS_AFTER, TOPIC_IDS_AFTER
from partition_notify.store.topic_seqs import last_seqs
from partition_notify.store.uow import Access, map_db_error
from sqlalchemy.exc import SQLAlchemyError

#: :meth:`LogReads.events_after` as one driver statement (headers: JSON text on SQLite).
_AFTER_SQL = ("SELECT event_id, topic, topic_seq, body, headers FROM pn_events "
              "WHERE event_id > {mark} ORDER BY event_id LIMIT {mark}")
#: :meth:`LogReads.topic_ids_after` as one driver statement (numbers, ids, kinds: no bodies).
_IDS_SQL = ("SELECT topic_seq, message_id, event_type FROM pn_events WHERE topic = {mark} "
            "AND topic_seq > {mark} AND topic_seq <= {mark} ORDER BY topic_seq LIMIT {mark}")


def logged(event_id: int, topic: str, topic_seq: int, body: str, headers: object) -> LoggedEvent:
    """One row of the log as read (``headers`` as stored: a damaged value is rebuilt)."""
    return LoggedEvent(event_id, topic, topic_seq, body,
                       *checked_headers(event_id, topic, body, headers))


class LogReads:
    """Reads of the event log; :class:`~partition_notify.store.event_log.EventLog` adds
    the writes and the outbox."""

    def __init__(self, access: Access, hot: HotReader) -> None:
        self._db = access
        self._hot = hot
        mark = "?" if access.engine.dialect.paramstyle == "qmark" else "%s"
        self._after_sql = _AFTER_SQL.format(mark=mark)
        self._ids_sql = _IDS_SQL.format(mark=mark)

    def max_event_id(self) -> int:
        with self._db.uow() as uow:
            return uow.events.max_id()

    def events_after(self, event_id: int, limit: int = 1000) -> list[LoggedEvent]:
        """Logged events with id > ``event_id``, oldest first.

        Because ids are handed out under the sequence lock and only visible
        once committed, nothing with a smaller id can appear later: a cursor
        never skips an event. Every follower of the log runs this, the embedded
        transport after each wake-up: one statement on a kept raw connection
        (store/hot_read.py), not a pool checkout and an ORM session, which took
        1.9 ms of the 3.3 ms commit -> callback p50 (bench/cross_process_trace.py).
        """
        rows = self._hot.rows(self._after_sql, (event_id, limit))
        if rows is None:  # no kept connection free (the repository decodes headers itself)
            with self._db.uow() as uow:
                return [LoggedEvent(*row) for row in uow.events.after(event_id, limit)]
        return [logged(*row) for row in rows]

    def table_events_after(self, table_id: int, event_id: int, limit: int) -> list[LoggedEvent]:
        """Events of one table with id > ``event_id``, oldest first (never skips, as above)."""
        with self._db.uow() as uow:
            return [logged(*row) for row in uow.events.of_table_after(table_id, event_id, limit)]

    def topic_events_after(
        self, topic: str, after_seq: int, limit: int = 1000, *, upto_seq: int | None = None
    ) -> list[LoggedEvent]:
        """Logged events of ``topic`` with ``after_seq`` < topicSeq <= ``upto_seq``, in order.

        A subscriber's catch-up read after a reconnect or a sequence jump. A
        topic's sequence is allocated under the event lock, so once seq N is
        visible every seq below it that was ever logged is visible too; a
        number absent here is not in the log (never logged, or gone).
        """
        upto = upto_seq if upto_seq is not None else 2**62
        params = {"topic": topic, "after": after_seq, "upto": upto, "limit": limit}
        return [
            logged(r.event_id, r.topic, r.topic_seq, r.body, r.headers)
            for r in self._db.read(TOPIC_EVENTS_AFTER, params)
        ]

    def topic_ids_after(self, topic: str, after_seq: int, upto_seq: int,
                        limit: int = 1000) -> list[tuple[int, str, str]]:
        """(topicSeq, message id, kind) of the events :meth:`topic_events_after` reads,
        without bodies: what a subscriber checks a live message against.

        A quiet subscriber runs it once per live message, between the broker and
        the callback: one statement on a kept raw connection, as :meth:`events_after`.
        """
        rows = self._hot.rows(self._ids_sql, (topic, after_seq, upto_seq, limit))
        if rows is None:  # no kept connection free
            params = {"topic": topic, "after": after_seq, "upto": upto_seq, "limit": limit}
            rows = [tuple(r) for r in self._db.read(TOPIC_IDS_AFTER, params)]
        return [(int(s), str(m), str(k)) for s, m, k in rows]

    def last_topic_seqs(self, topics: Sequence[str]) -> dict[str, int]:
        """The highest topicSeq logged so far per topic (0 when none).

        Plain driver SQL on one connection (store/topic_seqs.py): following 100,000
        topics spent its time compiling expanding IN lists (bench/many_tables.py).
        """
        try:
            with self._db.reader.connect() as conn:
                found = last_seqs(conn, topics)
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc
        return {t: found.get(t, 0) for t in topics}
