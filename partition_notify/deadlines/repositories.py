"""Repositories of the deadline tables; each takes a Session, none commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from sqlalchemy import Table, and_, func, select
from sqlalchemy.orm import Session

from partition_notify.deadlines.schema import ExpectationCheckRow, ExpectationRow
from partition_notify.store.housekeeping import delete_where
from partition_notify.store.purge_order import oldest_first
from partition_notify.store.schema import TableRow

_CHECKS = cast(Table, ExpectationCheckRow.__table__)


class ExpectationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, table_id: int, name: str) -> ExpectationRow | None:
        stmt = select(ExpectationRow).where(
            ExpectationRow.table_id == table_id, ExpectationRow.name == name
        )
        return self.session.scalars(stmt).one_or_none()

    def all(self, table_ids: Sequence[int] | None = None) -> list[ExpectationRow]:
        stmt = select(ExpectationRow)
        if table_ids is not None:
            stmt = stmt.where(ExpectationRow.table_id.in_(list(table_ids)))
        return list(self.session.scalars(stmt.order_by(ExpectationRow.id)))

    def add(self, row: ExpectationRow) -> None:
        self.session.add(row)
        self.session.flush()

    def remove(self, row: ExpectationRow) -> None:
        self.session.delete(row)
        self.session.flush()


class ExpectationCheckRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, expectation_id: int, logical_date: str) -> ExpectationCheckRow | None:
        stmt = select(ExpectationCheckRow).where(
            ExpectationCheckRow.expectation_id == expectation_id,
            ExpectationCheckRow.logical_date == logical_date,
        )
        return self.session.scalars(stmt).one_or_none()

    def checked_dates(self, expectation_id: int, since_deadline: float) -> set[str]:
        stmt = select(ExpectationCheckRow.logical_date).where(
            ExpectationCheckRow.expectation_id == expectation_id,
            ExpectationCheckRow.deadline_at >= since_deadline,
        )
        return set(self.session.scalars(stmt))

    def open_late(self) -> list[ExpectationCheckRow]:
        stmt = select(ExpectationCheckRow).where(
            ExpectationCheckRow.outcome == "late", ExpectationCheckRow.recovered_at.is_(None)
        )
        return list(self.session.scalars(stmt.order_by(ExpectationCheckRow.id)))

    def late_by_table(self) -> dict[str, int]:
        """``db.table`` -> instances late now, for the tables that have any."""
        stmt = (
            select(TableRow.db, TableRow.name, func.count())
            .join(ExpectationRow, ExpectationRow.table_id == TableRow.id)
            .join(ExpectationCheckRow, ExpectationCheckRow.expectation_id == ExpectationRow.id)
            .where(ExpectationCheckRow.outcome == "late",
                   ExpectationCheckRow.recovered_at.is_(None))
            .group_by(TableRow.db, TableRow.name)
        )
        return {f"{db}.{name}": int(n) for db, name, n in self.session.execute(stmt).tuples()}

    def recent(self, expectation_ids: Sequence[int], limit: int) -> list[ExpectationCheckRow]:
        stmt = (
            select(ExpectationCheckRow)
            .where(ExpectationCheckRow.expectation_id.in_(list(expectation_ids)))
            .order_by(ExpectationCheckRow.deadline_at.desc())
            .limit(limit)
        )
        return list(self.session.scalars(stmt))

    def add(self, row: ExpectationCheckRow) -> None:
        self.session.add(row)
        self.session.flush()

    def purge_batch(self, checked_before: float, deadline_before: float, n: int) -> int:
        """Delete the ``n`` oldest verdicts checked before ``checked_before`` whose
        deadline is before ``deadline_before`` (the checker no longer looks at them)."""
        c = _CHECKS.c
        return delete_where(self.session, _CHECKS, oldest_first(
            self.session, c.id, c.checked_at,
            and_(c.checked_at < checked_before, c.deadline_at < deadline_before), n))
