"""The event log, which is also the outbox: append, read after, lease and mark."""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from partition_notify.store import withdrawals
from partition_notify.store.append_rows import (
    CATALOG_COUNTER,
    DriverAppend,
    Rows,
    check_catalog,
    insert_many,
)
from partition_notify.store.group_commit import FOLLOWER_WAIT_SECONDS, GroupCommit
from partition_notify.store.hot_read import HotReader
from partition_notify.store.log_reads import LogReads, logged
from partition_notify.store.records import EventDraft, LoggedEvent
from partition_notify.store.repositories import (
    INSERT_EVENTS,
    INSERT_SET_DONE,
    reserve,
)
from partition_notify.store.sqlite_writer import DriverMarks, SQLiteWriter
from partition_notify.store.uow import Access, InTxn, UnitOfWork, map_db_error, map_driver_error
from partition_notify.store.wakeups import NOTIFY_SQL, wake_file
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from partition_notify.contract import AnyMessage

log = logging.getLogger(__name__)


#: The catalog counter, read in an append's transaction (store/catalog.py's cache).
CATALOG_SQL = f"SELECT next_value FROM pn_sequence WHERE name = '{CATALOG_COUNTER}'"

#: Called after an append commits (in the appending thread, outside the transaction).
CommitListener = Callable[[], None]


