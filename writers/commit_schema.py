"""Spark commits already announced (migration 0007): the idempotency record.

One row per Spark write job whose manifest was processed, written in the
same transaction as the job's messages, so a manifest seen twice (an HTTP
retry, a spool file left behind by a crash, both at once) announces once; its
content fingerprint (0014) tells a replay from another job reusing the id.
"""

from __future__ import annotations

from partition_notify.store.schema import Base
from sqlalchemy import BigInteger, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

#: Longest Spark job id accepted (Spark uses a 36-character UUID).
MAX_JOB_ID_CHARS = 128


class SparkCommitRow(Base):
    __tablename__ = "pn_spark_commits"
    job_id: Mapped[str] = mapped_column(String(MAX_JOB_ID_CHARS), primary_key=True)
    table_id: Mapped[int] = mapped_column(Integer)
    partitions: Mapped[int] = mapped_column(Integer)
    processed_at: Mapped[float] = mapped_column(Float)
    #: SHA-256 of the job's content (migration 0014; None: recorded before it)
    fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: the job's committedAtMs and the specs it cleared, JSON (0016; commit order,
    #: writers/commit_order.py)
    committed_at_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cleared: Mapped[str | None] = mapped_column(Text, nullable=True)
    __table_args__ = (Index("ix_pn_spark_commits_processed", "processed_at"),
                      Index("ix_pn_spark_commits_table_time", "table_id", "committed_at_ms"))
