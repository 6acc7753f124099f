"""A commit racing the SQLite waker's start still wakes it.

The waker announces its start (a wake-up for whatever committed while nobody
watched), then sets up its inotify watch and reads ``data_version`` once. A
commit whose WAL writes land before the watch and whose visibility lands after
that read produced no event and no change seen: the waker slept through it until
the next commit (CI failure of test_wakeup_descriptors.py, 2026-11-28; 16 of 100
starts missed their commit with the two cores busy). The writer here is a plain
``sqlite3`` connection, as a foreign process would be: it never touches the wake file.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from partition_notify.store.wakeups import InotifyWaker

STARTS = 40
WAIT = 5.0


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Both cores busy: the waker's thread is descheduled mid-start, as under CI's load."""
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for p in spin:
            p.kill()
            p.wait(WAIT)


def test_a_commit_racing_the_start_wakes_the_waker(tmp_path: Path, busy_cores: None) -> None:
    missed = []
    for i in range(STARTS):
        db = tmp_path / f"w{i}.db"
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE t (x)")
        woke = threading.Event()
        waker = InotifyWaker(db, woke.set).start()
        try:
            assert woke.wait(WAIT)  # the start's own wake-up
            woke.clear()
            writer = sqlite3.connect(db)  # at once: racing the watch's set-up
            with writer:
                writer.execute("INSERT INTO t VALUES (1)")
            writer.close()
            if not woke.wait(WAIT):
                missed.append(i)
                break
        finally:
            waker.close(WAIT)
    assert not missed, f"start #{missed[0]} slept through a commit made while it started"
