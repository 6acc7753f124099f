"""Expectations and their per-instance verdicts, over the SQL store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select

from partition_notify.contract.messages import PARTITION_DONE
from partition_notify.core.errors import ConflictError, NotFoundError
from partition_notify.deadlines.repositories import (
    ExpectationCheckRepository,
    ExpectationRepository,
)
from partition_notify.deadlines.schema import ExpectationCheckRow, ExpectationRow
from partition_notify.store.housekeeping import BetweenBatches, in_batches
from partition_notify.store.schema import EventRow
from partition_notify.store.uow import UnitOfWork

if TYPE_CHECKING:
    from partition_notify.store.provider import Store, TableInfo

ON_TIME, DONE_LATE, LATE = "on_time", "done_late", "late"


@dataclass(frozen=True, slots=True)
class ExpectationInfo:
    id: int
    table_id: int
    name: str
    spec_template: str
    cron: str
    timezone: str
    deadline: dict[str, object]
    created_at: float

    @classmethod
    def of(cls, row: ExpectationRow) -> ExpectationInfo:
        return cls(row.id, row.table_id, row.name, row.spec_template, row.cron, row.timezone,
                   dict(row.deadline), row.created_at)


@dataclass(frozen=True, slots=True)
class CheckInfo:
    id: int
    expectation_id: int
    logical_date: str
    spec: str
    deadline_at: float
    outcome: str
    late_event_id: int | None
    recovered_event_id: int | None
    checked_at: float
    recovered_at: float | None

    @classmethod
    def of(cls, r: ExpectationCheckRow) -> CheckInfo:
        return cls(r.id, r.expectation_id, r.logical_date, r.spec, r.deadline_at, r.outcome,
                   r.late_event_id, r.recovered_event_id, r.checked_at, r.recovered_at)


class AlreadyDecided(Exception):
    """Raised inside a transaction: another process decided this instance; roll back."""


class DeadlineStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=write)

    def purge_checks(self, checked_before: float, deadline_before: float, *, batch_size: int,
                     between_batches: BetweenBatches | None = None) -> int:
        """Delete verdicts checked before ``checked_before`` (``PN_EXPECTATION_CHECK_RETENTION_
        SECONDS``) whose deadline is before ``deadline_before`` (the look-back), oldest first:
        an instance the checker still looks at keeps its verdict, so it is not decided twice."""
        return in_batches(
            lambda: self._uow(write=True),
            lambda uow, n: ExpectationCheckRepository(uow.session).purge_batch(
                checked_before, deadline_before, n),
            batch_size=batch_size, between_batches=between_batches)

    # -- expectations ---------------------------------------------------------
    def add(self, table: TableInfo, name: str, template: str, cron: str, tz: str,
            deadline: dict[str, object]) -> ExpectationInfo:
        with self._uow(write=True) as uow:
            repo = ExpectationRepository(uow.session)
            if repo.get(table.id, name) is not None:
                raise ConflictError(
                    f"table {table.qualified} has an expectation named {name!r} already "
                    "(remove it first)"
                )
            row = ExpectationRow(table_id=table.id, name=name, spec_template=template, cron=cron,
                                 timezone=tz, deadline=deadline, created_at=self.store.clock())
            repo.add(row)
            return ExpectationInfo.of(row)

    def expectations(self, table_ids: Sequence[int] | None = None) -> list[ExpectationInfo]:
        with self._uow() as uow:
            rows = ExpectationRepository(uow.session).all(table_ids)
            return [ExpectationInfo.of(r) for r in rows]

    def get(self, table: TableInfo, name: str) -> ExpectationInfo:
        with self._uow() as uow:
            row = ExpectationRepository(uow.session).get(table.id, name)
            if row is None:
                raise NotFoundError(f"table {table.qualified} has no expectation named {name!r}")
            return ExpectationInfo.of(row)

    def remove(self, table: TableInfo, name: str) -> ExpectationInfo:
        with self._uow(write=True) as uow:
            repo = ExpectationRepository(uow.session)
            row = repo.get(table.id, name)
            if row is None:
                raise NotFoundError(f"table {table.qualified} has no expectation named {name!r}")
            info = ExpectationInfo.of(row)
            uow.session.query(ExpectationCheckRow).filter(
                ExpectationCheckRow.expectation_id == row.id
            ).delete(synchronize_session=False)
            repo.remove(row)
            return info

    # -- verdicts -------------------------------------------------------------
    def decided(self, expectation_id: int, since_deadline: float) -> set[str]:
        with self._uow() as uow:
            return ExpectationCheckRepository(uow.session).checked_dates(
                expectation_id, since_deadline
            )

    def record(self, uow: UnitOfWork, exp_id: int, logical_date: str, spec: str,
               deadline_at: float, outcome: str, late_event_id: int | None = None) -> None:
        """Insert the verdict inside ``uow``; :class:`AlreadyDecided` when one exists."""
        repo = ExpectationCheckRepository(uow.session)
        if repo.get(exp_id, logical_date) is not None:
            raise AlreadyDecided(logical_date)
        repo.add(ExpectationCheckRow(
            expectation_id=exp_id, logical_date=logical_date, spec=spec, deadline_at=deadline_at,
            outcome=outcome, late_event_id=late_event_id, checked_at=self.store.clock(),
        ))

    def record_alone(self, exp_id: int, logical_date: str, spec: str, deadline_at: float,
                     outcome: str) -> bool:
        """A verdict that publishes nothing; False when another process was first."""
        try:
            with self._uow(write=True) as uow:
                uow.sequences.lock("event")  # the same order as the late path
                self.record(uow, exp_id, logical_date, spec, deadline_at, outcome)
        except (AlreadyDecided, ConflictError):
            return False
        return True

    def open_late(self) -> list[CheckInfo]:
        with self._uow() as uow:
            return [CheckInfo.of(r) for r in ExpectationCheckRepository(uow.session).open_late()]

    def late_by_table(self) -> dict[str, int]:
        """``db.table`` -> instances late now (the serve job's ``pn_deadline_late_open``)."""
        with self._uow() as uow:
            return ExpectationCheckRepository(uow.session).late_by_table()

    def mark_recovered(self, uow: UnitOfWork, check_id: int, event_id: int) -> None:
        row = uow.session.get(ExpectationCheckRow, check_id)
        if row is None or row.recovered_at is not None:
            raise AlreadyDecided(str(check_id))
        row.recovered_at = self.store.clock()
        row.recovered_event_id = event_id
        uow.session.flush()

    def recent(self, expectation_ids: Sequence[int], limit: int = 50) -> list[CheckInfo]:
        if not expectation_ids:
            return []
        with self._uow() as uow:
            rows = ExpectationCheckRepository(uow.session).recent(expectation_ids, limit)
            return [CheckInfo.of(r) for r in rows]

    @staticmethod
    def covered_in(uow: UnitOfWork, table_id: int, specs: Sequence[str],
                   now: float) -> list[tuple[str, int, int]]:
        """Covering set-done rows (body, row id, event id), read inside a writer's
        transaction (under its lock); the caller checks them (store/retained_check.py)."""
        return uow.set_done.covering(table_id, specs, now)

    def set_done_logged(self, table_id: int, specs: Sequence[str], after: int = 0) -> list[str]:
        """Bodies of the table's logged set-done events for one of ``specs``, oldest first.

        The event log, not the retention table: a set-done whose retention ran
        out before the deadline still covered its spec. ``after`` (an event id)
        bounds the read to what came later (a recovery looks after its late event).
        """
        wanted = set(specs)
        stmt = (
            select(EventRow.body)
            .where(EventRow.event_id > after, EventRow.table_id == table_id,
                   EventRow.event_type == PARTITION_DONE)
            .order_by(EventRow.event_id)
        )
        with self._uow() as uow:
            return [b for b in uow.session.scalars(stmt)
                    if json.loads(b).get("partitionSpecString") in wanted]
