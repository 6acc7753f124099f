"""Spark commits the HTTP route refused or ignored, with the reason (migration 0013).

``POST /v1/commits`` answers a manifest it cannot apply with a 422 problem
(``rejected``) or a 200 ``ignored`` (no registered table matches it); until
now the reason reached only the job's log and a counter. One row per such
answer keeps it for the ``/ui`` operations page. Bounded twice: a write keeps
at most :data:`MAX_ROWS` (the oldest beyond go in the same transaction, one
primary-key range delete), and ``serve``'s housekeeping forgets rows older
than ``PN_SPARK_COMMIT_RETENTION_SECONDS``, oldest first in batches. An operator's skip
of an Iceberg/Delta commit its follower cannot announce is recorded here too (status
``skipped``, the operator as principal: ``writers/lakehouse/skip.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from partition_notify.store import Store, UnitOfWork
from partition_notify.store.housekeeping import BetweenBatches, delete_where, in_batches
from partition_notify.store.purge_order import oldest_first
from partition_notify.store.schema import Base, BigId
from partition_notify.writers.commit_schema import MAX_JOB_ID_CHARS
from sqlalchemy import Float, Index, String, Table, Text, insert, select
from sqlalchemy.orm import Mapped, mapped_column

#: Refusals kept at most (newest); a write beyond this deletes the oldest.
MAX_ROWS = 10_000
#: A longer reason is cut (a problem's detail can quote a whole body).
MAX_REASON_CHARS = 2_000
MAX_TABLE_CHARS = 300


class SparkCommitRefusalRow(Base):
    __tablename__ = "pn_spark_commit_refusals"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    #: "rejected" or "ignored"; "skipped": a lakehouse commit an operator skipped
    #: (writers/lakehouse/skip.py), kept here so the same page shows it
    status: Mapped[str] = mapped_column(String(16))
    #: None when the body had no usable job id (it is what was wrong)
    job_id: Mapped[str | None] = mapped_column(String(MAX_JOB_ID_CHARS), nullable=True)
    #: the table or output path the manifest named, if it got that far
    table: Mapped[str | None] = mapped_column(String(MAX_TABLE_CHARS), nullable=True)
    reason: Mapped[str] = mapped_column(Text)
    #: the token's name that posted it
    principal: Mapped[str] = mapped_column(String(128))
    at: Mapped[float] = mapped_column(Float)
    __table_args__ = (Index("ix_pn_spark_commit_refusals_at", "at"),)


_T = cast(Table, SparkCommitRefusalRow.__table__)


@dataclass(frozen=True, slots=True)
class Refusal:
    status: str
    job_id: str | None
    table: str | None
    reason: str
    principal: str
    at: float


class CommitRefusals:
    """Record, list and purge refusals; each call is one unit of work."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, status: str, job_id: str | None, table: str | None, reason: str,
               principal: str) -> None:
        with UnitOfWork(self.store.engine, write=True) as uow:
            self.record_in(uow, status, job_id, table, reason, principal)

    def record_in(self, uow: UnitOfWork, status: str, job_id: str | None, table: str | None,
                  reason: str, principal: str) -> None:
        """:meth:`record` inside ``uow`` (a lakehouse skip: with the cursor's move)."""
        new_id = uow.session.execute(insert(_T).values(
            status=status, job_id=(job_id or None) and job_id[:MAX_JOB_ID_CHARS],
            table=table and table[:MAX_TABLE_CHARS], reason=reason[:MAX_REASON_CHARS],
            principal=principal[:128], at=self.store.clock(),
        ).returning(_T.c.id)).scalar_one()
        # Ids only grow: everything at or below new_id - MAX_ROWS is beyond the cap.
        delete_where(uow.session, _T, _T.c.id <= new_id - MAX_ROWS)

    def latest(self, limit: int) -> list[Refusal]:
        """The newest ``limit`` refusals, newest first."""
        c = _T.c
        with UnitOfWork(self.store.engine, write=False) as uow:
            rows = uow.session.execute(
                select(c.status, c.job_id, c.table, c.reason, c.principal, c.at)
                .order_by(c.id.desc()).limit(limit)).all()
        return [Refusal(*r) for r in rows]

    def purge(self, before: float, *, batch_size: int,
              between_batches: BetweenBatches | None = None) -> int:
        """Forget refusals older than ``before``, oldest first in batches."""
        c = _T.c
        return in_batches(
            lambda: UnitOfWork(self.store.engine, write=True),
            lambda uow, n: delete_where(uow.session, _T, oldest_first(
                uow.session, c.id, c.at, c.at < before, n)),
            batch_size=batch_size, between_batches=between_batches)
