"""Repositories of ``pn_revision_files`` and ``pn_revision_replacements`` (migration 0004).

Like :mod:`store.repositories`: each takes a Session and never commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import exists, insert, select, update
from sqlalchemy.orm import Session

from store.revision_file_schema import RevisionFileRow, RevisionReplacementRow
from store.revision_repositories import RevisionUnitOfWork

_IN_CHUNK = 500  # keep IN-lists well under SQLite's variable limit


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


class RevisionFileRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def has_write(self, table: str, write_id: str) -> bool:
        stmt = select(
            exists().where(
                RevisionFileRow.table_name == table, RevisionFileRow.write_id == write_id
            )
        )
        return bool(self.session.scalar(stmt))

    def add_many(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.session.execute(insert(RevisionFileRow), rows)

    def retire(self, table: str, partitions: Sequence[str], write_id: str, retired_to: str) -> None:
        """Files in ``partitions`` (other than ``write_id``'s own) now lie under ``retired_to``."""
        for chunk in _chunks(partitions):
            self.session.execute(
                update(RevisionFileRow)
                .where(
                    RevisionFileRow.table_name == table,
                    RevisionFileRow.partition.in_(chunk),
                    RevisionFileRow.retired_to.is_(None),
                    RevisionFileRow.write_id != write_id,
                )
                .values(retired_to=retired_to)
            )

    def retag(self, table: str, old: int, new: int) -> None:
        self.session.execute(
            update(RevisionFileRow)
            .where(RevisionFileRow.table_name == table, RevisionFileRow.revision == old)
            .values(revision=new)
        )

    def up_to(self, table: str, max_revision: int) -> list[RevisionFileRow]:
        stmt = select(RevisionFileRow).where(
            RevisionFileRow.table_name == table, RevisionFileRow.revision <= max_revision
        )
        return list(self.session.scalars(stmt.order_by(RevisionFileRow.id)))


class RevisionReplacementRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def has_write(self, table: str, write_id: str) -> bool:
        stmt = select(
            exists().where(
                RevisionReplacementRow.table_name == table,
                RevisionReplacementRow.write_id == write_id,
            )
        )
        return bool(self.session.scalar(stmt))

    def add_many(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.session.execute(insert(RevisionReplacementRow), rows)

    def retag(self, table: str, old: int, new: int) -> None:
        self.session.execute(
            update(RevisionReplacementRow)
            .where(
                RevisionReplacementRow.table_name == table,
                RevisionReplacementRow.revision == old,
            )
            .values(revision=new)
        )

    def up_to(self, table: str, max_revision: int) -> list[RevisionReplacementRow]:
        stmt = select(RevisionReplacementRow).where(
            RevisionReplacementRow.table_name == table,
            RevisionReplacementRow.revision <= max_revision,
        )
        return list(self.session.scalars(stmt))


class RevisionFileUnitOfWork(RevisionUnitOfWork):
    """The revision unit of work plus the file and replacement repositories."""

    def __enter__(self) -> RevisionFileUnitOfWork:
        super().__enter__()
        self.files = RevisionFileRepository(self.session)
        self.replacements = RevisionReplacementRepository(self.session)
        return self


__all__ = ["RevisionFileRepository", "RevisionFileUnitOfWork", "RevisionReplacementRepository"]
