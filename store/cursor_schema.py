"""The consumer-cursor table (migration 0006).

A cursor is the last event id a named consumer has fully handled: an Airflow
event trigger, or the push sink of ``serve``. ``pending_event_id`` is the
sink's intent record: set before an event is sent to a system that does not
de-duplicate, cleared (with the cursor advanced) once the send is confirmed,
so a restart knows which one event may or may not have gone out. The lease
keeps two ``serve`` processes from pushing the same events.
"""

from __future__ import annotations

from partition_notify.store.schema import Base
from sqlalchemy import BigInteger, Float, String
from sqlalchemy.orm import Mapped, mapped_column

MAX_CURSOR_NAME_CHARS = 200


class CursorRow(Base):
    __tablename__ = "pn_consumer_cursors"
    name: Mapped[str] = mapped_column(String(MAX_CURSOR_NAME_CHARS), primary_key=True)
    event_id: Mapped[int] = mapped_column(BigInteger)
    pending_event_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    pending_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[float] = mapped_column(Float)
