"""Messages an outside client puts on a table's ActiveMQ topic with stomp.py
(more, on every broker: test_forged_messages.py).

A well-formed message whose ``topicSeq`` is the next number, or whose body
names another followed table, is not in the event log: it must not take a
sequence number a genuine announcement then needs, or that announcement is
dropped as a repeat and lost without a word.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import stomp

from tests.store.helpers import Collector
from tests.support.markers import uses
from tests.transports.stomp_helpers import build, host_port, stomp_spec


@pytest.fixture
@uses("broker")
def spec():
    return stomp_spec("activemq")


def _outside_client(spec) -> stomp.Connection:
    conn = stomp.Connection([host_port(spec)])
    conn.connect(spec.username, spec.password, wait=True)
    return conn


def _forge(genuine, **changes: object) -> str:
    body = json.loads(genuine.model_dump_json(by_alias=True))
    body.update(messageId=uuid.uuid4().hex, **changes)
    return json.dumps(body)


def _until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.mark.parametrize("mode", ["verify", "deliver"])
def test_a_forged_next_number_does_not_cost_the_genuine_announcement(spec, sqlite_url, mode):
    """verify drops the forged one; deliver hands it on, then the genuine one too."""
    db = "forge" + uuid.uuid4().hex[:8]
    app = build(spec, sqlite_url, foreign_messages=mode)
    outside = _outside_client(spec)
    try:
        app.publisher.register_table(db, "t", ["ds"])
        got = Collector()
        with app.subscriber() as sub:
            sub.subscribe((db, "t"), got, history=False)
            first = app.publisher.announce_partitions(db, "t", ["ds=1"])[0]
            assert got.wait_for(lambda ms: len(ms) == 1, 10)
            outside.send(f"/topic/{first.topic}",
                         _forge(first, topicSeq=2, eventId=first.event_id + 1,
                                partitions=[{"ds": "FORGED"}]),
                         headers={"HCAT_EVENT": "ADD_PARTITION"})
            assert _until(lambda: sub.stats.received == 2)
            second = app.publisher.announce_partitions(db, "t", ["ds=2"])[0]
            assert second.topic_seq == 2
            assert got.wait_for(lambda ms: second.message_id in {m.message_id for m in ms}, 10), \
                f"the genuine ds=2 announcement was dropped; got {got.messages}"
            forged_delivered = {"FORGED"} <= {m.partitions[0]["ds"] for m in got.messages}
            assert forged_delivered == (mode == "deliver")
            assert sub.stats.foreign == 1
    finally:
        outside.disconnect()
        app.close()


def test_a_body_naming_another_topic_than_it_came_on_is_skipped(spec, sqlite_url):
    db = "forge" + uuid.uuid4().hex[:8]
    app = build(spec, sqlite_url)
    outside = _outside_client(spec)
    try:
        app.publisher.register_table(db, "t", ["ds"])
        app.publisher.register_table(db, "u", ["ds"])
        got = Collector()
        with app.subscriber() as sub:
            sub.subscribe([f"{db}.t", f"{db}.u"], got, history=False)
            on_t = app.publisher.announce_partitions(db, "t", ["ds=1"])[0]
            assert got.wait_for(lambda ms: len(ms) == 1, 10)
            # Sent to t's topic, claiming to be u's first message.
            outside.send(f"/topic/{on_t.topic}",
                         _forge(on_t, table="u", topic=f"hcat.{db}.u",
                                partitions=[{"ds": "FORGED"}]),
                         headers={"HCAT_EVENT": "ADD_PARTITION"})
            assert _until(lambda: sub.stats.received == 2)
            on_u = app.publisher.announce_partitions(db, "u", ["ds=1"])[0]
            # After the forged one on t's topic: once it is here, the forged one was handled.
            sentinel = app.publisher.announce_partitions(db, "t", ["ds=2"])[0]
            assert got.wait_for(lambda ms: {on_u.message_id, sentinel.message_id}
                                <= {m.message_id for m in ms}, 10)
            assert sorted(m.message_id for m in got.messages) == sorted(
                [on_t.message_id, on_u.message_id, sentinel.message_id])
            assert sub.stats.malformed == 1
    finally:
        outside.disconnect()
        app.close()
