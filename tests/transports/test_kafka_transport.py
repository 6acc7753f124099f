"""Kafka specifics the contract suite does not reach: futures, keys, offsets, many topics."""

from __future__ import annotations

import logging
import queue
import threading
import time

import psutil
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from partition_notify.transports.base import RawMessage
from partition_notify.transports.kafka import KafkaTransport

from partition_notify.core.errors import (
    MessageRejected,
    PublishError,
    PublishTimeout,
    TransportError,
)
from tests.support.markers import uses
from tests.transports.kafka_helpers import (
    envelope,
    kafka_spec,
    private_tansu,
    unique_topic,
    with_options,
)

pytestmark = pytest.mark.broker

#: tansu checks a record's value against ``properties.value``; no JSON object is a
#: string, so every record on this topic is refused.
REFUSING = {"type": "object", "properties": {"value": {"type": "string", "pattern": "^never$"}},
            "required": ["value"]}


@pytest.fixture
@uses("broker")
def url() -> str:
    return kafka_spec().url


@pytest.fixture
def transport(url):
    t = KafkaTransport.from_url(url, connect_timeout=5)
    yield t
    t.close(10)


def _drain(q: queue.Queue[RawMessage], want: int, timeout: float) -> list[RawMessage]:
    got: list[RawMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            got.append(q.get(timeout=left))
        except queue.Empty:
            break
    return got


def _until_marker(q: queue.Queue[RawMessage], marker: bytes, timeout: float) -> list[RawMessage]:
    """Everything received up to and including the message whose body is ``marker``."""
    got: list[RawMessage] = []
    deadline = time.monotonic() + timeout
    while not got or got[-1].body != marker:
        got.append(q.get(timeout=max(deadline - time.monotonic(), 0.001)))
    return got


# -- publishing: every future checked -------------------------------------------
def test_refused_record_is_a_publish_error_and_the_producer_recovers(tmp_path):
    with private_tansu(tmp_path, {"pn.refused": REFUSING}) as url:
        transport = KafkaTransport.from_url(url, connect_timeout=5)
        try:
            transport.publish([envelope("pn.fine", 1)], timeout=10)
            started = time.monotonic()
            with pytest.raises(PublishError) as err:
                transport.publish([envelope("pn.refused", 2)], timeout=10)
            assert not isinstance(err.value, PublishTimeout)
            assert time.monotonic() - started < 5, "a refusal must not wait for the deadline"
            # A refusal for good, attributed to its record (the relay dead-letters it).
            assert isinstance(err.value, MessageRejected)
            assert "refused for good: event 2: InvalidRecord" in str(err.value)
            assert set(err.value.rejected) == {2}
            # One refused record among good ones fails the publish, naming only that one;
            # the good ones are confirmed or left for a retry, never reported refused.
            batch = [envelope("pn.fine", 3), envelope("pn.refused", 4), envelope("pn.fine", 5)]
            with pytest.raises(MessageRejected, match="event 4") as err:
                transport.publish(batch, timeout=10)
            assert set(err.value.rejected) == {4} and err.value.confirmed <= {3, 5}
            # kafka-python's idempotent producer goes fatal after a refusal; the transport
            # replaces it, so a good publish afterwards succeeds.
            transport.publish([envelope("pn.fine", 6)], timeout=10)
        finally:
            transport.close(10)


def test_unreachable_broker_fails_within_the_deadline():
    transport = KafkaTransport.from_url("kafka://127.0.0.1:9", connect_timeout=1)
    started = time.monotonic()
    try:
        with pytest.raises(TransportError, match=r"127\.0\.0\.1:9\b"):
            transport.publish([envelope("pn.nowhere", 1)], timeout=2)
        assert time.monotonic() - started < 4
    finally:
        transport.close(5)


def test_publish_returns_only_when_the_record_is_readable(transport, url):
    topic = unique_topic()
    transport.publish([envelope(topic, 1)], timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=url.removeprefix("kafka://").split("?")[0],
                             enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        assert sum(consumer.end_offsets(parts, timeout_ms=5000).values()) == 1
    finally:
        consumer.close()


# -- ordering per key --------------------------------------------------------------
def test_per_table_order_on_a_multi_partition_topic(url):
    transport = KafkaTransport.from_url(with_options(url, partitions=4), connect_timeout=5)
    topic = unique_topic()
    got: queue.Queue[RawMessage] = queue.Queue()
    keys = [f"db.t{i}" for i in range(6)]
    try:
        consumer = transport.consumer(got.put)
        consumer.subscribe([topic], timeout=10)
        n = 0
        for _ in range(5):  # several batches, each interleaving every key
            batch = []
            for _ in range(20):
                for key in keys:
                    n += 1
                    batch.append(envelope(topic, n, key))
            transport.publish(batch, timeout=10)
        received = _drain(got, n, 20)
        assert len(received) == n
        for key in keys:
            seqs = [int(m.headers["pn-seq"]) for m in received if key.encode() in m.body]
            assert seqs == sorted(seqs) and len(seqs) == n // len(keys), key
    finally:
        transport.close(10)
    raw = KafkaConsumer(bootstrap_servers=url.removeprefix("kafka://").split("?")[0],
                        enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(raw.partitions_for_topic(topic))]
        assert len(parts) == 4, "the transport creates topics with ?partitions="
        raw.assign(parts)
        raw.seek_to_beginning(*parts)
        partition_of: dict[bytes, set[int]] = {}
        seen = 0
        deadline = time.monotonic() + 15
        while seen < n and time.monotonic() < deadline:
            for tp, records in raw.poll(timeout_ms=200).items():
                for r in records:
                    partition_of.setdefault(r.key, set()).add(tp.partition)
                    seen += 1
        assert seen == n
        assert all(len(p) == 1 for p in partition_of.values()), partition_of
    finally:
        raw.close()


# -- consuming: start at the end, many topics, late topics -------------------------
def test_subscription_starts_at_the_end_offset(transport):
    topic = unique_topic()
    for i in range(5):  # history, one record per batch (see the tansu check below)
        transport.publish([envelope(topic, i)], timeout=10)
    got: queue.Queue[RawMessage] = queue.Queue()
    consumer = transport.consumer(got.put)
    consumer.subscribe([topic], timeout=10)
    transport.publish([envelope(topic, 100), envelope(topic, 101)], timeout=10)
    received = _until_marker(got, envelope(topic, 101).body, 15)
    assert [m.headers["pn-seq"] for m in received] == ["100", "101"]


def test_broker_end_offset_counts_every_record_of_a_batch(transport, url):
    """Kafka: end offset = last offset + 1. tansu 0.6 answers base offset + 1 of the last
    batch, so a subscription pinned there replays that batch's tail (de-duplicated by the
    subscriber, never lost). Kept as a check so a fixed tansu is noticed."""
    from kafka import KafkaAdminClient

    bootstrap = url.removeprefix("kafka://").split("?")[0]
    topic = unique_topic()
    transport.publish([envelope(topic, i) for i in range(5)], timeout=10)  # one batch
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        cluster_id = str(admin.describe_cluster().get("cluster_id"))
        end = consumer.end_offsets([TopicPartition(topic, 0)], timeout_ms=5000)
    finally:
        admin.close()
        consumer.close()
    if "tansu" in cluster_id and end[TopicPartition(topic, 0)] < 5:
        # Usually 1 (one batch); 2 when the producer sent the first record on its own.
        pytest.xfail("tansu reports the end offset of a multi-record batch as base offset + 1")
    assert end[TopicPartition(topic, 0)] == 5


def _sockets(port: int) -> int:
    return sum(1 for c in psutil.Process().net_connections("tcp")
               if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def test_many_topics_in_one_consumer_keep_their_positions(transport, url):
    port = int(url.removeprefix("kafka://").split("?")[0].rsplit(":", 1)[1])
    first = [unique_topic("pn.many") for _ in range(60)]
    second = [unique_topic("pn.many") for _ in range(60)]
    for t in first + second:  # existing topics with history nobody should replay
        transport.publish([envelope(t, 0)], timeout=10)
    threads, sockets = threading.active_count(), _sockets(port)
    got: queue.Queue[RawMessage] = queue.Queue()
    consumer = transport.consumer(got.put)
    consumer.subscribe(first, timeout=20)
    transport.publish([envelope(first[0], 1)], timeout=10)
    assert _until_marker(got, envelope(first[0], 1).body, 15)[-1].topic == first[0]
    # Published while the consumer still follows only `first`; must survive re-assignment.
    transport.publish([envelope(first[-1], 2)], timeout=10)
    consumer.subscribe(second, timeout=20)
    transport.publish([envelope(second[-1], 3), envelope(first[0], 4)], timeout=10)
    received = _drain(got, 3, 15)
    assert sorted(m.headers["pn-seq"] for m in received) == ["2", "3", "4"]
    assert got.empty(), "nothing replayed"
    # One poll thread plus kafka-python's I/O thread; the publishing transport's producer
    # connection predates the baseline.
    assert threading.active_count() - threads <= 2
    assert _sockets(port) - sockets == 1, "one broker connection for every topic"


def test_one_subscribe_mixing_topics_the_client_knows_and_brand_new_ones(transport):
    # The consumer learns every existing topic when it connects; `new` is created
    # afterwards, inside subscribe, so its leader is still unknown to the client.
    old, new = unique_topic(), unique_topic()
    transport.publish([envelope(old, 1)], timeout=10)
    got: queue.Queue[RawMessage] = queue.Queue()
    transport.consumer(got.put).subscribe([old, new], timeout=10)
    transport.publish([envelope(old, 2), envelope(new, 3)], timeout=10)
    assert sorted(m.headers["pn-seq"] for m in _drain(got, 2, 15)) == ["2", "3"]
    assert got.empty()


def test_topic_created_after_subscribe_is_read_from_its_first_offset(url):
    transport = KafkaTransport.from_url(with_options(url, create_topics="false"),
                                        connect_timeout=5)
    topic = unique_topic("pn.late")
    got: queue.Queue[RawMessage] = queue.Queue()
    try:
        consumer = transport.consumer(got.put)
        consumer.subscribe([topic], timeout=10)  # does not exist: followed once it appears
        producer = KafkaProducer(bootstrap_servers=url.removeprefix("kafka://").split("?")[0],
                                 acks="all")
        try:
            producer.send(topic, key=b"k", value=b"first").get(10)  # auto-created by the broker
        finally:
            producer.close(5)
        received = _drain(got, 1, 15)
        assert [m.body for m in received] == [b"first"]
    finally:
        transport.close(10)


# -- optional consumer group -------------------------------------------------------
def test_consumer_group_resumes_from_its_committed_offset(url):
    # tansu completes a join after about session_timeout_ms / 2 (docs/kafka-broker.md).
    group_url = with_options(url, group_id=unique_topic("pn-group"), session_timeout_ms=2000)
    topic = unique_topic("pn.group")
    publisher = KafkaTransport.from_url(url, connect_timeout=5)
    try:
        publisher.publish([envelope(topic, 1)], timeout=10)  # before the group existed
        first = KafkaTransport.from_url(group_url, connect_timeout=5)
        got: queue.Queue[RawMessage] = queue.Queue()
        first.consumer(got.put).subscribe([topic], timeout=20)
        publisher.publish([envelope(topic, 2)], timeout=10)
        assert [m.headers["pn-seq"] for m in _drain(got, 1, 15)] == ["2"], \
            "a new group starts at the end (auto_offset_reset=latest)"
        first.close(10)  # commits the consumed offset
        publisher.publish([envelope(topic, 3)], timeout=10)  # while nobody is subscribed
        second = KafkaTransport.from_url(group_url, connect_timeout=5)
        again: queue.Queue[RawMessage] = queue.Queue()
        try:
            second.consumer(again.put).subscribe([topic], timeout=20)
            publisher.publish([envelope(topic, 4)], timeout=10)
            received = _until_marker(again, envelope(topic, 4).body, 15)
            assert [m.headers["pn-seq"] for m in received] == ["3", "4"]
        finally:
            second.close(10)
    finally:
        publisher.close(10)


# -- credentials -------------------------------------------------------------------
def test_credentials_stay_out_of_logs_and_errors(url, caplog):
    """SASL against a broker that does not speak it: every client fails, nothing leaks."""
    secret = "pw-never-logged-7f3a"
    transport = KafkaTransport.from_url(url, username="svc", password=secret, connect_timeout=1)
    try:
        with caplog.at_level(logging.DEBUG):
            with pytest.raises(TransportError) as publish_err:
                transport.publish([envelope(unique_topic(), 1)], timeout=3)
            with pytest.raises(TransportError) as subscribe_err:
                transport.consumer(lambda m: None).subscribe([unique_topic()], timeout=3)
            # The admin client (topic creation) logs its configuration at DEBUG.
            assert transport.topics.partitions([unique_topic()], time.monotonic() + 3) is None
    finally:
        transport.close(5)
    assert caplog.records, "the clients logged nothing at DEBUG: the check would be empty"
    assert not [r for r in caplog.records if secret in r.getMessage()]
    assert secret not in str(publish_err.value) and secret not in str(subscribe_err.value)
