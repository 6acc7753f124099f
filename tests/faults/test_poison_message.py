"""Fault: a message the broker refuses for good (a poison message) sits at the head of the log.

A backlog is logged while the broker is unreachable: first one event the
broker will refuse for good, then events of other tables (and one more of the
poisoned table). The relay then runs against the real broker:

* ActiveMQ (the shipped authorization map): the poisoned table's topic is
  outside ``hcat.>``, so every SEND to it is answered with an ERROR frame
  ("not authorized") — attributed to that SEND's receipt.
* Kafka (tansu): the poisoned event is larger than the producer's
  ``max_request_size``; kafka-python refuses that record with
  ``MessageSizeTooLargeError`` (tansu itself accepts any size).

Required: the other tables' events are delivered promptly while the poison is
still being retried; after ``relay_max_attempts`` refusals the poison is
dead-lettered (store state, counter, log line naming it); the later event of
the poisoned topic follows it once it is quarantined, with a detectable gap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from partition_notify.store.dead_letters import DeadLetters
from partition_notify.store.schema import EventRow, TableRow
from sqlalchemy import select

from partition_notify.app import App, build_app
from partition_notify.core.errors import PublishError
from partition_notify.serve.service import Service
from tests.faults.support import Collector, stomp_app, tally
from tests.support.activemq import ActiveMQ
from tests.support.markers import uses
from tests.support.net import free_port, wait_until
from tests.transports.kafka_helpers import kafka_spec

OTHER_EVENTS = 50
MAX_ATTEMPTS = 3
#: Delivery of the other tables must not wait for the poison's quarantine:
#: far less than the attempts' backoff (0.5 + 1 + ... s) plus the first try.
PROMPT_SECONDS = 10.0


def _service(app: App) -> Service:
    return Service(app)


@pytest.fixture
def relay_settings() -> dict[str, object]:
    return {
        "relay_interval_seconds": 0.05,
        "relay_writer_grace_seconds": 0.0,
        "relay_max_backoff_seconds": 2.0,
        "relay_max_attempts": MAX_ATTEMPTS,
    }


def _run_episode(name: str, up: App, down: App, db: str, big_location: str | None,
                 caplog: pytest.LogCaptureFixture, *, follow_up: bool) -> None:
    collect = Collector()
    same_topic = Collector()
    sub = up.subscriber()
    try:
        handles = [sub.subscribe(f"{db}.{t}", collect) for t in ("other1", "other2")]
        if follow_up:
            handles.append(sub.subscribe(f"{db}.poisoned", same_topic))
        if follow_up:  # seen before the poison, so the hole after it is a visible gap
            first = up.publisher.announce_partitions(db, "poisoned", ["ds=before"])
            assert same_topic.wait_for({first[0].message_id}, 15)
        # One store, two apps: the one whose broker is unreachable logs the backlog.
        with pytest.raises(PublishError):
            down.publisher.announce_partitions(db, "poisoned", ["ds=poison"],
                                               locations=[big_location])
        for t, parity in (("other1", 1), ("other2", 0)):
            with pytest.raises(PublishError):
                down.publisher.announce_partitions(
                    db, t, [f"ds={i}" for i in range(OTHER_EVENTS) if i % 2 == parity])
        ids = _logged_ids(up, db)
        assert len(ids) == OTHER_EVENTS
        after: set[str] = set()
        if follow_up:  # a later event of the poisoned topic: waits, then flows
            with pytest.raises(PublishError):
                down.publisher.announce_partitions(db, "poisoned", ["ds=after"])
            after = {_logged_ids(up, db, ("poisoned",))[-1]}
        svc = _service(up)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="partition_notify.publisher.relay"):
            svc.start()
            try:
                prompt = collect.wait_for(set(ids), PROMPT_SECONDS)
                latency = time.monotonic() - started
                assert prompt, (f"{collect.delivered(set(ids))} of {OTHER_EVENTS} other-table "
                                f"events delivered within {PROMPT_SECONDS:g} s of the relay "
                                "starting: the poison stalls the relay")
                # Delivered is not enough: confirmed and marked, or they are re-sent forever.
                # Left pending: the poison, and the later event of its topic behind it.
                left = 1 + len(after)
                wait_until(lambda: up.store.log.relay_lag()[0] <= left, PROMPT_SECONDS,
                           "the other tables' events to be marked published (only the poisoned "
                           "topic left pending)")
                confirmed = time.monotonic() - started
                wait_until(lambda: len(DeadLetters(up.store).find()) == 1, 60,
                           "the poison to be dead-lettered")
                assert same_topic.wait_for(after, 30), "the poisoned topic did not flow again"
            finally:
                svc.stop()
        dead = DeadLetters(up.store).find()
        assert dead[0].table == f"{db}.poisoned" and dead[0].attempts == MAX_ATTEMPTS
        counter = svc.metrics.registry.get_sample_value("pn_relay_dead_lettered_total")
        assert counter == 1.0
        if follow_up:
            # Per-topic order: the later event went out only once the poison was quarantined.
            # On the bus the poison is a hole in topicSeq; our subscriber sees the jump and
            # fills it from the event log, where the dead letter stays: nothing lost to it.
            assert _published_at(up, after) >= dead[0].dead_at
            poison_id = _logged_ids(up, db, ("poisoned",))[1]
            assert same_topic.delivered(after) == 1
            assert same_topic.delivered({poison_id}) == 1 and sub.stats.filled >= 1
        lines = [r.getMessage() for r in caplog.records if "dead-letter" in r.getMessage()]
        assert any(str(dead[0].event_id) in m and f"{db}.poisoned" in m for m in lines), lines
        tally(
            f"poison-{name}",
            acknowledged=OTHER_EVENTS,
            delivered=collect.delivered(set(ids)),
            duplicates_suppressed=sum(h.duplicates for h in handles),
            other_tables_delivered_in_s=f"{latency:.2f}",
            other_tables_confirmed_in_s=f"{confirmed:.2f}",
            poison_dead_lettered=len(dead),
            poison_attempts=dead[0].attempts,
            same_topic_after_quarantine=same_topic.delivered(after) if follow_up else "n/a",
            gaps_seen=sub.stats.gaps,
            filled_from_log=sub.stats.filled,
        )
    finally:
        sub.close()


def _logged_ids(app: App, db: str, tables: tuple[str, ...] = ("other1", "other2")) -> list[str]:
    with app.store.engine.connect() as conn:
        rows = conn.execute(
            select(EventRow.message_id).join(TableRow, TableRow.id == EventRow.table_id)
            .where(TableRow.db == db, TableRow.name.in_(tables)).order_by(EventRow.event_id))
        return [r[0] for r in rows]


def _published_at(app: App, message_ids: set[str]) -> float:
    with app.store.engine.connect() as conn:
        return float(conn.scalar(select(EventRow.published_at)
                                 .where(EventRow.message_id.in_(message_ids))) or 0.0)


def _register(app: App, db: str, poison_topic: str | None) -> None:
    app.publisher.register_table(db, "poisoned", ["ds"], topic=poison_topic)
    for t in ("other1", "other2"):
        app.publisher.register_table(db, t, ["ds"])


def test_poison_on_activemq_other_tables_flow(
    broker: ActiveMQ, sqlite_url: str, db_name: str,
    relay_settings: dict[str, object], caplog: pytest.LogCaptureFixture,
) -> None:
    down = stomp_app(sqlite_url, f"stomp://127.0.0.1:{free_port()}", connect_timeout=1.0)
    up = stomp_app(sqlite_url, broker.url)
    assert isinstance(up, App) and isinstance(down, App)
    up.settings = up.settings.model_copy(update=relay_settings)
    try:
        # The shipped ACL lets pn_service write hcat.> only: this topic is refused for good.
        _register(up, db_name, f"denied.{db_name}")
        _run_episode("activemq", up, down, db_name, None, caplog, follow_up=False)
    finally:
        up.close()
        down.close()


@pytest.fixture
@uses("broker")
def kafka_url() -> Iterator[str]:
    yield kafka_spec().url


def test_poison_on_kafka_other_tables_flow(
    kafka_url: str, sqlite_url: str, db_name: str,
    relay_settings: dict[str, object], caplog: pytest.LogCaptureFixture,
) -> None:
    # The publisher accepts up to 2 MiB here; the producer refuses records over its
    # max_request_size (1 MiB, kafka-python's default): a refusal that lasts.
    common: dict[str, object] = {"store_url": sqlite_url, "max_message_bytes": 2 << 20,
                                 "publish_timeout_seconds": 5.0}
    down = build_app(transport_url=f"kafka://127.0.0.1:{free_port()}",
                     connect_timeout_seconds=1.0, **common)
    up = build_app(transport_url=kafka_url, **common, **relay_settings)
    try:
        _register(up, db_name, None)
        _run_episode("kafka", up, down, db_name, "/data/" + "x" * (1100 * 1024), caplog,
                     follow_up=True)
    finally:
        up.close()
        down.close()

