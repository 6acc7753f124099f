"""``subscribe`` tells its caller when history was not merged in time.

Defect (session 24): ``_start`` ignored ``sub.wait_ready``'s answer, so a
subscribe whose history (retained set-dones, then the event log since the
subscription) was not merged within the subscriber's timeout returned as if
caught up. The real cause here: the single dispatcher thread is busy in another
subscription's slow callback, so the new subscription's history waits behind it.
Now :class:`HistoryTimeout` names the topic and the timeout and carries the
subscription, still open: once the dispatcher is free it delivers the history,
then what came live, nothing lost. And a history longer than a callback-less
subscription's ``max_queued`` waited for its reader, the caller of ``subscribe``, for the
whole timeout and then overflowed: it now returns once the queue is full. Real SQLite and
PostgreSQL stores, embedded transport.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from partition_notify.subscriber import Subscriber

from partition_notify.app import App
from partition_notify.contract import AnyMessage
from partition_notify.core.errors import HistoryTimeout

TIMEOUT = 0.5


@pytest.fixture
def subscriber(app: App) -> Iterator[Subscriber]:
    app.publisher.register_table("db", "busy", ["ds"])
    app.publisher.register_table("db", "t", ["ds"])
    s = Subscriber(app.store, app.transport, timeout_seconds=TIMEOUT)
    yield s
    s.close()


def test_history_not_merged_in_time_raises_and_keeps_the_subscription(
        app: App, subscriber: Subscriber) -> None:
    app.publisher.send_mark_set_done("db", "t", {"ds": "old"})
    entered, release = threading.Event(), threading.Event()

    def slow(msg: AnyMessage) -> None:  # holds the dispatcher thread
        entered.set()
        release.wait(30)

    subscriber.subscribe("db.busy", slow, history=False)
    app.publisher.send_mark_set_done("db", "busy", {"ds": "x"})
    assert entered.wait(10), "the busy callback never ran"
    try:
        with pytest.raises(HistoryTimeout) as raised:
            subscriber.subscribe("db.t")
    finally:
        release.set()
    err = raised.value
    assert str(err).startswith(f"history of topic {app.store.catalog.get_table('db', 't').topic}"
                               f" not merged within {TIMEOUT:g} s"), str(err)
    assert err.timeout == TIMEOUT
    sub = err.subscription
    assert not sub.closed
    app.publisher.send_mark_set_done("db", "t", {"ds": "new"})
    got = [sub.get(timeout=10), sub.get(timeout=10)]
    assert [m.spec if m else None for m in got] == ["ds=old", "ds=new"], (
        "history first, then live: nothing lost")
    sub.close()


def test_history_merged_in_time_returns(app: App, subscriber: Subscriber) -> None:
    app.publisher.send_mark_set_done("db", "t", {"ds": "old"})
    sub = subscriber.subscribe("db.t")
    msg = sub.get(timeout=0)
    assert msg is not None and msg.spec == "ds=old"


def test_a_history_longer_than_the_queue_waits_for_its_reader_not_for_the_timeout(
        app: App) -> None:
    # Without a callback the history goes into a queue of max_queued: a longer one has
    # to wait for the reader, who is the caller of subscribe. subscribe returns then
    # (no HistoryTimeout, no overflow); the reader gets the history first, then live.
    queued, n = 5, 12
    app.publisher.register_table("db", "t", ["ds"])
    for i in range(n):
        app.publisher.send_mark_set_done("db", "t", {"ds": f"d{i:02}"})
    with Subscriber(app.store, app.transport, timeout_seconds=2.0, max_queued=queued) as s:
        sub = s.subscribe("db.t")
        app.publisher.send_mark_set_done("db", "t", {"ds": "live"})
        got: list[str] = []
        while len(got) < n + 1:
            msg = sub.get(timeout=10)
            assert msg is not None, f"stopped after {got}"
            got.append(msg.spec)
        assert not sub.overflowed.is_set()
    assert got == [f"ds=d{i:02}" for i in range(n)] + ["ds=live"]


def test_messages_after_a_history_timeout_yields_the_late_history(
        app: App, subscriber: Subscriber) -> None:
    # Defect (session 25): ``messages(timeout)`` ended at its deadline with nothing
    # queued yet, so "what is already there" (timeout 0) after a HistoryTimeout gave
    # none of the history still being merged; ``tail --timeout 0`` had the same defect.
    app.publisher.send_mark_set_done("db", "t", {"ds": "old"})
    entered, release = threading.Event(), threading.Event()
    subscriber.subscribe("db.busy", lambda msg: (entered.set(), release.wait(30)),
                         history=False)
    app.publisher.send_mark_set_done("db", "busy", {"ds": "x"})
    assert entered.wait(10), "the busy callback never ran"
    try:
        with pytest.raises(HistoryTimeout) as raised:
            subscriber.subscribe("db.t")
        sub = raised.value.subscription
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.extend(
            m.spec for m in sub.messages(timeout=0)))
        reader.start()  # before the dispatcher is free: the history is still to merge
    finally:
        release.set()
    reader.join(30)
    assert not reader.is_alive(), "messages(0) did not end once the history was merged"
    assert got == ["ds=old"], "the late history is what was already there"
    sub.close()


def test_messages_with_no_time_left_yields_what_is_already_there(
        app: App, subscriber: Subscriber) -> None:
    # Defect (session 25): messages(0) yielded nothing, even with the history queued.
    for ds in ("a", "b"):
        app.publisher.send_mark_set_done("db", "t", {"ds": ds})
    sub = subscriber.subscribe("db.t")
    assert [m.spec for m in sub.messages(timeout=0)] == ["ds=a", "ds=b"]
    sub.close()
