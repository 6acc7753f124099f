"""10,000 topics on one connection: no thread or socket per topic (no JMS-style consumer each)."""

from __future__ import annotations

import os
import queue
import threading
import time

import psutil
import pytest
from partition_notify.transports.stomp import StompTransport

from tests.support.markers import uses
from tests.transports.stomp_helpers import STOMP_BROKERS, host_port, stomp_spec

pytestmark = [pytest.mark.broker, pytest.mark.slow]

TOPICS = int(os.environ.get("PN_TEST_MANY_TOPICS", "10000"))


@pytest.fixture(params=STOMP_BROKERS)
@uses("broker")
def spec(request):
    return stomp_spec(request.param)


def _sockets_to(port: int) -> int:
    return sum(1 for c in psutil.Process().net_connections("tcp")
               if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def test_one_consumer_follows_many_topics_on_one_connection(spec):
    # Fixed names: a broker creates a destination once, so reruns are quick (the
    # first run on a fresh ActiveMQ spends ~5-10 ms per new topic).
    topics = [f"hcat.many.t{i:05d}" for i in range(TOPICS)]
    _, port = host_port(spec)
    sockets, threads = _sockets_to(port), threading.active_count()
    transport = StompTransport.from_url(spec.url, username=spec.username,
                                        password=spec.password)
    got: queue.Queue = queue.Queue()
    try:
        consumer = transport.consumer(got.put)
        started = time.monotonic()
        consumer.subscribe(topics, timeout=900)  # returns after all TOPICS receipts
        took = time.monotonic() - started
        assert len(consumer.topics) == TOPICS
        assert _sockets_to(port) - sockets == 1
        # stomp.py's reader and heart-beat threads; nothing per topic.
        assert threading.active_count() - threads <= 2
        for topic in (topics[0], topics[TOPICS // 2], topics[-1]):
            transport.publish([_envelope(topic)], timeout=10)
            assert got.get(timeout=10).topic == topic
        print(f"\n{spec.name}: {TOPICS} topics subscribed in {took:.1f} s on one connection, "
              f"{threading.active_count() - threads} extra threads")
        consumer.close(120)
    finally:
        transport.close(10)
    assert _sockets_to(port) == sockets


def _envelope(topic: str):
    from partition_notify.contract import Envelope

    return Envelope(topic=topic, key=topic, headers={"HCAT_EVENT": "PARTITION_DONE"},
                    body=b'{"probe": true}')
