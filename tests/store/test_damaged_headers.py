"""A row of the event log whose ``headers`` value is damaged must not stall the log.

Defect (session 26): ``headers`` is JSON text on SQLite and a ``json`` column on
PostgreSQL. A row whose value is not JSON (a broken tool, a half-done manual edit:
``UPDATE pn_events SET headers = '{not json'``) or JSON of the wrong shape (a
list, a string, null) made every reader of the log raise on that row: the
embedded transport retried the same read for ever, so every later event of
every table stopped reaching every subscriber; the relay's lease and a
subscriber's catch-up failed the same way.

Required: the readers go on; the damaged row's headers are rebuilt from its body
(headers are a pure function of the message: contract ``headers_for``), so
nothing is lost and the order stands; the damage is logged at ERROR naming the
event id, topic, field and what was wrong. The row is damaged by SQL, in the
same statement that logs it (a trigger), so no reader can see it undamaged.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from partition_notify.store.dead_letters import DeadLetters
from partition_notify.store.log_headers import damaged_events, unverifiable_events
from partition_notify.subscriber import Subscriber
from sqlalchemy import text

from partition_notify.app import App
from partition_notify.metrics import Metrics
from tests.faults.support import Collector
from tests.support.damaged_rows import DAMAGE, damage_on_insert

TIMEOUT = 15.0


@pytest.fixture
def subscriber(app: App) -> Iterator[Subscriber]:
    for t in ("a", "b"):
        app.publisher.register_table("db", t, ["ds"])
    s = Subscriber(app.store, app.transport, timeout_seconds=TIMEOUT)
    yield s
    s.close()


@pytest.mark.parametrize("value", DAMAGE)
def test_a_row_with_damaged_headers_does_not_stall_the_embedded_subscriber(
    app: App, subscriber: Subscriber, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    if not damage_on_insert(app, value):
        return  # PostgreSQL refuses such a value: no such row can exist there
    got_a, got_b = Collector(), Collector()
    subscriber.subscribe("db.a", got_a)
    subscriber.subscribe("db.b", got_b)
    poison = app.publisher.announce_partitions("db", "a", ["ds=poison"])[0]
    later_b = app.publisher.announce_partitions("db", "b", ["ds=1"])[0]
    later_a = app.publisher.announce_partitions("db", "a", ["ds=2"])[0]
    with app.store.engine.connect() as conn:
        raw = conn.execute(text("SELECT headers FROM pn_events WHERE event_id = :e"),
                           {"e": poison.event_id}).scalar()
    assert raw is None or "PN_MESSAGE_ID" not in str(raw), raw  # the damage is in place

    assert got_b.wait_for({later_b.message_id}, TIMEOUT), "db.b stalled behind db.a's row"
    ids = {poison.message_id, later_a.message_id}
    assert got_a.wait_for(ids, TIMEOUT), f"db.a got {dict(got_a.seen)}"
    # Nothing lost, nothing twice, in order: the damaged event itself is delivered.
    assert got_a.max_per_id() == 1 and got_b.max_per_id() == 1
    assert [seq for _, seq in got_a.order] == [poison.topic_seq, later_a.topic_seq]

    said = [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR and "headers" in r.getMessage()]
    assert said, "the damage was not logged"
    assert f"event {poison.event_id}" in said[0] and poison.topic in said[0], said[0]


@pytest.mark.parametrize("value", DAMAGE)
def test_every_log_read_survives_a_row_with_damaged_headers(app: App, value: str) -> None:
    """The relay's lease, a subscriber's catch-up, the push sink's table read."""
    app.publisher.register_table("db", "a", ["ds"])
    if not damage_on_insert(app, value):
        return  # PostgreSQL refuses such a value: no such row can exist there
    before = app.store.log.max_event_id()
    sent = [app.publisher.announce_partitions("db", "a", [f"ds={p}"])[0]
            for p in ("0", "poison", "1")]
    damaged = damaged_events()
    log = app.store.log
    table_id = app.store.catalog.get_table("db", "a").id
    reads = {
        "events_after": log.events_after(before, 10),
        "topic_events_after": log.topic_events_after(sent[0].topic, 0, 10),
        "table_events_after": log.table_events_after(table_id, before, 10),
    }
    with app.store.engine.begin() as conn:  # as a broker transport's relay finds them
        conn.execute(text("UPDATE pn_events SET published_at = NULL"))
    reads["lease_unpublished"] = log.lease_unpublished("test-relay", 10, 30.0)
    for name, got in reads.items():
        assert [e.event_id for e in got] == [m.event_id for m in sent], name
        assert got[1].headers["PN_MESSAGE_ID"] == sent[1].message_id, name
        assert got[1].headers["PN_TABLE"] == "db.a", name
    # Reported once, however often it is read: the serve process's metric counts it.
    metrics = Metrics()
    metrics.log_damaged = damaged_events
    assert damaged_events() == damaged + 1
    assert metrics.registry.get_sample_value("pn_log_damaged_headers_total") == damaged + 1


