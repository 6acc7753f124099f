"""Bad input: a specific error naming the offending part, and the store untouched.

Runs on SQLite and PostgreSQL (``app`` fixture). Every rejected call is
bracketed by a full snapshot of the store's tables.
"""

from __future__ import annotations

import logging

import pytest

from partition_notify.contract import SetDoneMessage
from partition_notify.core.errors import (
    ConflictError,
    InvalidNameError,
    InvalidSpecError,
    UnknownTableError,
    ValidationError,
    WaitTimeout,
)
from tests.store.helpers import Collector, append_raw_event, snapshot

DB, TABLE = "sales", "orders"


@pytest.fixture
def seeded(app):
    """A registered table with one partition and one set-done already stored."""
    app.publisher.register_table(DB, TABLE, ["datestamp", "region"], retention_seconds=3600)
    app.publisher.announce_partitions(DB, TABLE, ["datestamp=1/region=us"])
    app.publisher.send_mark_set_done(DB, TABLE, "datestamp=1")
    return app


def rejected(app, exc_type, needle, fn, *args, **kwargs):
    before = snapshot(app.store.engine)
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert needle in str(info.value), str(info.value)
    assert snapshot(app.store.engine) == before, "a rejected call changed the store"
    return info.value


@pytest.mark.parametrize(
    ("partitions", "needle"),
    [
        (["datestamp=2/colour=red"], "unknown key(s) ['colour']"),
        ([{"datestamp": "2", "region": "us", "colour": "red"}], "unknown key(s) ['colour']"),
        (["datestamp=2"], "missing ['region']"),
        ([{"datestamp": "", "region": "us"}], "'datestamp' is empty"),
        (["datestamp=/region=us"], "'datestamp' is empty"),
        ([{"datestamp": "2", "DateStamp": "3", "region": "us"}], "'datestamp' appears twice"),
        (["datestamp=2/region=us/DATESTAMP=3"], "'datestamp' appears twice"),
        ([{}], "at least one key=value"),
        ([""], "at least one key=value"),
        ([{"date-stamp": "2"}], "'date-stamp'"),
        ([{"datestamp": "\ud800", "region": "us"}], "'datestamp' cannot be encoded"),
        ([{"datestamp": "/" * 700, "region": "us"}], "characters once escaped"),
        # One bad partition in a batch: the good ones are not stored either.
        (["datestamp=3/region=us", "datestamp=3/region=", "datestamp=4/region=eu"],
         "partition #1"),
        (["datestamp=3/region=us", "region=us/datestamp=3"], "listed twice"),
    ],
)
def test_announce_rejects(seeded, partitions, needle):
    rejected(seeded, InvalidSpecError, needle, seeded.publisher.announce_partitions, DB, TABLE,
             partitions)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("colour=red", "unknown key(s) ['colour']"),
        ({"datestamp": ""}, "'datestamp' is empty"),
        ("datestamp=", "'datestamp' is empty"),
        ({"Region": "us", "region": "eu"}, "'region' appears twice"),
        ("region=us/REGION=eu", "'region' appears twice"),
        ({}, "at least one key=value"),
        ("", "at least one key=value"),
        ("datestamp", "is not key=value"),
        ("datestamp=%G1", "'datestamp'"),
        ({"region!": "us"}, "'region!'"),
    ],
)
def test_set_done_rejects(seeded, spec, needle):
    rejected(seeded, InvalidSpecError, needle, seeded.publisher.send_mark_set_done, DB, TABLE,
             spec)


def test_locations_must_match_partitions(seeded):
    rejected(seeded, ValidationError, "2 partitions but 1 locations",
             seeded.publisher.announce_partitions, DB, TABLE,
             ["datestamp=5/region=us", "datestamp=5/region=eu"], locations=["/x"])


@pytest.mark.parametrize(
    ("args", "kwargs", "needle"),
    [
        (("sa les", "t", ["k"]), {}, "database name 'sa les'"),
        (("sales;", "t", ["k"]), {}, "illegal character(s) ';'"),
        (("", "t", ["k"]), {}, "database name is empty"),
        (("sales", "or-ders", ["k"]), {}, "table name 'or-ders'"),
        (("sales", "t" * 129, ["k"]), {}, "129 characters"),
        (("sales", "t", ["da te"]), {}, "partition key 'da te'"),
        (("sales", "t", ["1day"]), {}, "must not start with a digit"),
        (("sales", "t", []), {}, "at least one partition key"),
        (("sales", "t", ["k", "K"]), {}, "'k' is listed twice"),
        (("sales", "t", "k"), {}, "must be a list"),
        (("sales", "t", ["k"]), {"topic": "hcat/sales"}, "illegal character(s) '/'"),
        (("sales", "t", ["k"]), {"topic": "hcat.sales.*"}, "illegal character(s) '*'"),
        (("sales", "t", ["k"]), {"topic": "t" * 250}, "Kafka allows at most 249"),
        (("sales", "t", ["k"]), {"topic": ".."}, "reserved"),
        (("sales", "t", ["k"]), {"retention_seconds": 0}, "positive integer"),
        (("sales", "t", ["k"]), {"retention_seconds": -5}, "positive integer"),
    ],
)
def test_register_rejects(seeded, args, kwargs, needle):
    rejected(seeded, ValidationError, needle, seeded.publisher.register_table, *args, **kwargs)


