"""A subscription without a callback holds at most ``max_queued`` unread messages.

Defect (audit 22): its queue had no bound: a library user who subscribed and
never read grew memory without limit. Now a full queue makes the dispatcher
wait (backpressure, up to the subscriber's timeout) for the reader; a reader
that keeps up loses nothing. One that does not is told: after the messages
already queued, ``get`` raises :class:`SubscriptionOverflowError` naming the
first message not delivered; the event log still holds it. Real SQLite store,
embedded transport.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from partition_notify.subscriber import Subscriber

from partition_notify.app import App, build_app
from partition_notify.core.errors import SubscriptionOverflowError

QUEUED = 20


@pytest.fixture
def app(sqlite_url: str) -> Iterator[App]:
    application = build_app(store_url=sqlite_url, transport_url="embedded://")
    application.publisher.register_table("db", "t", ["ds"])
    yield application
    application.close()


@pytest.fixture
def subscriber(app: App) -> Iterator[Subscriber]:
    s = Subscriber(app.store, app.transport, timeout_seconds=1.0, max_queued=QUEUED)
    yield s
    s.close()


def _publish(app: App, n: int) -> None:
    for i in range(n):
        app.publisher.send_mark_set_done("db", "t", {"ds": f"d{i:03}"})


def test_a_reader_that_never_reads_is_told_after_max_queued(app: App,
                                                            subscriber: Subscriber) -> None:
    sub = subscriber.subscribe("db.t", history=False)
    _publish(app, QUEUED + 15)
    assert sub.overflowed.wait(10), "the dispatcher gave up waiting for the reader"
    got: list[Any] = []
    with pytest.raises(SubscriptionOverflowError) as raised:
        while (msg := sub.get(timeout=10)) is not None:
            got.append(msg)
            assert sub._queue.qsize() <= QUEUED
    assert [m.spec for m in got] == [f"ds=d{i:03}" for i in range(QUEUED)], (
        "every message queued before the overflow is delivered, in order")
    assert "ds=d020" in str(raised.value), "it names the first message not delivered"
    assert f"{QUEUED} unread messages" in str(raised.value)
    assert sub.closed


def test_a_reader_that_keeps_up_gets_everything(app: App, subscriber: Subscriber) -> None:
    sub = subscriber.subscribe("db.t", history=False)
    got: list[Any] = []
    done = threading.Event()

    def read() -> None:
        for msg in sub.messages(timeout=5):
            got.append(msg)
            if len(got) == QUEUED * 5:
                done.set()
                return

    reader = threading.Thread(target=read)
    reader.start()
    _publish(app, QUEUED * 5)
    assert done.wait(30), f"got {len(got)} of {QUEUED * 5}"
    reader.join(10)
    assert [m.spec for m in got] == [f"ds=d{i:03}" for i in range(QUEUED * 5)]
