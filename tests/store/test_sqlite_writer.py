"""The SQLite appends' own connection, begun and committed on the driver (store/sqlite_writer.py).

Real SQLite files; another connection holds the write lock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from partition_notify.store import Store
from partition_notify.store.sqlite_writer import SQLiteWriter
from sqlalchemy import text

from partition_notify.core.errors import StoreError
from tests.support import wal


def _locker(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _store(path: Path, timeout: float = 10.0) -> Store:
    store = Store.open(f"sqlite:///{path}", connect_timeout_seconds=timeout)
    store.catalog.register_table("db", "t", ["d"], topic="pn.db.t", retention_seconds=3600)
    return store


def _publish(store: Store, n: int = 1) -> None:
    from partition_notify.publisher import Publisher, PublisherConfig
    from partition_notify.transports.embedded import EmbeddedTransport

    pub = Publisher(store, EmbeddedTransport(store), PublisherConfig())
    for i in range(n):
        pub.send_mark_set_done("db", "t", f"d={time.monotonic_ns()}-{i}")


def _events(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM pn_events")).scalar_one())


def test_each_append_is_one_durable_commit_on_the_writer(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    _publish(store)  # the writer's connection is open from here
    wal.truncate(tmp_path / "s.db")
    _publish(store, 3)
    assert wal.commits(tmp_path / "s.db") == 3
    assert _events(store) == 4
    store.close()


def test_append_waits_for_the_lock_and_begins_right_after_its_release(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    locker = _locker(tmp_path / "s.db")
    writer = threading.Thread(target=_publish, args=(store,))
    writer.start()
    writer.join(0.3)
    assert writer.is_alive(), "the append committed while another connection held the lock"
    released = time.monotonic()
    locker.execute("COMMIT")
    writer.join(10)
    assert not writer.is_alive()
    assert time.monotonic() - released < 0.5
    assert _events(store) == 1
    locker.close()
    store.close()


def test_append_past_the_lock_deadline_fails_logs_nothing_and_the_next_one_works(
        tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db", timeout=0.1)  # lock deadline 3 x 0.1 s
    locker = _locker(tmp_path / "s.db")
    started = time.monotonic()
    with pytest.raises(StoreError, match="locked"):
        _publish(store)
    assert 0.25 < time.monotonic() - started < 5
    locker.execute("ROLLBACK")
    locker.close()
    assert _events(store) == 0
    _publish(store)
    assert _events(store) == 1
    store.close()


def test_a_failed_transaction_is_rolled_back_and_the_connection_reused(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    writer = SQLiteWriter(store.engine)
    with writer.transaction() as raw:
        raw.execute("CREATE TABLE x (v INTEGER PRIMARY KEY)")
    with pytest.raises(sqlite3.IntegrityError), writer.transaction() as raw:
        raw.execute("INSERT INTO x VALUES (1)")
        raw.execute("INSERT INTO x VALUES (1)")
    with writer.transaction() as raw:
        raw.execute("INSERT INTO x VALUES (2)")
    with store.engine.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT v FROM x"))] == [2]
    writer.close()
    store.close()


def test_a_second_transaction_waits_for_the_connection_then_gives_up_at_the_deadline(
        tmp_path: Path) -> None:
    """One transaction at a time on the shared connection; the wait for it has the
    write lock's deadline (3 x the connect timeout), not forever."""
    store = _store(tmp_path / "s.db", timeout=0.1)
    writer = SQLiteWriter(store.engine)
    outcome: list[BaseException | int] = []

    def second() -> None:
        try:
            outcome.append(writer.run(lambda conn: conn.execute("SELECT 1").fetchone()[0]))
        except BaseException as exc:  # reported below
            outcome.append(exc)

    with writer.transaction():
        other = threading.Thread(target=second)
        started = time.monotonic()
        other.start()
        other.join(10)
        waited = time.monotonic() - started
    assert isinstance(outcome[0], sqlite3.OperationalError), outcome
    assert "writer connection was busy for 0.3 s" in str(outcome[0])
    assert 0.3 <= waited < 5
    assert writer.run(lambda conn: conn.execute("SELECT 1").fetchone()[0]) == 1  # released
    writer.close()
    store.close()


def test_a_forked_child_writes_on_a_connection_of_its_own(tmp_path: Path) -> None:
    # SQLite's rule: a child must not write on its parent's connection (the writer keeps
    # one open across transactions).
    import os

    store = _store(tmp_path / "s.db")
    _publish(store)  # the parent's writer connection is open
    writer = store.log._writer
    assert writer is not None
    parent_conn = writer._connection()
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 only if it opened and used its own connection
        try:
            ok = writer._connection() is not parent_conn
            _publish(store)
            os._exit(0 if ok and _events(store) == 2 else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert writer._connection() is parent_conn
    _publish(store)
    assert _events(store) == 3
    store.close()