def test_default_topic_too_long_is_rejected(seeded):
    # db + table within their limits, but hcat.<db>.<table> exceeds Kafka's.
    rejected(seeded, InvalidNameError, "Kafka allows at most 249",
             seeded.publisher.register_table, "d" * 128, "t" * 128, ["k"])


@pytest.mark.parametrize(
    ("keys", "kwargs", "needle"),
    [
        (["datestamp"], {}, "registered with partition keys ['datestamp', 'region']"),
        (["region", "datestamp"], {}, "not ['region', 'datestamp']"),
        (["datestamp", "region", "hour"], {}, "not ['datestamp', 'region', 'hour']"),
        (["datestamp", "region"], {"topic": "other.topic"}, "not 'other.topic'"),
    ],
)
def test_reregister_differently_conflicts(seeded, keys, kwargs, needle):
    rejected(seeded, ConflictError, needle, seeded.publisher.register_table, DB, TABLE, keys,
             **kwargs)


def test_identical_reregistration_is_a_no_op(seeded):
    before = snapshot(seeded.store.engine)
    info = seeded.publisher.register_table("SALES", "Orders", ["DateStamp", "region"])
    assert (info.db, info.name, info.partition_keys) == (DB, TABLE, ("datestamp", "region"))
    assert snapshot(seeded.store.engine) == before


@pytest.mark.parametrize("call", ["announce", "mark_done", "wait", "subscribe", "present",
                                  "history"])
def test_unregistered_table(seeded, call):
    sub = seeded.subscriber()
    try:
        fn, args = {
            "announce": (seeded.publisher.announce_partitions, (DB, "returns", ["datestamp=1"])),
            "mark_done": (seeded.publisher.send_mark_set_done, (DB, "returns", "datestamp=1")),
            # A wait waits for the table to be registered, then times out (issue 24).
            "wait": (sub.wait_for_set_done, (DB, "returns", "datestamp=1", 0.2)),
            "subscribe": (sub.subscribe, ((DB, "returns"),)),
            "present": (sub.is_partition_present, (DB, "returns", "datestamp=1")),
            "history": (sub.set_done_history, (DB, "returns")),
        }[call]
        error = WaitTimeout if call == "wait" else UnknownTableError
        rejected(seeded, error, "table sales.returns is not registered", fn, *args)
    finally:
        sub.close()


def test_subscriber_side_validation(seeded):
    with seeded.subscriber() as sub:
        rejected(seeded, InvalidSpecError, "unknown key(s) ['hour']", sub.wait_for_set_done,
                 DB, TABLE, "hour=1", 1.0)
        rejected(seeded, InvalidSpecError, "missing ['region']", sub.is_partition_present,
                 DB, TABLE, "datestamp=1")
        rejected(seeded, InvalidNameError, "must be written db.table", sub.subscribe, "orders")


def test_malformed_message_in_log_is_logged_and_skipped(seeded, caplog):
    info = seeded.store.catalog.get_table(DB, TABLE)
    got = Collector()
    with seeded.subscriber() as sub:
        sub.subscribe((DB, TABLE), got, history=False)
        bad_id = append_raw_event(seeded.store.engine, topic=info.topic, table_id=info.id,
                                  body='{"eventType": "PARTITION_DONE", "db": 42',
                                  headers={"HCAT_EVENT": "PARTITION_DONE"})
        wrong_type = append_raw_event(
            seeded.store.engine, topic=info.topic, table_id=info.id,
            body='{"eventType": "PARTITION_DONE", "db": "sales", "eventId": "x"}',
            headers={"HCAT_EVENT": "PARTITION_DONE"})
        with caplog.at_level(logging.WARNING, logger="partition_notify.subscriber.subscriber"):
            good = seeded.publisher.send_mark_set_done(DB, TABLE, "datestamp=2")
            assert got.wait_for(lambda ms: any(m.message_id == good.message_id for m in ms), 10)
        assert [m.message_id for m in got.messages] == [good.message_id]
        assert good.event_id == wrong_type + 1 == bad_id + 2
        assert sub.stats.malformed == 2
        assert sub.stats.received == 3
    warnings = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert len(warnings) == 2 and all(info.topic in w for w in warnings), warnings
    assert "not JSON" in warnings[0] and "9 error(s)" in warnings[1]
    # Still in the log: nothing was lost or rewritten.
    assert [e.event_id for e in seeded.store.log.events_after(bad_id - 1)] == [
        bad_id, wrong_type, good.event_id]


def test_malformed_row_in_retention_table_is_skipped_from_history(seeded):
    info = seeded.store.catalog.get_table(DB, TABLE)
    from sqlalchemy import text

    with seeded.store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_set_done (table_id, spec, event_id, body, published_at, expires_at) "
            "VALUES (:t, 'datestamp=1', 999, 'garbage', 0, 1e12)"), {"t": info.id})
    got = Collector()
    with seeded.subscriber() as sub:
        sub.subscribe((DB, TABLE), got, history=True)
        assert got.wait_for(lambda ms: len(ms) >= 1, 10)
        found = sub.wait_for_set_done(DB, TABLE, "datestamp=1/region=us", timeout=5)
        # The store checks every retained row it reads (store/retained_check.py)
        # and skips this one, for the history and the wait alike.
        assert sub.stats.malformed == 0
        assert seeded.store.retention.check.skipped >= 2
    assert isinstance(found, SetDoneMessage) and found.spec == "datestamp=1"
    assert [m.spec for m in got.messages] == ["datestamp=1"]
