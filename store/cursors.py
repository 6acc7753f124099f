"""Durable consumer cursors over the event log (table of migration 0006)."""

from __future__ import annotations

from dataclasses import dataclass

from partition_notify.store.cursor_schema import MAX_CURSOR_NAME_CHARS, CursorRow
from partition_notify.store.provider import Store
from partition_notify.store.uow import UnitOfWork, affected_rows
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from partition_notify.core.errors import ConflictError, InvalidNameError

#: Name prefixes of the cursors ``serve`` owns (the Airflow push sink's). The
#: read-only role (store/sql/readonly_role.sql) may write its own trigger
#: cursors but none of these: a reader moving one would make ``serve``
#: re-push every set-done or skip them.
SERVE_CURSOR_PREFIXES = ("airflow-push:",)


@dataclass(frozen=True, slots=True)
class Cursor:
    name: str
    event_id: int
    pending_event_id: int | None
    pending_since: float | None
    lease_owner: str | None = None


class CursorRepository:
    """Rows of ``pn_consumer_cursors``; takes a Session, never commits."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, name: str) -> CursorRow | None:
        return self.session.get(CursorRow, name)

    def get_or_create(self, name: str, start: int, now: float) -> CursorRow:
        row = self.get(name)
        if row is None:
            row = CursorRow(name=name, event_id=start, updated_at=now)
            self.session.add(row)
            self.session.flush()
        return row

    def set(self, name: str, values: dict[str, object]) -> int:
        stmt = update(CursorRow).where(CursorRow.name == name).values(**values)
        return affected_rows(self.session.execute(stmt))

    def set_where_owner(self, name: str, owner: str, values: dict[str, object]) -> int:
        stmt = (update(CursorRow).where(CursorRow.name == name, CursorRow.lease_owner == owner)
                .values(**values))
        return affected_rows(self.session.execute(stmt))

    def claim(self, name: str, owner: str, now: float, until: float) -> bool:
        """Take or renew the lease of ``name`` unless another owner holds it unexpired."""
        stmt = (
            update(CursorRow)
            .where(
                CursorRow.name == name,
                or_(CursorRow.lease_owner.is_(None), CursorRow.lease_owner == owner,
                    CursorRow.lease_until < now),
            )
            .values(lease_owner=owner, lease_until=until, updated_at=now)
        )
        return affected_rows(self.session.execute(stmt)) == 1

    def names(self, prefix: str) -> list[str]:
        stmt = select(CursorRow.name).where(CursorRow.name.startswith(prefix, autoescape=True))
        return list(self.session.scalars(stmt))


def check_name(name: str) -> str:
    # Not only str: an AssetWatcher's cursor comes from a DAG file's trigger kwargs.
    if not isinstance(name, str) or not name or len(name) > MAX_CURSOR_NAME_CHARS:
        raise InvalidNameError(
            f"cursor name {name!r:.120}: expected text of 1..{MAX_CURSOR_NAME_CHARS} characters"
        )
    return name


class Cursors:
    """Each method is one unit of work on ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _of(self, row: CursorRow) -> Cursor:
        return Cursor(row.name, row.event_id, row.pending_event_id, row.pending_since,
                      row.lease_owner if (row.lease_until or 0) >= self.store.clock() else None)

    def open(self, name: str, *, start: int | None = None) -> Cursor:
        """The cursor ``name``; a new one starts at ``start`` (default: the log's end)."""
        check_name(name)
        with UnitOfWork(self.store.engine, write=True) as uow:
            row = CursorRepository(uow.session).get(name)
            if row is not None:
                return self._of(row)
            first = uow.events.max_id() if start is None else start
            return self._of(
                CursorRepository(uow.session).get_or_create(name, first, self.store.clock())
            )

    def get(self, name: str) -> Cursor | None:
        with UnitOfWork(self.store.engine, write=False) as uow:
            row = CursorRepository(uow.session).get(name)
            return None if row is None else self._of(row)

    def advance(self, name: str, event_id: int) -> None:
        """Move ``name`` to ``event_id`` (never backwards) and clear any intent."""
        with UnitOfWork(self.store.engine, write=True) as uow:
            repo = CursorRepository(uow.session)
            row = repo.get(name)
            if row is None:
                raise InvalidNameError(f"no cursor named {name!r}")
            row.event_id = max(row.event_id, event_id)
            row.pending_event_id = None
            row.pending_since = None
            row.updated_at = self.store.clock()

    def claim(self, name: str, owner: str, seconds: float) -> bool:
        """Lease ``name`` to ``owner`` for ``seconds`` (renewing its own lease)."""
        now = self.store.clock()
        with UnitOfWork(self.store.engine, write=True) as uow:
            return CursorRepository(uow.session).claim(name, owner, now, now + seconds)

    def take_over(self, name: str, stale_owner: str, owner: str, seconds: float) -> bool:
        """Take ``name``'s lease from ``stale_owner`` (known dead) if it still holds it."""
        now = self.store.clock()
        with UnitOfWork(self.store.engine, write=True) as uow:
            return CursorRepository(uow.session).set_where_owner(
                name, stale_owner, {"lease_owner": owner, "lease_until": now + seconds,
                                    "updated_at": now}) == 1

    def take(self, name: str, event_id: int) -> bool:
        """Move ``name`` to ``event_id`` if it is still before it: False when another
        reader of the same cursor took that event first (compare-and-set)."""
        now = self.store.clock()
        with UnitOfWork(self.store.engine, write=True) as uow:
            stmt = (update(CursorRow)
                    .where(CursorRow.name == name, CursorRow.event_id < event_id)
                    .values(event_id=event_id, pending_event_id=None, pending_since=None,
                            updated_at=now))
            return affected_rows(uow.session.execute(stmt)) == 1

    def mark_pending(self, name: str, event_id: int, *, since: float | None = None) -> float:
        """Record that ``event_id`` is about to be sent (no lease: the caller holds one)."""
        now = self.store.clock() if since is None else since
        with UnitOfWork(self.store.engine, write=True) as uow:
            if CursorRepository(uow.session).set(
                    name, {"pending_event_id": event_id, "pending_since": now}) != 1:
                raise InvalidNameError(f"no cursor named {name!r}")
        return now

    def release(self, name: str, owner: str) -> None:
        with UnitOfWork(self.store.engine, write=True) as uow:
            uow.session.execute(
                update(CursorRow)
                .where(CursorRow.name == name, CursorRow.lease_owner == owner)
                .values(lease_owner=None, lease_until=None)
            )

    def intend(self, name: str, event_id: int, owner: str, lease_seconds: float) -> float:
        """Record that ``event_id`` is about to be sent, renewing ``owner``'s lease.

        Raises ConflictError when the lease was lost (another process took the
        cursor): the caller must not send.
        """
        now = self.store.clock()
        with UnitOfWork(self.store.engine, write=True) as uow:
            repo = CursorRepository(uow.session)
            if not repo.claim(name, owner, now, now + lease_seconds):
                raise ConflictError(f"cursor {name!r}: lease lost to another process")
            repo.set(name, {"pending_event_id": event_id, "pending_since": now})
        return now
