"""The SQLite connection the log's one-event appends write on, begun and committed on the driver.

Why: a publish's commit went through SQLAlchemy's Connection, a pool checkout
and check-in, and the engine's begin event with two ``busy_timeout`` pragmas
around ``BEGIN IMMEDIATE``; together more CPU than the append's own statements
(bench/durable_profile.py). One connection is enough: group commit's leader
writes one batch at a time (store/group_commit.py). Whoever else shares it (the
log's appends with group commit off, the relay and the mark flusher) queues for
it: a transaction has the connection to itself from BEGIN to COMMIT, and the
wait for it counts against the same deadline as the wait for the write lock.

Its busy timeout is 0 for good: ``BEGIN IMMEDIATE`` polls for the write lock
itself until the store's lock deadline (store/engine.py), and once the lock
is held no statement of the transaction waits for another (in WAL mode readers
never block the writer, and the commit's auto-checkpoint is passive). The
statements, their order, the lock and the durable commit (``synchronous`` as
the engine's connect hook set it) are those of the SQLAlchemy path.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from partition_notify.store.engine import sqlite_lock_seconds, try_begin_immediate
from sqlalchemy import Engine

T = TypeVar("T")


class SQLiteWriter:
    """A connection of ``engine``'s own (its connect hook ran), detached from the pool."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock_seconds = sqlite_lock_seconds(engine)
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._guard = threading.Lock()
        #: Held from BEGIN to COMMIT or ROLLBACK: one transaction at a time.
        self._use = threading.Lock()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` .. ``COMMIT``; rolled back if the body raises.

        Raises :class:`sqlite3.OperationalError` ("database is locked") when the
        connection or the write lock is not had within the deadline.
        """
        conn = self._begin()
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        finally:
            self._use.release()

    def run(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body`` in a :meth:`transaction`, without a generator's context manager
        (the publish path: a few microseconds each, on every commit)."""
        conn = self._begin()
        try:
            result = body(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        finally:
            self._use.release()
        return result

    def _begin(self) -> sqlite3.Connection:
        """The connection, ours until ``_use`` is released, in ``BEGIN IMMEDIATE``."""
        deadline = time.monotonic() + self._lock_seconds
        if not self._use.acquire(timeout=self._lock_seconds):
            raise sqlite3.OperationalError(
                f"database is locked: this process's writer connection was busy for "
                f"{self._lock_seconds:g} s")
        try:
            conn = self._connection()
            if not try_begin_immediate(conn, deadline):
                raise sqlite3.OperationalError(
                    f"database is locked: no write lock within {self._lock_seconds:g} s")
        except BaseException:
            self._use.release()
            raise
        return conn

    def close(self) -> None:
        with self._guard:
            conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            conn.close()

    def _connection(self) -> sqlite3.Connection:
        with self._guard:
            # A forked child must not write on its parent's connection (SQLite's rule).
            if self._conn is None or self._pid != os.getpid():
                proxied = self._engine.raw_connection()
                raw = proxied.driver_connection
                assert isinstance(raw, sqlite3.Connection), "SQLite engines only"
                proxied.detach()  # ours now: the pool opens another when it needs one
                raw.execute("PRAGMA busy_timeout=0")
                self._conn, self._pid = raw, os.getpid()
            return self._conn

    def _rollback(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            # A connection in an unknown state is not reused: the next write opens another.
            with self._guard:
                if self._conn is conn:
                    self._conn = None
            conn.close()


#: Event ids per statement: store/repositories.py's IN lists (under SQLite's variable limit).
MARK_CHUNK = 500
#: store/repositories.py's ``_MARK_PUBLISHED`` as SQLite driver SQL ({ids}: the markers).
_MARK_SQL = ("UPDATE pn_events SET published_at = ?, lease_owner = NULL, lease_until = NULL, "
             "retry_at = NULL WHERE event_id IN ({ids})")


class DriverMarks:
    """``EventLog.mark_published`` on a SQLite file: a connection of its own, on the driver.

    Why: the mark flusher (publisher/marks.py) writes every 0.1 s while a process
    publishes, and through the ORM unit of work (session, the begin event with its
    pragmas, an expanding IN) a flush of ~50 marks cost ~2 ms of CPU: 20-40 us per
    publish, a tenth of a one-at-a-time publish's (bench/durable_ab.py). The same
    statement, chunks and single transaction as the unit of work's; the flusher and
    the relay may mark at once: the writer takes them one at a time.
    """

    def __init__(self, engine: Engine) -> None:
        self._writer = SQLiteWriter(engine)

    def mark_published(self, ids: Sequence[int], now: float) -> None:
        def body(conn: sqlite3.Connection) -> None:
            for at in range(0, len(ids), MARK_CHUNK):
                part = ids[at:at + MARK_CHUNK]
                conn.execute(_MARK_SQL.format(ids=", ".join("?" * len(part))), (now, *part))

        self._writer.run(body)

    def close(self) -> None:
        self._writer.close()
