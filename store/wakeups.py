"""Cross-process wake-ups for readers of the event log.

In one process an append wakes the log's readers at once (the event log's
after-commit listeners). A reader in *another* process learns of a commit
here, from the database's own signal:

- PostgreSQL: every append sends ``NOTIFY pn_events`` inside its transaction
  (delivered at commit, never for a rollback); a listener thread holds one
  connection with ``LISTEN pn_events``.
- SQLite: an append of this library touches a wake file beside the database
  once its commit is visible (:class:`WakeFile`); any commit writes the WAL
  (or, outside WAL mode, the database file) before it is visible. A thread
  waits on inotify for the database's directory (Linux): a touch wakes
  readers at once, a write starts a short ``PRAGMA data_version`` watch (for
  writers that do not touch). Where inotify is missing it polls
  ``data_version`` every :data:`DATA_VERSION_POLL_SECONDS` instead.

A wake-up is a hint, never the truth: a lost notification (a dropped
listener connection, an inotify queue overflow) costs latency only, because
readers still read the log every fallback interval and reconnecting wakes
them once (to catch what committed while nobody listened).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
import sqlite3
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from partition_notify.store import pg_deadlines, pg_pooler
from partition_notify.store.engine import sqlite_file
from partition_notify.store.pg_pooler import Pooler
from sqlalchemy.engine import Engine

from partition_notify.core.backoff import Backoff

log = logging.getLogger(__name__)

#: The PostgreSQL notification channel every append notifies.
CHANNEL = "pn_events"
NOTIFY_SQL = f"NOTIFY {CHANNEL}"
#: With a waker, readers still read the log at least this often: a lost
#: wake-up costs at most this much latency.
FALLBACK_SECONDS = 1.0
#: A PostgreSQL listener that could not tell whether LISTEN is heard asks again after
#: this long, doubling up to REPROBE_MAX_SECONDS (each attempt: the engine's connect
#: deadline, PN_CONNECT_TIMEOUT_SECONDS).
REPROBE_SECONDS = 0.25
REPROBE_MAX_SECONDS = 5.0
#: How often a waker checks that it was asked to stop (also its longest close).
STOP_CHECK_SECONDS = 0.25
#: SQLite: how often ``PRAGMA data_version`` is read (always without inotify;
#: with it only after a write to the WAL, for at most SETTLE_SECONDS).
DATA_VERSION_POLL_SECONDS = 0.002
SETTLE_SECONDS = 1.0
#: After a WAL write the commit is usually visible within the fsync (about a
#: millisecond): the settle's first reads are this far apart, each next one
#: SETTLE_BACKOFF times further, up to SETTLE_MAX_POLL_SECONDS. A write whose
#: commit was already reported (a commit's later WAL writes queue behind the
#: wake-up its first one caused) then costs a few dozen reads, not one every
#: 0.2 ms for a second; a commit's own latency grows by at most a quarter of
#: its fsync time, or not at all where its writer touches the wake file.
SETTLE_POLL_SECONDS = 0.0002
SETTLE_BACKOFF = 1.25
SETTLE_MAX_POLL_SECONDS = 0.02
#: Beside an SQLite database ``<db>`` + WAKE_SUFFIX: every append of this
#: library touches it once its commit is visible, an exact signal for readers
#: in other processes (the WAL writes come before the commit is visible).
WAKE_SUFFIX = "-pn-commit"

_IN_MODIFY, _IN_ATTRIB, _IN_CREATE, _IN_MOVED_TO = 0x2, 0x4, 0x100, 0x80
_IN_Q_OVERFLOW = 0x4000
_EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)

OnCommit = Callable[[], None]


class Waker:
    """A daemon thread that calls ``on_commit`` when another process commits."""

    def __init__(self, name: str, on_commit: OnCommit) -> None:
        self.on_commit = on_commit
        self.stop = threading.Event()
        self.kind = name
        self._thread = threading.Thread(target=self._guarded, name=f"pn-wake-{name}", daemon=True)

    def start(self) -> Waker:
        self._thread.start()
        return self

    def close(self, timeout: float) -> None:
        self.stop.set()
        self._thread.join(min(timeout, STOP_CHECK_SECONDS * 4))

    def _guarded(self) -> None:
        backoff = Backoff(initial=0.1, cap=5.0)
        while not self.stop.is_set():
            try:
                self.run(backoff)
            except Exception as exc:  # the fallback poll keeps delivering meanwhile
                delay = backoff.failed()
                log.warning("%s wake-ups failed, retrying in %.1f s (readers fall back to "
                            "polling): %s", self.kind, delay, exc)
                backoff.wait(self.stop, delay)

    def run(self, backoff: Backoff) -> None:
        raise NotImplementedError

    def hears(self) -> bool:
        """Whether commits of other processes wake readers (else they poll the log at
        their poll interval, not the wake-up fallback)."""
        return True


class PostgresWaker(Waker):
    """LISTEN on one connection. Started ``undecided`` (an engine that could not tell
    whether LISTEN would be heard through its pooler: store/pg_pooler.py), it asks
    again with a capped backoff, each attempt within the engine's connect deadline,
    until it can: then it listens, or (a transaction-mode pooler) ends, readers polling."""

    def __init__(self, conninfo: str, deadlines: tuple[float | None, dict[str, Any]],
                 on_commit: OnCommit, pooler: Pooler | None = None,
                 undecided: Engine | None = None) -> None:
        super().__init__("postgresql", on_commit)
        self._conninfo = conninfo
        self._reply, self._args = deadlines  # the engine's (store/pg_deadlines.py)
        self._pooler = pooler
        self._undecided = undecided
        self._listens = undecided is None
        #: Set once it is known whether LISTEN is heard (at once unless undecided).
        self.settled = threading.Event()
        if undecided is None:
            self.settled.set()

    def hears(self) -> bool:
        return self._listens

    def _decide(self, engine: Engine) -> bool:
        """Ask the pooler question again until answered; whether to listen."""
        again = Backoff(initial=REPROBE_SECONDS, cap=REPROBE_MAX_SECONDS)
        while not self.stop.is_set():
            sessions = pg_pooler.keeps_sessions(engine, quiet=True)
            if sessions is not None:
                self._undecided, self._listens = None, sessions
                self.settled.set()
                if sessions:
                    log.info("PostgreSQL at %s:%s answers: wake-ups listen (LISTEN %s), "
                             "readers no longer poll", engine.url.host, engine.url.port,
                             CHANNEL)
                return sessions
            again.wait(self.stop, again.failed())
        return False

    def run(self, backoff: Backoff) -> None:
        if self._undecided is not None and not self._decide(self._undecided):
            self.stop.set()  # a transaction-mode pooler (said once) or closed: readers poll
            return
        with pg_deadlines.connect(self._reply, self._conninfo, autocommit=True,
                                  pooler=self._pooler, **self._args) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            backoff.reset()
            self.on_commit()  # whatever committed while nobody listened
            heard = time.monotonic()
            while not self.stop.is_set():
                # Several commits in one burst need one read of the log, not one each.
                woke = False
                for _ in conn.notifies(timeout=STOP_CHECK_SECONDS, stop_after=1):
                    woke = True
                if woke:
                    self.on_commit()
                    heard = time.monotonic()
                elif self._reply is not None and time.monotonic() - heard >= self._reply:
                    # Waiting for NOTIFY sends nothing, so a server that stopped
                    # answering would never be noticed: ask it, within the reply deadline.
                    conn.execute("SELECT 1")
                    heard = time.monotonic()


class DataVersionWaker(Waker):
    """Polls ``PRAGMA data_version``, which changes when another connection commits."""

    def __init__(self, database: Path, on_commit: OnCommit,
                 kind: str = "sqlite-data-version") -> None:
        super().__init__(kind, on_commit)
        self._database = database

    def run(self, backoff: Backoff) -> None:
        uri = f"{self._database.resolve().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=STOP_CHECK_SECONDS,
                               check_same_thread=False)
        try:
            last = _data_version(conn)
            backoff.reset()
            self.on_commit()  # whatever committed while nobody watched
            self.follow(conn, last)
        finally:
            conn.close()

    def follow(self, conn: sqlite3.Connection, last: int) -> None:
        while not self.stop.wait(DATA_VERSION_POLL_SECONDS):
            last = self._woken_if_changed(conn, last)

    def _woken_if_changed(self, conn: sqlite3.Connection, last: int) -> int:
        now = _data_version(conn)
        if now != last:
            self.on_commit()
        return now


class InotifyWaker(DataVersionWaker):
    """Sleeps on inotify; a write to the WAL starts a short ``data_version`` watch.

    The write alone is too early a signal: SQLite writes the WAL frames, fsyncs
    them and only then publishes the commit in the shared-memory index, which
    inotify does not see. A reader woken by the write could read before the
    commit is visible and then sleep until the fallback poll; so after a write
    we poll ``data_version`` until it moves (at most :data:`SETTLE_SECONDS`),
    or until the writer touches the wake file (:class:`WakeFile`).
    """

    def __init__(self, database: Path, on_commit: OnCommit) -> None:
        super().__init__(database, on_commit, "sqlite-inotify")
        self._dir = database.parent
        self._names = {database.name, f"{database.name}-wal", f"{database.name}-journal"}
        self._wake_name = f"{database.name}{WAKE_SUFFIX}"

    def follow(self, conn: sqlite3.Connection, last: int) -> None:
        libc = _libc()
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        try:
            mask = _IN_MODIFY | _IN_ATTRIB | _IN_CREATE | _IN_MOVED_TO
            if libc.inotify_add_watch(fd, os.fsencode(self._dir), mask) < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {self._dir} failed")
            # A commit whose WAL writes came before the watch can still become visible
            # after one read here, with no event left to tell: watch data_version a
            # while, as after a write (tests/store/test_wakeup_start_race.py).
            last = self._settle(conn, last, fd)
            while not self.stop.is_set():
                if not _readable(fd, STOP_CHECK_SECONDS):
                    continue
                pending, touched = self._events(os.read(fd, 64 * 1024))
                if touched:
                    last = self._woken_if_changed(conn, last)
                if pending:
                    last = self._settle(conn, last, fd)
        finally:
            os.close(fd)

    def _settle(self, conn: sqlite3.Connection, last: int, fd: int) -> int:
        """Read ``data_version`` until it moves, at ever longer intervals.

        The wait between reads is on the inotify descriptor: the writer's touch
        of the wake file after the writes ends it at once, their commit being
        visible by then; another write starts the fine reads again.
        """
        until = time.monotonic() + SETTLE_SECONDS
        interval = SETTLE_POLL_SECONDS
        while not self.stop.is_set():
            now = self._woken_if_changed(conn, last)
            if now != last:
                return now
            left = until - time.monotonic()
            if left <= 0:
                break
            if not _readable(fd, min(interval, left)):
                interval = min(interval * SETTLE_BACKOFF, SETTLE_MAX_POLL_SECONDS)
                continue
            pending, touched = self._events(os.read(fd, 64 * 1024))
            if pending:  # its commit may follow as soon as its fsync
                until, interval = time.monotonic() + SETTLE_SECONDS, SETTLE_POLL_SECONDS
            elif touched:
                return self._woken_if_changed(conn, last)
        return last

    def _events(self, data: bytes) -> tuple[bool, bool]:
        """(a database file was written after the last touch of the wake file, it was touched).

        inotify keeps a directory's events in order, and the wake file is touched
        once a commit is visible: writes before a touch belong to visible commits.
        """
        pending = touched = False
        offset = 0
        while offset + _EVENT_HEADER.size <= len(data):
            _, mask, _, length = _EVENT_HEADER.unpack_from(data, offset)
            start = offset + _EVENT_HEADER.size
            name = data[start:start + length].rstrip(b"\0").decode(errors="replace")
            offset = start + length
            if mask & _IN_Q_OVERFLOW or name in self._names:
                pending = True
            elif name == self._wake_name:
                pending, touched = False, True
        return pending, touched


class WakeFile:
    """Touched by the appending process once its commit is visible (SQLite).

    A failed touch costs readers in other processes latency only (the WAL
    watch and the fallback read remain): it is reported once, then skipped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._failed = False

    def touch(self) -> None:
        if self._failed:
            return
        try:
            try:
                os.utime(self.path)  # IN_ATTRIB: one syscall, no data written
            except FileNotFoundError:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o666))  # IN_CREATE
        except OSError as exc:
            self._failed = True
            log.warning("cannot touch %s (%s): other processes' readers of this store "
                        "hear its commits from the WAL instead, a little later", self.path, exc)


