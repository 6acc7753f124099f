"""One small repository per table. Each takes a Session and never commits:
the unit of work does (see :mod:`partition_notify.store.uow`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from partition_notify.store.append_rows import JsonColumn, insert_many
from partition_notify.store.existing_specs import existing_specs
from partition_notify.store.log_headers import checked_headers, raw_headers
from partition_notify.store.purge_order import oldest_first
from partition_notify.store.schema import EventRow, PartitionRow, SequenceRow, SetDoneRow, TableRow
from partition_notify.store.wakeups import NOTIFY_SQL
from sqlalchemy import (
    Connection,
    Integer,
    Row,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    not_,
    select,
    update,
)
from sqlalchemy.orm import Session

_IN_CHUNK = 500  # keep IN-lists well under SQLite's variable limit

# The write path runs these once per publish. Built once here, executed as
# Core statements on the session's connection: building and ORM-executing
# them per call was most of a publish's CPU (bench/core_latency.py).
_SEQ_T = cast(Table, SequenceRow.__table__)
_TABLES_T = cast(Table, TableRow.__table__)
_SEQ = _SEQ_T.c
_SEQ_RESERVE = (
    update(_SEQ_T)
    .where(_SEQ.name == bindparam("counter"))
    .values(next_value=_SEQ.next_value + bindparam("count"))
    .returning(_SEQ.next_value)
)
_SEQ_SET = (
    update(_SEQ_T)
    .where(_SEQ.name == bindparam("counter"))
    .values(next_value=bindparam("value"))
)
_SEQ_NEW = insert(_SEQ_T)
_TABLE_BY_NAME = select(TableRow).where(
    TableRow.db == bindparam("db"), TableRow.name == bindparam("name")
)
#: A table's row as plain columns, for reads outside a unit of work.
TABLE_INFO_BY_NAME = select(*_TABLES_T.c).where(
    _TABLES_T.c.db == bindparam("db"), _TABLES_T.c.name == bindparam("name")
)
_EVENTS_T = cast(Table, EventRow.__table__)
_EV = _EVENTS_T.c
INSERT_EVENTS = insert(_EVENTS_T)
#: Every read of whole events takes ``headers`` undecoded: one damaged row must not
#: stall the log (store/log_headers.py decodes, and rebuilds a damaged value).
_RAW_HEADERS = raw_headers(_EV.headers).label("headers")
# The relay's statements, built once (bench/relay_drain.py): expanding IN
# lists compile once instead of once per batch.
_UNPUBLISHED_HEAD = (
    select(_EV.event_id, _EV.topic, _EV.topic_seq, _EV.body, _RAW_HEADERS, _EV.created_at,
           _EV.lease_owner, _EV.lease_until)
    .where(_EV.published_at.is_(None), _EV.dead_at.is_(None), _EV.event_id > bindparam("after"))
    .order_by(_EV.event_id)
    .limit(bindparam("limit", type_=Integer()))
    .with_for_update()
)
#: Ordered by the partial index's column, under a literal limit: PostgreSQL without
#: statistics takes ``retry_at IS NOT NULL`` for 99.5% of the log and scanned all of
#: it on every lease (tests/store/test_relay_lease_plan.py); more rows: read them all.
RETRYING_PAGE = 1000
_RETRYING_ALL = select(_EV.event_id, _EV.topic, _EV.retry_at).where(_EV.retry_at.is_not(None))
_RETRYING = _RETRYING_ALL.order_by(_EV.retry_at).limit(
    bindparam("page", RETRYING_PAGE, literal_execute=True))
_LEASE = (
    update(_EVENTS_T)
    .where(_EV.event_id.in_(bindparam("ids", expanding=True)), _EV.published_at.is_(None))
    .values(lease_owner=bindparam("owner"), lease_until=bindparam("until"))
)
_MARK_PUBLISHED = (
    update(_EVENTS_T)
    .where(_EV.event_id.in_(bindparam("ids", expanding=True)))
    .values(published_at=bindparam("now"), lease_owner=None, lease_until=None, retry_at=None)
)
#: A subscriber's catch-up read: one topic after a sequence number, served by
#: the unique (topic, topic_seq) index; built once, it runs on every gap.
TOPIC_EVENTS_AFTER = (
    select(
        _EVENTS_T.c.event_id,
        _EVENTS_T.c.topic,
        _EVENTS_T.c.topic_seq,
        _EVENTS_T.c.body,
        _RAW_HEADERS,
    )
    .where(
        _EVENTS_T.c.topic == bindparam("topic"),
        _EVENTS_T.c.topic_seq > bindparam("after"),
        _EVENTS_T.c.topic_seq <= bindparam("upto"),
    )
    .order_by(_EVENTS_T.c.topic_seq)
    .limit(bindparam("limit"))
)
#: The same range, numbers, ids and kinds only: subscriber/verify.py's check, bodies unread.
TOPIC_IDS_AFTER = TOPIC_EVENTS_AFTER.with_only_columns(_EV.topic_seq, _EV.message_id,
                                                       _EV.event_type)
_INSERT_PARTITIONS = insert(cast(Table, PartitionRow.__table__))
INSERT_SET_DONE = insert(cast(Table, SetDoneRow.__table__))


def _chunks(items: Sequence[Any], n: int = _IN_CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


class TableRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, db: str, name: str) -> TableRow | None:
        return self.session.scalars(_TABLE_BY_NAME, {"db": db, "name": name}).one_or_none()

    def all(self) -> list[TableRow]:
        return list(self.session.scalars(select(TableRow).order_by(TableRow.db, TableRow.name)))

    def add(self, row: TableRow) -> TableRow:
        self.session.add(row)
        self.session.flush()
        return row


class PartitionRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def existing(self, table_id: int, specs: Sequence[str]) -> set[str]:
        """The ``specs`` of ``table_id`` present (store/existing_specs.py)."""
        return existing_specs(self.session.connection(), table_id, specs)

    def add_many(self, rows: Sequence[Mapping[str, Any]],
                 json_columns: Mapping[str, JsonColumn] | None = None) -> None:
        insert_many(self.session.connection(), _INSERT_PARTITIONS, rows, json_columns)

    def replace(self, table_id: int, spec: str, values: dict[str, Any]) -> None:
        self.session.execute(update(PartitionRow).where(
            PartitionRow.table_id == table_id, PartitionRow.spec == spec).values(**values))

    def remove(self, table_id: int, spec: str) -> None:
        self.session.execute(delete(PartitionRow).where(PartitionRow.table_id == table_id,
                                                        PartitionRow.spec == spec))

    def get(self, table_id: int, spec: str) -> PartitionRow | None:
        stmt = select(PartitionRow).where(
            PartitionRow.table_id == table_id, PartitionRow.spec == spec
        )
        return self.session.scalars(stmt).one_or_none()

    def retag(self, table_id: int, old: int, new: int) -> int:
        """Move the table's partitions announced under revision ``old`` to ``new``."""
        stmt = (
            update(PartitionRow)
            .where(PartitionRow.table_id == table_id, PartitionRow.revision == old)
            .values(revision=new)
        )
        return int(self.session.execute(stmt).rowcount)  # type: ignore[attr-defined]

    def list(self, table_id: int, max_revision: int | None = None) -> list[PartitionRow]:
        stmt = select(PartitionRow).where(PartitionRow.table_id == table_id)
        if max_revision is not None:
            stmt = stmt.where(PartitionRow.revision <= max_revision)
        return list(self.session.scalars(stmt.order_by(PartitionRow.spec)))


class SequenceRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def lock(self, name: str) -> int:
        """Lock counter ``name`` until commit and return its next value.

        The row lock (the UPDATE's on PostgreSQL; the database lock taken by
        ``BEGIN IMMEDIATE`` on SQLite) is what makes the values gap-free and
        in commit order.
        """
        return self.take(name, 0)

    def advance(self, name: str, next_value: int) -> None:
        self.session.connection().execute(_SEQ_SET, {"counter": name, "value": next_value})

    def take(self, name: str, count: int) -> int:
        """Reserve ``count`` values of counter ``name``; return the first."""
        return reserve(self.session.connection(), name, count)


def reserve(conn: Connection, name: str, count: int) -> int:
    """Reserve ``count`` values of counter ``name`` in ``conn``'s transaction; the first.

    One statement: the UPDATE locks the row until commit and returns the
    new value (a missing counter starts at 1).
    """
    value = conn.execute(_SEQ_RESERVE, {"counter": name, "count": count}).scalar()
    if value is None:
        conn.execute(_SEQ_NEW, {"name": name, "next_value": 1 + count})
        return 1
    return int(value) - count


class EventRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add_many(self, rows: Sequence[Mapping[str, Any]],
                 json_columns: Mapping[str, JsonColumn] | None = None) -> None:
        if rows:
            conn = self.session.connection()
            insert_many(conn, INSERT_EVENTS, rows, json_columns)
            if conn.dialect.name == "postgresql":  # wakes other processes' readers at commit
                conn.exec_driver_sql(NOTIFY_SQL)

    def max_id(self) -> int:
        return int(self.session.scalar(select(func.coalesce(func.max(EventRow.event_id), 0))) or 0)

    def after(self, event_id: int,
              limit: int) -> list[tuple[int, str, int, str, dict[str, str], str]]:
        """Events after ``event_id``, oldest first; damaged headers rebuilt (log_headers)."""
        stmt = (
            select(
                EventRow.event_id,
                EventRow.topic,
                EventRow.topic_seq,
                EventRow.body,
                _RAW_HEADERS,
            )
            .where(EventRow.event_id > event_id)
            .order_by(EventRow.event_id)
            .limit(limit)
        )
        rows = self.session.execute(stmt)
        return [(e, t, s, b, *checked_headers(e, t, b, h)) for e, t, s, b, h in rows]

    def of_table_after(self, table_id: int, event_id: int, limit: int) -> list[Any]:
        """One table's events after ``event_id``, oldest first (the push sink's read)."""
        cols = (EventRow.event_id, EventRow.topic, EventRow.topic_seq, EventRow.body,
                _RAW_HEADERS)
        stmt = (select(*cols).where(EventRow.table_id == table_id, EventRow.event_id > event_id)
                .order_by(EventRow.event_id).limit(limit))
        return [tuple(r) for r in self.session.execute(stmt)]

    def unpublished_head(
        self, limit: int, held_back: dict[str, int] | None = None, after: int = 0
    ) -> list[Row[Any]]:
        """The oldest ``limit`` unpublished live rows, leased or not, locked until commit.

        ``held_back`` maps a topic to the event id behind which its later
        events wait (a refused event being retried): those are left out, so
        they never crowd other topics out of the batch. Dead letters are out.
        ``FOR UPDATE`` makes a second relay on PostgreSQL wait, then see the
        first one's lease (a plain SELECT would let both claim the same rows).
        """
        stmt = _UNPUBLISHED_HEAD
        for topic, event_id in (held_back or {}).items():
            stmt = stmt.where(not_(and_(_EV.topic == topic, _EV.event_id > event_id)))
        # Plain Core rows on the session's connection: loading ORM entities (or
        # even ORM rows) per batch was a third of the relay's drain CPU.
        return list(self.session.connection().execute(stmt, {"after": after, "limit": limit}))

    def retrying(self) -> list[tuple[int, str, float]]:
        """(event id, topic, retry at) of live events refused and waiting for a retry.

        ``retry_at`` is cleared when an event is published, dead-lettered or
        redriven, so this one condition suffices - and keeps the planner on the
        small partial index instead of scanning every pending row.
        """
        rows = list(self.session.connection().execute(_RETRYING))
        if len(rows) >= RETRYING_PAGE:
            rows = list(self.session.connection().execute(_RETRYING_ALL))
        return [(int(r[0]), str(r[1]), float(r[2] or 0.0)) for r in rows]

    def lease(self, ids: Sequence[int], owner: str, until: float) -> None:
        conn = self.session.connection()
        for chunk in _chunks(ids):
            conn.execute(_LEASE, {"ids": list(chunk), "owner": owner, "until": until})

    def mark_published(self, ids: Sequence[int], now: float) -> None:
        conn = self.session.connection()
        for chunk in _chunks(ids):
            conn.execute(_MARK_PUBLISHED, {"ids": list(chunk), "now": now})

    def mark_failed(self, ids: Sequence[int], error: str) -> None:
        for chunk in _chunks(ids):
            self.session.execute(
                update(EventRow)
                .where(EventRow.event_id.in_(chunk))
                .values(
                    attempts=EventRow.attempts + 1,
                    last_error=error[:2000],
                    lease_owner=None,
                    lease_until=None,
                )
            )

    def pending_count(self) -> int:
        stmt = select(func.count()).select_from(EventRow).where(
            EventRow.published_at.is_(None), EventRow.dead_at.is_(None)
        )
        return int(self.session.scalar(stmt) or 0)

    def oldest_pending_created(self) -> float | None:
        stmt = select(func.min(EventRow.created_at)).where(
            EventRow.published_at.is_(None), EventRow.dead_at.is_(None)
        )
        value = self.session.scalar(stmt)
        return float(value) if value is not None else None


