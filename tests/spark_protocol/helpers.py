"""Helpers of the Spark commit-protocol tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.http.support import HttpServe
from tests.support.accounts import ROOT
from tests.support.collect import Collector as BaseCollector

JAR = ROOT / "writers" / "jvm" / "partition-notify-spark.jar"
#: Nothing listens on port 9 (discard) here: a POST fails at once.
DEAD_URL = "http://127.0.0.1:9"


def spark_flags(serve_url: str | None = None) -> dict[str, str]:
    from partition_notify.cli.spark import spark_settings

    return spark_settings(serve_url, None)


#: The driver's deliveries still running when a test ends must finish within this.
DELIVERIES_SECONDS = 60.0


def finish_deliveries(spark: Any) -> None:
    """Wait until the driver has handed over every committed job.

    A SQL command's job is delivered by the query listener, on Spark's listener bus, after
    the write call returned: its event can be in the log (serve applied it) while serve's
    answer is still on its way. Closing what carries that answer first (a relay, serve)
    would make the driver spool a manifest serve already has."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(int(DELIVERIES_SECONDS * 1000))


def start_serve(store_url: str, log: Path) -> HttpServe:
    return HttpServe(store_url, log, env_extra={"PN_SPARK_SPOOL_INTERVAL_SECONDS": "0.2"}).start()


class Collector(BaseCollector):
    """Messages of a subscription; ``on_add`` runs for each add-partition as it arrives."""

    timeout = 60.0

    def __init__(self, on_add: Any = None) -> None:
        super().__init__()
        self.on_add = on_add
        self.seen_by_on_add: list[Any] = []

    def observe(self, msg: Any) -> None:
        if self.on_add is not None and msg.event_type == "ADD_PARTITION":
            self.seen_by_on_add.append(self.on_add(msg))

    def adds(self) -> list[str]:
        return sorted(
            "/".join(f"{k}={v}" for k, v in m.partitions[0].items())
            for m in self.messages if m.event_type == "ADD_PARTITION"
        )

    def drops(self) -> list[str]:
        return sorted(
            "/".join(f"{k}={v}" for k, v in m.partitions[0].items())
            for m in self.messages if m.event_type == "DROP_PARTITION"
        )

    def dones(self) -> list[str]:
        return [m.spec for m in self.messages
                if m.event_type == "PARTITION_DONE"]


def events_of(app: Any, db: str, table: str) -> list[Any]:
    """Every event logged for a table (the store is the ground truth of 'exactly once')."""
    topic = app.publisher.table(db, table).topic
    return [e for e in app.store.log.events_after(0, limit=100_000) if e.topic == topic]


def spool_files(location: Path) -> list[Path]:
    d = location / "_partition_notify"
    return sorted(d.glob("*.json")) if d.exists() else []


def wait_until(pred: Any, timeout: float = 60.0, what: str = "condition") -> None:
    """For file-system state only (no event to wait on): bounded, fine-grained polling."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)
