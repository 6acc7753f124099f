"""Tables of the HTTP API: tokens and idempotency (migration 0005).

On the store's ``Base`` metadata; one repository each in
:mod:`partition_notify.http.repositories`.
"""

from __future__ import annotations

from sqlalchemy import Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from partition_notify.store.schema import Base, BigId

#: Longest accepted Idempotency-Key header value.
MAX_IDEMPOTENCY_KEY_CHARS = 200


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
