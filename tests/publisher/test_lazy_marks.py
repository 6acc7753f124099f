"""Marks of broker-confirmed events are written lazily, in batches.

One durable commit per publish (the log append), nothing lost: an event
whose mark is pending stays unpublished in the log, the relay leaves it to
its writer while it is young, and re-sends it only if the writer died
before the mark (at least once). close() writes what is pending, with a
deadline. SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from partition_notify.publisher import Publisher, PublisherConfig
from partition_notify.publisher.marks import MarkBatcher
from partition_notify.publisher.relay import Relay
from partition_notify.store import Store
from partition_notify.store.engine import sqlite_file
from partition_notify.transports.base import Consumer, OnMessage, Transport
from sqlalchemy import event

from partition_notify.contract import Envelope
from partition_notify.core.errors import StoreError
from tests.support import wal


class RecordingBus(Transport):
    """A test double, not a broker: it confirms every envelope and keeps a copy."""

    scheme = "recording"

    def __init__(self) -> None:
        self.sent: list[Envelope] = []

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RecordingBus:
        return cls()

    def publish(self, envelopes: Sequence[Envelope], *, timeout: float) -> None:
        self.sent.extend(envelopes)

    def consumer(self, on_message: OnMessage) -> Consumer:
        raise NotImplementedError("publishing only")


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store.open(store_url)
    yield s
    s.close()


def _publisher(store: Store, bus: Transport, interval: float = 3600.0, **kw: Any) -> Publisher:
    config = PublisherConfig(mark_flush_interval_seconds=interval, **kw)
    pub = Publisher(store, bus, config)
    pub.register_table("lazy", "events", ["datestamp"])
    return pub


def _commits(store: Store) -> Callable[[], int]:
    """Durable commits from now on: on SQLite the WAL's commit frames (appends commit on
    the driver, past SQLAlchemy's events), on PostgreSQL the engine's commit events."""
    db = sqlite_file(str(store.engine.url))
    if db is not None:
        wal.truncate(db)
        return lambda: wal.commits(db)
    seen: list[int] = []
    event.listen(store.engine, "commit", lambda conn: seen.append(1))
    return lambda: len(seen)


def test_each_publish_is_one_commit_and_the_marks_one_batch(store: Store) -> None:
    bus = RecordingBus()
    pub = _publisher(store, bus)
    commits = _commits(store)
    for i in range(5):
        pub.send_mark_set_done("lazy", "events", f"datestamp={i}")
    assert commits() == 5, "one durable commit per publish"
    assert len(bus.sent) == 5
    assert store.log.relay_lag()[0] == 5, "marks are pending, not lost"
    pub.flush_marks()
    assert commits() == 6, "the five marks in one transaction"
    assert store.log.relay_lag()[0] == 0


def test_relay_does_not_resend_events_whose_marks_are_pending(store: Store) -> None:
    bus = RecordingBus()
    pub = _publisher(store, bus)
    for i in range(3):
        pub.send_mark_set_done("lazy", "events", f"datestamp={i}")
    relay_bus = RecordingBus()
    # The relay as serve builds it: its writer grace covers a healthy writer's pending marks.
    relay = Relay(store, relay_bus)
    assert relay.writer_grace > 10 * PublisherConfig().mark_flush_interval_seconds
    assert relay.run_once() == 0
    assert relay_bus.sent == [], "re-sent an event its writer had published"
    assert pub.close(5.0)
    assert store.log.relay_lag()[0] == 0


def test_writer_dead_before_the_mark_means_one_resend_in_order(store: Store) -> None:
    bus = RecordingBus()
    pub = _publisher(store, bus)
    sent = [pub.send_mark_set_done("lazy", "events", f"datestamp={i}") for i in range(4)]
    # The process dies here: the pending marks are never written.
    relay_bus = RecordingBus()
    relay = Relay(store, relay_bus, writer_grace_seconds=0.0)
    assert relay.run_once() == 4
    assert [e.message_id for e in relay_bus.sent] == [m.message_id for m in sent]
    assert [e.event_id for e in relay_bus.sent] == sorted(e.event_id for e in relay_bus.sent)
    assert store.log.relay_lag()[0] == 0


def test_a_full_batch_is_written_without_waiting_for_the_interval(store: Store) -> None:
    pub = _publisher(store, RecordingBus(), mark_max_batch=3)
    for i in range(3):
        pub.send_mark_set_done("lazy", "events", f"datestamp={i}")
    _wait_for_no_lag(store)  # the interval is an hour: only the batch size can flush
    assert pub.close(5.0)


def test_eager_marks_when_the_interval_is_zero(store: Store) -> None:
    pub = _publisher(store, RecordingBus(), interval=0.0)
    pub.send_mark_set_done("lazy", "events", "datestamp=1")
    assert store.log.relay_lag()[0] == 0


def test_close_writes_pending_marks_and_keeps_its_deadline(tmp_path: Any) -> None:
    path = tmp_path / "store.db"
    store = Store.open(f"sqlite:///{path}", connect_timeout_seconds=1.0)
    pub = _publisher(store, RecordingBus())
    pub.send_mark_set_done("lazy", "events", "datestamp=1")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the deadline
    try:
        started = time.monotonic()
        assert pub.close(0.3) is False, "reported pending marks as written"
        assert time.monotonic() - started < 2.0, "close() overran its deadline"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    # The flusher's write lands once the lock is free; until then the event is
    # merely unmarked, which the relay would re-send.
    _wait_for_no_lag(store)
    # A publish after close() is marked at once: the broker has it already.
    pub.send_mark_set_done("lazy", "events", "datestamp=2")
    assert store.log.relay_lag()[0] == 0
    store.close()


def _wait_for_no_lag(store: Store) -> None:
    deadline = time.monotonic() + 30
    while store.log.relay_lag()[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.log.relay_lag()[0] == 0


def test_flush_includes_the_batch_the_flusher_is_writing() -> None:
    """flush_marks() returns only when what was confirmed so far is marked, even
    the batch the background flusher holds (here its write fails and is retried)."""
    in_flight, release = threading.Event(), threading.Event()
    marked: list[int] = []

    def mark(ids: Sequence[int]) -> None:
        if not in_flight.is_set():
            in_flight.set()
            release.wait(10)
            raise StoreError("database is locked")
        marked.extend(ids)

    marks = MarkBatcher(mark, interval=3600.0, max_batch=1)
    marks.add([1])  # a full batch: the flusher takes it at once
    assert in_flight.wait(10)
    # The lock is released only after flush() started: a flush that returns at
    # once (seeing nothing pending) has marked nothing.
    timer = threading.Timer(0.3, release.set)
    timer.start()
    marks.flush()
    timer.join()
    assert marked == [1]
    assert marks.close(5.0)
