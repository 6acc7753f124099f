"""A SQLite writer's BEGIN IMMEDIATE, issued on the driver connection (store/engine.py).

Real SQLite files; another connection holds the write lock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from partition_notify.store.engine import WRITE, make_engine
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError


def _locker(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _engine(path: Path, timeout: float) -> Engine:
    engine = make_engine(f"sqlite:///{path}", connect_timeout_seconds=timeout)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
    return engine


def test_writer_begins_right_after_the_lock_is_released(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s.db", timeout=10.0)
    locker = _locker(tmp_path / "s.db")
    began: list[float] = []

    def write() -> None:
        with engine.execution_options(**{WRITE: True}).begin() as conn:
            began.append(time.monotonic())
            conn.execute(text("INSERT INTO t VALUES (1)"))

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(0.3)
    assert writer.is_alive(), "the writer began while another connection held the lock"
    released = time.monotonic()
    locker.execute("COMMIT")
    writer.join(10)
    assert not writer.is_alive()
    assert began and began[0] - released < 0.5
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM t")).scalar_one() == 1
        # The busy timeout other statements wait with is back after the write.
        assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == 30000
    engine.dispose()
    locker.close()


def test_writer_past_its_deadline_gets_sqlalchemys_locked_error(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s.db", timeout=0.1)  # lock deadline 3 x 0.1 s
    locker = _locker(tmp_path / "s.db")
    started = time.monotonic()
    with (pytest.raises(OperationalError, match="locked"),
          engine.execution_options(**{WRITE: True}).begin()):
        pass
    assert 0.25 < time.monotonic() - started < 5
    locker.execute("ROLLBACK")
    locker.close()
    engine.dispose()
