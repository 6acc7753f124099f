"""Push dead letters (migration 0008): set-dones a scheduler refused for good.

The Airflow push sink (``integrations/airflow/push.py``) reads the event log
itself, so an event it cannot deliver is quarantined here, not on the event
row the relay's dead letters use (:mod:`partition_notify.store.dead_letters`):
one event may be published to the broker and refused by Airflow. A letter is
keyed by the sink (its cursor name, which names the Airflow URL) and the
event id. ``partition-notify dead-letters --source airflow-push`` lists,
redrives (the sink sends it again on its next run and deletes the row once
Airflow accepted it) and discards them (kept, marked, never sent). Discarded
letters are purged :data:`DISCARDED_RETENTION_SECONDS` after discarding, and
a letter whose event the log's retention purged with the rest once its event
is gone (the sink could only drop it on redrive), both in short batches by
``serve``'s job ``airflow-push-letters-purge``.

The table lives in ``store/`` beside the relay's dead letters, not with the
sink in ``integrations/``: the sink, the ``dead-letters`` command and the
``/ui`` operations page (the http layer, which may not import integrations,
docs/architecture.md) all list, redrive and discard through :class:`PushLetters`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from partition_notify.store.housekeeping import BetweenBatches, in_batches
from partition_notify.store.provider import Store
from partition_notify.store.schema import Base, EventRow
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import (
    BigInteger,
    Float,
    Index,
    String,
    Text,
    and_,
    delete,
    exists,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from partition_notify.core.errors import ConflictError, NotFoundError

#: A discarded push dead letter is deleted this long after it was discarded (30 days).
DISCARDED_RETENTION_SECONDS = 30 * 86400.0


class PushLetterRow(Base):
    __tablename__ = "pn_push_dead_letters"
    #: The log's purge and the letters' purge look letters up by event (migration 0018).
    __table_args__ = (Index("ix_pn_push_dead_letters_event", "event_id"),)
    sink: Mapped[str] = mapped_column(String(200), primary_key=True)
    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    table: Mapped[str] = mapped_column(String(300))
    error: Mapped[str] = mapped_column(Text)
    dead_at: Mapped[float] = mapped_column(Float)
    redriven_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    sending_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    discarded_at: Mapped[float | None] = mapped_column(Float, nullable=True)


@dataclass(frozen=True, slots=True)
class PushLetter:
    event_id: int
    table: str
    sink: str
    error: str
    dead_at: float
    redriven: bool
    discarded: bool
    sending_since: float | None = None

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        del out["sending_since"]
        return {"source": "airflow-push", **out}


def _letter(r: PushLetterRow) -> PushLetter:
    return PushLetter(r.event_id, r.table, r.sink, r.error, r.dead_at,
                      r.redriven_at is not None, r.discarded_at is not None, r.sending_since)


class PushLetterRepository:
    """Rows of ``pn_push_dead_letters``; takes a Session, never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def find(self, *, table: str | None = None, sink: str | None = None,
             ids: Sequence[int] | None = None, due: bool = False,
             limit: int | None = None) -> list[PushLetterRow]:
        stmt = select(PushLetterRow).order_by(PushLetterRow.event_id, PushLetterRow.sink)
        if table is not None:
            stmt = stmt.where(PushLetterRow.table == table)
        if sink is not None:
            stmt = stmt.where(PushLetterRow.sink == sink)
        if ids is not None:
            stmt = stmt.where(PushLetterRow.event_id.in_(list(ids)))
        if due:
            stmt = stmt.where(PushLetterRow.redriven_at.is_not(None),
                              PushLetterRow.discarded_at.is_(None))
        return list(self.session.scalars(stmt if limit is None else stmt.limit(limit)))

    def put(self, sink: str, event_id: int, table: str, error: str, now: float) -> None:
        row = self.session.get(PushLetterRow, (sink, event_id))
        if row is None:
            row = PushLetterRow(sink=sink, event_id=event_id, table=table)
            self.session.add(row)
        row.error, row.dead_at = error[:2000], now
        row.redriven_at = row.sending_since = row.discarded_at = None


