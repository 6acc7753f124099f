"""The subscriber's inbox (consumer thread -> dispatcher) holds at most its bound.

Defect (inbox23): the queue between a transport's consumer thread and the
dispatcher had no bound, so a slow callback while a table was flooded grew
the process's memory with every message the broker sent. Now a full inbox
drops further live copies of a topic and queues one recheck of that topic,
which reads it from the event log after the last number delivered: every
message still reaches the callback once, in order. Run against every
transport of the contract suite: the consumer threads differ (the embedded
log reader, stomp.py's receiver, the Kafka poll loop).
"""

from __future__ import annotations

import threading

from partition_notify.subscriber import Subscriber

from partition_notify.contract import AnyMessage

N = 20_000
BOUND = 1_000
CHUNK = 1_000


def test_a_blocked_callback_holds_the_inbox_at_its_bound(bus, unique_db):
    bus.publisher.register_table(unique_db, "events", ["p"], retention_seconds=3600)
    got: list[AnyMessage] = []
    arrived = threading.Event()
    release = threading.Event()
    all_in = threading.Event()
    marker_in = threading.Event()

    def callback(msg: AnyMessage) -> None:
        got.append(msg)
        arrived.set()
        release.wait(300)  # the slow consumer: held until the flood is in the inbox
        if len(got) == N:
            all_in.set()
        if len(got) > N and msg.spec == "p=marker":
            marker_in.set()

    sub = Subscriber(bus.store, bus.transport, timeout_seconds=10.0, max_inbox=BOUND,
                     foreign_messages=bus.settings.foreign_messages)
    try:
        sub.subscribe((unique_db, "events"), callback, history=False)
        sent: list[AnyMessage] = []
        for start in range(0, N, CHUNK):  # within the publish timeout on every broker
            sent += bus.publisher.announce_partitions(
                unique_db, "events", [f"p={i:05}" for i in range(start, start + CHUNK)])
        assert len(sent) == N
        assert arrived.wait(60), "the first message never reached the callback"
        assert sub.inbox.wait_offered(N, 120), (
            f"the consumer handed in {sub.inbox.offered} of {N} messages")
        high = sub.inbox.high_water
        # One topic: the bound plus at most its one queued recheck.
        assert high <= BOUND + 1, f"inbox high water {high} > bound {BOUND} + 1"
        release.set()
        assert all_in.wait(120), f"{len(got)} of {N} delivered"
        marker = bus.publisher.send_mark_set_done(unique_db, "events", "p=marker")
        # Anything delivered twice would come before the marker: it is the last.
        assert marker_in.wait(60), "the marker was not delivered"
        assert [m.message_id for m in got] == [m.message_id for m in sent] + [
            marker.message_id], "every message once, in the order published"
        assert sub.stats.coalesced > 0, "the flood overflowed the inbox"
    finally:
        release.set()
        sub.close()


def test_several_topics_each_take_one_recheck_and_lose_nothing(bus, bus_spec, unique_db):
    """Per topic at most one recheck waits; each table's messages arrive once, in order.
    ``PN_FOREIGN_MESSAGES=deliver`` on the brokers: nothing verified, the log still fills."""
    tables = [f"t{i}" for i in range(4)]
    for t in tables:
        bus.publisher.register_table(unique_db, t, ["p"], retention_seconds=3600)
    per_table, bound = 1_500, 200
    got: dict[str, list[str]] = {t: [] for t in tables}
    release, arrived, done = threading.Event(), threading.Event(), threading.Event()
    marker_in = threading.Event()

    def callback(msg: AnyMessage) -> None:
        got[msg.table].append(msg.message_id)
        arrived.set()
        release.wait(300)
        if sum(map(len, got.values())) == per_table * len(tables):
            done.set()
        if msg.spec == "p=marker":
            marker_in.set()

    foreign = "verify" if bus_spec.name == "embedded" else "deliver"
    sub = Subscriber(bus.store, bus.transport, timeout_seconds=10.0, max_inbox=bound,
                     foreign_messages=foreign)
    try:
        sub.subscribe([(unique_db, t) for t in tables], callback, history=False)
        sent: dict[str, list[str]] = {t: [] for t in tables}
        for start in range(0, per_table, 500):  # interleaved: every topic overflows
            for t in tables:
                sent[t] += [m.message_id for m in bus.publisher.announce_partitions(
                    unique_db, t, [f"p={i:05}" for i in range(start, start + 500)])]
        assert arrived.wait(60)
        assert sub.inbox.wait_offered(per_table * len(tables), 120), sub.inbox.offered
        topics = {bus.store.catalog.get_table(unique_db, t).topic for t in tables}
        assert sub.inbox.high_water <= bound + len(topics), (
            f"high water {sub.inbox.high_water} > {bound} + {len(topics)} topics")
        release.set()
        assert done.wait(120), {t: len(v) for t, v in got.items()}
        marker = bus.publisher.send_mark_set_done(unique_db, tables[0], "p=marker")
        assert marker_in.wait(60), "the marker was not delivered"
        assert got == {t: sent[t] + ([marker.message_id] if t == tables[0] else [])
                       for t in tables}, "each table's messages once, in order"
    finally:
        release.set()
        sub.close()
