"""The table of the HTTP API: bearer tokens (migration 0005).

On the store's ``Base`` metadata; its repository is in
:mod:`partition_notify.http.repositories`. The idempotency keys of the same
migration are in the store (:mod:`partition_notify.store.idempotency_schema`):
in-process writes of the publisher use them too.
"""

from __future__ import annotations

from sqlalchemy import Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from partition_notify.store.schema import Base


class ApiTokenRow(Base):
    """A bearer token of the HTTP API: only its SHA-256 is stored."""

    __tablename__ = "pn_api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
