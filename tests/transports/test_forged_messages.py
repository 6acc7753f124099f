"""Well-formed messages an outside producer puts on a table's topic (raw STOMP
frames, a raw Kafka produce): nothing the event log does not hold reaches a
callback or ends a wait, unless PN_FOREIGN_MESSAGES=deliver says so.

A forged PARTITION_DONE would otherwise start a scheduler on data that is
not complete; the publisher logs every genuine message before sending it, so
the subscriber can check each one against the log.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid

import pytest

from partition_notify.contract import SetDoneMessage, to_envelope
from partition_notify.core.errors import ConfigurationError
from partition_notify.settings import load_settings
from tests.contract.raw_clients import RAW_CLIENT_BUSES, raw_client
from tests.store.helpers import Collector
from tests.support.accounts import bus_specs
from tests.support.ci import require
from tests.support.markers import uses
from tests.support.net import reachable
from tests.transports.stomp_helpers import build


@pytest.fixture(params=RAW_CLIENT_BUSES)
@uses("broker")
def spec(request):
    spec = bus_specs()[request.param]
    require(reachable(spec.url), f"{spec.name} broker at {spec.url} is not reachable")
    return spec


def _until(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _forged_set_done(db: str, topic: str, seq: int, spec: str) -> SetDoneMessage:
    key, _, value = spec.partition("=")
    return SetDoneMessage.model_validate(
        {
            "server": "partition-notify",
            "db": db,
            "table": "t",
            "timestamp": int(time.time()),
            "messageId": uuid.uuid4().hex,
            "eventId": seq + 1000,
            "topic": topic,
            "topicSeq": seq,
            "partitionSpec": {key: value},
            "partitionSpecString": spec,
        }
    )


class _Scene:
    """An app on ``spec``'s broker, a table, an outside producer, and a subscriber."""

    def __init__(self, spec, store_url: str, **settings: object) -> None:
        self.db = "forge" + uuid.uuid4().hex[:8]
        self.app = build(spec, store_url, **settings)
        self.raw = raw_client(spec)
        self.app.publisher.register_table(self.db, "t", ["ds"])
        self.topic = self.app.store.catalog.get_table(self.db, "t").topic

    def forge(self, seq: int, spec: str = "ds=1") -> SetDoneMessage:
        forged = _forged_set_done(self.db, self.topic, seq, spec)
        env = to_envelope(forged)
        self.raw.publish(self.topic, env.body, env.headers, key=env.key)  # broker-confirmed
        return forged

    def sentinel(self, everything: Collector, n: int) -> None:
        """A genuine message sent after the forged ones: once here, they were handled."""
        sent = self.app.publisher.announce_partitions(self.db, "t", [f"ds=sentinel{n}"])[0]
        assert everything.wait_for(lambda ms: sent.message_id in {m.message_id for m in ms}, 15)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()
        self.app.close()


def test_a_forged_set_done_neither_ends_a_wait_nor_reaches_a_callback(spec, sqlite_url):
    scene = _Scene(spec, sqlite_url)
    result: dict[str, object] = {}
    try:
        with scene.app.subscriber() as sub:
            everything, watched = Collector(), Collector()
            sub.subscribe((scene.db, "t"), everything, history=False)
            sub.watch_set_done(scene.db, "t", "ds=1", watched)

            def wait() -> None:
                try:
                    result["msg"] = sub.wait_for_set_done(scene.db, "t", "ds=1", timeout=30)
                except Exception as exc:  # reported by the assertions below
                    result["error"] = exc

            waiter = threading.Thread(target=wait)
            waiter.start()
            assert _until(lambda: len(sub._subs) == 3 and all(s._ready.is_set() for s in sub._subs))
            forged = scene.forge(seq=1)  # the very next number: the hot path
            scene.sentinel(everything, 1)
            ids = {m.message_id for m in everything.messages + watched.messages}
            assert forged.message_id not in ids, "the forged set-done reached a callback"
            assert waiter.is_alive() and "msg" not in result, (
                f"the forged set-done ended the wait: {result}"
            )
            assert sub.stats.foreign == 1
            genuine = scene.app.publisher.send_mark_set_done(scene.db, "t", "ds=1")
            waiter.join(20)
            assert getattr(result.get("msg"), "message_id", None) == genuine.message_id, result
            assert watched.wait_for(
                lambda ms: [m.message_id for m in ms] == [genuine.message_id], 15
            )
    finally:
        scene.close()


