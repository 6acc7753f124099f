"""Tables of partition deadlines: expectations and their verdicts (migration 0005).

On the store's ``Base`` metadata (one migration chain); one repository each in
:mod:`partition_notify.deadlines.repositories`.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from partition_notify.deadlines.cron import MAX_CRON_CHARS
from partition_notify.deadlines.schedule import MAX_TEMPLATE_CHARS
from partition_notify.store.schema import Base, BigId

__all__ = ["MAX_TEMPLATE_CHARS", "ExpectationCheckRow", "ExpectationRow"]


class ExpectationRow(Base):
    """A table's expected set-done: spec template, schedule and deadline."""

    __tablename__ = "pn_expectations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("pn_tables.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    spec_template: Mapped[str] = mapped_column(String(MAX_TEMPLATE_CHARS))
    cron: Mapped[str] = mapped_column(String(MAX_CRON_CHARS))
    timezone: Mapped[str] = mapped_column(String(64))
    deadline: Mapped[dict[str, object]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (Index("ux_pn_expectations_table_name", "table_id", "name", unique=True),)


class ExpectationCheckRow(Base):
    """The verdict on one instance of an expectation, at most one per instance.

    The unique index is what keeps several ``serve`` processes from
    publishing two PARTITION_LATE messages for one instance: the row is
    inserted in the transaction that appends the message.
    """

    __tablename__ = "pn_expectation_checks"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    expectation_id: Mapped[int] = mapped_column(
        ForeignKey("pn_expectations.id", ondelete="CASCADE")
    )
    logical_date: Mapped[str] = mapped_column(String(40))
    spec: Mapped[str] = mapped_column(String(2000))
    deadline_at: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    late_event_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    recovered_event_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    checked_at: Mapped[float] = mapped_column(Float)
    recovered_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    __table_args__ = (
        Index("ux_pn_expectation_checks_instance", "expectation_id", "logical_date", unique=True),
        Index("ix_pn_expectation_checks_open", "outcome", "recovered_at"),
        Index("ix_pn_expectation_checks_checked", "checked_at"),
    )
