"""Subscribers detect gaps in a topic's sequence (stats.gaps, on_gap)."""

from __future__ import annotations

import uuid

from partition_notify.transports import RawMessage
from sqlalchemy import text

from partition_notify.contract import SetDoneMessage, to_envelope
from tests.store.helpers import Collector


def _skip_topic_seq(engine, topic: str, by: int) -> None:
    """Lose ``by`` sequence numbers, as if those events never reached the log."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE pn_sequence SET next_value = next_value + :n WHERE name = :t"),
                     {"n": by, "t": f"topic:{topic}"})


def test_gap_in_the_log_is_reported(app):
    app.publisher.register_table("g", "t", ["ds"])
    topic = app.store.catalog.get_table("g", "t").topic
    gaps: list[tuple[str, int, int]] = []
    got = Collector()
    with app.subscriber(on_gap=lambda *g: gaps.append(g)) as sub:
        sub.subscribe(("g", "t"), got, history=False)
        first = app.publisher.send_mark_set_done("g", "t", "ds=1")
        _skip_topic_seq(app.store.engine, topic, 2)
        second = app.publisher.send_mark_set_done("g", "t", "ds=2")
        third = app.publisher.send_mark_set_done("g", "t", "ds=3")
        assert (first.topic_seq, second.topic_seq, third.topic_seq) == (1, 4, 5)
        # Event ids stay gap-free; only the topic sequence jumped.
        assert second.event_id == first.event_id + 1
        assert got.wait_for(lambda ms: len(ms) == 3, 10)
        assert sub.stats.gaps == 1
        assert sub.stats.missing_events == 2
        assert gaps == [(topic, 2, 3)]
        assert [m.message_id for m in got.messages] == [
            first.message_id, second.message_id, third.message_id]


def test_no_false_gap_when_tables_share_a_topic(app):
    # Both tables on one topic: a subscriber of 'a' sees b's sequence numbers too.
    app.publisher.register_table("g", "a", ["ds"], topic="hcat.g.shared")
    app.publisher.register_table("g", "b", ["ds"], topic="hcat.g.shared")
    got = Collector()
    with app.subscriber() as sub:
        sub.subscribe(("g", "a"), got, history=False)
        for i in range(5):
            app.publisher.send_mark_set_done("g", "a", f"ds={i}")
            app.publisher.send_mark_set_done("g", "b", f"ds={i}")
        assert got.wait_for(lambda ms: len(ms) == 5, 10)
        assert {m.table for m in got.messages} == {"a"}
        assert sub.stats.gaps == 0


def _raw(topic: str, seq: int, table: str = "t") -> RawMessage:
    msg = SetDoneMessage.model_validate({
        "server": "s", "db": "g", "table": table, "timestamp": 1, "messageId": uuid.uuid4().hex,
        "eventId": 1000 + seq, "topic": topic, "topicSeq": seq,
        "partitionSpec": {"ds": str(seq)}, "partitionSpecString": f"ds={seq}",
    })
    env = to_envelope(msg)
    return RawMessage(topic, env.headers, env.body)


def test_gap_detection_on_the_dispatch_path(app):
    """Feed the consumer callback directly: per-topic sequences, repeats are not gaps."""
    app.publisher.register_table("g", "t", ["ds"])
    gaps: list[tuple[str, int, int]] = []
    got = Collector()
    with app.subscriber(on_gap=lambda *g: gaps.append(g)) as sub:
        sub.subscribe(("g", "t"), got, history=False)
        feed = [("x", 1), ("x", 2), ("y", 7), ("x", 5), ("y", 8), ("x", 5), ("x", 3),
                ("y", 9), ("x", 6), ("y", 12)]
        for topic, seq in feed:
            sub._on_raw(_raw(topic, seq))  # what the transport's consumer calls
        assert got.wait_for(lambda ms: len(ms) == len(feed), 10)
        assert gaps == [("x", 3, 4), ("y", 10, 11)]
        assert sub.stats.gaps == 2
        assert sub.stats.missing_events == 4
        assert sub.stats.received == len(feed)
