"""The storage provider: what the rest of partition-notify asks of the store.

Callers never see a transaction (the storage interface hides them): each method is one unit of work.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, Executable, Row
from sqlalchemy.exc import SQLAlchemyError

from partition_notify.contract import AnyMessage, SetDoneMessage, to_envelope
from partition_notify.errors import ConflictError, UnknownTableError
from store.engine import DEFAULT_SQLITE_SYNCHRONOUS, SINGLE_READ, WRITE, make_engine
from store.hot_read import HotReader
from store.migrate import migrate
from store.repositories import (
    TABLE_INFO_BY_NAME,
    TOPIC_EVENTS_AFTER,
    TOPIC_LAST_SEQ,
    covering_sql,
)
from store.schema import TableRow
from store.uow import UnitOfWork, map_db_error

Clock = Callable[[], float]
#: Runs inside :meth:`Store.append`'s transaction with the messages logged
#: (idempotency keys, late-message rows); raising rolls everything back.
InTxn = Callable[[UnitOfWork, list[AnyMessage]], None]


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    db: str
    name: str
    partition_keys: tuple[str, ...]
    topic: str
    retention_seconds: int
    location: str | None = None
    topic_override: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @classmethod
    def of(cls, row: TableRow | Row[Any]) -> TableInfo:
        return cls(
            row.id,
            row.db,
            row.name,
            tuple(row.partition_keys),
            row.topic,
            row.retention_seconds,
            row.location,
            row.topic_override,
        )


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    spec: str
    values: dict[str, str]
    location: str | None
    revision: int | None
    event_id: int
    created_at: float


@dataclass(slots=True)
class EventDraft:
    """An event to append; ``build`` makes the message once ids are allocated."""

    table: TableInfo
    build: Callable[[int, int, float], AnyMessage]
    partition_spec: str | None = None
    partition_values: dict[str, str] = field(default_factory=dict)
    location: str | None = None
    revision: int | None = None


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    event_id: int
    topic: str
    topic_seq: int
    body: str
    headers: dict[str, Any]


class Store:
    """SQL-backed store of tables, partitions, the event log and set-done history."""

    def __init__(self, engine: Engine, *, clock: Clock = time.time) -> None:
        self.engine = engine
        # Built once: execution_options() copies the engine on every call.
        self._writer = engine.execution_options(**{WRITE: True})
        # Single-statement reads on the hot path: on PostgreSQL autocommit saves
        # the BEGIN and ROLLBACK round trips around them (bench/core_lookup.py).
        self._reader = (
            engine.execution_options(isolation_level="AUTOCOMMIT")
            if engine.dialect.name == "postgresql"
            else engine.execution_options(**{SINGLE_READ: True})
        )
        # The covering look-up's SQL by number of candidate specs, sent as is:
        # compiling the expanding IN on every call was most of its CPU.
        self._covering_sql: dict[int, str] = {}
        self._placeholder = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        self._hot = HotReader(engine)
        self.clock = clock
        # In-process consumers wait on this instead of sleeping between polls;
        # the generation tells a consumer that a commit landed while it was
        # reading, so it does not sleep through a notify it was not waiting for.
        self.appended = threading.Condition()
        self.append_generation = 0

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Clock = time.time,
        upgrade: bool = True,
        connect_timeout_seconds: float = 10.0,
        sqlite_synchronous: str = DEFAULT_SQLITE_SYNCHRONOUS,
    ) -> Store:
        engine = make_engine(
            url,
            connect_timeout_seconds=connect_timeout_seconds,
            sqlite_synchronous=sqlite_synchronous,
        )
        if upgrade:
            try:
                migrate(engine)
            except SQLAlchemyError as exc:
                raise map_db_error(exc) from exc
        return cls(engine, clock=clock)

    def close(self) -> None:
        self._hot.close()
        self.engine.dispose()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def _read(self, stmt: Executable, params: dict[str, Any]) -> list[Row[Any]]:
        """One statement on a plain connection: the hot reads skip the unit of work."""
        try:
            with self._reader.connect() as conn:
                return list(conn.execute(stmt, params))
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc

    def _uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self._writer if write else self.engine, write=write)

    # -- tables ---------------------------------------------------------------
    def register_table(
        self,
        db: str,
        name: str,
        keys: Sequence[str],
        *,
        topic: str,
        retention_seconds: int,
        topic_override: str | None = None,
        location: str | None = None,
        update_retention: bool = False,
    ) -> tuple[TableInfo, bool]:
        """Register a table; returns (info, created).

        Re-registering an existing table applies a given ``location`` and, with
        ``update_retention``, the retention; different keys or topic conflict.
        """
        with self._uow(write=True) as uow:
            row = uow.tables.get(db, name)
            if row is not None:
                info = TableInfo.of(row)
                if info.partition_keys != tuple(keys):
                    raise ConflictError(
                        f"table {db}.{name} is registered with partition keys "
                        f"{list(info.partition_keys)}, not {list(keys)}"
                    )
                if topic_override and topic_override != info.topic:
                    raise ConflictError(
                        f"table {db}.{name} is registered on topic {info.topic!r}, "
                        f"not {topic_override!r}"
                    )
                if update_retention:
                    row.retention_seconds = retention_seconds
                if location is not None:
                    row.location = location
                return TableInfo.of(row), False
            row = uow.tables.add(
                TableRow(
                    db=db,
                    name=name,
                    partition_keys=list(keys),
                    topic=topic,
                    topic_override=topic_override,
                    retention_seconds=retention_seconds,
                    location=location,
                    created_at=self.clock(),
                )
            )
            return TableInfo.of(row), True

    def set_retention(self, db: str, name: str, seconds: int) -> TableInfo:
        with self._uow(write=True) as uow:
            row = uow.tables.get(db, name)
            if row is None:
                raise UnknownTableError(f"table {db}.{name} is not registered")
            row.retention_seconds = seconds
            return TableInfo.of(row)

    def get_table(self, db: str, name: str) -> TableInfo:
        # Every publish starts here: a plain connection and a prebuilt
        # statement, not a unit of work (bench/core_latency.py).
        rows = self._read(TABLE_INFO_BY_NAME, {"db": db, "name": name})
        if not rows:
            raise UnknownTableError(
                f"table {db}.{name} is not registered (register it first: "
                f"partition-notify register {db}.{name} --keys ...)"
            )
        return TableInfo.of(rows[0])

    def get_tables(self, refs: Sequence[tuple[str, str]]) -> list[TableInfo]:
        """Many tables in one query, in the order asked; any unknown one is an error."""
        found: dict[tuple[str, str], TableInfo] = {}
        with self._uow() as uow:
            for info in (TableInfo.of(r) for r in uow.tables.all()):
                found[(info.db, info.name)] = info
        missing = [f"{db}.{name}" for db, name in refs if (db, name) not in found]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise UnknownTableError(f"table(s) {', '.join(missing[:5])}{more} not registered")
        return [found[ref] for ref in refs]

    def tables(self) -> list[TableInfo]:
        with self._uow() as uow:
            return [TableInfo.of(r) for r in uow.tables.all()]

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
        ``replace_partitions`` (an overwrite announces the partition again).
        Returns the messages actually logged, in event-id order. ``published``
        marks them delivered at once: when the log itself is the bus.
        ``in_txn`` runs last inside the transaction (even when nothing is logged).
        """
        if not drafts and in_txn is None:
            return []
        with self._uow(write=True) as uow:
            existing: dict[int, set[str]] = defaultdict(set)
            by_table: dict[int, list[str]] = defaultdict(list)
            for d in drafts:
                if d.partition_spec is not None:
                    by_table[d.table.id].append(d.partition_spec)
            if not drafts and in_txn is not None:
                uow.sequences.lock("event")  # serialise the hook with every writer
                in_txn(uow, [])
                return []
            if not by_table:
                # Nothing to de-duplicate (set-done only): lock and reserve at once.
                first = uow.sequences.take("event", len(drafts))
            else:
                # Lock the event counter first: everything after is serialised.
                first = uow.sequences.lock("event")
                for table_id, specs in by_table.items():
                    existing[table_id] = uow.partitions.existing(table_id, specs)
                if not replace_partitions:
                    drafts = [
                        d
                        for d in drafts
                        if d.partition_spec is None
                        or d.partition_spec not in existing[d.table.id]
                    ]
                if not drafts:
                    if in_txn is not None:
                        in_txn(uow, [])
                    return []
                uow.sequences.advance("event", first + len(drafts))
            seqs = {
                t: uow.sequences.take(f"topic:{t}", n)
                for t, n in Counter(d.table.topic for d in drafts).items()
            }
            now = self.clock()
            messages, events, parts, dones = self._rows(drafts, first, seqs, now, existing, uow)
            if published:
                for e in events:
                    e["published_at"] = now
            uow.events.add_many(events)
            uow.partitions.add_many(parts)
            uow.set_done.add_many(dones)
            if in_txn is not None:
                in_txn(uow, messages)
        with self.appended:
            self.append_generation += 1
            self.appended.notify_all()
        return messages

    def _rows(
        self,
        drafts: Sequence[EventDraft],
        first: int,
        seqs: dict[str, int],
        now: float,
        existing: dict[int, set[str]],
        uow: UnitOfWork,
    ) -> tuple[list[AnyMessage], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        messages: list[AnyMessage] = []
        events: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        dones: list[dict[str, Any]] = []
        for offset, d in enumerate(drafts):
            event_id = first + offset
            seq = seqs[d.table.topic]
            seqs[d.table.topic] = seq + 1
            msg = d.build(event_id, seq, now)
            env = to_envelope(msg)
            body = env.body.decode()
            messages.append(msg)
            events.append(
                {
                    "event_id": event_id,
                    "topic": d.table.topic,
                    "topic_seq": seq,
                    "event_type": msg.event_type,
                    "table_id": d.table.id,
                    "message_id": msg.message_id,
                    "headers": env.headers,
                    "body": body,
                    "created_at": now,
                    "published_at": None,
                    "attempts": 0,
                }
            )
            if d.partition_spec is not None:
                values = {
                    "values": d.partition_values,
                    "location": d.location,
                    "revision": d.revision,
                    "event_id": event_id,
                    "created_at": now,
                }
                if d.partition_spec in existing[d.table.id]:
                    uow.partitions.replace(d.table.id, d.partition_spec, values)
                else:
                    parts.append({"table_id": d.table.id, "spec": d.partition_spec, **values})
            if isinstance(msg, SetDoneMessage):
                dones.append(
                    {
                        "table_id": d.table.id,
                        "spec": msg.spec,
                        "event_id": event_id,
                        "body": body,
                        "published_at": now,
                        "expires_at": now + d.table.retention_seconds,
                    }
                )
        return messages, events, parts, dones

    # -- reads ----------------------------------------------------------------
    def partition(self, table: TableInfo, spec: str) -> PartitionInfo | None:
        with self._uow() as uow:
            row = uow.partitions.get(table.id, spec)
            return (
                None
                if row is None
                else PartitionInfo(
                    row.spec,
                    dict(row.values),
                    row.location,
                    row.revision,
                    row.event_id,
                    row.created_at,
                )
            )

    def partitions(
        self,
        table: TableInfo,
        *,
        max_revision: int | None = None,
    ) -> list[PartitionInfo]:
        with self._uow() as uow:
            return [
                PartitionInfo(
                    r.spec, dict(r.values), r.location, r.revision, r.event_id, r.created_at
                )
                for r in uow.partitions.list(table.id, max_revision)
            ]

    def max_event_id(self) -> int:
        with self._uow() as uow:
            return uow.events.max_id()

    def events_after(self, event_id: int, limit: int = 1000) -> list[LoggedEvent]:
        """Logged events with id > ``event_id``, oldest first.

        Because ids are handed out under the sequence lock and only visible
        once committed, nothing with a smaller id can appear later: a cursor
        never skips an event.
        """
        with self._uow() as uow:
            return [LoggedEvent(*row) for row in uow.events.after(event_id, limit)]

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
            LoggedEvent(r.event_id, r.topic, r.topic_seq, r.body, dict(r.headers))
            for r in self._read(TOPIC_EVENTS_AFTER, params)
        ]

    def last_topic_seqs(self, topics: Sequence[str]) -> dict[str, int]:
        """The highest topicSeq logged so far per topic (0 when none)."""
        found: dict[str, int] = {}
        for i in range(0, len(topics), 500):  # within SQLite's bound-parameter limit
            rows = self._read(TOPIC_LAST_SEQ, {"topics": list(topics[i : i + 500])})
            found.update((str(r.topic), int(r.last_seq or 0)) for r in rows)
        return {t: found.get(t, 0) for t in topics}

    def set_done_covering(self, table: TableInfo, specs: Sequence[str]) -> list[str]:
        """Unexpired set-done bodies of ``table`` whose canonical spec is in ``specs``.

        The hot read of every wait: a kept raw driver connection
        (store/hot_read.py), not a pool checkout or an ORM session, which were
        most of its time (bench/core_lookup.py --profile).
        """
        if not specs:
            return []
        sql = self._covering_sql.get(len(specs))
        if sql is None:
            sql = self._covering_sql[len(specs)] = covering_sql(len(specs), self._placeholder)
        params = (table.id, *specs, self.clock())
        found = self._hot.column(sql, params)
        if found is not None:
            return found
        try:  # every kept connection is busy
            with self._reader.connect() as conn:
                return [r[0] for r in conn.exec_driver_sql(sql, params)]
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc

    def set_done_history(self, tables: Sequence[TableInfo], since: float) -> list[str]:
        """Unexpired set-done bodies of ``tables`` published at or after ``since``."""
        if not tables:
            return []
        with self._uow() as uow:
            return uow.set_done.history([t.id for t in tables], since, self.clock())

    # -- retention ------------------------------------------------------------
    def purge_expired(
        self,
        *,
        batch_size: int = 5000,
        max_batches: int | None = None,
        between_batches: Callable[[], None] | None = None,
    ) -> int:
        """Delete expired set-done rows, one short transaction per batch.

        Small batches keep each write lock short so publishers are never held
        up behind one giant delete; rows not yet expired are never touched.
        """
        total = 0
        batches = 0
        while max_batches is None or batches < max_batches:
            with self._uow(write=True) as uow:
                n = uow.set_done.purge_batch(self.clock(), batch_size)
            total += n
            batches += 1
            if n < batch_size:
                break
            if between_batches is not None:
                between_batches()
        return total

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
        now = self.clock()
        with self._uow(write=True) as uow:
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
                LoggedEvent(r.event_id, r.topic, r.topic_seq, r.body, dict(r.headers))
                for r in claimed
            ]

    def mark_published(self, event_ids: Sequence[int]) -> None:
        if event_ids:
            with self._uow(write=True) as uow:
                uow.events.mark_published(event_ids, self.clock())

    def mark_failed(self, event_ids: Sequence[int], error: str) -> None:
        if event_ids:
            with self._uow(write=True) as uow:
                uow.events.mark_failed(event_ids, error)

    def relay_lag(self) -> tuple[int, float]:
        """(unpublished events, age in seconds of the oldest)."""
        with self._uow() as uow:
            count = uow.events.pending_count()
            oldest = uow.events.oldest_pending_created()
        return count, (self.clock() - oldest) if oldest is not None else 0.0
