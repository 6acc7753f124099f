"""Tables of the store. The Alembic migrations in ``store/migrations`` create them.

Times are epoch seconds as floats: portable across SQLite and PostgreSQL and
free of time-zone conversions.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: Index-friendly bound on canonical spec strings (PostgreSQL btree entries ~2.7 kB).
MAX_SPEC_CHARS = 2000
# SQLite only gives INTEGER PRIMARY KEY rowid semantics to INTEGER, not BIGINT.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass


class TableRow(Base):
    """A registered table: its partition keys, topic and set-done retention."""

    __tablename__ = "pn_tables"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    db: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(128))
    partition_keys: Mapped[list[str]] = mapped_column(JSON)
    topic: Mapped[str] = mapped_column(String(249))
    topic_override: Mapped[str | None] = mapped_column(String(249), nullable=True)
    retention_seconds: Mapped[int] = mapped_column(BigInteger)
    location: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (Index("ux_pn_tables_db_name", "db", "name", unique=True),)


class PartitionRow(Base):
    """A partition that has been announced."""

    __tablename__ = "pn_partitions"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("pn_tables.id", ondelete="CASCADE"))
    spec: Mapped[str] = mapped_column(String(MAX_SPEC_CHARS))
    values: Mapped[dict[str, str]] = mapped_column(JSON)
    location: Mapped[str | None] = mapped_column(Text, nullable=True)
    revision: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    event_id: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (
        Index("ux_pn_partitions_table_spec", "table_id", "spec", unique=True),
        # The /ui board's newest partitions of a table (migration 0012).
        Index("ix_pn_partitions_recent", "table_id", "created_at", "id"),
    )


class EventRow(Base):
    """The event log: gap-free ids in commit order; the outbox for brokers."""

    __tablename__ = "pn_events"
    # The rowid on SQLite (migration 0021): no separate primary-key b-tree to
    # write on every append. Ids still come from pn_sequence, never from SQLite.
    event_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    topic: Mapped[str] = mapped_column(String(249))
    topic_seq: Mapped[int] = mapped_column(BigInteger)
    event_type: Mapped[str] = mapped_column(String(32))
    table_id: Mapped[int] = mapped_column(Integer)
    message_id: Mapped[str] = mapped_column(String(64), unique=True)
    # Deferred: loading a whole row (dead letters) decoded it, and a damaged value
    # raised; the log's reads take it undecoded (store/log_headers.py).
    headers: Mapped[dict[str, Any]] = mapped_column(JSON, deferred=True)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    published_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Dead letters (migration 0003, store/dead_letters.py): refusals for good
    # count in ``rejections``; ``retry_at`` is set while one is being retried
    # (its topic is held back behind it); ``dead_at`` once quarantined.
    rejections: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    retry_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    dead_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    discarded_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    __table_args__ = (
        Index("ux_pn_events_topic_seq", "topic", "topic_seq", unique=True),
        Index("ix_pn_events_unpublished", "published_at", "event_id"),
        # One table's replay (SSE) and the /ui's events of a table (0008). The log
        # purge reads in event_id order (store/housekeeping.py): no created_at index
        # to write on every append (migration 0023).
        Index("ix_pn_events_table", "table_id", "event_id"),
        # Partial: only the few refused rows are indexed. A full index on
        # dead_at (NULL for every live row) lured SQLite's planner into
        # scanning every pending row on each lease (bench/relay_drain.py).
        Index("ix_pn_events_retry", "retry_at", sqlite_where=text("retry_at IS NOT NULL"),
              postgresql_where=text("retry_at IS NOT NULL")),
        Index("ix_pn_events_dead", "dead_at", sqlite_where=text("dead_at IS NOT NULL"),
              postgresql_where=text("dead_at IS NOT NULL")),
    )


class SequenceRow(Base):
    """Counters: ``event`` (global) and ``topic:<name>`` (per topic).

    The ``event`` row is locked for the whole writing transaction (Hive's
    NOTIFICATION_SEQUENCE approach), which is what makes ids gap-free and in
    commit order.
    """

    __tablename__ = "pn_sequence"
    name: Mapped[str] = mapped_column(String(260), primary_key=True)
    next_value: Mapped[int] = mapped_column(BigInteger)


class SetDoneRow(Base):
    """The retention table: set-done messages kept for their table's period."""

    __tablename__ = "pn_set_done"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("pn_tables.id", ondelete="CASCADE"))
    spec: Mapped[str] = mapped_column(String(MAX_SPEC_CHARS))
    event_id: Mapped[int] = mapped_column(BigInteger)
    body: Mapped[str] = mapped_column(Text)
    published_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (
        Index("ix_pn_set_done_lookup", "table_id", "spec", "expires_at"),
        Index("ix_pn_set_done_history", "table_id", "published_at"),
        Index("ix_pn_set_done_expiry", "expires_at"),
    )