class EventLog(LogReads):
    """The log of every event, in commit order; each method is one unit of work."""

    def __init__(self, access: Access, hot: HotReader) -> None:
        super().__init__(access, hot)
        self._listeners: list[CommitListener] = []
        #: SQLite: tells readers in other processes that a commit is visible.
        self._wake = wake_file(access.engine)
        sqlite = access.engine.dialect.name == "sqlite"
        self._driver_append = DriverAppend() if sqlite else None
        # A file's one-event appends commit on a connection of their own, on the driver
        # (store/sqlite_writer.py); an in-memory database has just the one connection.
        memory = access.engine.url.database in (None, "", ":memory:")
        self._writer = SQLiteWriter(access.engine) if sqlite and not memory else None
        self._marks = DriverMarks(access.engine) if self._writer is not None else None
        #: Concurrent one-event appends share a commit; False: one each (the bench's baseline).
        self.group_commit = True
        self._group: GroupCommit[tuple[EventDraft, bool], list[AnyMessage]] = GroupCommit(
            self._append_batch, wait_seconds=FOLLOWER_WAIT_SECONDS)

    def close(self) -> None:
        """Close the appends' and marks' own connections (the store closes its engine after)."""
        for own in (self._writer, self._marks):
            if own is not None:
                own.close()

    @property
    def engine(self) -> Engine:
        """The database the log lives in (store/wakeups.py listens to it)."""
        return self._db.engine

    # -- after-commit listeners -----------------------------------------------
    def add_listener(self, listener: CommitListener) -> None:
        """Call ``listener`` after every append of this process commits."""
        self._listeners = [*self._listeners, listener]  # copy: appends iterate lock-free

    def remove_listener(self, listener: CommitListener) -> None:
        self._listeners = [f for f in self._listeners if f is not listener]

    def _committed(self) -> None:
        if self._wake is not None:
            self._wake.touch()
        for listener in self._listeners:
            try:
                listener()
            except Exception:  # the append committed: a listener must not undo its result
                log.exception("event log: an after-commit listener failed")

    # -- the write path -------------------------------------------------------
    def append(
        self,
        drafts: Sequence[EventDraft],
        *,
        replace_partitions: bool = False,
        published: bool = False,
        in_txn: InTxn | None = None,
    ) -> list[AnyMessage]:
        """Append events, their partitions and set-done rows in one transaction.

        Drafts for partitions that already exist are dropped unless
        ``replace_partitions`` (an overwrite announces the partition again);
        those are logged with ``replace``. Drop drafts (``drop``) of partitions
        that are not present are dropped; the others remove their partition.
        Returns the messages actually logged, in event-id order. ``published``
        marks them delivered at once: when the log itself is the bus.
        ``in_txn`` runs last inside the transaction (even when nothing is logged).
        """
        if not drafts and in_txn is None:
            return []
        if (len(drafts) == 1 and drafts[0].partition_spec is None and in_txn is None
                and drafts[0].withdraw is None):
            messages = self._append_one(drafts[0], published)
            self._committed()
            return messages
        with self._db.uow(write=True) as uow:
            messages = self._append_in(uow, drafts, replace_partitions, published, in_txn)
        if messages:  # nothing logged, nothing for the listeners to wake up for
            self._committed()
        return messages

    def _append_in(
        self,
        uow: UnitOfWork,
        drafts: Sequence[EventDraft],
        replace_partitions: bool,
        published: bool,
        in_txn: InTxn | None,
    ) -> list[AnyMessage]:
        """The body of :meth:`append`, inside its transaction."""
        if not drafts:  # only the hook: serialise it with every writer
            uow.sequences.lock("event")
            if in_txn is not None:
                in_txn(uow, [])
            return []
        cached = [d for d in drafts if d.catalog_version is not None]
        if cached:  # under the write lock, as the driver append checks it
            row = uow.session.connection().exec_driver_sql(CATALOG_SQL).first()
            for d in cached:
                check_catalog(d, row)
        first, existing, drafts = self._reserve(uow, drafts, replace_partitions)
        if not drafts:
            if in_txn is not None:
                in_txn(uow, [])
            return []
        seqs = {
            t: uow.sequences.take(f"topic:{t}", n)
            for t, n in Counter(d.table.topic for d in drafts).items()
        }
        withdrawals.apply(uow.session, drafts, self._db.clock())
        rows = Rows.of(drafts, first, seqs, self._db.clock(), existing, published)
        for table_id, spec, values in rows.replaced:
            uow.partitions.replace(table_id, spec, values)
        for table_id, spec in rows.dropped:
            uow.partitions.remove(table_id, spec)
        event_json, part_json = rows.json()
        uow.events.add_many(rows.events, event_json)
        uow.partitions.add_many(rows.parts, part_json)
        uow.set_done.add_many(rows.dones)
        if in_txn is not None:
            in_txn(uow, rows.messages)
        return rows.logged()

    @staticmethod
    def _reserve(
        uow: UnitOfWork, drafts: Sequence[EventDraft], replace_partitions: bool
    ) -> tuple[int, dict[int, set[str]], Sequence[EventDraft]]:
        """Take the event ids; drop drafts of partitions that exist unless replacing.

        Returns the first event id, the partitions that already existed per
        table, and the drafts left to log.
        """
        existing: dict[int, set[str]] = defaultdict(set)
        by_table: dict[int, list[str]] = defaultdict(list)
        for d in drafts:
            if d.partition_spec is not None:
                by_table[d.table.id].append(d.partition_spec)
        if not by_table:
            # Nothing to de-duplicate (set-done only): lock and reserve at once.
            return uow.sequences.take("event", len(drafts)), existing, drafts
        # Lock the event counter first: everything after is serialised.
        first = uow.sequences.lock("event")
        for table_id, specs in by_table.items():
            existing[table_id] = uow.partitions.existing(table_id, specs)
        # Decided under the lock: what another writer added or dropped meanwhile counts.
        drafts = [
            d
            for d in drafts
            if d.partition_spec is None
            or (d.partition_spec in existing[d.table.id]) == d.drop
            or (replace_partitions and not d.drop)
        ]
        if drafts:
            uow.sequences.advance("event", first + len(drafts))
        return first, existing, drafts

    def _append_one(self, draft: EventDraft, published: bool) -> list[AnyMessage]:
        """One event with no partition row and no hook: every publish of a set-done.

        Concurrent callers share a transaction (store/group_commit.py): N
        publishing threads, fewer fsyncs, each returns once its event committed.
        """
        if not self.group_commit:
            return self._append_batch([(draft, published)])[0]
        return self._group.submit((draft, published))

    def _append_batch(self, items: Sequence[tuple[EventDraft, bool]]) -> list[list[AnyMessage]]:
        """One-event appends in one transaction, in order; each one's messages.

        The general path's statements on a plain connection, without the ORM
        session, whose bookkeeping was most of an append's CPU after the commit
        (bench/durable_publish.py); on SQLite as prebuilt driver SQL. Same
        statements, locks and order as the general path.
        """
        if self._writer is not None and self._driver_append is not None:
            return self._append_on_writer(self._writer, self._driver_append, items)
        try:
            with self._db.writer.begin() as conn:
                logged = [self._append_in_conn(conn, d, published) for d, published in items]
                if conn.dialect.name == "postgresql":  # wakes other processes at commit
                    conn.exec_driver_sql(NOTIFY_SQL)
        except SQLAlchemyError as exc:
            raise map_db_error(exc, self._db.engine) from exc
        except sqlite3.Error as exc:  # DriverAppend's statements bypass SQLAlchemy
            raise map_driver_error(exc, self._db.engine) from exc
        return logged

    def _append_on_writer(self, writer: SQLiteWriter, append: DriverAppend,
                          items: Sequence[tuple[EventDraft, bool]]) -> list[list[AnyMessage]]:
        """:meth:`_append_batch` on SQLite, begun and committed on the driver."""
        try:
            clock = self._db.clock
            return writer.run(lambda raw: [append.run(raw, d, clock, published)
                                           for d, published in items])
        except sqlite3.Error as exc:
            raise map_driver_error(exc, self._db.engine) from exc

    def _append_in_conn(self, conn: Connection, draft: EventDraft,
                        published: bool) -> list[AnyMessage]:
        if self._driver_append is not None:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection), "a SQLite connection in a transaction"
            return self._driver_append.run(raw, draft, self._db.clock, published)
        topic = draft.table.topic
        first = reserve(conn, "event", 1)
        seqs = {topic: reserve(conn, f"topic:{topic}", 1)}
        rows = Rows.of([draft], first, seqs, self._db.clock(), {}, published)
        insert_many(conn, INSERT_EVENTS, rows.events, rows.json()[0])
        if rows.dones:
            conn.execute(INSERT_SET_DONE, rows.dones)
        return rows.logged()

    # -- the outbox (relay) ---------------------------------------------------
    def lease_unpublished(
        self,
        owner: str,
        limit: int,
        lease_seconds: float,
        *,
        min_age_seconds: float = 0.0,
        after_event_id: int = 0,
    ) -> list[LoggedEvent]:
        """Claim the oldest unpublished events for ``owner`` until the lease ends.

        ``after_event_id`` continues a scan past a batch already claimed (the
        relay leases the next batch while the broker confirms the last one).

        Only a prefix of the log is claimed: the scan stops at the first entry
        another owner holds, or one younger than ``min_age_seconds`` (its
        writer may still be publishing it). So no relay overtakes an earlier
        entry: event-id order, hence per-topic order, holds across processes.

        One exception keeps a poison message from stalling everything: an
        event the broker refused for good (``retry_at`` set) holds back its own
        topic only. It is claimed alone once its retry time has come, and the
        later events of its topic wait until it is published or dead-lettered;
        other topics go on.
        """
        now = self._db.clock()
        with self._db.uow(write=True) as uow:
            held_back: dict[str, int] = {}
            due: set[int] = set()
            for event_id, topic, retry_at in uow.events.retrying():
                held_back[topic] = min(event_id, held_back.get(topic, event_id))
                if retry_at <= now:
                    due.add(event_id)
            claimed = []
            for r in uow.events.unpublished_head(limit, held_back, after_event_id):
                held = r.lease_owner not in (None, owner) and (r.lease_until or 0.0) >= now
                if held or r.created_at > now - min_age_seconds:
                    break
                if held_back.get(r.topic) == r.event_id and r.event_id not in due:
                    continue  # its retry time has not come; its topic waits behind it
                claimed.append(r)
            uow.events.lease([r.event_id for r in claimed], owner, now + lease_seconds)
            return [
                logged(r.event_id, r.topic, r.topic_seq, r.body, r.headers)
                for r in claimed
            ]

    def mark_published(self, event_ids: Sequence[int]) -> None:
        if event_ids and self._marks is not None:  # a SQLite file (store/sqlite_writer.py)
            try:
                self._marks.mark_published(event_ids, self._db.clock())
            except sqlite3.Error as exc:
                raise map_driver_error(exc, self._db.engine) from exc
        elif event_ids:
            with self._db.uow(write=True) as uow:
                uow.events.mark_published(event_ids, self._db.clock())

    def mark_failed(self, event_ids: Sequence[int], error: str) -> None:
        if event_ids:
            with self._db.uow(write=True) as uow:
                uow.events.mark_failed(event_ids, error)

    def relay_lag(self) -> tuple[int, float]:
        """(unpublished events, age in seconds of the oldest)."""
        with self._db.uow() as uow:
            count = uow.events.pending_count()
            oldest = uow.events.oldest_pending_created()
        return count, (self._db.clock() - oldest) if oldest is not None else 0.0
