"""The storage provider: what the rest of partition-notify asks of the store.

``Store`` opens and closes the database and hands out its parts:
``partition_notify.store.catalog`` (tables, partitions), ``store.log`` (the event log and
outbox) and ``partition_notify.store.retention`` (set-done history, look-up, purge). Callers
never see a transaction (the storage interface hides them): each method of a
part is one unit of work.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from partition_notify.store.catalog import Catalog
from partition_notify.store.engine import (
    DEFAULT_SQLITE_SYNCHRONOUS,
    make_engine,
    sqlite_access,
    sqlite_access_problem,
    sqlite_file,
)
from partition_notify.store.event_log import EventLog
from partition_notify.store.hot_read import HotReader
from partition_notify.store.housekeeping import Housekeeping
from partition_notify.store.migrate import migrate, require_read_only_store
from partition_notify.store.records import (
    Clock,
    EventDraft,
    Logged,
    LoggedEvent,
    PartitionInfo,
    TableInfo,
)
from partition_notify.store.retention import Retention
from partition_notify.store.uow import Access, InTxn, map_db_error
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from partition_notify.core.errors import StoreError
from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS, STORE_REPLY_TIMEOUT_SECONDS
from partition_notify.core.redact import redact_url


class Store:
    """SQL-backed store of tables, partitions, the event log and set-done history."""

    def __init__(self, engine: Engine, *, clock: Clock = time.time) -> None:
        self.engine = engine
        self.clock = clock
        access = Access(engine, clock)
        # Raw connections kept for the hot single-statement reads: the waits'
        # look-up and the log followers' read. Shared, so their bound is the store's.
        self._hot = HotReader(engine)
        self.catalog = Catalog(access)
        self.log = EventLog(access, self._hot)
        self.retention = Retention(access, self._hot)
        self.housekeeping = Housekeeping(access)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Clock = time.time,
        upgrade: bool = True,
        connect_timeout_seconds: float = CONNECT_TIMEOUT_SECONDS,
        sqlite_synchronous: str = DEFAULT_SQLITE_SYNCHRONOUS,
        store_reply_timeout_seconds: float = STORE_REPLY_TIMEOUT_SECONDS,
    ) -> Store:
        engine = make_engine(
            url,
            connect_timeout_seconds=connect_timeout_seconds,
            sqlite_synchronous=sqlite_synchronous,
            store_reply_timeout_seconds=store_reply_timeout_seconds,
        )
        access = sqlite_access(url)
        read_only = access != "rw"
        path = sqlite_file(url)
        if read_only and path is not None and (problem := sqlite_access_problem(
                path, access)):  # before SQLite's "readonly database"
            engine.dispose()
            raise StoreError(f"store {redact_url(url)}: {problem}")
        try:
            if read_only:  # never written: not upgraded but refused if older than the code
                require_read_only_store(url, engine)
            elif upgrade:
                migrate(engine)
        except SQLAlchemyError as exc:
            engine.dispose()
            err = map_db_error(exc)  # the driver does not say which file it could not open
            raise type(err)(f"{err} (store {where(url)})") from exc
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, clock=clock)

    def close(self) -> None:
        self._hot.close()  # kept connections: the engine's pool does not own them
        self.log.close()
        self.engine.dispose()

    def read(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        """The rows of one SELECT (``{p}`` marks each parameter), read on a kept raw
        connection (store/hot_read.py): no pool checkout, ORM session or result
        wrapping, which were most of a single indexed read's time. Reads the newest
        commit, as a unit of work would."""
        text = sql.format(p="?" if self.engine.dialect.paramstyle == "qmark" else "%s")
        rows = self._hot.rows(text, params)
        if rows is not None:
            return rows
        try:  # every kept connection busy: one from the pool
            with self.engine.connect() as conn:
                return [tuple(r) for r in conn.exec_driver_sql(text, tuple(params))]
        except SQLAlchemyError as exc:
            raise map_db_error(exc) from exc

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name


def where(url: str) -> str:
    """The store as a user can find it: redacted URL and, for SQLite, its file, with
    the reason SQLite gives only as "unable to open" (a missing directory, a file or
    directory this process may not read or write)."""
    path = sqlite_file(url)
    if path is None:
        return redact_url(url)
    problem = sqlite_access_problem(path, sqlite_access(url))
    return f"{redact_url(url)}, file {path}" + (f"; {problem}" if problem else "")


__all__ = [
    "Clock",
    "EventDraft",
    "InTxn",
    "Logged",
    "LoggedEvent",
    "PartitionInfo",
    "Store",
    "TableInfo",
]