class PushLetters:
    """Each method is one unit of work on ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=write)

    def record(self, sink: str, event_id: int, table: str, error: str) -> None:
        """Quarantine ``event_id`` for ``sink`` (again, if a redrive was refused)."""
        with self._uow(write=True) as uow:
            PushLetterRepository(uow.session).put(sink, event_id, table, error,
                                                  self.store.clock())

    def find(self, table: str | None = None, sink: str | None = None) -> list[PushLetter]:
        with self._uow() as uow:
            return [_letter(r) for r in PushLetterRepository(uow.session).find(table=table,
                                                                               sink=sink)]

    def latest(self, limit: int) -> list[PushLetter]:
        """The ``limit`` newest letters (by the time they died), newest first."""
        with self._uow() as uow:
            rows = uow.session.scalars(select(PushLetterRow).order_by(
                PushLetterRow.dead_at.desc(), PushLetterRow.event_id.desc()).limit(limit))
            return [_letter(r) for r in rows]

    def due(self, sink: str, limit: int) -> list[PushLetter]:
        """Redriven letters of ``sink`` to send again, oldest event first."""
        with self._uow() as uow:
            return [_letter(r) for r in PushLetterRepository(uow.session).find(
                sink=sink, due=True, limit=limit)]

    def redrive(self, event_ids: Sequence[int] | None) -> list[PushLetter]:
        """Mark letters to be sent again (``None``: every one not discarded)."""
        now = self.store.clock()
        with self._uow(write=True) as uow:
            rows = self._pick(PushLetterRepository(uow.session), event_ids)
            discarded = [r.event_id for r in rows if r.discarded_at is not None]
            if discarded and event_ids is not None:
                raise ConflictError(f"push dead letter(s) {discarded[:10]} were discarded; "
                                    "a discarded dead letter is never sent")
            rows = [r for r in rows if r.discarded_at is None]
            for r in rows:
                r.redriven_at, r.sending_since = now, None
            return [_letter(r) for r in rows]

    def discard(self, event_ids: Sequence[int]) -> list[PushLetter]:
        now = self.store.clock()
        with self._uow(write=True) as uow:
            rows = self._pick(PushLetterRepository(uow.session), event_ids)
            for r in rows:
                r.discarded_at = r.discarded_at or now
                r.redriven_at = None
            return [_letter(r) for r in rows]

    def sending(self, sink: str, event_id: int) -> None:
        """Intent: a redriven letter is about to be POSTed (a restart settles it first)."""
        self._set(sink, event_id, sending_since=self.store.clock())

    def delivered(self, sink: str, event_id: int) -> None:
        with self._uow(write=True) as uow:
            uow.session.execute(delete(PushLetterRow).where(PushLetterRow.sink == sink,
                                                            PushLetterRow.event_id == event_id))

    def purge(self, *, batch_size: int,
              between_batches: BetweenBatches | None = None) -> int:
        """Delete letters discarded :data:`DISCARDED_RETENTION_SECONDS` ago and letters
        whose event the log purged, ``batch_size`` per unit of work; rows deleted."""
        before = self.store.clock() - DISCARDED_RETENTION_SECONDS
        horizon = self.store.housekeeping.purged_below()  # ids below may be gone
        row = PushLetterRow
        gone = or_(row.discarded_at < before, and_(
            row.event_id < horizon, ~exists().where(EventRow.event_id == row.event_id)))

        def batch(uow: UnitOfWork, n: int) -> int:
            keys = [tuple(k) for k in uow.session.execute(
                select(row.sink, row.event_id).where(gone).order_by(row.event_id).limit(n))]
            if keys:
                uow.session.execute(delete(row).where(tuple_(row.sink, row.event_id).in_(keys)))
            return len(keys)

        return in_batches(lambda: self._uow(write=True), batch,
                          batch_size=batch_size, between_batches=between_batches)

    def _set(self, sink: str, event_id: int, **values: object) -> None:
        with self._uow(write=True) as uow:
            uow.session.execute(update(PushLetterRow).where(
                PushLetterRow.sink == sink, PushLetterRow.event_id == event_id).values(**values))

    @staticmethod
    def _pick(repo: PushLetterRepository, event_ids: Sequence[int] | None) -> list[PushLetterRow]:
        rows = repo.find(ids=event_ids)
        if event_ids is not None:
            missing = sorted(set(event_ids) - {r.event_id for r in rows})
            if missing:
                shown = ", ".join(str(i) for i in missing[:10])
                more = f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""
                raise NotFoundError(f"event(s) {shown}{more} are not push dead letters")
        return rows
