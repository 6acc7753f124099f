"""Dead letters: events the broker refused for good, taken off the relay's path.

An event the broker refuses for good (:class:`~partition_notify.core.errors.MessageRejected`:
too large, not authorized, invalid destination) is *retried* a bounded number
of times - its ``rejections`` count - with ``retry_at`` holding back its own
topic meanwhile (see :meth:`partition_notify.store.event_log.EventLog.lease_unpublished`). Retriable
failures (broker down, timeout) never count. At ``max_attempts`` rejections it
is *dead-lettered*: ``dead_at`` set, out of the relay's lease, out of the lag
figures, still in the event log (subscribers that fill ``topicSeq`` gaps from
the log still find it). From there an operator *redrives* it (back to
pending, counts reset) or *discards* it (kept, marked, never sent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from partition_notify.store.provider import Store
from partition_notify.store.schema import EventRow, TableRow
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import Select, select, update
from sqlalchemy.orm import Session

from partition_notify.core.errors import ConflictError, NotFoundError

_IN_CHUNK = 500


@dataclass(frozen=True, slots=True)
class DeadLetter:
    event_id: int
    table: str
    topic: str
    topic_seq: int
    event_type: str
    attempts: int
    error: str
    dead_at: float
    discarded: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class DeadLetterRepository:
    """Queries on ``pn_events`` about refusals; takes a Session and never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def _select(self) -> Select[EventRow, str, str]:
        return (
            select(EventRow, TableRow.db, TableRow.name)
            .join(TableRow, TableRow.id == EventRow.table_id)
            .where(EventRow.dead_at.is_not(None))
            .order_by(EventRow.event_id)
        )

    def find(self, table: tuple[str, str] | None, ids: Sequence[int] | None) -> list[DeadLetter]:
        stmt = self._select()
        if table is not None:
            stmt = stmt.where(TableRow.db == table[0], TableRow.name == table[1])
        out: list[DeadLetter] = []
        for chunk in _chunks(ids) if ids is not None else [None]:
            q = stmt if chunk is None else stmt.where(EventRow.event_id.in_(chunk))
            out += [_letter(r, db, name) for r, db, name in self.session.execute(q)]
        return out

    def reject(self, event_id: int, error: str, now: float, retry_at: float | None) -> None:
        """Count one refusal of a live event; ``retry_at=None`` dead-letters it."""
        row = self.session.get(EventRow, event_id)
        if row is None:
            return
        row.rejections = (row.rejections or 0) + 1
        row.attempts = (row.attempts or 0) + 1
        row.last_error = error[:2000]
        row.lease_owner = row.lease_until = None
        row.retry_at = retry_at
        if retry_at is None:
            row.dead_at = now

    def redrive(self, ids: Sequence[int]) -> None:
        for chunk in _chunks(ids):
            self.session.execute(
                update(EventRow)
                .where(EventRow.event_id.in_(chunk))
                .values(dead_at=None, retry_at=None, rejections=0, attempts=0,
                        lease_owner=None, lease_until=None)
            )

    def discard(self, ids: Sequence[int], now: float) -> None:
        for chunk in _chunks(ids):
            self.session.execute(
                update(EventRow).where(EventRow.event_id.in_(chunk)).values(discarded_at=now)
            )


class DeadLetters:
    """Quarantine, list, redrive and discard; each call is one unit of work."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=write)

    def record_rejections(
        self,
        rejected: dict[int, str],
        *,
        max_attempts: int,
        backoff: Callable[[int], float],
    ) -> list[DeadLetter]:
        """Count one refusal for good per event; return those now dead-lettered.

        Below ``max_attempts`` the event is retried ``backoff(rejections)``
        seconds from now, its topic held back behind it meanwhile.
        """
        now = self.store.clock()
        dead: list[int] = []
        with self._uow(write=True) as uow:
            repo = DeadLetterRepository(uow.session)
            for event_id, error in sorted(rejected.items()):
                row = uow.session.get(EventRow, event_id)
                if row is None or row.published_at is not None or row.dead_at is not None:
                    continue
                count = (row.rejections or 0) + 1
                final = count >= max_attempts
                repo.reject(event_id, error, now, None if final else now + backoff(count))
                if final:
                    dead.append(event_id)
            uow.session.flush()
            return repo.find(None, dead) if dead else []

    def find(self, table: tuple[str, str] | None = None) -> list[DeadLetter]:
        """Dead letters (discarded ones too), oldest first; of one table if given."""
        with self._uow() as uow:
            return DeadLetterRepository(uow.session).find(table, None)

    def redrive(self, event_ids: Sequence[int] | None) -> list[DeadLetter]:
        """Back to pending with counts reset (``None``: every dead letter not discarded)."""
        with self._uow(write=True) as uow:
            repo = DeadLetterRepository(uow.session)
            letters = self._pick(repo, event_ids)
            discarded = [d.event_id for d in letters if d.discarded]
            if discarded and event_ids is not None:
                raise ConflictError(f"event(s) {_ids(discarded)} were discarded; "
                                    "a discarded dead letter is never sent")
            letters = [d for d in letters if not d.discarded]
            repo.redrive([d.event_id for d in letters])
            return letters

    def discard(self, event_ids: Sequence[int]) -> list[DeadLetter]:
        """Mark dead letters discarded: kept in the log, never sent."""
        with self._uow(write=True) as uow:
            repo = DeadLetterRepository(uow.session)
            letters = self._pick(repo, event_ids)
            repo.discard([d.event_id for d in letters if not d.discarded], self.store.clock())
            return letters

    @staticmethod
    def _pick(repo: DeadLetterRepository, event_ids: Sequence[int] | None) -> list[DeadLetter]:
        letters = repo.find(None, list(event_ids) if event_ids is not None else None)
        if event_ids is not None:
            missing = sorted(set(event_ids) - {d.event_id for d in letters})
            if missing:
                raise NotFoundError(f"event(s) {_ids(missing)} are not dead letters")
        return letters


def _letter(row: EventRow, db: str, name: str) -> DeadLetter:
    return DeadLetter(
        event_id=row.event_id,
        table=f"{db}.{name}",
        topic=row.topic,
        topic_seq=row.topic_seq,
        event_type=row.event_type,
        attempts=row.rejections,
        error=row.last_error or "",
        dead_at=float(row.dead_at or 0.0),
        discarded=row.discarded_at is not None,
    )


def _ids(ids: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:10])
    return shown + (f" (and {len(ids) - 10} more)" if len(ids) > 10 else "")


def _chunks(items: Sequence[int] | None) -> list[Sequence[int]]:
    items = items or []
    return [items[i : i + _IN_CHUNK] for i in range(0, len(items), _IN_CHUNK)]
