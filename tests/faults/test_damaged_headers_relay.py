"""Fault: a row of the log whose ``headers`` are damaged sits in the relay's backlog.

The backlog is logged while the broker is unreachable (the row damaged by a
trigger as it is logged, tests/support/damaged_rows.py); the relay then runs
against the real ActiveMQ. Before the fix its lease raised on that row on every
pass, so nothing after it was ever sent. Required: every event is sent, the
damaged one with headers rebuilt from its body, each delivered once, in order;
nothing dead-lettered (the broker refused nothing); the damage logged at ERROR.
"""

from __future__ import annotations

import logging

import pytest
from partition_notify.store.dead_letters import DeadLetters
from sqlalchemy import text

from partition_notify.app import App
from partition_notify.core.errors import PublishError
from partition_notify.serve.service import Service
from tests.faults.support import Collector, stomp_app
from tests.support.activemq import ActiveMQ
from tests.support.damaged_rows import damage_on_insert
from tests.support.net import free_port, wait_until

PROMPT_SECONDS = 20.0


def test_damaged_headers_in_the_relay_backlog_do_not_stall_it(
    broker: ActiveMQ, store_url: str, db_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    down = stomp_app(store_url, f"stomp://127.0.0.1:{free_port()}", connect_timeout=1.0)
    up = stomp_app(store_url, broker.url)
    assert isinstance(up, App) and isinstance(down, App)
    up.settings = up.settings.model_copy(update={
        "relay_interval_seconds": 0.05, "relay_writer_grace_seconds": 0.0})
    sub = up.subscriber()
    try:
        for t in ("a", "b"):
            up.publisher.register_table(db_name, t, ["ds"])
        damage_on_insert(up, "'[1, 2]'")
        got_a, got_b = Collector(), Collector()
        sub.subscribe(f"{db_name}.a", got_a)
        sub.subscribe(f"{db_name}.b", got_b)
        for t, p in (("a", "poison"), ("b", "1"), ("a", "2")):
            with pytest.raises(PublishError):
                down.publisher.announce_partitions(db_name, t, [f"ds={p}"])
        with up.store.engine.connect() as conn:  # not through the readers under test
            sent = list(conn.execute(text(
                "SELECT event_id, message_id, topic_seq FROM pn_events ORDER BY event_id")))
        svc = Service(up)
        svc.start()
        try:
            a_ids = {sent[0].message_id, sent[2].message_id}
            assert got_b.wait_for({sent[1].message_id}, PROMPT_SECONDS), \
                "the relay stalled behind the damaged row"
            assert got_a.wait_for(a_ids, PROMPT_SECONDS), f"got {dict(got_a.seen)}"
            wait_until(lambda: up.store.log.relay_lag()[0] == 0, PROMPT_SECONDS,
                       "every event to be marked published")
        finally:
            svc.stop()
        assert got_a.max_per_id() == 1 and got_b.max_per_id() == 1
        assert [seq for _, seq in got_a.order] == [sent[0].topic_seq, sent[2].topic_seq]
        assert DeadLetters(up.store).find() == []
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any(f"event {sent[0].event_id} " in m and "'headers'" in m for m in said), said
    finally:
        sub.close()
        up.close()
        down.close()


def test_a_row_whose_body_is_damaged_too_is_dead_lettered_not_sent(
    broker: ActiveMQ, store_url: str, db_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Headers AND body damaged: nothing to verify the message by, so it must not reach
    the broker. Before the fix the relay sent it with empty headers (subscribers counted
    it malformed). Required: dead-lettered with the reason (event, topic, fields, what
    was expected), one ERROR from the relay, counted; later events sent, in order."""
    down = stomp_app(store_url, f"stomp://127.0.0.1:{free_port()}", connect_timeout=1.0)
    up = stomp_app(store_url, broker.url)
    assert isinstance(up, App) and isinstance(down, App)
    up.settings = up.settings.model_copy(update={
        "relay_interval_seconds": 0.05, "relay_writer_grace_seconds": 0.0})
    sub = up.subscriber()
    try:
        for t in ("a", "b"):
            up.publisher.register_table(db_name, t, ["ds"])
        damage_on_insert(up, "'[1, 2]'", f"'not a message {db_name} poison'")
        got_a, got_b = Collector(), Collector()
        sub.subscribe(f"{db_name}.a", got_a)
        sub.subscribe(f"{db_name}.b", got_b)
        for t, p in (("a", "poison"), ("b", "1"), ("a", "2")):
            with pytest.raises(PublishError):
                down.publisher.announce_partitions(db_name, t, [f"ds={p}"])
        with up.store.engine.connect() as conn:  # not through the readers under test
            sent = list(conn.execute(text(
                "SELECT event_id, message_id, topic_seq, topic FROM pn_events "
                "ORDER BY event_id")))
        svc = Service(up)
        svc.start()
        try:
            assert got_b.wait_for({sent[1].message_id}, PROMPT_SECONDS), \
                "the relay stalled behind the damaged row"
            assert got_a.wait_for({sent[2].message_id}, PROMPT_SECONDS), f"got {dict(got_a.seen)}"
            wait_until(lambda: up.store.log.relay_lag()[0] == 0, PROMPT_SECONDS,
                       "every event to be marked published or dead-lettered")
        finally:
            svc.stop()
        assert got_a.max_per_id() == 1 and got_b.max_per_id() == 1
        assert sent[0].message_id not in got_a.seen
        assert sub.stats.malformed == 0, "the unverifiable row reached the broker"
        assert [seq for _, seq in got_a.order] == [sent[2].topic_seq]
        letters = DeadLetters(up.store).find()
        assert [d.event_id for d in letters] == [sent[0].event_id], letters
        why = letters[0].error
        for part in (f"event {sent[0].event_id}", sent[0].topic, "'headers'", "'body'",
                     "expected"):
            assert part in why, why
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
                and r.name.endswith("relay")]
        assert len([m for m in said if f"event {sent[0].event_id} " in m]) == 1, said
        assert svc.relay.stats.dead_lettered == 1
        with up.store.engine.connect() as conn:
            published = conn.execute(text(
                "SELECT published_at FROM pn_events WHERE event_id = :e"),
                {"e": sent[0].event_id}).scalar()
        assert published is None, "marked published: it was sent"
    finally:
        sub.close()
        up.close()
        down.close()
