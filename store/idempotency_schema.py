"""The idempotency-key table (migration 0005).

Shared by every way a write comes in: the HTTP API's ``Idempotency-Key``
(one principal per token) and in-process writes (``idempotency_key=`` of the
publisher, the CLI's ``--idempotency-key``; principal ``:local``). It sits in
the store, not in ``http/``, because the publisher reads and writes it and
may not import the HTTP layer.
"""

from __future__ import annotations

from partition_notify.store.schema import Base, BigId
from sqlalchemy import Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

#: Longest accepted idempotency key (HTTP header value or in-process key).
MAX_IDEMPOTENCY_KEY_CHARS = 200


class IdempotencyRow(Base):
    """The response to a write sent with an idempotency key, kept for a retry.

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
