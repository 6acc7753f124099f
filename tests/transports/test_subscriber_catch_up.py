"""After a reconnect a subscriber delivers everything it missed, once (issue #10, 3 and 4).

Real ActiveMQ behind a TCP proxy: cutting the proxy's connections is a
broker crash as the subscriber sees it. Topic subscriptions are not durable,
so whatever is published meanwhile never arrives live: the subscriber must
fill it in from the event log by ``topicSeq``, whatever ``history=`` says,
and must not hand anything to its callback twice, however small its window.
"""

from __future__ import annotations

import partition_notify.subscriber.subscription as subscription_module
import pytest

from tests.contract.faults import FaultProxy
from tests.faults.support import Collector, tally
from tests.support.markers import uses
from tests.transports.stomp_helpers import build, host_port, stomp_spec

pytestmark = [pytest.mark.broker]


@pytest.fixture
@uses("broker")
def bus(store_url):
    spec = stomp_spec("activemq")
    proxy = FaultProxy(*host_port(spec))
    publisher = build(spec, store_url)  # straight to the broker
    follower = build(spec, store_url, url=proxy.url(), heartbeat_ms=500)
    try:
        yield proxy, publisher, follower
    finally:
        follower.close()
        publisher.close()
        proxy.close()


def _send(app, n: int, tag: str) -> list[str]:
    return [app.publisher.send_mark_set_done("rc", "events", f"d={tag}{i}").message_id
            for i in range(n)]


def test_reconnect_with_history_false_loses_nothing(bus):
    proxy, publisher, follower = bus
    publisher.publisher.register_table("rc", "events", ["d"])
    got = Collector()
    with follower.subscriber() as sub:
        sub.subscribe("rc.events", got, history=False)
        before = _send(publisher, 3, "a")
        assert got.wait_for(set(before), 10), "live delivery before the cut"
        proxy.cut(refuse_new=True)
        away = _send(publisher, 5, "b")  # nobody listens on the follower's side
        proxy.accept_again()
        assert got.wait_for(set(away), 30), \
            f"published while away, never delivered: {len(set(away) - got.seen.keys())}"
        after = _send(publisher, 2, "c")
        assert got.wait_for(set(after), 10), "live delivery after the reconnect"
        everything = before + away + after
        tally("subscriber reconnect with history=False", acknowledged=len(everything),
              delivered=got.delivered(set(everything)), duplicates_suppressed=0,
              reconnects=sub.stats.reconnects, duplicates_delivered=got.max_per_id() - 1)
        assert sub.stats.reconnects >= 1
        assert got.max_per_id() == 1
        assert [seq for _, seq in got.order] == list(range(1, len(everything) + 1)), \
            "in topicSeq order, each once"


def test_small_window_and_a_reconnect_deliver_no_duplicate(bus, monkeypatch):
    # Today's cap is far larger; a small one shows what happens past it.
    monkeypatch.setattr(subscription_module, "DEDUP_WINDOW", 5)
    proxy, publisher, follower = bus
    publisher.publisher.register_table("rc", "events", ["d"], retention_seconds=3600)
    got = Collector()
    with follower.subscriber() as sub:
        sub.subscribe("rc.events", got, history=True)
        early = _send(publisher, 20, "a")
        assert got.wait_for(set(early), 10)
        proxy.cut(refuse_new=True)
        away = _send(publisher, 3, "b")
        proxy.accept_again()
        assert got.wait_for(set(away), 30)
        # A live marker: once it is delivered, whatever the reconnect queued was too.
        marker = _send(publisher, 1, "c")
        assert got.wait_for(set(marker), 10)
        assert got.max_per_id() == 1, \
            f"{sum(n - 1 for n in got.seen.values())} message(s) delivered again"
        assert len(got.order) == len(early + away + marker)


def test_a_gap_seen_live_is_filled_from_the_log(bus):
    """An event that is in the log but never reached the broker (e.g. quarantined
    by the relay) is read from the log when the next one shows the jump."""
    from tests.faults.support import bulk_set_done

    _proxy, publisher, follower = bus
    publisher.publisher.register_table("rc", "events", ["d"])
    got = Collector()
    gaps: list[tuple[str, int, int]] = []
    with follower.subscriber(on_gap=lambda *g: gaps.append(g)) as sub:
        sub.subscribe("rc.events", got, history=False)
        first = _send(publisher, 1, "a")
        silent = bulk_set_done(publisher, "rc", "events", 0, 2, key="d")
        last = _send(publisher, 1, "c")
        assert got.wait_for(set(first + silent + last), 10), "the silent events were not filled"
        assert [seq for _, seq in got.order] == [1, 2, 3, 4]
        assert gaps == [] and sub.stats.gaps == 0


def _kafka_sockets(port: int) -> set[tuple[int, tuple[str, int]]]:
    import psutil

    return {(c.fd, tuple(c.laddr)) for c in psutil.Process().net_connections("tcp")
            if c.raddr and c.raddr.port == port and c.status == "ESTABLISHED"}


def _shut(sockets: set[tuple[int, tuple[str, int]]]) -> None:
    """shutdown() through a dup of each fd: the connection dies, the fd stays the driver's."""
    import socket

    for fd, _ in sockets:
        dup = socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM)
        try:
            dup.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            dup.close()


def test_kafka_reconnect_with_history_false_loses_nothing(store_url):
    """tansu: the consumer's connections are shut under it (the producer's are left
    alone); the driver reconnects and resumes at its pinned offsets, and the
    sequencer keeps it exactly-once."""
    from urllib.parse import urlsplit

    from tests.transports.kafka_helpers import kafka_spec

    spec = kafka_spec()
    port = urlsplit(spec.url).port or 9092
    app = build(spec, store_url)
    got = Collector()
    try:
        app.publisher.register_table("rc", "events", ["d"])
        before = _send(app, 1, "a")  # the producer connects first
        producer_side = _kafka_sockets(port)
        with app.subscriber() as sub:
            sub.subscribe("rc.events", got, history=False)
            before += _send(app, 2, "a")
            assert got.wait_for(set(before[1:]), 30), "live delivery before the cut"
            consumer_side = _kafka_sockets(port) - producer_side
            assert consumer_side, "found no consumer connection to cut"
            _shut(consumer_side)
            away = _send(app, 5, "b")
            after = _send(app, 2, "c")
            everything = before[1:] + away + after
            assert got.wait_for(set(everything), 60), \
                f"never delivered: {len(set(everything) - got.seen.keys())}"
            tally("subscriber reconnect with history=False (kafka)",
                  acknowledged=len(everything), delivered=got.delivered(set(everything)),
                  duplicates_suppressed=sub.stats.duplicates,
                  duplicates_delivered=got.max_per_id() - 1,
                  consumer_sockets_cut=len(consumer_side))
            now = _kafka_sockets(port) - producer_side
            assert now and not (now & consumer_side), "the consumer did not reconnect"
            assert got.max_per_id() == 1
            assert [seq for _, seq in got.order] == list(range(2, len(everything) + 2))
    finally:
        app.close()
