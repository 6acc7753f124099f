"""Publishers raced against late subscribers: zero misses, zero duplicates.

Each iteration a publisher thread sends a set-done at the same instant a
brand-new Subscriber subscribes with history (callback) and, on the same
Subscriber, another thread calls wait_for_set_done for a finer spec. Whether
the message lands before the subscription (history), after it (live) or
in between (both), the callback must see it exactly once and the wait must
return it. Subscribers of a batch stay open until a fence message proves
every earlier event has been through their dispatchers; then every
callback's tally is checked: each set-done of the table exactly once.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from partition_notify.app import build_app
from tests.store.helpers import Collector

ITERATIONS = 1000
BATCH = 10
TIMEOUT = 30.0


@pytest.fixture
def app(store_url):
    # In-process consumers are woken by the commit itself; the poll interval
    # only bounds cross-process latency. A long one keeps a batch of idle
    # consumers from flooding two cores with queries, and cannot hide a miss:
    # a missed event is never delivered, however long we poll.
    application = build_app(store_url=store_url, transport_url="embedded://",
                            poll_interval_seconds=0.5)
    yield application
    application.close()


def _race_one(app, table: str, i: int, sub, collector) -> tuple[str, str]:
    start = threading.Barrier(3)
    out: dict[str, object] = {}

    def publish() -> None:
        start.wait(TIMEOUT)
        out["sent"] = app.publisher.send_mark_set_done("race", table, {"ds": f"d{i}"})

    def wait() -> None:
        start.wait(TIMEOUT)
        out["waited"] = sub.wait_for_set_done("race", table, {"ds": f"d{i}", "region": "us"},
                                             timeout=TIMEOUT)

    threads = [threading.Thread(target=publish), threading.Thread(target=wait)]
    for t in threads:
        t.start()
    start.wait(TIMEOUT)
    sub.subscribe(("race", table), collector, history=True)
    for t in threads:
        t.join(TIMEOUT + 5)
    sent, waited = out.get("sent"), out.get("waited")
    assert sent is not None and waited is not None, f"iteration {i}: {out}"
    assert waited.message_id == sent.message_id, f"iteration {i}: wait returned another message"
    assert collector.wait_for(lambda ms: any(m.message_id == sent.message_id for m in ms),
                              TIMEOUT), f"iteration {i}: callback missed {sent.spec}"
    return sent.message_id, sent.spec


@pytest.mark.slow
def test_race_publishers_against_late_subscribers(app):
    batches = ITERATIONS // BATCH
    for b in range(batches):
        app.publisher.register_table("race", f"t{b}", ["ds", "region"], retention_seconds=3600)
    iterations = 0
    for b in range(batches):
        table = f"t{b}"
        open_subs: list[tuple[object, Collector]] = []
        sent_ids: list[str] = []
        try:
            for k in range(BATCH):
                sub, collector = app.subscriber(), Collector()
                open_subs.append((sub, collector))
                message_id, _ = _race_one(app, table, b * BATCH + k, sub, collector)
                sent_ids.append(message_id)
                iterations += 1
            fence = app.publisher.send_mark_set_done("race", table, {"ds": "fence"})
            sent_ids.append(fence.message_id)
            for sub, collector in open_subs:
                assert collector.wait_for(
                    lambda ms, f=fence: any(m.message_id == f.message_id for m in ms), TIMEOUT)
                tally = Counter(m.message_id for m in collector.messages)
                dupes = {m: n for m, n in tally.items() if n > 1}
                assert not dupes, f"table {table}: delivered more than once: {dupes}"
                # History (everything before it subscribed) + live (everything after).
                assert set(tally) == set(sent_ids), f"table {table}: missed " \
                    f"{set(sent_ids) - set(tally)}"
                assert sub.stats.malformed == 0 and sub.stats.gaps == 0
        finally:
            for sub, _ in open_subs:
                sub.close()
    assert iterations == ITERATIONS


@pytest.mark.slow
def test_race_new_table_on_a_running_subscriber(app):
    """A Subscriber already following a busy table adds a new one while it is published to.

    Regression: the embedded reader used to filter a batch with the topic set
    copied before the read, dropping an event for a topic subscribed meanwhile.
    """
    n = 300
    app.publisher.register_table("race", "busy", ["ds"])
    for i in range(n):
        app.publisher.register_table("race", f"y{i}", ["ds"])
    stop = threading.Event()

    def noise() -> None:
        i = 0
        while not stop.is_set():
            app.publisher.send_mark_set_done("race", "busy", f"ds={i}")
            i += 1

    noisy = threading.Thread(target=noise)
    with app.subscriber() as sub:
        sub.subscribe(("race", "busy"), lambda m: None, history=False)
        noisy.start()
        try:
            for i in range(n):
                collector = Collector()
                start = threading.Barrier(2)
                out: dict[str, object] = {}

                def publish(i: int = i, start=start, out=out) -> None:
                    start.wait(TIMEOUT)
                    out["sent"] = app.publisher.send_mark_set_done("race", f"y{i}", "ds=1")

                t = threading.Thread(target=publish)
                t.start()
                start.wait(TIMEOUT)
                sub.subscribe(("race", f"y{i}"), collector, history=True)
                t.join(TIMEOUT)
                sent = out["sent"]
                assert collector.wait_for(
                    lambda ms, s=sent: any(m.message_id == s.message_id for m in ms), TIMEOUT
                ), f"iteration {i}: missed"
                # A later message on y{i} proves nothing else is still in flight.
                fence = app.publisher.send_mark_set_done("race", f"y{i}", "ds=2")
                assert collector.wait_for(
                    lambda ms, f=fence: any(m.message_id == f.message_id for m in ms), TIMEOUT)
                assert [m.message_id for m in collector.messages] == [
                    sent.message_id, fence.message_id]
        finally:
            stop.set()
            noisy.join(TIMEOUT)
        assert sub.stats.gaps == 0
