"""Tables of the revision manager (0002), of SNAPSHOT datasets (0002), of revision files
(0004; their removal, 0017), of placement leases (0019) and of placements begun (0024).

The revision manager keeps exactly what a ZooKeeper-style revision layout keeps:
a revision counter per table, the running transactions and the aborted
ones. Committed transactions leave no row: a revision at or below the
counter that is neither running nor aborted is committed.
"""

from __future__ import annotations

from partition_notify.store.schema import MAX_SPEC_CHARS, Base, BigId
from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

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


# -- files of each revision (0004): snapshot reads list exactly the files of the
# committed revisions a snapshot covers, so a later append (new files) or an
# overwrite (old files moved aside) never changes what an older snapshot returns.
#: Longest write id (``partition_notify.writers.layout.new_write_id`` makes 28 characters).
MAX_WRITE_ID_CHARS = 64


class RevisionFileRow(Base):
    """One data file a revision added to a partition of a table.

    The file lives at ``<table>/<partition>/<name>`` until an overwrite of its
    partition moves it to ``<table>/<partition>/<retired_to>/<name>``.
    """

    __tablename__ = "pn_revision_files"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    table_name: Mapped[str] = mapped_column(String(MAX_TABLE_CHARS))
    revision: Mapped[int] = mapped_column(BigInteger)
    write_id: Mapped[str] = mapped_column(String(MAX_WRITE_ID_CHARS))
    #: The partition directory relative to the table, as Spark wrote it (escaped).
    partition: Mapped[str] = mapped_column(String(MAX_SPEC_CHARS))
    name: Mapped[str] = mapped_column(Text)
    #: Set when an overwrite moved the file: its subdirectory of the partition.
    retired_to: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: When serve's housekeeping deleted the file or found it gone (0017): a
    #: snapshot that lists it fails instead of reading less (revisions/vacuum.py).
    removed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Failed deletions; at ``MAX_REMOVE_ATTEMPTS`` (or a refused path) no more tries.
    remove_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    __table_args__ = (
        Index("ix_pn_revision_files_revision", "table_name", "revision"),
        Index("ix_pn_revision_files_write", "table_name", "write_id"),
        Index("ix_pn_revision_files_partition", "table_name", "partition"),
    )

    @property
    def path(self) -> str:
        """Where the file is now, relative to the table location."""
        if self.retired_to:
            return f"{self.partition}/{self.retired_to}/{self.name}"
        return f"{self.partition}/{self.name}"


class RevisionReplacementRow(Base):
    """An overwrite: ``revision`` replaced ``partition``, hiding older revisions' files there."""

    __tablename__ = "pn_revision_replacements"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    table_name: Mapped[str] = mapped_column(String(MAX_TABLE_CHARS))
    revision: Mapped[int] = mapped_column(BigInteger)
    write_id: Mapped[str] = mapped_column(String(MAX_WRITE_ID_CHARS))
    partition: Mapped[str] = mapped_column(String(MAX_SPEC_CHARS))
    #: Where the replaced files went, relative to the partition directory.
    retired_to: Mapped[str] = mapped_column(Text)
    #: When the overwrite committed (0017; rows from before: when housekeeping saw it
    #: committed). Its retired files go a retention after.
    committed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: When housekeeping was done with its retired files (deleted, gone or given up).
    vacuumed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    __table_args__ = (
        Index("ix_pn_revision_replacements_revision", "table_name", "revision"),
        Index("ix_pn_revision_replacements_write", "table_name", "write_id"),
        Index("ix_pn_revision_replacements_vacuum", "vacuumed_at", "committed_at"),
    )


class RevisionPlacementRow(Base):
    """The placement lease of a table (0019): the one write moving data into it now.

    Taken and released in short transactions (revisions/placement.py); the renames run
    outside any. A lease past ``expires_at`` belongs to a writer that died (or stopped
    renewing): the next placement of the table takes it over.
    """

    __tablename__ = "pn_revision_placements"
    table_name: Mapped[str] = mapped_column(String(MAX_TABLE_CHARS), primary_key=True)
    #: The write placing now (its write id).
    holder: Mapped[str] = mapped_column(String(MAX_WRITE_ID_CHARS))
    #: This taking of the lease: a renewal or release by an earlier one matches nothing.
    token: Mapped[str] = mapped_column(String(32))
    acquired_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)


class RevisionPlacingRow(Base):
    """A write whose placement began and has not finished (0024): taken with the lease,
    before any rename; deleted with the lease's release that records its rows.

    It outlasts the lease (a crash, then another write taking the lease over): the
    refusal to abort an overwrite some of whose files may have moved reads it, and
    housekeeping keeps such a revision's files and rows (revisions/placement.py)."""

    __tablename__ = "pn_revision_placing"
    table_name: Mapped[str] = mapped_column(String(MAX_TABLE_CHARS), primary_key=True)
    write_id: Mapped[str] = mapped_column(String(MAX_WRITE_ID_CHARS), primary_key=True)
    #: A revision it places at: its own, and a recovery's adopting one once it places
    #: again (both kept till it finishes: its files are tagged with the first till then).
    revision: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    began_at: Mapped[float] = mapped_column(Float)
    #: An overwrite that has yet to retire: files of the partitions may lie in
    #: ``_pn_retired`` with no row saying so (an append's placement moves its own only).
    retiring: Mapped[bool] = mapped_column(Boolean)
    __table_args__ = (Index("ix_pn_revision_placing_revision", "table_name", "revision"),)


__all__ = [
    "ABORTED",
    "MAX_FAMILY_CHARS",
    "MAX_TABLE_CHARS",
    "MAX_WRITE_ID_CHARS",
    "RUNNING",
    "RevisionFamilyRow",
    "RevisionFileRow",
    "RevisionPlacementRow",
    "RevisionPlacingRow",
    "RevisionReplacementRow",
    "RevisionTableRow",
    "RevisionTxnRow",
    "SnapshotDatasetRow",
    "SnapshotVersionRow",
]
