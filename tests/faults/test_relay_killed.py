"""Fault: the relay is killed after the broker acknowledged but before the mark.

A relay process publishes through a proxy that withholds the broker's
RECEIPTs, so the broker has the messages (the subscriber gets them) while the
relay still waits; then the relay is SIGKILLed. Its lease runs out, another
relay sends the same entries again, and the subscriber's callback still sees
each message id exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from partition_notify.publisher.relay import Relay
from sqlalchemy import create_engine, text

from partition_notify.core.errors import PublishError
from tests.contract.faults import FaultProxy
from tests.faults.support import Collector, logged_message_ids, stomp_app, tally
from tests.support.accounts import READER_PASSWORD, READER_USER, ROOT
from tests.support.activemq import ActiveMQ
from tests.support.net import free_port, wait_until

N = 30
LEASE = 8.0


def _log_unpublished(app: object, db: str, specs: list[str]) -> None:
    """Commit entries whose publish fails (the writer's broker is unreachable)."""
    try:
        app.publisher.announce_partitions(db, "events", specs)  # type: ignore[attr-defined]
    except PublishError:
        return
    raise AssertionError("publishing to a closed port succeeded")


def _leases(store_url: str) -> dict[str | None, int]:
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT lease_owner, count(*) FROM pn_events WHERE published_at IS NULL "
                "GROUP BY lease_owner"))
            return {r[0]: int(r[1]) for r in rows}
    finally:
        engine.dispose()


def test_relay_killed_before_marking_duplicates_are_suppressed(
    broker: ActiveMQ, store_url: str, db_name: str, tmp_path: Path
) -> None:
    proxy = FaultProxy("127.0.0.1", broker.stomp_port)
    writer = stomp_app(store_url, f"stomp://127.0.0.1:{free_port()}", connect_timeout=1.0)
    sub_app = stomp_app(store_url, broker.url, user=READER_USER, password=READER_PASSWORD)
    taker_app = stomp_app(store_url, broker.url)
    child: subprocess.Popen[bytes] | None = None
    try:
        writer.publisher.register_table(db_name, "events", ["ds", "n"])
        collect = Collector()
        subscription = sub_app.subscriber().subscribe(f"{db_name}.events", collect)

        _log_unpublished(writer, db_name, ["ds=warm/n=0"])
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(tmp_path / "relay.log", "wb") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "tests.faults._relay_child", store_url,
                 proxy.url(), "doomed-relay", str(LEASE), str(LEASE - 2), "0"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        warm = set(logged_message_ids(store_url))
        assert collect.wait_for(warm, 60), "the relay process never published"
        wait_until(lambda: writer.store.log.relay_lag()[0] == 0, 10, "the warm-up mark")

        proxy.hold_replies()
        _log_unpublished(writer, db_name, [f"ds=d/n={n}" for n in range(N)])
        logged = set(logged_message_ids(store_url))
        assert collect.wait_for(logged, 20), "the broker did not deliver the relay's batch"
        # The broker has every message; the relay is still waiting for the receipts.
        assert _leases(store_url) == {"doomed-relay": N}
        child.kill()
        assert child.wait(30) == -9
        killed_at = time.time()

        taker = Relay(taker_app.store, taker_app.transport, owner="taker", lease_seconds=30,
                      publish_timeout=5.0, writer_grace_seconds=0.0)
        assert taker.run_once() == 0, "the dead relay's lease must be respected"
        wait_until(lambda: taker.run_once() > 0 or writer.store.log.relay_lag()[0] == 0,
                   LEASE + 10, "the lease to expire and the taker to publish", interval=0.2)
        took_over = time.time() - killed_at
        assert writer.store.log.relay_lag()[0] == 0
        # Same connection as the taker's publish: the broker delivers in order, so
        # once the sentinel is in, every re-sent duplicate has been offered.
        sentinel = taker_app.publisher.announce_partitions(db_name, "events", ["ds=end/n=0"])
        assert collect.wait_for({sentinel[0].message_id}, 10)
        logged |= {sentinel[0].message_id}
        tally(
            f"relay-killed-after-ack[{writer.store.dialect}]",
            acknowledged=len(logged),
            delivered=collect.delivered(logged),
            duplicates_suppressed=subscription.duplicates,
            resent_by_taker=taker.stats.published,
            takeover_after_kill_s=f"{took_over:.1f}",
        )
        assert taker.stats.published == N, "the taker re-sends exactly the unmarked entries"
        assert subscription.duplicates == N
        assert collect.delivered(logged) == len(logged)
        assert collect.max_per_id() == 1, "a callback saw a message twice"
    finally:
        proxy.release_replies()
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(30)
        proxy.close()
        for app in (taker_app, sub_app, writer):
            app.close()
