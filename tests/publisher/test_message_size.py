"""One size limit for messages, checked at publish time before anything is logged.

A message the publisher accepted must never be dropped by a subscriber as
malformed; one it refuses names the field, the size and the limit, and leaves
the store untouched (SQLite and PostgreSQL).
"""

from __future__ import annotations

import threading

import pytest

from partition_notify.app import App, build_app
from partition_notify.contract import AnyMessage
from partition_notify.contract.messages import encode_body
from partition_notify.core.errors import ValidationError
from partition_notify.settings import DEFAULT_MAX_MESSAGE_BYTES


def _location_of_body_size(app: App, db: str, target: int) -> str:
    """A location that makes the add-partition body about ``target`` bytes."""
    probe = app.publisher.announce_partitions(db, "t", ["ds=probe"], locations=["/x"])[0]
    overhead = len(encode_body(probe)) - len("/x")
    # Ids and timestamps of the real message may be a few digits longer than the probe's.
    return "/" + "x" * (target - overhead - 1 - 64)


def test_too_large_refused_before_logging(store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds"])
        before = app.store.log.max_event_id()
        big = "/data/" + "x" * (DEFAULT_MAX_MESSAGE_BYTES + 100 * 1024)
        with pytest.raises(ValidationError) as err:
            app.publisher.announce_partitions("db", "t", ["ds=1", "ds=2"],
                                              locations=["/ok", big])
        text = str(err.value)
        assert "locations[1]" in text and "ds=2" in text, text
        assert str(DEFAULT_MAX_MESSAGE_BYTES) in text and "PN_MAX_MESSAGE_BYTES" in text, text
        # Nothing of the call was stored: not even the partition that fitted.
        assert app.store.log.max_event_id() == before
        assert app.store.catalog.partitions(app.publisher.table("db", "t")) == []


def test_limit_is_configurable(sqlite_url: str) -> None:
    with build_app(store_url=sqlite_url, transport_url="embedded://",
                   max_message_bytes=4096) as app:
        app.publisher.register_table("db", "t", ["ds"])
        with pytest.raises(ValidationError, match="4096"):
            app.publisher.announce_partitions("db", "t", ["ds=1"], locations=["/" + "x" * 5000])
        assert app.publisher.announce_partitions("db", "t", ["ds=2"], locations=["/x" * 100])


def test_accepted_at_the_limit_is_delivered(store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds"])
        got: list[AnyMessage] = []
        arrived = threading.Event()

        def on_message(msg: AnyMessage) -> None:
            got.append(msg)
            arrived.set()

        sub = app.subscriber()
        try:
            sub.subscribe("db.t", on_message)
            loc = _location_of_body_size(app, "db", DEFAULT_MAX_MESSAGE_BYTES)
            sent = app.publisher.announce_partitions("db", "t", ["ds=big"], locations=[loc])
            size = len(encode_body(sent[0]))
            assert DEFAULT_MAX_MESSAGE_BYTES - 200 < size <= DEFAULT_MAX_MESSAGE_BYTES
            while not any(m.message_id == sent[0].message_id for m in got):
                assert arrived.wait(10), "the accepted message never reached the subscriber"
                arrived.clear()
            assert sub.stats.malformed == 0
        finally:
            sub.close()


def _longest_accepted_location(app: App, replace: bool) -> int:
    """The longest location the publisher accepts for a new partition (bisection)."""
    lo, hi, n = 1, 4096, 0
    while lo < hi:
        mid, n = (lo + hi + 1) // 2, n + 1
        try:
            app.publisher.announce_partitions("db", "t", [f"ds={replace}{n}"],
                                              locations=["/" + "x" * (mid - 1)], replace=replace)
            lo = mid
        except ValidationError:
            hi = mid - 1
    return lo


def test_a_replacement_is_sized_with_its_replace_flag(sqlite_url: str) -> None:
    # An overwrite's message of an announced partition carries ',"replace":true'; which
    # partitions are announced is known only in the logging transaction, so with replace
    # every partition must fit with the flag (it was sized without it: up to 15 bytes over).
    with build_app(store_url=sqlite_url, transport_url="embedded://",
                   max_message_bytes=2048) as app:
        app.publisher.register_table("db", "t", ["ds"])
        plain = _longest_accepted_location(app, replace=False)
        replacing = _longest_accepted_location(app, replace=True)
        assert plain - replacing == len(b',"replace":true')
