"""The unit of work: the only place that commits."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from partition_notify.store import pg_pooler
from partition_notify.store.engine import (
    SINGLE_READ,
    WRITE,
    read_only_error,
    sqlite_access,
    sqlite_access_problem,
    sqlite_file,
)
from partition_notify.store.records import Clock
from partition_notify.store.repositories import (
    EventRepository,
    PartitionRepository,
    SequenceRepository,
    SetDoneRepository,
    TableRepository,
)
from sqlalchemy import CursorResult, Engine, Executable, Row
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from partition_notify.contract import AnyMessage
from partition_notify.core.errors import ConflictError, StoreError


def map_db_error(exc: SQLAlchemyError, engine: Engine | None = None) -> StoreError | ConflictError:
    """Turn a driver error into ours; the message keeps the cause, not the SQL. With
    the ``engine`` of a SQLite file, a refusal of the OS names the file and why
    (SQLite's "attempt to write a readonly database" names neither)."""
    if isinstance(exc, IntegrityError):
        return ConflictError(f"conflicting write: {exc.orig}")
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    cause = f"{type(orig).__name__}: {str(orig).strip()[:300]}"
    if engine is None or (path := sqlite_file(str(engine.url))) is None:
        return StoreError(f"store operation failed: {cause}")
    access = sqlite_access(str(engine.url))
    if access != "rw" and "readonly" in str(orig):  # a write the URL's mode=ro refused
        return read_only_error(engine)
    problem = sqlite_access_problem(path, access)
    return StoreError(f"store operation failed: {cause}"
                      + (f" (store file {path}; {problem})" if problem else ""))


#: Runs inside :meth:`partition_notify.store.event_log.EventLog.append`'s transaction with the
#: messages logged (idempotency keys, late-message rows); raising rolls
#: everything back.
InTxn = Callable[["UnitOfWork", list[AnyMessage]], None]
#: A row as SQLite's driver returns it.
DriverRow = tuple[str | int | float | None, ...]


def map_driver_error(exc: sqlite3.Error,
                     engine: Engine | None = None) -> StoreError | ConflictError:
    """:func:`map_db_error` for an error of SQLite's driver used directly."""
    wrapped = DBAPIError.instance(None, None, exc, sqlite3.Error)
    return map_db_error(wrapped, engine)


def affected_rows(result: object) -> int:
    """Rows an UPDATE or DELETE matched (SQLAlchemy types ``Session.execute`` as a plain
    Result, but DML always returns a CursorResult, which counts them)."""
    assert isinstance(result, CursorResult)
    return int(result.rowcount)


def run_sql(session: Session, sql: str, params: Sequence[object]) -> CursorResult[Any]:
    """One prebuilt statement (``{p}`` marks each parameter) in ``session``'s transaction,
    handed to the driver as written: building a Core statement, its cache key and
    execution context cost more than a one-row insert (serve's commit route)."""
    conn = session.connection()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    return conn.exec_driver_sql(sql.format(p=mark), tuple(params))


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

    def run(self, sql: str, params: Sequence[object]) -> CursorResult[Any]:
        """:func:`run_sql` in this unit of work's transaction."""
        return run_sql(self.session, sql, params)

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
                    raise map_db_error(err, self._engine) from err
            else:
                self.session.rollback()
        finally:
            self.session.close()
        if isinstance(exc, SQLAlchemyError):
            raise map_db_error(exc, self._engine) from exc
        # Bulk inserts hand rows to SQLite's driver directly (append_rows.insert_many).
        if isinstance(exc, sqlite3.Error):
            raise map_driver_error(exc, self._engine) from exc


class Access:
    """The engine handles the store's parts share, and the store's clock.

    Each part's method opens one unit of work (or one plain read) through
    this: callers of the parts never see a transaction.
    """

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock
        # Built once: execution_options() copies the engine on every call.
        self.writer = engine.execution_options(**{WRITE: True})
        # Single-statement reads on the hot path: on PostgreSQL autocommit saves
        # the BEGIN and ROLLBACK round trips around them (bench/core_lookup.py).
        self._postgres = engine.dialect.name == "postgresql"
        self._reader = (
            engine.execution_options(isolation_level="AUTOCOMMIT")
            if self._postgres
            else engine.execution_options(**{SINGLE_READ: True})
        )

    @property
    def reader(self) -> Engine:
        """The single-statement reads' engine. Behind a pooler (store/pg_pooler.py)
        they run in a transaction, which carries the server's deadlines."""
        pooled = self._postgres and pg_pooler.behind_pooler(self.engine)
        return self.engine if pooled else self._reader

    def read(self, stmt: Executable, params: dict[str, Any]) -> list[Row[Any]]:
        """One statement on a plain connection: the hot reads skip the unit of work."""
        try:
            with self.reader.connect() as conn:
                return list(conn.execute(stmt, params))
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc

    def read_driver(self, sql: str, params: Sequence[str | int | float]) -> list[DriverRow]:
        """One prebuilt statement on the pool's driver connection (SQLite only).

        For the read every publish starts with: the Connection object, its
        events and the statement's execution context cost more CPU than the
        indexed look-up itself (bench/durable_publish.py). On PostgreSQL the
        driver would open a transaction around it; use :meth:`read` there.
        """
        try:
            raw = self.reader.raw_connection()
            try:
                cur = raw.cursor()
                cur.execute(sql, params)
                return list(cur.fetchall())
            finally:
                raw.close()  # back to the pool
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc
        except sqlite3.Error as exc:
            raise map_driver_error(exc) from exc

    def uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.writer if write else self.engine, write=write)
