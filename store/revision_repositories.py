"""Repositories of the revision and SNAPSHOT-dataset tables.

Like :mod:`store.repositories`: each takes a Session and never commits.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from store.revision_schema import (
    ABORTED,
    RUNNING,
    RevisionFamilyRow,
    RevisionTableRow,
    RevisionTxnRow,
    SnapshotDatasetRow,
    SnapshotVersionRow,
)
from store.uow import UnitOfWork


class RevisionRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def lock_table(self, table: str, now: float, *, create: bool) -> int | None:
        """Lock ``table``'s counter row until commit; return its last revision.

        Every state change of a table's transactions takes this lock first, so
        they are serialised per table (``FOR UPDATE`` on PostgreSQL; SQLite's
        ``BEGIN IMMEDIATE`` already holds the database write lock). With
        ``create`` a missing row is created (race-free); otherwise None.
        """
        if create:
            dialect = self.session.get_bind().dialect.name
            ins = postgresql.insert if dialect == "postgresql" else sqlite.insert
            self.session.execute(
                ins(RevisionTableRow)
                .values(table_name=table, last_revision=0, created_at=now)
                .on_conflict_do_nothing(index_elements=["table_name"])
            )
        stmt = (
            select(RevisionTableRow.last_revision)
            .where(RevisionTableRow.table_name == table)
            .with_for_update()
        )
        value = self.session.scalar(stmt)
        return None if value is None else int(value)

    def last_revision(self, table: str) -> int | None:
        stmt = select(RevisionTableRow.last_revision).where(RevisionTableRow.table_name == table)
        value = self.session.scalar(stmt)
        return None if value is None else int(value)

    def set_last(self, table: str, revision: int) -> None:
        self.session.execute(
            update(RevisionTableRow)
            .where(RevisionTableRow.table_name == table)
            .values(last_revision=revision)
        )

    def families(self, table: str) -> list[str]:
        stmt = (
            select(RevisionFamilyRow.family)
            .where(RevisionFamilyRow.table_name == table)
            .order_by(RevisionFamilyRow.family)
        )
        return list(self.session.scalars(stmt))

    def add_families(self, table: str, families: Sequence[str], revision: int) -> None:
        """Record families not seen before (caller holds the table lock)."""
        known = set(self.families(table))
        rows = [
            {"table_name": table, "family": f, "first_revision": revision}
            for f in families
            if f not in known
        ]
        if rows:
            self.session.execute(insert(RevisionFamilyRow), rows)

    def add_txn(self, row: RevisionTxnRow) -> None:
        self.session.add(row)
        self.session.flush()

    def get_txn(self, table: str, revision: int) -> RevisionTxnRow | None:
        stmt = select(RevisionTxnRow).where(
            RevisionTxnRow.table_name == table, RevisionTxnRow.revision == revision
        )
        return self.session.scalars(stmt).one_or_none()

    def running(self, table: str) -> list[RevisionTxnRow]:
        stmt = (
            select(RevisionTxnRow)
            .where(RevisionTxnRow.table_name == table, RevisionTxnRow.state == RUNNING)
            .order_by(RevisionTxnRow.revision)
        )
        return list(self.session.scalars(stmt))

    def aborted_revisions(self, table: str, up_to: int | None = None) -> list[int]:
        stmt = select(RevisionTxnRow.revision).where(
            RevisionTxnRow.table_name == table, RevisionTxnRow.state == ABORTED
        )
        if up_to is not None:
            stmt = stmt.where(RevisionTxnRow.revision <= up_to)
        return [int(r) for r in self.session.scalars(stmt.order_by(RevisionTxnRow.revision))]

    def expire_running(self, table: str, now: float) -> list[int]:
        """Mark running transactions whose keep-alive ran out as aborted; return them."""
        stmt = select(RevisionTxnRow.revision).where(
            RevisionTxnRow.table_name == table,
            RevisionTxnRow.state == RUNNING,
            RevisionTxnRow.expires_at <= now,
        )
        revisions = [int(r) for r in self.session.scalars(stmt)]
        if revisions:
            self.session.execute(
                update(RevisionTxnRow)
                .where(RevisionTxnRow.table_name == table, RevisionTxnRow.revision.in_(revisions))
                .values(state=ABORTED, reason="expired", ended_at=now)
            )
        return revisions

    def end_txn(self, table: str, revision: int) -> None:
        """Forget a committed transaction: committed revisions keep no row."""
        self.session.execute(
            delete(RevisionTxnRow).where(
                RevisionTxnRow.table_name == table, RevisionTxnRow.revision == revision
            )
        )

    def tables(self) -> list[str]:
        stmt = select(RevisionTableRow.table_name).order_by(RevisionTableRow.table_name)
        return list(self.session.scalars(stmt))


class SnapshotDatasetRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, name: str, *, lock: bool = False) -> SnapshotDatasetRow | None:
        stmt = select(SnapshotDatasetRow).where(SnapshotDatasetRow.name == name)
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalars(stmt).one_or_none()

    def add(self, row: SnapshotDatasetRow) -> SnapshotDatasetRow:
        self.session.add(row)
        self.session.flush()
        return row

    def names(self) -> list[str]:
        stmt = select(SnapshotDatasetRow.name).order_by(SnapshotDatasetRow.name)
        return list(self.session.scalars(stmt))

    def add_version(self, row: SnapshotVersionRow) -> None:
        self.session.add(row)
        self.session.flush()

    def version(self, name: str, version: int) -> SnapshotVersionRow | None:
        stmt = select(SnapshotVersionRow).where(
            SnapshotVersionRow.dataset == name, SnapshotVersionRow.version == version
        )
        return self.session.scalars(stmt).one_or_none()

    def versions(self, name: str) -> list[SnapshotVersionRow]:
        stmt = (
            select(SnapshotVersionRow)
            .where(SnapshotVersionRow.dataset == name)
            .order_by(SnapshotVersionRow.version.desc())
        )
        return list(self.session.scalars(stmt))

    def delete_version(self, name: str, version: int) -> None:
        self.session.execute(
            delete(SnapshotVersionRow).where(
                SnapshotVersionRow.dataset == name, SnapshotVersionRow.version == version
            )
        )


class RevisionUnitOfWork(UnitOfWork):
    """The store's unit of work plus the revision and dataset repositories."""

    def __enter__(self) -> RevisionUnitOfWork:
        super().__enter__()
        self.revisions = RevisionRepository(self.session)
        self.datasets = SnapshotDatasetRepository(self.session)
        return self


__all__ = ["RevisionRepository", "RevisionUnitOfWork", "SnapshotDatasetRepository"]
