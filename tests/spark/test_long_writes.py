"""A Spark write that outlasts its transaction's keep-alive (issue 10 item 5).

The keep-alive is shortened to a few seconds and the Spark job is made
slower than that inside its tasks (a ``mapPartitions`` that takes longer
than the keep-alive, as a real long job does), never by pausing the test.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from partition_notify.revisions import RevisionManager
from partition_notify.writers.snapshot_read import read_snapshot

from partition_notify.contract import AddPartitionMessage, SetDoneMessage
from tests.faults.support import tally
from tests.spark.helpers import Collector
from tests.spark.test_writers import frame, path_writer, rows_for

pytestmark = pytest.mark.spark

KEEP_ALIVE = 2.0
#: Each Spark task takes this long: the whole job outlasts the keep-alive 3 times.
TASK_SECONDS = 3 * KEEP_ALIVE
SCHEMA = "id INT, amount DOUBLE, datestamp STRING, region STRING"


def slow_frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    def slow(part: Any) -> Any:  # runs in the Python worker of each task
        time.sleep(TASK_SECONDS)
        yield from part

    rdd = frame(spark, rows).repartition(2).rdd.mapPartitions(slow)
    return spark.createDataFrame(rdd, SCHEMA)


def keep_alive_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("keep-alive")]


def test_a_write_longer_than_the_keep_alive_succeeds_and_is_covered(spark, spark_app, tmp_path):
    revisions = RevisionManager(spark_app.store, default_keep_alive=KEEP_ALIVE)
    writer = path_writer(spark_app, tmp_path, revisions=revisions)
    rows = rows_for(["20110228"], ["us", "eu"])
    collector = Collector()
    sub = spark_app.subscriber().subscribe(("sales", "orders"), collector)
    try:
        started = time.monotonic()
        result = writer.write(slow_frame(spark, rows), mark_set_done="datestamp=20110228")
        took = time.monotonic() - started
        messages = collector.wait_for(3)
    finally:
        sub.close()

    assert result.spark_seconds > KEEP_ALIVE, "the Spark job outlasted the keep-alive"
    assert keep_alive_threads() == [], "the heartbeat stopped with the write"
    revision = result.announced[0].revision
    assert revision is not None and result.revision == revision
    snap = revisions.create_snapshot("sales.orders")
    assert snap.includes(revision, "data"), f"revision {revision} committed: {snap}"
    assert revisions.running_transactions("sales.orders") == []
    covered = read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)
    assert covered.frame.count() == len(rows), "the snapshot covers the write's data"
    adds = [m for m in messages if isinstance(m, AddPartitionMessage)]
    assert len(adds) == 2 and isinstance(messages[-1], SetDoneMessage)
    tally(
        "spark-write-outlasts-keep-alive[sqlite]",
        acknowledged=len(result.announced) + 1,
        delivered=len(messages),
        duplicates_suppressed=sub.duplicates,
        keep_alive_s=f"{KEEP_ALIVE:g}",
        spark_s=f"{result.spark_seconds:.1f}",
        write_s=f"{took:.1f}",
        committed=int(snap.includes(revision, "data")),
        snapshot_rows=covered.frame.count(),
    )


def test_a_failed_or_interrupted_write_stops_its_heartbeat_and_aborts(spark, spark_app,
                                                                      tmp_path):
    from pyspark.sql import functions as F

    revisions = RevisionManager(spark_app.store, default_keep_alive=KEEP_ALIVE)
    writer = path_writer(spark_app, tmp_path, revisions=revisions)

    @F.udf("string")
    def boom(region: str | None) -> str | None:
        raise RuntimeError("task failure injected by the test")

    with pytest.raises(Exception, match="task failure injected"):
        writer.write(frame(spark, rows_for(["20110301"], ["us"])).withColumn("region",
                                                                           boom("region")))
    assert keep_alive_threads() == []

    class Interrupted(type(writer)):  # type: ignore[misc]
        def _write(self, *a: Any, **kw: Any) -> Any:
            raise KeyboardInterrupt

    interrupted = Interrupted(spark_app, "sales", "orders", revisions=revisions)
    with pytest.raises(KeyboardInterrupt):
        interrupted.write(frame(spark, rows_for(["20110301"], ["us"])))
    assert keep_alive_threads() == []
    assert revisions.running_transactions("sales.orders") == []
    assert len(revisions.aborted_revisions("sales.orders")) == 2


def test_a_write_whose_revision_expired_while_publishing_still_succeeds(spark, spark_app,
                                                                        tmp_path):
    """The heartbeat could not help (say the database was away longer than the
    keep-alive): the write published, so it succeeds at a new committed revision."""
    from partition_notify.publisher import Publisher
    from partition_notify.revisions import snapshot_partitions

    from tests.support.clock import FakeClock

    clock = FakeClock(time.time())
    revisions = RevisionManager(spark_app.store, clock=clock, default_keep_alive=KEEP_ALIVE)

    class SlowStorePublisher(Publisher):
        def announce_partitions(self, *a: Any, **kw: Any) -> Any:
            out = super().announce_partitions(*a, **kw)
            clock.advance(KEEP_ALIVE + 1)  # the keep-alive runs out after the log step
            return out

    publisher = SlowStorePublisher(spark_app.store, spark_app.transport,
                                   spark_app.publisher.config)
    writer = path_writer(publisher, tmp_path, revisions=revisions)
    result = writer.write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    old = result.announced[0].revision
    assert old is not None and result.revision is not None and result.revision > old
    snap = revisions.create_snapshot("sales.orders")
    assert old in snap.aborted and snap.includes(result.revision, "data")
    info = spark_app.publisher.table("sales", "orders")
    assert {p.revision for p in snapshot_partitions(spark_app.store, info, snap)} == {
        result.revision}
    covered = read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap,
                            revisions=revisions)
    assert covered.frame.count() == 6
    assert keep_alive_threads() == []