def test_a_row_whose_body_is_damaged_too_is_skipped_as_malformed(
    app: App, subscriber: Subscriber, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing to rebuild the headers from: the subscriber counts it malformed, goes on."""
    # A body of its own: damage is reported once per event and body per process.
    damage_on_insert(app, "'[1, 2]'", f"'not a message {uuid.uuid4()}'")
    got = Collector()
    subscriber.subscribe("db.a", got)
    poison = app.publisher.announce_partitions("db", "a", ["ds=poison"])[0]
    later = app.publisher.announce_partitions("db", "a", ["ds=1"])[0]
    assert got.wait_for({later.message_id}, TIMEOUT), f"db.a got {dict(got.seen)}"
    assert poison.message_id not in got.seen and got.max_per_id() == 1
    assert subscriber.stats.malformed == 1
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(f"event {poison.event_id} " in m and "does not decode either" in m
               for m in said), said


def test_every_log_read_marks_a_row_damaged_beyond_repair_unverifiable(app: App) -> None:
    """Headers and body damaged: every read says why (what the relay dead-letters by),
    with empty headers (what the readers skip by); reported and counted once."""
    app.publisher.register_table("db", "a", ["ds"])
    damage_on_insert(app, "'[1, 2]'", f"'not a message {uuid.uuid4()}'")
    before = app.store.log.max_event_id()
    damaged, unverifiable = damaged_events() + 1, unverifiable_events() + 1
    sent = [app.publisher.announce_partitions("db", "a", [f"ds={p}"])[0]
            for p in ("0", "poison", "1")]
    log = app.store.log
    table_id = app.store.catalog.get_table("db", "a").id
    reads = {
        "events_after": log.events_after(before, 10),
        "topic_events_after": log.topic_events_after(sent[0].topic, 0, 10),
        "table_events_after": log.table_events_after(table_id, before, 10),
    }
    with app.store.engine.begin() as conn:
        conn.execute(text("UPDATE pn_events SET published_at = NULL"))
    reads["lease_unpublished"] = log.lease_unpublished("test-relay", 10, 30.0)
    for name, got in reads.items():
        assert [e.event_id for e in got] == [m.event_id for m in sent], name
        assert [bool(e.unverifiable) for e in got] == [False, True, False], name
        why = got[1].unverifiable
        assert f"event {sent[1].event_id} of topic {sent[1].topic}" in why, why
        assert "'headers' is a JSON list" in why and "'body' does not decode" in why, why
        assert got[1].headers == {}, name
    assert (damaged_events(), unverifiable_events()) == (damaged, unverifiable)
    metrics = Metrics()
    metrics.log_unverifiable = unverifiable_events
    assert metrics.registry.get_sample_value("pn_log_unverifiable_events_total") == unverifiable


@pytest.mark.parametrize("value", DAMAGE)
def test_a_dead_letter_with_damaged_headers_is_listed_redriven_and_rejected(
    app: App, value: str
) -> None:
    """The dead-letter machinery loads whole rows: a damaged one must not break it."""
    app.publisher.register_table("db", "a", ["ds"])
    if not damage_on_insert(app, value):
        return  # PostgreSQL refuses such a value: no such row can exist there
    poison = app.publisher.announce_partitions("db", "a", ["ds=poison"])[0]
    with app.store.engine.begin() as conn:
        conn.execute(text("UPDATE pn_events SET published_at = NULL, dead_at = 1.0, "
                          "last_error = 'refused' WHERE event_id = :e"), {"e": poison.event_id})
    letters = DeadLetters(app.store)
    assert [d.event_id for d in letters.find()] == [poison.event_id]
    assert [d.event_id for d in letters.redrive([poison.event_id])] == [poison.event_id]
    letters.record_rejections({poison.event_id: "refused again"}, max_attempts=1,
                              backoff=lambda n: 1.0)
    assert [(d.event_id, d.error) for d in letters.find()] == [(poison.event_id, "refused again")]
