"""The unit of work: the only place that commits."""

from __future__ import annotations

from types import TracebackType

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from partition_notify.errors import ConflictError, StoreError
from store.engine import WRITE
from store.repositories import (
    EventRepository,
    PartitionRepository,
    SequenceRepository,
    SetDoneRepository,
    TableRepository,
)


def map_db_error(exc: SQLAlchemyError) -> StoreError | ConflictError:
    """Turn a driver error into ours; the message keeps the cause, not the SQL."""
    if isinstance(exc, IntegrityError):
        return ConflictError(f"conflicting write: {exc.orig}")
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    return StoreError(f"store operation failed: {type(orig).__name__}: {str(orig).strip()[:300]}")


class UnitOfWork:
    """``with UnitOfWork(engine, write=True) as uow:`` commits on success, rolls back on error.

    ``write=True`` takes SQLite's write lock at BEGIN so that a transaction
    that reads then writes cannot deadlock with another writer.
    """

    def __init__(self, engine: Engine, *, write: bool) -> None:
        if write and not engine.get_execution_options().get(WRITE):
            engine = engine.execution_options(**{WRITE: True})
        self._engine = engine
        self._write = write

    def __enter__(self) -> UnitOfWork:
        self.session = Session(self._engine, expire_on_commit=False, autoflush=False)
        self.tables = TableRepository(self.session)
        self.partitions = PartitionRepository(self.session)
        self.sequences = SequenceRepository(self.session)
        self.events = EventRepository(self.session)
        self.set_done = SetDoneRepository(self.session)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None and self._write:
                try:
                    self.session.commit()
                except SQLAlchemyError as err:
                    self.session.rollback()
                    raise map_db_error(err) from err
            else:
                self.session.rollback()
        finally:
            self.session.close()
        if isinstance(exc, SQLAlchemyError):
            raise map_db_error(exc) from exc
