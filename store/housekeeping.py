"""Retention of everything that grows besides set-done rows (docs/reliability.md#retention).

Each purge deletes oldest first in short batches (one transaction each), as
the set-done purge does (:func:`in_batches`), so writers get in between.

* the event log: published (or discarded) events older than the log's
  horizon, at or below every consumer cursor, never the last event of a
  topic (subscribers compare topic sequences with it), never one still
  waiting for its relay or held as a dead letter;
* Spark commit records, expectation verdicts, idle consumer cursors and
  expired idempotency keys, each after its own retention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from partition_notify.store.cursor_schema import CursorRow
from partition_notify.store.schema import EventRow, SequenceRow
from partition_notify.store.uow import Access, UnitOfWork, affected_rows
from sqlalchemy import (
    ColumnElement,
    Float,
    Table,
    TableClause,
    and_,
    column,
    delete,
    exists,
    func,
    or_,
    select,
    table,
    update,
)
from sqlalchemy.orm import aliased

#: pn_sequence row (migration 0008): event ids below it may be purged.
PURGED_BELOW = "log-purged-below"
#: Tables whose row counts ``serve`` exports (pn_store_rows{table=...}).
COUNTED_TABLES = (
    "pn_events", "pn_set_done", "pn_partitions", "pn_spark_commits",
    "pn_expectation_checks", "pn_consumer_cursors", "pn_idempotency",
)


def in_batches(
    access: Access,
    delete_batch: Callable[[UnitOfWork, int], int],
    *,
    batch_size: int,
    max_batches: int | None = None,
    between_batches: Callable[[], None] | None = None,
) -> int:
    """Run ``delete_batch(uow, batch_size)`` in its own transaction until a short batch."""
    total = batches = 0
    while max_batches is None or batches < max_batches:
        with access.uow(write=True) as uow:
            n = delete_batch(uow, batch_size)
        total += n
        batches += 1
        if n < batch_size:
            break
        if between_batches is not None:
            between_batches()
    return total


# Feature-owned tables (Spark commits, deadlines, HTTP), named here by the
# columns a purge reads: the store layer does not import the features' models.
SPARK_COMMITS = table("pn_spark_commits", column("job_id"), column("processed_at", Float))
EXPECTATION_CHECKS = table("pn_expectation_checks", column("id"),
                           column("checked_at", Float), column("deadline_at", Float))
IDEMPOTENCY = table("pn_idempotency", column("id"), column("expires_at", Float))
_EVENTS = cast(Table, EventRow.__table__)
_CURSORS = cast(Table, CursorRow.__table__)


def _oldest(pk: ColumnElement[object], order: ColumnElement[float],
            where: ColumnElement[bool], n: int) -> ColumnElement[bool]:
    """``pk IN (the n oldest rows matching where)``: one statement, no ids shipped."""
    return pk.in_(select(pk).where(where).order_by(order).limit(n).scalar_subquery())


@dataclass(frozen=True, slots=True)
class Horizons:
    """Ages (seconds) past which each kind of row may go."""

    event_log: float
    spark_commits: float
    expectation_checks: float
    cursors: float
    #: Deadlines the checker still looks at (PN_DEADLINE_LOOKBACK_SECONDS): kept.
    deadline_lookback: float = 0.0


@dataclass(slots=True)
class Purged:
    events: int = 0
    spark_commits: int = 0
    expectation_checks: int = 0
    cursors: int = 0
    idempotency: int = 0

    def total(self) -> int:
        return (self.events + self.spark_commits + self.expectation_checks + self.cursors
                + self.idempotency)


class Housekeeping:
    """The purges; each batch is one unit of work."""

    def __init__(self, access: Access) -> None:
        self._db = access

    def purge(self, horizons: Horizons, *, batch_size: int,
              between_batches: Callable[[], None] | None = None) -> Purged:
        now = self._db.clock()

        def batched(t: TableClause, pk: str, order: str, where: ColumnElement[bool]) -> int:
            return in_batches(
                self._db, lambda uow, n: _delete(uow, t, _oldest(t.c[pk], t.c[order], where, n)),
                batch_size=batch_size, between_batches=between_batches)

        out = Purged()
        # Idle cursors first: a consumer gone for good must not hold the log.
        out.cursors = self._purge_cursors(now - horizons.cursors, now)
        out.events = self.purge_events(now - horizons.event_log, batch_size=batch_size,
                                       between_batches=between_batches)
        sc, ec, ik = SPARK_COMMITS.c, EXPECTATION_CHECKS.c, IDEMPOTENCY.c
        out.spark_commits = batched(SPARK_COMMITS, "job_id", "processed_at",
                                    sc.processed_at < now - horizons.spark_commits)
        out.expectation_checks = batched(
            EXPECTATION_CHECKS, "id", "checked_at",
            and_(ec.checked_at < now - horizons.expectation_checks,
                 ec.deadline_at < now - horizons.deadline_lookback))
        out.idempotency = batched(IDEMPOTENCY, "id", "expires_at", ik.expires_at <= now)
        return out

    def purge_events(self, before: float, *, batch_size: int,
                     between_batches: Callable[[], None] | None = None) -> int:
        """Delete purgeable events created before ``before``; see the module docstring."""
        with self._db.uow(write=True) as uow:
            floor = uow.session.scalar(select(func.min(CursorRow.event_id)))
            floor = 2**62 if floor is None else int(floor)
            later = aliased(EventRow)
            where = and_(
                EventRow.created_at < before,
                EventRow.event_id <= floor,
                or_(EventRow.published_at.is_not(None), EventRow.discarded_at.is_not(None)),
                exists().where(later.topic == EventRow.topic, later.topic_seq > EventRow.topic_seq),
            )
            top = uow.session.scalar(select(func.max(EventRow.event_id)).where(where))
            if top is None:
                return 0
            # Marked before anything goes: a resume below the mark is answered 410.
            uow.session.execute(update(SequenceRow).where(
                SequenceRow.name == PURGED_BELOW, SequenceRow.next_value <= top
            ).values(next_value=int(top) + 1))
        return in_batches(
            self._db, lambda uow, n: _delete(uow, _EVENTS, _oldest(
                _EVENTS.c.event_id, _EVENTS.c.created_at,
                and_(where, EventRow.event_id <= top), n)),
            batch_size=batch_size, between_batches=between_batches)

    def _purge_cursors(self, idle_since: float, now: float) -> int:
        """Cursors not moved since ``idle_since`` and not leased (few rows: one statement)."""
        with self._db.uow(write=True) as uow:
            return _delete(uow, _CURSORS, and_(
                CursorRow.updated_at < idle_since,
                or_(CursorRow.lease_until.is_(None), CursorRow.lease_until < now),
            ))

    def purged_below(self) -> int:
        """Event ids below this may have been purged (1: nothing was)."""
        with self._db.uow() as uow:
            value = uow.session.scalar(
                select(SequenceRow.next_value).where(SequenceRow.name == PURGED_BELOW))
        return int(value) if value is not None else 1

    def row_counts(self) -> dict[str, int]:
        with self._db.uow() as uow:
            conn = uow.session.connection()
            return {t: int(conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() or 0)
                    for t in COUNTED_TABLES}


def _delete(uow: UnitOfWork, t: TableClause, where: ColumnElement[bool]) -> int:
    """DELETE FROM ``t`` ``where`` (Core: no ORM session sync)."""
    result = uow.session.execute(delete(t).where(where))
    return affected_rows(result)
