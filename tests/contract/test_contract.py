"""The transport contract, written once and run against every transport."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from urllib.parse import urlsplit

import pytest

from partition_notify.contract import AddPartitionMessage, SetDoneMessage, decode
from partition_notify.contract.messages import HCAT_EVENT, PN_MESSAGE_ID
from partition_notify.core.errors import PublishError, PublishTimeout
from tests.contract import raw_clients
from tests.contract.faults import FaultProxy
from tests.support.accounts import bus_specs


def _register(bus, db, table="events", keys=("datestamp", "region")):
    return bus.publisher.register_table(db, table, list(keys), retention_seconds=3600)


def test_delivery_and_per_table_order(bus, unique_db):
    _register(bus, unique_db)
    got: list = []
    done = threading.Event()

    def on_message(msg):
        got.append(msg)
        if isinstance(msg, SetDoneMessage):
            done.set()

    with bus.subscriber() as sub:
        sub.subscribe((unique_db, "events"), on_message)
        parts = [{"datestamp": "20110228", "region": f"r{i:02d}"} for i in range(20)]
        sent = bus.publisher.announce_partitions(unique_db, "events", parts)
        bus.publisher.send_mark_set_done(unique_db, "events", "datestamp=20110228")
        assert done.wait(15), f"set-done not delivered; got {len(got)} messages"
    assert [m.event_id for m in got] == sorted(m.event_id for m in got)
    assert [m.partitions[0]["region"] for m in got if isinstance(m, AddPartitionMessage)] == [
        p["region"] for p in parts
    ]
    assert {m.message_id for m in sent} <= {m.message_id for m in got}


def test_late_subscriber_gets_set_done_from_history(bus, unique_db):
    _register(bus, unique_db)
    bus.publisher.announce_partitions(unique_db, "events", ["datestamp=1/region=us"])
    first = bus.publisher.send_mark_set_done(unique_db, "events", "datestamp=1")
    with bus.subscriber() as sub:
        found = sub.wait_for_set_done(unique_db, "events", "datestamp=1/region=us", timeout=10)
    assert found.message_id == first.message_id


def test_wait_sees_live_set_done(bus, unique_db):
    _register(bus, unique_db)
    result: dict = {}
    with bus.subscriber() as sub:
        t = threading.Thread(target=lambda: result.update(
            msg=sub.wait_for_set_done(unique_db, "events", {"datestamp": "2"}, timeout=15)))
        t.start()
        # Whether the waiter subscribed before this publish or not, it must see
        # the message exactly once: live, or from history.
        sent = bus.publisher.send_mark_set_done(unique_db, "events", "datestamp=2")
        t.join(20)
    assert result["msg"].message_id == sent.message_id


def test_history_and_live_are_deduplicated(bus, unique_db):
    _register(bus, unique_db)
    before = [bus.publisher.send_mark_set_done(unique_db, "events", f"datestamp={i}")
              for i in range(5)]
    got: list = []
    ten = threading.Event()

    def on_message(msg):
        got.append(msg)
        if len(got) >= 10:
            ten.set()

    with bus.subscriber() as sub:
        s = sub.subscribe((unique_db, "events"), on_message)
        after = [bus.publisher.send_mark_set_done(unique_db, "events", f"datestamp={i}")
                 for i in range(5, 10)]
        assert ten.wait(15), f"only {len(got)} of 10 delivered"
        # Publish a marker and wait for it: anything duplicated would come before it.
        marker = bus.publisher.send_mark_set_done(unique_db, "events", "datestamp=marker")
        deadline = time.monotonic() + 15
        while marker.message_id not in {m.message_id for m in got}:
            assert time.monotonic() < deadline, "marker not delivered"
            s.get(timeout=0.05)
        s.close()
    got = [m for m in got if m.message_id != marker.message_id]
    ids = [m.message_id for m in got]
    assert len(ids) == len(set(ids)) == 10
    assert set(ids) == {m.message_id for m in before + after}


# -- receipts/acks, refusal, malformed input ----------------------------------
# Items that need a foreign client or a broker that can refuse are scoped to the
# transports where they apply; raw_clients.NOT_APPLICABLE gives the reason for
# the others (and test_not_applicable_reasons keeps that list honest).
STOMP_BUSES = ("activemq", "rabbitmq")


def _build(spec, store_url, *, url=None, username=None, password=None, publish_timeout=10.0):
    from pydantic import SecretStr

    from partition_notify.app import build_app

    pw = password or spec.password
    return build_app(
        store_url=store_url, transport_url=url or spec.url,
        broker_username=username or spec.username,
        broker_password=SecretStr(pw) if pw else None,
        connect_timeout_seconds=5.0, publish_timeout_seconds=publish_timeout,
    )


def _next(q, timeout):
    import queue

    try:
        return q.get(timeout=timeout)
    except queue.Empty:
        return None


def test_not_applicable_reasons():
    """Every transport is either covered by a scoped test or has a stated reason."""
    for feature, covered in (("raw", raw_clients.RAW_CLIENT_BUSES),
                             ("refusal", raw_clients.REFUSING_BUSES)):
        for name in bus_specs():
            assert (name in covered) != ((feature, name) in raw_clients.NOT_APPLICABLE), \
                (feature, name)


@pytest.mark.parametrize("bus_spec", raw_clients.RAW_CLIENT_BUSES, indirect=True)
def test_publish_returns_after_broker_confirmed(bus, bus_spec, unique_db):
    """Once publish returned, the broker has the message: a plain driver consumer gets it."""
    info = _register(bus, unique_db)
    raw = raw_clients.raw_client(bus_spec)
    try:
        raw.subscribe(info.topic)  # confirmed by the broker before we publish
        sent = bus.publisher.send_mark_set_done(unique_db, "events", "datestamp=1")
        got = _next(raw.messages, 15)
        assert got is not None, "the broker did not deliver a message publish() reported done"
        assert got.topic == info.topic
        assert got.headers[HCAT_EVENT] == "PARTITION_DONE"
        assert got.headers[PN_MESSAGE_ID] == sent.message_id
        assert decode(got.body, got.headers).message_id == sent.message_id
        bus.publisher.flush_marks()  # marks of confirmed events are written in batches
        assert bus.store.log.relay_lag()[0] == 0, "a confirmed event must be marked published"
    finally:
        raw.close()


@pytest.mark.parametrize("bus_spec", STOMP_BUSES, indirect=True)
def test_publish_waits_for_the_receipt(bus_spec, sqlite_url, unique_db):
    """Replies withheld: publish raises PublishTimeout at its deadline, never returns early.

    Kafka is covered by its transport's own acks=all tests: Kafka clients go to
    the advertised listener after bootstrap, so a proxy cannot sit in between.
    """
    target = urlsplit(bus_spec.url)
    proxy = FaultProxy(target.hostname, target.port)
    app = _build(bus_spec, sqlite_url, url=proxy.url(), publish_timeout=1.0)
    try:
        _register(app, unique_db)
        app.publisher.send_mark_set_done(unique_db, "events", "datestamp=ok")
        proxy.hold_replies()
        started = time.monotonic()
        with pytest.raises(PublishError, match="no RECEIPT") as err:
            app.publisher.send_mark_set_done(unique_db, "events", "datestamp=held")
        assert isinstance(err.value.__cause__, PublishTimeout)
        assert 0.9 <= time.monotonic() - started < 5
        app.publisher.flush_marks()  # marks of confirmed events are written in batches
        assert app.store.log.relay_lag()[0] == 1, "the unconfirmed event stays for the relay"
    finally:
        proxy.release_replies()
        app.close()
        proxy.close()


@pytest.mark.parametrize("bus_spec", STOMP_BUSES, indirect=True)
def test_lost_connection_fails_pending_publish_then_reconnects(bus_spec, sqlite_url,
                                                               unique_db):
    target = urlsplit(bus_spec.url)
    proxy = FaultProxy(target.hostname, target.port)
    app = _build(bus_spec, sqlite_url, url=proxy.url(), publish_timeout=20.0)
    outcome: dict = {}
    try:
        _register(app, unique_db)
        app.publisher.send_mark_set_done(unique_db, "events", "datestamp=before")
        proxy.hold_replies()

        def publish():
            started = time.monotonic()
            try:
                app.publisher.send_mark_set_done(unique_db, "events", "datestamp=during")
            except PublishError as exc:
                outcome["error"] = exc
            outcome["seconds"] = time.monotonic() - started

        t = threading.Thread(target=publish)
        t.start()
        deadline = time.monotonic() + 5
        while app.transport.link.receipts.outstanding() == 0:  # the SEND is on the wire
            assert time.monotonic() < deadline, "publish never sent its frame"
            time.sleep(0.01)
        proxy.cut()
        t.join(10)
        assert isinstance(outcome.get("error"), PublishError), outcome
        assert not isinstance(outcome["error"].__cause__, PublishTimeout), "lost, not timed out"
        assert outcome["seconds"] < 10
        proxy.release_replies()
        app.publisher.send_mark_set_done(unique_db, "events", "datestamp=after")  # reconnects
        assert proxy.accepted == 2
        app.publisher.flush_marks()  # marks of confirmed events are written in batches
        assert app.store.log.relay_lag()[0] == 1  # only the one that was never confirmed
    finally:
        proxy.release_replies()
        app.close()
        proxy.close()


@pytest.mark.parametrize("bus_spec", raw_clients.REFUSING_BUSES, indirect=True)
def test_broker_refusal_is_a_publish_error(bus_spec, sqlite_url, unique_db):
    """The broker refuses the account's write: PublishError, event kept for the relay."""
    user, password = raw_clients.reader_credentials(bus_spec.name)
    app = _build(bus_spec, sqlite_url, username=user, password=password, publish_timeout=5.0)
    try:
        _register(app, unique_db)
        for attempt in range(2):  # refused again, not stuck, on the same or a new connection
            started = time.monotonic()
            with pytest.raises(PublishError) as err:
                app.publisher.send_mark_set_done(unique_db, "events", f"datestamp={attempt}")
            assert not isinstance(err.value.__cause__, PublishTimeout)
            assert time.monotonic() - started < 5
            assert "refused" in str(err.value) or "not authorized" in str(err.value)
            assert password not in str(err.value)
        app.publisher.flush_marks()  # marks of confirmed events are written in batches
        assert app.store.log.relay_lag()[0] == 2
    finally:
        app.close()


