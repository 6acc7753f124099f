"""ActiveMQ killed (SIGKILL) and restarted while a publisher publishes and a subscriber follows.

Claim under test: every set-done acknowledged to the publisher (publish
returned) reaches the subscriber, live or from history, exactly once.

The broker is a private instance the test starts, kills and restarts (see
tests/support/activemq.py). Non-durable topic subscribers lose whatever the broker
held when it died; the subscriber recovers it by re-subscribing (with
receipts) and then re-reading the retention table. Publishes that failed
during the outage stay in the event log; a relay pass (what
``partition-notify serve`` does) sends them afterwards, and only then are
they counted as acknowledged.
"""

from __future__ import annotations

import threading
import time

import pytest

from partition_notify.contract import Envelope
from partition_notify.core.errors import PartitionNotifyError
from tests.support import accounts
from tests.support.accounts import BusSpec
from tests.support.activemq import ActiveMQ, unavailable
from tests.support.ci import require
from tests.support.markers import uses
from tests.transports.stomp_helpers import build

pytestmark = [pytest.mark.broker, pytest.mark.slow]

BEFORE_KILL = 40  # acknowledged set-done messages before the crash
AFTER_RESTART = 40  # and after it


@pytest.fixture
@uses("broker")
def broker(tmp_path):
    reason = unavailable()
    require(reason is None, reason or "")
    instance = ActiveMQ(tmp_path / "activemq")
    instance.start()
    yield instance
    instance.stop()


class Follower:
    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.cond = threading.Condition()

    def __call__(self, msg) -> None:
        with self.cond:
            self.ids.add(msg.message_id)
            self.cond.notify_all()

    def wait_all(self, wanted: set[str], timeout: float) -> set[str]:
        with self.cond:
            self.cond.wait_for(lambda: wanted <= self.ids, timeout)
            return wanted - self.ids


def relay(app) -> list[str]:
    """One relay pass: send what the log holds unpublished, mark it published."""
    events = app.store.log.lease_unpublished("restart-test", 1000, 60)
    if not events:
        return []
    envelopes = [Envelope(topic=e.topic, key=e.topic, headers=dict(e.headers),
                          body=e.body.encode(), event_id=e.event_id) for e in events]
    app.transport.publish(envelopes, timeout=30)
    app.store.log.mark_published([e.event_id for e in events])
    return [e.headers["PN_MESSAGE_ID"] for e in events]


def test_every_acknowledged_set_done_survives_a_broker_crash(broker, sqlite_url, capsys):
    spec = BusSpec("activemq-private", broker.url, accounts.SERVICE_USER,
                   accounts.SERVICE_PASSWORD)
    pub = build(spec, sqlite_url, publish_timeout_seconds=5.0, connect_timeout_seconds=2.0)
    sub_app = build(spec, sqlite_url, connect_timeout_seconds=5.0, heartbeat_ms=1000)
    follower = Follower()
    acknowledged: list[str] = []
    failures: list[str] = []
    stop = threading.Event()
    ack_cond = threading.Condition()

    def publish_loop() -> None:
        i = 0
        while not stop.is_set():
            try:
                msg = pub.publisher.send_mark_set_done("crash", "events", f"d={i}")
            except PartitionNotifyError as exc:
                failures.append(type(exc.__cause__ or exc).__name__)
                stop.wait(0.05)  # the broker is down: do not spin
            else:
                with ack_cond:
                    acknowledged.append(msg.message_id)
                    ack_cond.notify_all()
            i += 1

    def wait_acks(n: int, timeout: float) -> None:
        with ack_cond:
            assert ack_cond.wait_for(lambda: len(acknowledged) >= n, timeout), \
                f"only {len(acknowledged)} of {n} publishes acknowledged"

    try:
        pub.publisher.register_table("crash", "events", ["d"], retention_seconds=3600)
        subscriber = sub_app.subscriber()
        subscription = subscriber.subscribe(("crash", "events"), follower)
        publisher = threading.Thread(target=publish_loop, name="publisher")
        publisher.start()

        wait_acks(BEFORE_KILL, 60)
        broker.kill()
        killed_at = len(acknowledged)
        down_for = time.monotonic()
        restart_seconds = broker.start()
        down_for = time.monotonic() - down_for
        wait_acks(killed_at + AFTER_RESTART, 120)
        stop.set()
        publisher.join(30)
        relayed = relay(pub)
        acked = set(acknowledged) | set(relayed)

        missing = follower.wait_all(acked, 60)
        duplicates = subscription.duplicates
        tally = (f"acknowledged {len(acked)} (live publishes {len(acknowledged)}, relayed "
                 f"{len(relayed)}), delivered {len(acked) - len(missing)}, lost {len(missing)}, "
                 f"duplicates suppressed {duplicates}, failed publishes while down "
                 f"{len(failures)}, subscriber reconnects {subscriber.stats.reconnects}, "
                 f"broker down {down_for:.1f} s (JVM start {restart_seconds:.1f} s)")
        with capsys.disabled():
            print(f"\nActiveMQ restart tally: {tally}")
        assert not missing, f"acknowledged but never delivered: {len(missing)}; {tally}"
        assert follower.ids == acked, "delivered something never acknowledged or logged"
        assert subscriber.stats.reconnects >= 1, tally
        assert failures, "the crash should have failed some publishes"
        pub.publisher.flush_marks()  # marks of confirmed events are written in batches
        assert pub.store.log.relay_lag()[0] == 0
        subscriber.close()
    finally:
        stop.set()
        sub_app.close()
        pub.close()