def test_forged_messages_are_counted_and_warned_about_boundedly(spec, sqlite_url, caplog):
    scene = _Scene(spec, sqlite_url)
    try:
        with scene.app.subscriber() as sub, caplog.at_level(logging.WARNING):
            everything = Collector()
            sub.subscribe((scene.db, "t"), everything, history=False)
            forged = [scene.forge(seq=n) for n in (1, 1, 2, 50, 10**6) for _ in range(5)]
            scene.sentinel(everything, 1)
            assert [m.topic_seq for m in everything.messages] == [1]
            assert sub.stats.foreign == len(forged)
            warned = [
                r.getMessage()
                for r in caplog.records
                if "event log does not hold" in r.getMessage()
            ]
            assert 1 <= len(warned) <= 11, warned
            assert scene.topic in warned[0] and forged[0].message_id in warned[0]
    finally:
        scene.close()


def test_deliver_lets_foreign_messages_through_by_message_id(spec, sqlite_url):
    """The opt-out, for a deployment whose other producers share the topics on purpose."""
    scene = _Scene(spec, sqlite_url, foreign_messages="deliver")
    try:
        with scene.app.subscriber() as sub:
            everything = Collector()
            sub.subscribe((scene.db, "t"), everything, history=False)
            forged = scene.forge(seq=1)
            scene.sentinel(everything, 1)
            assert everything.messages[0].message_id == forged.message_id
            # It did not cost the genuine message its number.
            assert everything.messages[-1].topic_seq == 1
    finally:
        scene.close()


def test_foreign_messages_setting_is_validated(monkeypatch):
    monkeypatch.setenv("PN_FOREIGN_MESSAGES", "Deliver")
    assert load_settings().foreign_messages == "deliver"
    monkeypatch.setenv("PN_FOREIGN_MESSAGES", "trust")
    with pytest.raises(ConfigurationError) as err:
        load_settings()
    assert "PN_FOREIGN_MESSAGES='trust'" in str(err.value)
    assert "'verify' or 'deliver'" in str(err.value)
    monkeypatch.delenv("PN_FOREIGN_MESSAGES")
    assert load_settings().foreign_messages == "verify"


def test_a_message_that_cannot_be_verified_is_delivered_once_the_log_reads_again(
    spec, sqlite_url, monkeypatch
):
    """Fault injection: the store's topic reads fail (as a PostgreSQL outage would make
    them) while a genuine set-done arrives. It is neither delivered unverified nor
    lost: the topic is read again until the log answers, then it comes, once."""
    from partition_notify.core.errors import StoreError

    scene = _Scene(spec, sqlite_url)
    down = threading.Event()
    log = scene.app.store.log

    def failing(read):
        def reads(*args, **kwargs):
            if down.is_set():
                raise StoreError("injected: the store does not answer")
            return read(*args, **kwargs)

        return reads

    # The check's read and the fill's read both fail while the store is "down".
    for name in ("topic_ids_after", "topic_events_after"):
        monkeypatch.setattr(log, name, failing(getattr(log, name)))
    try:
        with scene.app.subscriber() as sub:
            got = Collector()
            sub.subscribe((scene.db, "t"), got, history=False)
            down.set()
            sent = scene.app.publisher.send_mark_set_done(scene.db, "t", "ds=1")
            assert _until(lambda: sub.stats.received == 1 and sub.stats.fill_errors >= 1)
            assert got.messages == [] and sub.stats.foreign == 0
            down.clear()
            assert got.wait_for(lambda ms: len(ms) == 1, 15)
            assert got.messages[0].message_id == sent.message_id
            scene.sentinel(got, 1)
            assert [m.topic_seq for m in got.messages] == [1, 2]
    finally:
        scene.close()