MALFORMED = [
    (b'{"eventType": "PARTITION_DONE", "db": ', {}),  # truncated JSON
    (b"\xff\xfe\xfa not utf-8", {}),
    (b'{"db": "x", "table": "y"}', {HCAT_EVENT: "DROP_TABLE"}),  # unknown event
    (b"[1, 2, 3]", {HCAT_EVENT: "PARTITION_DONE"}),  # JSON, not an object
]


@pytest.mark.parametrize("bus_spec", raw_clients.RAW_CLIENT_BUSES, indirect=True)
def test_malformed_messages_are_logged_and_skipped(bus, bus_spec, unique_db, caplog):
    info = _register(bus, unique_db)
    raw = raw_clients.raw_client(bus_spec)
    got: list = []
    seen_malformed: list[int] = []
    arrived = threading.Event()
    sub = bus.subscriber()

    def on_message(msg):
        got.append(msg)
        seen_malformed.append(sub.stats.malformed)
        if len(got) == 2:
            arrived.set()

    try:
        with caplog.at_level(logging.WARNING, logger="subscriber"):
            sub.subscribe((unique_db, "events"), on_message, history=False)
            for body, headers in MALFORMED:
                raw.publish(info.topic, body, headers, key=f"{unique_db}.events")
            first = bus.publisher.send_mark_set_done(unique_db, "events", "datestamp=1")
            second = bus.publisher.send_mark_set_done(unique_db, "events", "datestamp=2")
            assert arrived.wait(15), f"valid messages after the garbage: got {len(got)}"
        assert [m.message_id for m in got] == [first.message_id, second.message_id]
        # The garbage went first (confirmed before the valid ones were sent).
        assert seen_malformed[0] == len(MALFORMED)
        skipped = [r for r in caplog.records if "malformed" in r.getMessage()]
        assert len(skipped) == len(MALFORMED)
    finally:
        with contextlib.suppress(Exception):
            raw.close()
        sub.close()