def wake_file(engine: Engine) -> WakeFile | None:
    """The wake file of ``engine``'s SQLite database; None for PostgreSQL or in memory."""
    database = _sqlite_database(engine)
    return None if database is None else WakeFile(database.with_name(
        database.name + WAKE_SUFFIX))


def _sqlite_database(engine: Engine) -> Path | None:
    # sqlite_file: a URI filename (file:PATH?mode=ro) is PATH, not a relative "file:PATH".
    return sqlite_file(str(engine.url)) if engine.dialect.name == "sqlite" else None


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has data within ``timeout`` seconds (rounded up to a millisecond).

    poll(), not select(): serve holding ~1024 HTTP connections puts a waker's
    descriptor past select()'s FD_SETSIZE (1024), where select() raises.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if not hasattr(libc, "inotify_init1"):
        raise OSError("no inotify in this C library")
    return libc


def reader_fallback(waker: Waker | None, poll: float) -> float:
    """How long a reader of the log waits for a wake-up before reading anyway:
    :data:`FALLBACK_SECONDS` (at least ``poll``) while ``waker`` hears other processes'
    commits, else ``poll`` (no waker, or a PostgreSQL listener still asking its pooler)."""
    return max(poll, FALLBACK_SECONDS) if waker is not None and waker.hears() else poll


def cross_process_waker(engine: Engine, on_commit: OnCommit, *,
                        inotify: bool = True) -> Waker | None:
    """A started waker for ``engine``'s database, or None (an in-memory SQLite, a
    PostgreSQL pooler in transaction mode: readers poll). On PostgreSQL it connects
    with the engine's deadlines (make_engine's); one that cannot tell yet whether
    LISTEN would be heard asks again until it can (:class:`PostgresWaker`)."""
    url = engine.url
    if engine.dialect.name == "postgresql":
        sessions = pg_pooler.keeps_sessions(engine)
        if sessions is False:  # LISTEN would hear nothing
            return None
        conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        return PostgresWaker(conninfo, pg_deadlines.config(engine), on_commit,
                             pg_pooler.pooler_of(engine),
                             undecided=engine if sessions is None else None).start()
    database = _sqlite_database(engine)
    if database is None:
        return None
    if inotify:
        try:
            _libc()
            return InotifyWaker(database, on_commit).start()
        except OSError as exc:
            log.info("no inotify (%s): SQLite wake-ups poll PRAGMA data_version", exc)
    return DataVersionWaker(database, on_commit).start()
