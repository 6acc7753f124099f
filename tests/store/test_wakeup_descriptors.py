"""The SQLite waker keeps working when its descriptors are numbered past select()'s 1024.

serve may hold up to PN_HTTP_MAX_CONNECTIONS (default 1024) connections and
raises its open-files limit to match (http/server.py), so a waker started or
restarted while they are open gets a descriptor above FD_SETSIZE, which
``select.select`` refuses (ValueError): wake-ups would fail, and readers fall
back to their slow poll.
"""

from __future__ import annotations

import logging
import os
import resource
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from partition_notify.store.wakeups import InotifyWaker

FD_SETSIZE = 1024
WAIT = 30.0


@pytest.fixture
def high_descriptors() -> Iterator[None]:
    """Every descriptor below FD_SETSIZE taken: the next one opened is above it."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and soft < FD_SETSIZE + 100:
        pytest.skip(f"open-files limit {soft} too low")
    fillers = [os.open(os.devnull, os.O_RDONLY)]
    while fillers[-1] < FD_SETSIZE:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
    try:
        yield
    finally:
        for fd in fillers:
            os.close(fd)


def test_inotify_waker_wakes_with_descriptors_above_fd_setsize(
        tmp_path: Path, high_descriptors: None, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "w.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
    woke = threading.Event()
    waker = InotifyWaker(db, woke.set).start()
    try:
        assert woke.wait(WAIT)  # the start's own wake-up
        woke.clear()
        with sqlite3.connect(db) as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        assert woke.wait(WAIT), "the commit did not wake the waker"
    finally:
        waker.close(WAIT)
    failed = [r.getMessage() for r in caplog.records
              if r.levelno >= logging.WARNING and "wake-ups failed" in r.getMessage()]
    assert not failed, failed
