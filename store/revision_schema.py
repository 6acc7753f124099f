"""Tables of the revision manager and of SNAPSHOT datasets (migration 0002).

The revision manager keeps exactly what a ZooKeeper-style revision layout keeps:
a revision counter per table, the running transactions and the aborted
ones. Committed transactions leave no row: a revision at or below the
counter that is neither running nor aborted is committed.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from store.schema import Base

#: Longest table / dataset name the revision tables accept.
MAX_TABLE_CHARS = 260
#: Longest column-family name.
MAX_FAMILY_CHARS = 128

RUNNING = "running"
ABORTED = "aborted"


class RevisionTableRow(Base):
    """One row per table: the revision counter, locked by every state change."""

    __tablename__ = "pn_revision_tables"
    table_name: Mapped[str] = mapped_column(String(MAX_TABLE_CHARS), primary_key=True)
    last_revision: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)


class RevisionFamilyRow(Base):
    """Families a table's transactions have declared; snapshots list each of them."""

    __tablename__ = "pn_revision_families"
    table_name: Mapped[str] = mapped_column(
        ForeignKey("pn_revision_tables.table_name", ondelete="CASCADE"), primary_key=True
    )
    family: Mapped[str] = mapped_column(String(MAX_FAMILY_CHARS), primary_key=True)
    first_revision: Mapped[int] = mapped_column(BigInteger)


class RevisionTxnRow(Base):
    """A running or aborted write transaction (``state`` is ``running`` or ``aborted``)."""

    __tablename__ = "pn_revision_txns"
    table_name: Mapped[str] = mapped_column(
        ForeignKey("pn_revision_tables.table_name", ondelete="CASCADE"), primary_key=True
    )
    revision: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    families: Mapped[list[str]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    keep_alive_seconds: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: ``aborted`` (asked for) or ``expired`` (keep-alive ran out).
    reason: Mapped[str | None] = mapped_column(String(16), nullable=True)
    __table_args__ = (Index("ix_pn_revision_txns_state", "table_name", "state", "expires_at"),)


class SnapshotDatasetRow(Base):
    """A SNAPSHOT dataset: where its versions live, the current-version pointer, retention."""

    __tablename__ = "pn_snapshot_datasets"
    name: Mapped[str] = mapped_column(String(MAX_TABLE_CHARS), primary_key=True)
    location: Mapped[str] = mapped_column(Text)
    current_version: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    ttl_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    min_versions: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class SnapshotVersionRow(Base):
    """One run of a SNAPSHOT dataset: ``writing``, ``complete``, ``failed`` or ``expiring``."""

    __tablename__ = "pn_snapshot_versions"
    dataset: Mapped[str] = mapped_column(
        ForeignKey("pn_snapshot_datasets.name", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    path: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[float] = mapped_column(Float)
    completed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: When another version replaced it as current: the TTL counts from here.
    superseded_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    __table_args__ = (Index("ix_pn_snapshot_versions_state", "dataset", "state"),)


__all__ = [
    "ABORTED",
    "MAX_FAMILY_CHARS",
    "MAX_TABLE_CHARS",
    "RUNNING",
    "RevisionFamilyRow",
    "RevisionTableRow",
    "RevisionTxnRow",
    "SnapshotDatasetRow",
    "SnapshotVersionRow",
]
