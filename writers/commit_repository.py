"""Repository of ``pn_spark_commits``: takes a Session, never commits."""

from __future__ import annotations

from typing import cast

from partition_notify.store.housekeeping import delete_where
from partition_notify.store.purge_order import oldest_first
from partition_notify.store.uow import run_sql
from partition_notify.writers.commit_schema import SparkCommitRow
from sqlalchemy import Table, select
from sqlalchemy.orm import Session

_COMMITS = cast(Table, SparkCommitRow.__table__)
_ADD_SQL = ("INSERT INTO pn_spark_commits (job_id, table_id, partitions, processed_at, "
            "fingerprint, committed_at_ms, cleared) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})")


class SparkCommitRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, job_id: str) -> SparkCommitRow | None:
        return self.session.scalars(
            select(SparkCommitRow).where(SparkCommitRow.job_id == job_id)
        ).first()

    def add(self, job_id: str, table_id: int, partitions: int, now: float,
            fingerprint: str, committed_at_ms: int | None = None,
            cleared: str | None = None) -> None:
        # Executed now: a concurrent processor of the same job fails here, inside the
        # transaction that would have logged the duplicate messages. A prebuilt
        # statement: the ORM's flush was most of this insert's time.
        run_sql(self.session, _ADD_SQL, (job_id, table_id, partitions, now, fingerprint,
                                        committed_at_ms, cleared))

    def purge_batch(self, before: float, n: int) -> int:
        """Forget the ``n`` oldest job ids processed before ``before``."""
        c = _COMMITS.c
        return delete_where(self.session, _COMMITS, oldest_first(
            self.session, c.job_id, c.processed_at, c.processed_at < before, n))
