"""Fault: the broker is frozen (SIGSTOP) for longer than the heart-beat.

A frozen broker still has its TCP sockets (the kernel keeps accepting), so a
client without deadlines would hang forever. Publishers must fail with
PublishError/PublishTimeout within their publish timeout; after SIGCONT the
relay delivers everything. The broker is always thawed in ``finally``.
"""

from __future__ import annotations

import threading
import time

from partition_notify.publisher.relay import Relay

from partition_notify.core.errors import PublishError
from tests.faults.support import Collector, logged_message_ids, stomp_app, tally
from tests.support.accounts import READER_PASSWORD, READER_USER
from tests.support.activemq import ActiveMQ
from tests.support.net import wait_until

HEARTBEAT_MS = 1000
PUBLISH_TIMEOUT = 3.0
CALLS = 3  # 3 x 3 s frozen: far longer than the 1 s heart-beat


def test_frozen_broker_times_out_then_relay_delivers(
    broker: ActiveMQ, store_url: str, db_name: str
) -> None:
    pub = stomp_app(store_url, broker.url, publish_timeout=PUBLISH_TIMEOUT,
                    connect_timeout=PUBLISH_TIMEOUT, heartbeat_ms=HEARTBEAT_MS)
    sub_app = stomp_app(store_url, broker.url, user=READER_USER, password=READER_PASSWORD,
                        heartbeat_ms=HEARTBEAT_MS)
    stop = threading.Event()
    errors: list[str] = []
    elapsed: list[float] = []
    try:
        pub.publisher.register_table(db_name, "events", ["ds", "n"])
        collect = Collector()
        subscriber = sub_app.subscriber()
        subscription = subscriber.subscribe(f"{db_name}.events", collect)
        warm = pub.publisher.announce_partitions(db_name, "events", ["ds=warm/n=0"])
        assert collect.wait_for({warm[0].message_id}, 10)

        broker.freeze()
        frozen_at = time.monotonic()
        try:
            for c in range(CALLS):
                started = time.monotonic()
                try:
                    pub.publisher.announce_partitions(
                        db_name, "events", [f"ds=f{c}/n={n}" for n in range(5)])
                except PublishError as exc:
                    errors.append(type(exc.__cause__ or exc).__name__)
                else:
                    raise AssertionError("a publish to a frozen broker reported success")
                finally:
                    elapsed.append(time.monotonic() - started)
            frozen_for = time.monotonic() - frozen_at
        finally:
            broker.thaw()
        thawed = time.monotonic()
        assert frozen_for > 2 * HEARTBEAT_MS / 1000
        # Every call gave up within its deadline (plus scheduling slack), none hung.
        assert max(elapsed) < PUBLISH_TIMEOUT + 2.0, elapsed
        pub.publisher.flush_marks()  # marks of confirmed events are written in batches
        assert pub.store.log.relay_lag()[0] == 5 * CALLS

        relay = Relay(pub.store, pub.transport, publish_timeout=PUBLISH_TIMEOUT,
                      lease_seconds=15.0, writer_grace_seconds=0.0)
        # The subscriber lost its connection to missed heart-beats; it must be
        # listening again before the relay sends (topics keep nothing for it).
        wait_until(lambda: subscriber.stats.reconnects >= 1, 30, "the subscriber to reconnect")

        def loop() -> None:
            while not stop.is_set():
                relay.run_once()
                stop.wait(0.1)

        threading.Thread(target=loop, daemon=True).start()
        logged = set(logged_message_ids(store_url))
        assert collect.wait_for(logged, 30), f"{collect.delivered(logged)}/{len(logged)}"
        took = time.monotonic() - thawed
        stop.set()
        tally(
            f"broker-frozen[{pub.store.dialect}]",
            acknowledged=len(logged),
            delivered=collect.delivered(logged),
            duplicates_suppressed=subscription.duplicates,
            publish_errors=len(errors),
            error_kinds="/".join(sorted(set(errors))),
            slowest_failure_s=f"{max(elapsed):.1f}",
            frozen_s=f"{frozen_for:.1f}",
            delivered_after_thaw_s=f"{took:.1f}",
        )
        assert collect.max_per_id() == 1
    finally:
        stop.set()
        broker.thaw()
        sub_app.close()
        pub.close()
