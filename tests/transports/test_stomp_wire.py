"""What partition-notify puts on the STOMP wire, as a broker and a JMS consumer see it."""

from __future__ import annotations

import queue
import threading

import pytest

from partition_notify.contract import decode
from tests.transports.stomp_helpers import STOMP_BROKERS, build, stomp_spec
from tests.contract.raw_clients import RawStomp
from tests.support.markers import uses


@pytest.fixture(params=STOMP_BROKERS)
@uses("broker")
def spec(request):
    return stomp_spec(request.param)


class FrameSpy:
    """Records every frame the transport's stomp.py connection sends."""

    def __init__(self) -> None:
        self.frames: list = []
        self.lock = threading.Lock()

    def on_send(self, frame) -> None:
        with self.lock:
            self.frames.append((frame.cmd, dict(frame.headers)))


def test_every_send_has_a_receipt_persistent_and_no_content_length(spec, sqlite_url):
    app = build(spec, sqlite_url)
    try:
        app.publisher.register_table("wire", "events", ["datestamp", "region"])
        app.publisher.announce_partitions("wire", "events", ["datestamp=0/region=x"])
        spy = FrameSpy()
        app.transport.link._conn.set_listener("spy", spy)  # the live stomp.py connection
        parts = [f"datestamp=1/region=r{i}" for i in range(50)]
        app.publisher.announce_partitions("wire", "events", parts)
        app.publisher.send_mark_set_done("wire", "events", "datestamp=1")
    finally:
        app.close()
    sends = [h for cmd, h in spy.frames if cmd == "SEND"]
    assert len(sends) == 51
    assert len({h["receipt"] for h in sends}) == 51, "one distinct receipt per SEND"
    assert all(h["persistent"] == "true" for h in sends)
    assert all(h["destination"] == "/topic/hcat.wire.events" for h in sends)
    assert not [h for h in sends if "content-length" in h]
    assert {h["HCAT_EVENT"] for h in sends} == {"ADD_PARTITION", "PARTITION_DONE"}


@pytest.mark.broker  # asks for the broker itself, not through a fixture
def test_activemq_delivers_a_text_message_with_properties(sqlite_url):
    """ActiveMQ makes a TextMessage when SEND has no content-length; it then delivers
    MESSAGE frames without one (a BytesMessage gets content-length), so the header's
    absence on delivery is the broker telling us what JMS consumers receive."""
    spec = stomp_spec("activemq")
    raw = RawStomp(spec.url, spec.username, spec.password)
    app = build(spec, sqlite_url)
    try:
        app.publisher.register_table("wire", "jms", ["datestamp"])
        raw.subscribe("hcat.wire.jms")
        sent = app.publisher.send_mark_set_done("wire", "jms", "datestamp=1")
        ours = raw.messages.get(timeout=10)
        raw.publish("hcat.wire.jms", b'{"not": "ours"}')  # plain stomp.py: content-length set
        foreign = raw.messages.get(timeout=10)
    finally:
        app.close()
        raw.close()
    assert "content-length" not in ours.headers, "a BytesMessage would break HCatalog consumers"
    assert "content-length" in foreign.headers, "control: ActiveMQ marks BytesMessages"
    assert ours.headers["persistent"] == "true"
    # Envelope headers arrive as JMS string properties.
    assert ours.headers["HCAT_EVENT"] == "PARTITION_DONE"
    assert ours.headers["HCAT_MESSAGE_FORMAT"] == "json"
    assert ours.headers["PN_EVENT_ID"] == str(sent.event_id)
    assert decode(ours.body, ours.headers) == sent


def test_empty_publish_sends_nothing(spec, sqlite_url):
    app = build(spec, sqlite_url)
    try:
        app.transport.publish([], timeout=1)
        assert app.transport.link.connects == 0, "no connection for nothing to send"
    finally:
        app.close()


def test_messages_for_unsubscribed_topics_are_not_delivered(spec, sqlite_url):
    app = build(spec, sqlite_url)
    got: queue.Queue = queue.Queue()
    try:
        app.publisher.register_table("wire", "a", ["d"])
        app.publisher.register_table("wire", "b", ["d"])
        consumer = app.transport.consumer(got.put)
        consumer.subscribe(["hcat.wire.a"], timeout=5)
        app.publisher.send_mark_set_done("wire", "b", "d=1")
        app.publisher.send_mark_set_done("wire", "a", "d=1")
        first = got.get(timeout=10)
        assert first.topic == "hcat.wire.a"
        consumer.close(5)
        app.publisher.send_mark_set_done("wire", "a", "d=2")
        with pytest.raises(queue.Empty):
            got.get(timeout=0.5)  # closed: unsubscribed (UNSUBSCRIBE confirmed by receipt)
    finally:
        app.close()
