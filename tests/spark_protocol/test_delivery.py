"""The driver's POSTs to serve: one kept-alive connection, and a closed one is not a failure.

Through a relay in front of the real serve (tests/spark_protocol/proxy.py)
that counts the driver's connections and can close a reused one. The
``serve`` fixture fails the test if any POST failed (its manifest would be in
the unscanned spool).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark_protocol.helpers import Collector, events_of, finish_deliveries, spool_files
from tests.spark_protocol.proxy import Relay

KEYS = ["ds", "region"]
WRITES = 3
#: Longer than the session's deadline for a dead serve, well inside the driver's default.
HELD_SECONDS = 3.0


@pytest.fixture
def relay_to(pspark: Any, serve: Any) -> Iterator[Any]:
    made: list[Relay] = []

    def make(**kw: Any) -> Relay:
        r = Relay(serve.port, **kw)
        made.append(r)
        pspark.conf.set("spark.partitionnotify.serveUrl", r.base)
        return r

    yield make
    finish_deliveries(pspark)  # the last answer may still be on its way through a relay
    pspark.conf.set("spark.partitionnotify.serveUrl", serve.base)
    for r in made:
        r.close()


def _write_days(spark: Any, app: Any, loc: Path, n: int) -> None:
    """``n`` jobs, each one partition and its set-done; returns once all are logged."""
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    for day in range(n):
        (spark.createDataFrame([(day, str(day), "us")], "v INT, ds STRING, region STRING")
         .write.mode("append").partitionBy(*KEYS)
         .option("partitionnotify.markSetDone", f"ds={day}").parquet(str(loc)))
    col.wait_for(2 * n)
    assert col.dones() == [f"ds={d}" for d in range(n)]
    assert len(events_of(app, "lake", "events")) == 2 * n  # each job once
    assert not spool_files(loc)
    sub.close()


def test_commits_share_one_connection_to_serve(pspark: Any, app: Any, relay_to: Any,
                                               tmp_path: Path) -> None:
    relay = relay_to()
    _write_days(pspark, app, tmp_path / "events", WRITES)
    # One client for the driver's life: the TCP set-up (and a client's selector thread)
    # is not paid again by every commit.
    assert relay.accepted == 1, f"{relay.accepted} connections for {WRITES} commits"


def test_a_reused_connection_serve_closed_is_retried_not_spooled(
        pspark: Any, app: Any, relay_to: Any, tmp_path: Path) -> None:
    relay = relay_to(drop_reuse=True)
    _write_days(pspark, app, tmp_path / "events", WRITES)
    # Every commit after the first found its connection closed, and went through anyway.
    assert relay.dropped == WRITES - 1
    assert relay.accepted == WRITES


def test_a_slow_answer_within_the_deadline_is_not_spooled(
        pspark: Any, app: Any, relay_to: Any, tmp_path: Path) -> None:
    # CI's loaded machine: serve had applied a commit (its events were logged) while its
    # answer was still on the way. The driver must wait for it within its deadline, and the
    # test for the driver, not spool a duplicate beside the announcement.
    relay_to(hold_answer_seconds=HELD_SECONDS)
    _write_days(pspark, app, tmp_path / "events", 1)
