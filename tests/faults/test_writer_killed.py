"""Fault: writer processes SIGKILLed between their data commit and the publish.

Each writer commits (partitions + event log in one transaction) and then hangs
in publish against a broker that never answers; the test kills it with
SIGKILL. A real ``partition-notify serve`` process then announces every
partition on the private ActiveMQ; a subscriber (as the read-only pn_reader)
sees each exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.faults.support import (
    READER_PASSWORD,
    READER_USER,
    ROOT,
    SERVICE_PASSWORD,
    SERVICE_USER,
    BlackHole,
    Collector,
    PrivateActiveMQ,
    logged_message_ids,
    stomp_app,
    tally,
    wait_until,
)

WRITERS = 6
PER_WRITER = 10


def test_killed_writers_are_announced_by_serve(
    broker: PrivateActiveMQ, store_url: str, db_name: str, tmp_path: Path
) -> None:
    hole = BlackHole()
    sub_app = stomp_app(store_url, broker.url, user=READER_USER, password=READER_PASSWORD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children: list[subprocess.Popen[bytes]] = []
    serve: subprocess.Popen[bytes] | None = None
    try:
        sub_app.publisher.register_table(db_name, "events", ["ds", "n"])
        table = sub_app.store.catalog.get_table(db_name, "events")
        collect = Collector()
        subscriber = sub_app.subscriber()
        subscription = subscriber.subscribe(f"{db_name}.events", collect)

        for w in range(WRITERS):
            children.append(subprocess.Popen(
                [sys.executable, "-m", "tests.faults._writer_child", store_url, hole.url,
                 db_name, str(w), str(PER_WRITER)],
                cwd=ROOT, env=env, stderr=subprocess.DEVNULL))
        total = WRITERS * PER_WRITER
        wait_until(lambda: len(sub_app.store.catalog.partitions(table)) == total, 60,
                   "every writer's commit")
        for c in children:
            assert c.poll() is None, "a writer finished: its publish did not hang"
            c.send_signal(signal.SIGKILL)
        assert all(c.wait(30) == -signal.SIGKILL for c in children)
        pending, _ = sub_app.store.log.relay_lag()
        assert pending == total, "the killed writers' entries wait in the log"
        assert collect.delivered(set(logged_message_ids(store_url))) == 0

        serve_env = {
            **env,
            "PN_STORE_URL": store_url,
            "PN_TRANSPORT_URL": broker.url,
            "PN_BROKER_USERNAME": SERVICE_USER,
            "PN_BROKER_PASSWORD": SERVICE_PASSWORD,
            "PN_PUBLISH_TIMEOUT_SECONDS": "1",  # writer grace = 1 + 5 s
            "PN_RELAY_INTERVAL_SECONDS": "0.2",
        }
        started = time.monotonic()
        serve_log = tmp_path / "serve.log"
        with open(serve_log, "wb") as log:
            serve = subprocess.Popen(
                [sys.executable, "-m", "partition_notify.cli", "serve"],
                cwd=ROOT, env=serve_env, stdout=log, stderr=subprocess.STDOUT)
        logged = set(logged_message_ids(store_url))
        assert collect.wait_for(logged, 60), (
            f"serve announced {collect.delivered(logged)}/{len(logged)}")
        took = time.monotonic() - started
        wait_until(lambda: sub_app.store.log.relay_lag()[0] == 0, 10, "every entry to be marked")
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0, serve_log.read_text()[-2000:]
        assert "stopped" in serve_log.read_text()
        tally(
            f"writer-sigkill[{sub_app.store.dialect}]",
            acknowledged=len(logged),
            delivered=collect.delivered(logged),
            duplicates_suppressed=subscription.duplicates,
            writers_killed=WRITERS,
            serve_delivered_s=f"{took:.1f}",
        )
        assert collect.delivered(logged) == total
        assert collect.max_per_id() == 1
        assert all(subscriber.is_partition_present(db_name, "events", f"ds=w{w}/n={n}")
                   for w in range(WRITERS) for n in range(PER_WRITER))
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait(30)
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait(30)
        sub_app.close()
        hole.close()
