"""Repository of ``pn_spark_commits``: takes a Session, never commits."""

from __future__ import annotations

from partition_notify.writers.commit_schema import SparkCommitRow
from sqlalchemy import select
from sqlalchemy.orm import Session


class SparkCommitRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, job_id: str) -> SparkCommitRow | None:
        return self.session.scalars(
            select(SparkCommitRow).where(SparkCommitRow.job_id == job_id)
        ).first()

    def add(self, job_id: str, table_id: int, partitions: int, now: float) -> None:
        # flush now: a concurrent processor of the same job fails here, inside the
        # transaction that would have logged the duplicate messages.
        self.session.add(SparkCommitRow(
            job_id=job_id, table_id=table_id, partitions=partitions, processed_at=now
        ))
        self.session.flush()
