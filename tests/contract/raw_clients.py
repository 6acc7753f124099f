"""Plain driver clients for the contract suite: a foreign producer and consumer per bus.

They talk to the broker with the driver directly (stomp.py, kafka-python), not
through partition-notify, so the suite can put arbitrary bytes on a topic and
observe what the broker really delivers. Each publish waits for the broker's
confirmation (STOMP RECEIPT, Kafka acks=all) with a deadline.

The embedded bus has no raw client: it *is* the store's event log, written
only inside the publisher's transaction, so no foreign producer exists.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: Transports with a foreign producer/consumer; embedded has none (see module doc).
RAW_CLIENT_BUSES = ("activemq", "rabbitmq", "kafka")
#: Brokers on which the tests have an account that may read but not write.
REFUSING_BUSES = ("activemq", "rabbitmq")
NOT_APPLICABLE = {
    ("refusal", "embedded"): "no broker: publishing is the store commit itself",
    ("refusal", "kafka"): "the Kafka-protocol test broker (tansu) has no ACLs to refuse a write",
    ("raw", "embedded"): "the embedded bus is the store's event log; no foreign producer exists",
}


def reader_credentials(bus_name: str) -> tuple[str, str]:
    """An account the broker lets connect and subscribe but not publish."""
    env = os.environ.get
    if bus_name == "activemq":
        return (env("PN_TEST_READER_USERNAME", "pn_reader"),
                env("PN_TEST_READER_PASSWORD", "pn-reader-secret"))
    if bus_name == "rabbitmq":
        return (env("PN_TEST_RABBIT_READER_USERNAME", "pn_reader"),
                env("PN_TEST_RABBIT_READER_PASSWORD", "pn-reader-secret"))
    raise ValueError(f"{bus_name}: {NOT_APPLICABLE.get(('refusal', bus_name))}")


@dataclass
class Received:
    topic: str
    headers: dict[str, str]
    body: bytes


# ----------------------------------------------------------------------------- STOMP
@dataclass
class RawStomp:
    """A stomp.py connection: SEND with a receipt, SUBSCRIBE with a receipt."""

    url: str
    username: str | None
    password: str | None
    timeout: float = 10.0
    messages: queue.Queue[Received] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        import stomp

        parts = urlsplit(self.url)
        self._receipts: dict[str, threading.Event] = {}
        self._errors: dict[str, str] = {}
        self._topics: dict[str, str] = {}
        self._connected = threading.Event()
        outer = self

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_connected(self, frame):
                outer._connected.set()

            def on_receipt(self, frame):
                ev = outer._receipts.get(frame.headers.get("receipt-id"))
                if ev is not None:
                    ev.set()

            def on_error(self, frame):
                outer._connected.set()  # a refused CONNECT ends the wait too
                rid = frame.headers.get("receipt-id", "")
                outer._errors[rid] = frame.headers.get("message", "")
                ev = outer._receipts.get(rid)
                if ev is not None:
                    ev.set()

            def on_message(self, frame):
                topic = outer._topics.get(frame.headers.get("subscription", ""), "?")
                outer.messages.put(Received(topic, dict(frame.headers), frame.body))

        self.conn = stomp.Connection12([(parts.hostname, parts.port)], vhost="/",
                                       auto_decode=False, reconnect_attempts_max=1,
                                       timeout=self.timeout)
        self.conn.set_listener("raw", Listener())
        self.conn.connect(self.username, self.password, wait=False)
        if not self._connected.wait(self.timeout) or not self.conn.is_connected():
            raise TimeoutError(f"raw stomp.py client: not connected to {self.url}")

    def _confirmed(self, send) -> None:
        rid = uuid.uuid4().hex
        ev = self._receipts[rid] = threading.Event()
        send(rid)
        if not ev.wait(self.timeout):
            raise TimeoutError(f"raw stomp.py client: no RECEIPT {rid} within {self.timeout} s")
        if rid in self._errors:
            raise RuntimeError(f"broker refused raw frame: {self._errors[rid]}")

    def publish(self, topic: str, body: bytes, headers: dict[str, str] | None = None,
                key: str | None = None) -> None:
        # A raw client does what plain stomp.py does: content-length included.
        self._confirmed(lambda rid: self.conn.send(f"/topic/{topic}", body,
                                                   headers={**(headers or {}), "receipt": rid}))

    def subscribe(self, topic: str) -> None:
        sid = uuid.uuid4().hex[:12]
        self._topics[sid] = topic
        self._confirmed(lambda rid: self.conn.subscribe(f"/topic/{topic}", id=sid,
                                                        headers={"receipt": rid}))

    def close(self) -> None:
        self.conn.disconnect()


# ----------------------------------------------------------------------------- Kafka
class RawKafka:
    """kafka-python producer (acks=all) and an assign-at-end consumer."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        from kafka import KafkaProducer

        parts = urlsplit(url)
        self.bootstrap = f"{parts.hostname}:{parts.port or 9092}"
        self.timeout = timeout
        self.messages: queue.Queue[Received] = queue.Queue()
        self.producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                      api_version=(2, 8), request_timeout_ms=int(timeout * 1000))
        self._consumers: list[threading.Thread] = []
        self._stop = threading.Event()

    def publish(self, topic: str, body: bytes, headers: dict[str, str] | None = None,
                key: str | None = None) -> None:
        future = self.producer.send(topic, value=body, key=key.encode() if key else None,
                                    headers=[(k, v.encode()) for k, v in (headers or {}).items()])
        future.get(timeout=self.timeout)

    def subscribe(self, topic: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self._create(topic)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, api_version=(2, 8),
                                 enable_auto_commit=False)
        deadline = time.monotonic() + self.timeout
        parts = consumer.partitions_for_topic(topic)
        while not parts:
            if time.monotonic() > deadline:
                raise TimeoutError(f"raw kafka client: topic {topic} has no partitions")
            time.sleep(0.05)
            parts = consumer.partitions_for_topic(topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_end(*tps)
        for tp in tps:
            consumer.position(tp)  # resolve the end offset now, before anything is sent

        def run() -> None:
            while not self._stop.is_set():
                for recs in consumer.poll(timeout_ms=100).values():
                    for r in recs:
                        self.messages.put(Received(
                            r.topic, {k: v.decode() for k, v in (r.headers or [])}, r.value))
            consumer.close()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self._consumers.append(t)

    def _create(self, topic: str) -> None:
        """As an admin would: the topic may not exist before anything was published."""
        from kafka.admin import KafkaAdminClient, NewTopic
        from kafka.errors import TopicAlreadyExistsError

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, api_version=(2, 8),
                                 request_timeout_ms=int(self.timeout * 1000))
        try:
            admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._consumers:
            t.join(self.timeout)
        self.producer.close(timeout=self.timeout)


def raw_client(spec, *, username: str | None = None, password: str | None = None):
    """The raw client for a contract bus spec (``tests.support.accounts.BusSpec``)."""
    if spec.name == "kafka":
        return RawKafka(spec.url)
    if spec.name in ("activemq", "rabbitmq"):
        return RawStomp(spec.url, username or spec.username, password or spec.password)
    raise ValueError(f"{spec.name}: {NOT_APPLICABLE.get(('raw', spec.name))}")