#: Built once: constructing the statement and its cache key on every call cost
#: more than the indexed look-up itself (~1 ms of CPU per wait_for_set_done).
COVERING = (
    select(SetDoneRow.body, SetDoneRow.id, SetDoneRow.event_id)
    .where(
        SetDoneRow.table_id == bindparam("table_id"),
        SetDoneRow.spec.in_(bindparam("specs", expanding=True)),
        SetDoneRow.expires_at > bindparam("now"),
    )
    .order_by(SetDoneRow.event_id)
)



_SET_DONE_T = cast(Table, SetDoneRow.__table__)


def covering_sql(count: int, placeholder: str, *, newest: bool = False) -> str:
    """COVERING as driver SQL for ``count`` specs; parameters: table_id, *specs, now;
    rows: body, row id, event id (checked by the readers: store/retained_check.py).
    Sent with exec_driver_sql, it skips compiling the expanding IN on every
    look-up (the profile's largest share after the driver itself). ``newest``:
    only the latest row, a waiter's answer (tests/store/test_hot_read_plans.py).
    """
    t = _SET_DONE_T
    return (
        f"SELECT {t.c.body.name}, {t.c.id.name}, {t.c.event_id.name} FROM {t.name} WHERE "
        f"{t.c.table_id.name} = {placeholder} AND {t.c.spec.name} IN "
        f"({', '.join([placeholder] * count)}) AND {t.c.expires_at.name} > {placeholder} "
        f"ORDER BY {t.c.event_id.name}{' DESC LIMIT 1' if newest else ''}"
    )


class SetDoneRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add_many(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            insert_many(self.session.connection(), INSERT_SET_DONE, rows)

    def covering(self, table: int, specs: Sequence[str], now: float) -> list[tuple[str, int, int]]:
        """(body, row id, event id) of unexpired rows of table id ``table``, spec in ``specs``."""
        params = {"table_id": table, "specs": list(specs), "now": now}
        return [(r[0], r[1], r[2]) for r in self.session.execute(COVERING, params)]

    def purge_batch(self, now: float, batch_size: int) -> int:
        """Delete at most ``batch_size`` expired rows, oldest first; return how many went.

        One statement: shipping the ids to Python and back as a 5,000-element
        IN list made PostgreSQL purges ~3x slower (bench/core_purge.py).
        """
        # No session sync: with a subquery SQLAlchemy would otherwise add
        # RETURNING and ship every deleted id back.
        c = _SET_DONE_T.c
        expired = c.expires_at <= now
        result = self.session.execute(
            delete(SetDoneRow)
            .where(oldest_first(self.session, c.id, c.expires_at, expired, batch_size), expired)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]


__all__ = [
    "INSERT_EVENTS",
    "INSERT_SET_DONE",
    "TOPIC_EVENTS_AFTER",
    "TOPIC_IDS_AFTER",
    "EventRepository",
    "PartitionRepository",
    "SequenceRepository",
    "SetDoneRepository",
    "TableRepository",
]
