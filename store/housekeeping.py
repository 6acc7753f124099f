"""Retention of the shared log besides set-done rows (docs/reliability.md#retention).

Each purge deletes oldest first in short batches (one transaction each), as
the set-done purge does (:func:`in_batches`), so writers get in between.

The event log's oldest are read in ``event_id`` order (its primary key), up to the
last event created before the horizon, found by a binary search of a few primary-key
look-ups (:func:`created_before_bound`). ``created_at`` needs no index of its own
(migration 0023): every append wrote a page of one (bench/durable_profile.py pages).
Ids are taken under the write lock and the clock is read after, in the same
transaction, so ``created_at`` follows ``event_id`` while the clock does not step
back. If it does (or writers' clocks differ), each row is still checked against the
horizon: no event younger than it is purged; older ones past the bound wait for a
later run (for at most the step).

* the event log: published (or discarded) events older than the log's
  horizon, at or below every consumer cursor, never the last event of a
  topic (subscribers compare topic sequences with it), never one still
  waiting for its relay or held as a dead letter (the relay's, or an Airflow
  push letter nobody discarded: its redrive reads the event), never one a completeness
  rule has not evaluated yet (for at most the cursor retention);
* idle consumer cursors.

The features purge their own tables with the helpers here (Spark commits in
``writers``, verdicts in ``deadlines``, idempotency keys in ``http``): the
store layer never imports them; ``serve`` runs them all in one job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import cast

from partition_notify.store.cursor_schema import CursorRow
from partition_notify.store.purge_order import oldest_first
from partition_notify.store.schema import EventRow, SequenceRow
from partition_notify.store.uow import Access, UnitOfWork, affected_rows
from sqlalchemy import (
    ColumnElement,
    Table,
    TableClause,
    and_,
    bindparam,
    column,
    delete,
    exists,
    func,
    or_,
    select,
    table,
    update,
)
from sqlalchemy.orm import Session, aliased

from partition_notify.core.errors import ValidationError

#: pn_sequence row (migration 0008): event ids below it may be purged.
PURGED_BELOW = "log-purged-below"
#: The shared log's tables whose sizes ``serve`` exports (pn_store_rows); the
#: features add theirs in partition_notify/serve/housekeeping.py.
LOG_TABLES = ("pn_events", "pn_set_done", "pn_partitions", "pn_consumer_cursors")
_EVENTS = cast(Table, EventRow.__table__)
_CURSORS = cast(Table, CursorRow.__table__)
#: pn_push_dead_letters (store/push_letters.py, which imports this module): the columns
#: the event purge reads.
_PUSH_LETTERS = table("pn_push_dead_letters", column("event_id"), column("discarded_at"))
_TABLE_NAME = re.compile(r"pn_[a-z_]{1,60}")
#: Past every real event id: "no cursor holds the log back".
_NO_FLOOR = 2**62


#: Called between two batches of a purge (SQLite: the pause that lets writers
#: in). False ends the purge there: ``serve`` is stopping and the rest is the
#: next run's; anything else goes on.
BetweenBatches = Callable[[], bool | None]


def in_batches(
    write_uow: Callable[[], UnitOfWork],
    delete_batch: Callable[[UnitOfWork, int], int],
    *,
    batch_size: int,
    max_batches: int | None = None,
    between_batches: BetweenBatches | None = None,
) -> int:
    """Run ``delete_batch(uow, batch_size)`` in its own write unit of work
    (``write_uow()``) until a batch deletes fewer than ``batch_size`` rows, or
    ``between_batches`` returns False."""
    total = batches = 0
    while max_batches is None or batches < max_batches:
        with write_uow() as uow:
            n = delete_batch(uow, batch_size)
        total += n
        batches += 1
        if n < batch_size:
            break
        if between_batches is not None and between_batches() is False:
            break
    return total


def _purge_marked(session: Session, where: ColumnElement[bool], n: int) -> int:
    """Delete the ``n`` oldest events matching ``where`` and raise the 410 mark past
    them, in one transaction: no snapshot shows an event gone below an old mark.

    The mark comes from the batch's own ids (RETURNING) because the newest purgeable
    id, asked for up front, cost a read of the whole retained log every run.
    """
    gone = session.execute(delete(_EVENTS).where(oldest_first(
        session, _EVENTS.c.event_id, _EVENTS.c.event_id, where, n,
    )).returning(_EVENTS.c.event_id)).scalars().all()
    if gone:
        top = max(gone)
        session.execute(update(SequenceRow).where(
            SequenceRow.name == PURGED_BELOW, SequenceRow.next_value <= top
        ).values(next_value=int(top) + 1))
    return len(gone)


def created_before_bound(session: Session, before: float) -> int | None:
    """The last event id, by a binary search on the primary key, whose event was created
    before ``before``; None when the oldest event is not (or the log is empty).

    Exact while ``created_at`` follows ``event_id`` (see the module docstring); else a
    bound on the ids the purge reads, never on what it may delete. About 2 log2(ids)
    one-row look-ups: the first row at or after an id, by the primary key.
    """
    ids = _EVENTS.c.event_id
    # Two statements: SQLite answers a lone min() or max() from the primary key's
    # ends, both in one statement by reading a whole index.
    lo = session.scalar(select(func.min(ids)))
    hi = session.scalar(select(func.max(ids)))
    if lo is None or hi is None:
        return None
    first_at = select(_EVENTS.c.event_id, _EVENTS.c.created_at).where(
        ids >= bindparam("at")).order_by(ids).limit(1)
    row = session.execute(first_at, {"at": lo}).one()
    if row[1] >= before:
        return None
    lo, hi = int(lo), int(hi)
    while lo < hi:  # lo was created before; nothing after hi exists
        mid = (lo + hi + 1) // 2
        found, created = session.execute(first_at, {"at": mid}).one()
        if created < before:
            lo = int(found)  # >= mid > lo
        else:
            hi = mid - 1
    return lo


def delete_where(session: Session, t: TableClause, where: ColumnElement[bool]) -> int:
    """DELETE FROM ``t`` ``where`` (Core: no ORM session sync); rows deleted."""
    return affected_rows(session.execute(delete(t).where(where)))


class Housekeeping:
    """The log's purges; each batch is one unit of work."""

    def __init__(self, access: Access) -> None:
        self._db = access

    def _write(self) -> UnitOfWork:
        return self._db.uow(write=True)

    def purge_events(self, before: float, *, batch_size: int,
                     between_batches: BetweenBatches | None = None,
                     held_from: int | None = None, hold_until: float = 0.0) -> int:
        """Delete purgeable events created before ``before``; see the module docstring.

        ``held_from``: a feature's own cursor (the completeness rules' lowest,
        which the store cannot read itself): events after it stay too, unless
        created before ``hold_until`` (a cursor stuck that long holds no more).
        """
        with self._db.uow() as uow:
            floor = uow.session.scalar(select(func.min(CursorRow.event_id)))
            bound = created_before_bound(uow.session, before)
        if bound is None:
            return 0
        floor = _NO_FLOOR if floor is None else int(floor)
        held = _NO_FLOOR if held_from is None else held_from
        later = aliased(EventRow)
        where = and_(
            EventRow.event_id <= bound,
            EventRow.created_at < before,
            EventRow.event_id <= floor,
            or_(EventRow.event_id <= held, EventRow.created_at < hold_until),
            or_(EventRow.published_at.is_not(None), EventRow.discarded_at.is_not(None)),
            exists().where(later.topic == EventRow.topic, later.topic_seq > EventRow.topic_seq),
            ~exists().where(_PUSH_LETTERS.c.event_id == EventRow.event_id,
                            _PUSH_LETTERS.c.discarded_at.is_(None)),
        )
        return in_batches(self._write, lambda uow, n: _purge_marked(uow.session, where, n),
                          batch_size=batch_size, between_batches=between_batches)

    def purge_cursors(self, idle_since: float) -> int:
        """Cursors not moved since ``idle_since`` and not leased (few rows: one statement).

        Run before :meth:`purge_events`: a consumer gone for good must not hold the log.
        """
        now = self._db.clock()
        with self._write() as uow:
            return delete_where(uow.session, _CURSORS, and_(
                CursorRow.updated_at < idle_since,
                or_(CursorRow.lease_until.is_(None), CursorRow.lease_until < now),
            ))

    def purged_below(self) -> int:
        """Event ids below this may have been purged (1: nothing was)."""
        with self._db.uow() as uow:
            value = uow.session.scalar(
                select(SequenceRow.next_value).where(SequenceRow.name == PURGED_BELOW))
        return int(value) if value is not None else 1

    def row_counts(self, tables: Sequence[str] = LOG_TABLES) -> dict[str, int]:
        """Rows of each of ``tables`` (our ``pn_*`` tables: the names go into the SQL)."""
        for t in tables:
            if not _TABLE_NAME.fullmatch(t):
                raise ValidationError(f"table {t!r}: expected one of ours, pn_[a-z_]+")
        with self._db.uow() as uow:
            conn = uow.session.connection()
            return {t: int(conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() or 0)
                    for t in tables}
