"""Repositories of the revision, SNAPSHOT-dataset and revision-file tables.

Like :mod:`partition_notify.store.repositories`: each takes a Session and never commits; the
store's :class:`~partition_notify.store.uow.UnitOfWork` commits. :class:`RevisionUnitOfWork`
is that unit of work with these repositories added, nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from partition_notify.revisions.schema import (
    ABORTED,
    RUNNING,
    RevisionFamilyRow,
    RevisionFileRow,
    RevisionPlacingRow,
    RevisionReplacementRow,
    RevisionTableRow,
    RevisionTxnRow,
    SnapshotDatasetRow,
    SnapshotVersionRow,
)
from partition_notify.store.schema import TableRow
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import Select, delete, exists, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased


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

    def aborted_revisions(self, table: str) -> list[int]:
        stmt = select(RevisionTxnRow.revision).where(
            RevisionTxnRow.table_name == table, RevisionTxnRow.state == ABORTED
        )
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

    def is_registered(self, name: str) -> bool:
        """Whether ``name`` is a defined SNAPSHOT dataset or a registered table's db.table."""
        if self.session.get(SnapshotDatasetRow, name) is not None:
            return True
        db, _, table = name.partition(".")
        stmt = select(TableRow.id).where(TableRow.db == db, TableRow.name == table)
        return self.session.scalar(stmt) is not None


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

    def retire(self, table: str, partitions: Sequence[str], write_id: str, retired_to: str,
               revision: int) -> list[str]:
        """Files of revisions below ``revision`` in ``partitions`` now lie under
        ``retired_to``; returns the paths (``<partition>/<name>``) of later revisions'
        files there, which stay where they are (a write begun after the overwrite)."""
        later: list[str] = []
        f = RevisionFileRow
        for chunk in _chunks(partitions):
            in_chunk = (f.table_name == table, f.partition.in_(chunk), f.retired_to.is_(None))
            self.session.execute(update(f).where(
                *in_chunk, f.write_id != write_id, f.revision < revision,
            ).values(retired_to=retired_to))
            # The overwrite's own files too: a resumed overwrite whose merge had begun
            # retires again (its rows rolled back with the placement) and must keep them.
            later += [f"{p}/{n}" for p, n in self.session.execute(
                select(f.partition, f.name).where(
                    *in_chunk, or_(f.revision > revision, f.write_id == write_id)))]
        return later

    def staying(self, table: str, partitions: Sequence[str], write_id: str,
                revision: int) -> list[str]:
        """The paths in ``partitions`` an overwrite (``write_id`` at ``revision``) leaves
        where they are: its own files and later revisions' (what :meth:`retire` returns)."""
        f = RevisionFileRow
        found: list[str] = []
        for chunk in _chunks(partitions):
            found += [f"{p}/{n}" for p, n in self.session.execute(
                select(f.partition, f.name).where(
                    f.table_name == table, f.partition.in_(chunk), f.retired_to.is_(None),
                    or_(f.revision > revision, f.write_id == write_id)))]
        return found

    def first_retired(self, table: str, write_id: str, *,
                      void_too: bool = True) -> RevisionFileRow | None:
        """A file of the write that an overwrite's rows moved aside, if any; without
        ``void_too``, only one an overwrite not aborted on request moved (:func:`void`)."""
        f, r = RevisionFileRow, RevisionReplacementRow
        stmt = select(f).where(
            f.table_name == table, f.write_id == write_id, f.retired_to.is_not(None))
        if not void_too:
            stmt = stmt.where(exists().where(
                r.table_name == f.table_name, r.partition == f.partition,
                r.retired_to == f.retired_to, r.revision.not_in(void(table))))
        return self.session.scalars(stmt.order_by(f.id).limit(1)).first()

    def unretire(self, table: str, write_id: str) -> None:
        """The write's files lie where it recorded them: what moved them is void."""
        f = RevisionFileRow
        self.session.execute(update(f).where(
            f.table_name == table, f.write_id == write_id, f.retired_to.is_not(None),
        ).values(retired_to=None))

    def retag(self, table: str, old: int, new: int) -> None:
        self.session.execute(
            update(RevisionFileRow)
            .where(RevisionFileRow.table_name == table, RevisionFileRow.revision == old)
            .values(revision=new)
        )

    def retag_placing(self, table: str, old: int, new: int) -> None:
        """A placement begun at ``old`` (not finished) now places at ``new``."""
        p, q = RevisionPlacingRow, aliased(RevisionPlacingRow)
        self.session.execute(delete(p).where(p.table_name == table, p.revision == old, exists()
                                             .where(q.table_name == table, q.revision == new,
                                                    q.write_id == p.write_id)))
        self.session.execute(update(p).where(p.table_name == table, p.revision == old)
                             .values(revision=new))

    def in_partitions(self, table: str, partitions: Sequence[str]) -> list[RevisionFileRow]:
        """The files of ``partitions`` housekeeping has not removed."""
        f = RevisionFileRow
        found: list[RevisionFileRow] = []
        for chunk in _chunks(partitions):
            found += self.session.scalars(select(f).where(
                f.table_name == table, f.partition.in_(chunk), f.removed_at.is_(None)))
        return found

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

    def later(self, table: str, partitions: Sequence[str], revision: int,
              write_id: str) -> list[RevisionReplacementRow]:
        """Overwrites of ``partitions`` by other writes of revisions above ``revision``,
        those aborted on request (:func:`void`) aside."""
        r = RevisionReplacementRow
        found: list[RevisionReplacementRow] = []
        for chunk in _chunks(partitions):
            found += self.session.scalars(select(r).where(
                r.table_name == table, r.partition.in_(chunk), r.revision > revision,
                r.write_id != write_id, r.revision.not_in(void(table)),
            ).order_by(r.revision, r.id).limit(_IN_CHUNK))
        return found

    def committed(self, table: str, revision: int, now: float) -> None:
        self.session.execute(
            update(RevisionReplacementRow)
            .where(RevisionReplacementRow.table_name == table,
                   RevisionReplacementRow.revision == revision)
            .values(committed_at=now)
        )

    def up_to(self, table: str, max_revision: int) -> list[RevisionReplacementRow]:
        stmt = select(RevisionReplacementRow).where(
            RevisionReplacementRow.table_name == table,
            RevisionReplacementRow.revision <= max_revision,
        )
        return list(self.session.scalars(stmt))


def void(table: str) -> Select[int]:
    """The revisions of ``table`` aborted on request: they stay aborted (an expired one
    may still be adopted into a committed revision, revisions/files.py ``settle``), so
    no snapshot ever includes what they did."""
    t = RevisionTxnRow
    return select(t.revision).where(t.table_name == table, t.state == ABORTED,
                                    t.reason == "aborted")


class RevisionUnitOfWork(UnitOfWork):
    """The store's unit of work plus the revision, dataset and file repositories."""

    def __enter__(self) -> RevisionUnitOfWork:
        super().__enter__()
        self.revisions = RevisionRepository(self.session)
        self.datasets = SnapshotDatasetRepository(self.session)
        self.files = RevisionFileRepository(self.session)
        self.replacements = RevisionReplacementRepository(self.session)
        return self


__all__ = [
    "RevisionFileRepository",
    "RevisionReplacementRepository",
    "RevisionRepository",
    "RevisionUnitOfWork",
    "SnapshotDatasetRepository",
]
