"""What partition-notify puts on the STOMP wire, as a broker and a JMS consumer see it."""

from __future__ import annotations

import queue
import threading

import pytest
import stomp
import stomp.protocol
import stomp.transport
import stomp.utils
from hypothesis import given, settings
from hypothesis import strategies as st
from partition_notify.transports.stomp._wire import send_frame

from partition_notify.contract import decode
from tests.contract.raw_clients import RawStomp
from tests.support.markers import uses
from tests.transports.stomp_helpers import STOMP_BROKERS, build, stomp_spec


@pytest.fixture(params=STOMP_BROKERS)
@uses("broker")
def spec(request):
    return stomp_spec(request.param)


class WireSpy:
    """Records every frame the transport writes on its stomp.py connection's socket
    (SENDs are encoded by the link and written in batches, past stomp.py's listeners)."""

    def __init__(self, transport) -> None:
        self.data = bytearray()
        self.lock = threading.Lock()
        self._send = transport.send

        def send(data: bytes) -> None:
            with self.lock:
                self.data += data
            self._send(data)

        transport.send = send

    @property
    def frames(self) -> list:
        with self.lock:
            raw = bytes(self.data)
        out = []
        for chunk in raw.split(b"\x00"):
            head = chunk.lstrip(b"\r\n").split(b"\n\n", 1)[0].decode()
            if not head:
                continue  # heart-beats
            cmd, *lines = head.split("\n")
            out.append((cmd, dict(line.split(":", 1) for line in lines)))
        return out


def test_every_send_has_a_receipt_persistent_and_no_content_length(spec, sqlite_url):
    app = build(spec, sqlite_url)
    try:
        app.publisher.register_table("wire", "events", ["datestamp", "region"])
        app.publisher.announce_partitions("wire", "events", ["datestamp=0/region=x"])
        spy = WireSpy(app.transport.link._conn.transport)  # the live stomp.py connection
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


@settings(max_examples=300, deadline=None)
@given(headers=st.dictionaries(st.text(alphabet="abcXYZ_-", min_size=1, max_size=8),
                               st.text(max_size=20).filter(lambda v: "\x00" not in v),
                               max_size=6),
       body=st.binary(max_size=50).filter(lambda b: b"\x00" not in b))
def test_send_frame_is_the_bytes_stomp_py_writes(headers, body) -> None:
    """The link encodes SENDs itself (batched writes): byte for byte stomp.py's frame."""
    sent: list[bytes] = []

    class Capture(stomp.transport.BaseTransport):
        def transmit(self, frame) -> None:
            sent.append(stomp.utils.pack(stomp.utils.convert_frame(frame)))

    proto = stomp.protocol.Protocol12(Capture(), auto_content_length=False)
    full = {**headers, "persistent": "true", "receipt": "r-1"}
    proto.send("/topic/t.x", body, headers=dict(full))
    assert send_frame("/topic/t.x", body, full) == sent[0]
