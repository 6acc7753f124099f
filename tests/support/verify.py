"""Client-level checks of the running services (``scripts/services.sh verify``).

What the suite relies on, checked with the client libraries it uses: the
ActiveMQ service account may write to hcat.> and the reader may not; RabbitMQ
delivers and refuses its reader's SEND; tansu takes a produce(acks=all) and
serves it back. Run as ``python -m tests.support.verify`` by a python that has
stomp.py and kafka-python; the service manager gives the whole run a deadline,
and each wait here has its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import uuid

import stomp
from stomp.exception import StompException

from tests.support import accounts

DEST = "/topic/hcat.x.y"


class Listener:
    """stomp.py calls ``on_<frame>`` methods by name; no base class needed."""

    def __init__(self) -> None:
        self.errors: list[dict[str, str]] = []
        self.receipts: list[str] = []
        self.messages: list[str] = []
        self.event = threading.Event()
        self.connected = threading.Event()

    def on_connected(self, frame: stomp.utils.Frame) -> None:
        self.connected.set()

    def on_error(self, frame: stomp.utils.Frame) -> None:
        self.errors.append(dict(frame.headers))
        self.event.set()

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self.receipts.append(str(frame.headers.get("receipt-id")))
        self.event.set()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.messages.append(str(frame.body))
        self.event.set()


class Report:
    def __init__(self) -> None:
        self.ok = True

    def __call__(self, name: str, good: bool, detail: str = "") -> None:
        self.ok &= good
        print(f"[services] verify {name:<44} {'ok' if good else 'FAILED'}"
              + (f" ({detail})" if detail else ""), file=sys.stderr)


def connect(port: int, user: str, password: str) -> tuple[stomp.Connection12, Listener]:
    conn = stomp.Connection12([("127.0.0.1", port)], heartbeats=(0, 0), vhost="/", timeout=10)
    listener = Listener()
    conn.set_listener("l", listener)
    conn.connect(user, password, wait=False)
    if not listener.connected.wait(10):
        raise OSError(f"no CONNECTED from 127.0.0.1:{port} as {user} within 10 s")
    return conn, listener


def send_with_receipt(port: int, user: str, password: str) -> tuple[bool, str | None]:
    """(receipt received, the ERROR frame's message if one came)."""
    conn, listener = connect(port, user, password)
    receipt = "r-" + uuid.uuid4().hex[:8]
    conn.send(DEST, body="services.sh check", headers={"receipt": receipt})
    listener.event.wait(10)
    with contextlib.suppress(Exception):  # a check connection: it only has to go away
        conn.disconnect()
    error = listener.errors[0].get("message", "ERROR") if listener.errors else None
    return receipt in listener.receipts, error


def check_activemq(report: Report) -> None:
    port = accounts.ACTIVEMQ_STOMP_PORT
    good, error = send_with_receipt(port, accounts.SERVICE_USER, accounts.SERVICE_PASSWORD)
    report(f"activemq: {accounts.SERVICE_USER} SEND {DEST} -> RECEIPT",
           good and error is None, error or "")
    good, error = send_with_receipt(port, accounts.READER_USER, accounts.READER_PASSWORD)
    report(f"activemq: {accounts.READER_USER} SEND {DEST} -> ERROR", error is not None
           and not good, error or "no ERROR frame: reader can write!")


def check_rabbitmq(report: Report) -> None:
    port = accounts.RABBIT_STOMP_PORT
    sub, heard = connect(port, "guest", "guest")
    sub.subscribe(DEST, id="1", ack="auto", headers={"receipt": "sub-0"})
    heard.event.wait(10)  # the SUBSCRIBE's receipt: the subscription is in place
    heard.event.clear()
    good, error = send_with_receipt(port, "guest", "guest")
    report(f"rabbitmq: guest SEND {DEST} -> RECEIPT", good and error is None)
    deadline = time.monotonic() + 10
    while not heard.messages and time.monotonic() < deadline:
        heard.event.wait(0.5)
        heard.event.clear()
    report("rabbitmq: subscriber receives it", bool(heard.messages))
    sub.disconnect()
    user, password = accounts.RABBIT_READER_USER, accounts.RABBIT_READER_PASSWORD
    rsub, rheard = connect(port, user, password)
    rsub.subscribe(DEST, id="1", ack="auto", headers={"receipt": "sub-1"})
    rheard.event.wait(10)
    report(f"rabbitmq: {user} SUBSCRIBE {DEST} -> RECEIPT",
           "sub-1" in rheard.receipts and not rheard.errors)
    rsub.disconnect()
    good, error = send_with_receipt(port, user, password)
    report(f"rabbitmq: {user} SEND {DEST} -> ERROR", error is not None and not good,
           error or "no ERROR frame: reader can write!")


def check_kafka(report: Report) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    servers = f"127.0.0.1:{accounts.KAFKA_PORT}"
    topic = "hcat.services-check"
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", request_timeout_ms=10000)
    sent = producer.send(topic, b"services.sh check", partition=0).get(timeout=15)
    producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False,
                             request_timeout_ms=10000)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, sent.offset)
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.close()
    report("kafka: produce(acks=all) + assign/seek/poll", got[:1] == [b"services.sh check"])


def main() -> int:
    skip = set(filter(None, os.environ.get("PN_SERVICES_SKIP", "").split(",")))
    report = Report()
    for name, check in (("activemq", check_activemq), ("rabbitmq", check_rabbitmq)):
        if name not in skip:
            try:
                check(report)
            except (StompException, OSError) as exc:
                report(f"{name}: stomp.py checks", False, repr(exc))
    if "kafka" not in skip:
        try:
            check_kafka(report)
        except Exception as exc:  # any failure is the check's answer
            report("kafka: kafka-python checks", False, repr(exc))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
