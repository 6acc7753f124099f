"""Raw driver connections kept open for the store's hottest single-statement read.

The is-set-done look-up is one indexed SELECT, run by every wait. Profiled
through an engine connection (bench/core_lookup.py --profile), most of its
client time went to the pool around the query, not to the query: checkout,
a pre-ping round trip on PostgreSQL, the reset on return, and SQLAlchemy's
execution context and result wrapping. Here a few raw DBAPI connections are
kept aside (detached from the pool, so they take none of its slots) and reused
last-in first-out; the statement goes straight to the driver.

Freshness is unchanged: SQLite connections are in autocommit mode and the
result is read to the end, so each SELECT reads the newest committed snapshot
and holds no read transaction afterwards; PostgreSQL connections are set to
autocommit, so each statement takes a new snapshot.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from partition_notify.store import pg_pooler
from partition_notify.store.uow import map_db_error
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

if TYPE_CHECKING:
    # psycopg is the [postgres] extra: imported at run time only by a PostgreSQL store.
    import psycopg
    from psycopg.rows import TupleRow

    Conn = sqlite3.Connection | psycopg.Connection[TupleRow]

#: Connections kept aside at most; a burst beyond it uses the engine's pool.
#: Waiters poll one at a time, so a few cover them, and an idle PostgreSQL
#: connection held for the store's lifetime is a server process.
MAX_KEPT = 4

#: The look-up's SQLite connections read pages through a memory map instead of
#: one read() call per page missing from SQLite's small page cache: with
#: 1,000,000 rows it cut the look-up's CPU p50 by 7-27% and p99 by 22-41%
#: (two A/B runs on one loaded file, docs/benchmarks.md). Address space only; the pages
#: are the OS page cache's. Writers keep plain reads.
SQLITE_MMAP_BYTES = 1 << 30

#: Bumped in a forked child: connections (sockets, SQLite handles) inherited
#: from the parent must not be used or closed there.
_fork_generation = 0


def _after_fork() -> None:
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork)

ErrorTypes = tuple[type[Exception], ...]


def _driver_errors(
    engine: Engine,
) -> tuple[ErrorTypes, ErrorTypes, type[psycopg.Connection[TupleRow]] | None]:
    """(disconnects, driver errors, psycopg's Connection or None) for ``engine``'s driver."""
    if engine.dialect.driver != "psycopg":
        return (sqlite3.OperationalError,), (sqlite3.Error,), None
    import psycopg  # the engine's dialect has imported it already

    return ((sqlite3.OperationalError, psycopg.OperationalError),
            (sqlite3.Error, psycopg.Error), psycopg.Connection)


class HotReader:
    """Runs one SELECT on a kept raw connection (the store's one: see :class:`Store`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # An in-memory SQLite database lives in its one shared connection.
        self.enabled = not isinstance(engine.pool, StaticPool)
        self._idle: list[Conn] = []
        self._open: list[Conn] = []
        self._lock = threading.Lock()
        self._generation = _fork_generation
        self._closed = False
        self._disconnects, self._driver_errors, self._pg_connection = _driver_errors(engine)

    def rows(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]] | None:
        """Every row as the driver returns it, or None when no connection is free."""
        if self._generation != _fork_generation:
            self._forget_inherited()
        try:
            try:
                conn: Conn | None = self._idle.pop()  # atomic under the GIL: no lock needed
                reused = True
            except IndexError:
                conn, reused = self._connect(), False
            if conn is None:
                return None
            try:
                return self._run(conn, sql, params)
            except self._disconnects:
                if not reused:
                    raise
            # Possibly dropped while idle (a server restart), which the pool's
            # pre-ping would have caught: a read can safely go once more.
            conn = self._connect()
            return None if conn is None else self._run(conn, sql, params)
        except self._driver_errors as exc:
            raise map_db_error(DBAPIError(sql, None, exc, hide_parameters=True)) from exc
        except SQLAlchemyError as exc:  # the pool timing out while we connect
            raise map_db_error(exc) from exc

    def _run(self, conn: Conn, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        try:
            if isinstance(conn, sqlite3.Connection):
                rows = conn.execute(sql, params).fetchall()
            else:
                # Prepared from the first call, not after psycopg's default five.
                rows = conn.execute(sql, params, prepare=True).fetchall()
        except BaseException:
            self._discard(conn)
            raise
        if self._closed:  # the store closed while this read ran
            self._discard(conn)
        else:
            self._idle.append(conn)
        return [tuple(r) for r in rows]

    def _connect(self) -> Conn | None:
        with self._lock:
            if self._closed or not self.enabled or len(self._open) >= MAX_KEPT:
                return None
            proxied = self._engine.raw_connection()  # runs the engine's connect hooks
            proxied.detach()  # ours now: the pool neither counts nor resets it
            raw = proxied.dbapi_connection
            conn: Conn
            if isinstance(raw, sqlite3.Connection):
                conn = raw  # the connect hook already set autocommit
                if SQLITE_MMAP_BYTES:
                    conn.execute(f"PRAGMA mmap_size={int(SQLITE_MMAP_BYTES)}")
            elif pg_pooler.behind_pooler(self._engine):
                # A kept connection reads in autocommit, with a prepared statement and a
                # session setting: none of which a pooler keeps (store/pg_pooler.py).
                proxied.close()
                self.enabled = False
                return None
            elif self._pg_connection is not None and isinstance(raw, self._pg_connection):
                raw.autocommit = True
                # Prepared, but planned on every run for the table as it is: PostgreSQL
                # would switch to a generic plan after five runs and keep it until the
                # table's statistics change (never, without autovacuum). The set-done
                # look-up's plan made while pn_set_done was empty read every set-done
                # row of the table per wait once it had grown
                # (tests/store/test_hot_read_plans.py). Planning costs ~0.03 ms.
                raw.execute("SET plan_cache_mode = force_custom_plan")
                conn = raw
            else:  # another driver: leave it to the engine
                proxied.close()
                self.enabled = False
                return None
            self._open.append(conn)
            return conn

    def _discard(self, conn: Conn) -> None:
        with self._lock:
            if conn in self._open:
                self._open.remove(conn)
        with contextlib.suppress(Exception):  # already broken: closing is best effort
            conn.close()

    def _forget_inherited(self) -> None:
        with self._lock:
            self._idle, self._open = [], []
            self._generation = _fork_generation

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._idle, self._open = self._open, [], []
        if self._generation == _fork_generation:
            for conn in conns:
                with contextlib.suppress(Exception):  # one broken need not keep others open
                    conn.close()
