"""Cross-process wake-ups of the embedded transport (issue 20).

A subscriber whose fallback poll is a minute away must still hear another
process's commit at once: from PostgreSQL's LISTEN/NOTIFY or SQLite's
inotify/data_version. A wake-up is a hint: a dropped LISTEN connection
must not lose the message committed while it was down.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from partition_notify.store.wakeups import (
    DataVersionWaker,
    InotifyWaker,
    PostgresWaker,
    cross_process_waker,
)

from partition_notify.app import build_app

#: Far beyond every wait below: a delivery within WAIT cannot be the fallback poll.
POLL = 120.0
WAIT = 30.0

PUBLISH = """
import sys
from partition_notify.app import build_app
with build_app(store_url=sys.argv[1], transport_url="embedded://") as app:
    app.publisher.send_mark_set_done("wake", "t", {"ds": sys.argv[2]})
"""


def _subscriber(store_url: str) -> tuple[object, object, threading.Event, list[object]]:
    app = build_app(store_url=store_url, transport_url="embedded://",
                    poll_interval_seconds=POLL)
    app.publisher.register_table("wake", "t", ["ds"])
    got: list[object] = []
    arrived = threading.Event()

    def on_message(msg: object) -> None:
        got.append(msg)
        arrived.set()

    sub = app.subscriber()
    sub.subscribe(("wake", "t"), on_message)
    return app, sub, arrived, got


def test_a_commit_in_another_process_wakes_the_subscriber(store_url: str) -> None:
    app, sub, arrived, got = _subscriber(store_url)
    try:
        subprocess.run([sys.executable, "-c", PUBLISH, store_url, "1"], check=True,
                       timeout=WAIT, env={**os.environ, "PN_LOG_LEVEL": "WARNING"})
        assert arrived.wait(WAIT), "the other process's commit never woke the subscriber"
        assert [m.partition_spec for m in got] == [{"ds": "1"}]  # type: ignore[attr-defined]
    finally:
        sub.close()
        app.close()


def _listener_pids(admin: sa.Engine, database: str) -> list[int]:
    with admin.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT pid FROM pg_stat_activity WHERE datname = :db AND query = 'LISTEN pn_events'"
        ), {"db": database}).all()
    return [int(r[0]) for r in rows]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_dropped_listen_connection_loses_nothing(store_url: str) -> None:
    app, sub, arrived, got = _subscriber(store_url)
    admin = sa.create_engine(store_url)
    database = sa.engine.make_url(store_url).database or ""
    try:
        deadline = time.monotonic() + WAIT
        while not (pids := _listener_pids(admin, database)):
            assert time.monotonic() < deadline, "the subscriber never ran LISTEN"
            time.sleep(0.05)  # polling pg_stat_activity: no event tells us LISTEN ran
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pids[0]})
            conn.commit()
        # Committed while the listener is (likely) away: the reconnect's own wake-up finds it.
        with build_app(store_url=store_url, transport_url="embedded://") as other:
            other.publisher.send_mark_set_done("wake", "t", {"ds": "2"})
        assert arrived.wait(WAIT), "the message committed around the drop was lost"
        assert [m.partition_spec for m in got] == [{"ds": "2"}]  # type: ignore[attr-defined]
    finally:
        admin.dispose()
        sub.close()
        app.close()


def _commit_elsewhere(db: Path) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()


@pytest.mark.parametrize("kind", [InotifyWaker, DataVersionWaker])
def test_sqlite_wakers_hear_another_connection_commit(tmp_path: Path, kind: type) -> None:
    db = tmp_path / "store.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    woke = threading.Event()
    waker = kind(db, woke.set).start()
    try:
        assert woke.wait(WAIT), "the waker never started"  # its catch-up wake-up
        woke.clear()
        _commit_elsewhere(db)
        assert woke.wait(WAIT), f"{kind.__name__} missed a commit"
    finally:
        waker.close(5)


def _event(name: str, mask: int = 0x2) -> bytes:
    raw = name.encode() + b"\0" * (16 - len(name) % 16)  # the kernel pads names with NULs
    return struct.pack("iIII", 1, mask, 0, len(raw)) + raw


def test_only_the_database_files_count_as_a_commit(tmp_path: Path) -> None:
    # The parser alone: an inotify queue is shared by every file of the directory,
    # and a write to a log file beside the database must not start a settle loop.
    # (writes pending a settle, the wake file touched)
    waker = InotifyWaker(tmp_path / "store.db", lambda: None)
    assert waker._events(_event("notes.txt") + _event("store.db.bak")) == (False, False)
    assert waker._events(_event("notes.txt") + _event("store.db-wal")) == (True, False)
    assert waker._events(_event("store.db")) == (True, False)
    assert waker._events(_event("", mask=0x4000)) == (True, False)  # overflow: assume a commit
    # A touch follows its commit's writes: only writes after the last touch are pending.
    assert waker._events(_event("store.db-wal") + _event("store.db-pn-commit", 0x4)) == (
        False, True)
    assert waker._events(_event("store.db-pn-commit", 0x4) + _event("store.db-wal")) == (
        True, True)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_postgres_waker_hears_notify_only_at_commit(store_url: str) -> None:
    engine = sa.create_engine(store_url)
    woke = threading.Event()
    waker = cross_process_waker(engine, woke.set)
    assert isinstance(waker, PostgresWaker)
    try:
        assert woke.wait(WAIT)
        woke.clear()
        with engine.connect() as conn:
            conn.exec_driver_sql("NOTIFY pn_events")
            assert not woke.wait(0.5), "woken before the transaction committed"
            conn.commit()
        assert woke.wait(WAIT)
    finally:
        waker.close(5)
        engine.dispose()


def test_an_in_memory_store_has_no_waker() -> None:
    assert cross_process_waker(sa.create_engine("sqlite://"), lambda: None) is None
