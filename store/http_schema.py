"""Tables of the HTTP API and of partition deadlines (migration 0005).

On the store's ``Base`` metadata; one repository each in
:mod:`partition_notify.store.http_repositories`.
"""

from __future__ import annotations

from partition_notify.store.schema import Base, BigId
from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

#: Longest accepted Idempotency-Key header value.
MAX_IDEMPOTENCY_KEY_CHARS = 200
#: Longest spec template.
MAX_TEMPLATE_CHARS = 1000


class ApiTokenRow(Base):
    """A bearer token of the HTTP API: only its SHA-256 is stored."""

    __tablename__ = "pn_api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class IdempotencyRow(Base):
    """The response to a write sent with an ``Idempotency-Key``, kept for a retry.

    Inserted in the same transaction as the events the write appended, so a
    retry either finds it (and gets the original response) or finds nothing
    was written.
    """

    __tablename__ = "pn_idempotency"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    principal: Mapped[str] = mapped_column(String(128))
    key: Mapped[str] = mapped_column(String(MAX_IDEMPOTENCY_KEY_CHARS))
    fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[int] = mapped_column(Integer)
    response: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (
        Index("ux_pn_idempotency_key", "principal", "key", unique=True),
        Index("ix_pn_idempotency_expiry", "expires_at"),
    )


class ExpectationRow(Base):
    """A table's expected set-done: spec template, schedule and deadline."""

    __tablename__ = "pn_expectations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("pn_tables.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    spec_template: Mapped[str] = mapped_column(String(MAX_TEMPLATE_CHARS))
    cron: Mapped[str] = mapped_column(String(128))
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
