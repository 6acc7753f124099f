"""Tables followed by their commits (migrations 0010, 0015): format, source, cursor,
lease, the table's identity and the commit the follower is stopped on.

One row per registered table that has a format (``register --format``). The
cursor is the last commit whose events are logged (an Iceberg snapshot id, a
Delta version); it moves in the transaction that logs those events, so a
commit is announced once across restarts. The lease keeps two ``serve``
processes from following the same table at once. Rows are bounded by the
catalog: at most one per registered table.
"""

from __future__ import annotations

from partition_notify.store.schema import Base
from sqlalchemy import BigInteger, Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

#: The formats a table can be followed in (the serve job of each is ``<format>-follow``).
FORMATS = ("iceberg", "delta")
MAX_CATALOG_CHARS = 128
MAX_IDENTIFIER_CHARS = 512
MAX_LOCATION_CHARS = 2048
#: Cursor of a table followed from its very first commit (no commit handled yet).
BEFORE_FIRST = -1
MAX_UUID_CHARS = 64
#: Why the follower stopped, as kept with the row (the log line says it all).
MAX_STOP_CHARS = 500


class LakehouseTableRow(Base):
    __tablename__ = "pn_lakehouse_tables"
    table_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    format: Mapped[str] = mapped_column(String(16))
    #: Iceberg: the catalog's name in the settings, and the table's identifier in it.
    catalog: Mapped[str | None] = mapped_column(String(MAX_CATALOG_CHARS), nullable=True)
    identifier: Mapped[str | None] = mapped_column(String(MAX_IDENTIFIER_CHARS), nullable=True)
    #: Delta: the table's root (its ``_delta_log`` is under it).
    location: Mapped[str | None] = mapped_column(String(MAX_LOCATION_CHARS), nullable=True)
    #: None: not followed yet; BEFORE_FIRST; else the last handled snapshot id / version.
    cursor: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    gaps: Mapped[int] = mapped_column(Integer, default=0)
    #: Migration 0015. The Delta ``metaData.id`` / Iceberg ``table-uuid`` the cursor
    #: belongs to; None until the follower has read it.
    table_uuid: Mapped[str | None] = mapped_column(String(MAX_UUID_CHARS), nullable=True)
    #: The commit after the cursor that cannot be announced (``lakehouse skip`` passes
    #: it), and why; None while the follower goes on. Cleared by every cursor move.
    #: The table not loadable at the cursor: the commit a skip resumes at, or the
    #: cursor itself (nothing to skip to; cleared once the table loads).
    stopped_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    stopped_reason: Mapped[str | None] = mapped_column(String(MAX_STOP_CHARS), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[float] = mapped_column(Float)
    #: Migration 0010: each format's follower lists its tables.
    __table_args__ = (Index("ix_pn_lakehouse_tables_format", "format"),)
