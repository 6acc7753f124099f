"""Which data files each revision of a table added, and which partitions it replaced (0004).

Snapshot reads list exactly the files of the committed revisions a snapshot
covers, so a later append (new files) or overwrite (old files moved aside,
new ones in) never changes what an older snapshot returns.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from store.revision_schema import MAX_TABLE_CHARS
from store.schema import MAX_SPEC_CHARS, Base, BigId

#: Longest write id (``writers.layout.new_write_id`` makes 28 characters).
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
    __table_args__ = (
        Index("ix_pn_revision_files_revision", "table_name", "revision"),
        Index("ix_pn_revision_files_write", "table_name", "write_id"),
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
    __table_args__ = (
        Index("ix_pn_revision_replacements_revision", "table_name", "revision"),
        Index("ix_pn_revision_replacements_write", "table_name", "write_id"),
    )


__all__ = ["MAX_WRITE_ID_CHARS", "RevisionFileRow", "RevisionReplacementRow"]
