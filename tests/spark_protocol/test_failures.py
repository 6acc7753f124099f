"""Nothing is announced for a failed task, a cancelled job or a failed catalog update;
a job run while serve is down succeeds and is announced when serve is back.

Absence is checked after a later successful write to another table was
announced: the listener delivers in order, so by then the failed write's
turn has passed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark_protocol.helpers import Collector, events_of, spool_files, start_serve, wait_until
from tests.support.net import free_port

KEYS = ["ds", "region"]


def _rows(spark: Any, rows: list[tuple[int, str, str]]) -> Any:
    return spark.createDataFrame(rows, "v INT, ds STRING, region STRING")


def _sentinel(spark: Any, app: Any, tmp_path: Path) -> None:
    """A successful write to another table; returns once it is announced."""
    loc = tmp_path / "sentinel"
    app.publisher.register_table("lake", "sentinel", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "sentinel"), col)
    _rows(spark, [(0, "1", "x")]).write.partitionBy(*KEYS).parquet(str(loc))
    assert len(col.wait_for(1)) == 1
    sub.close()


def _parquet_files(loc: Path) -> list[Path]:
    return list(loc.glob("ds=*/region=*/*.parquet"))


def test_failing_task_announces_nothing(pspark: Any, app: Any, serve: Any,
                                        tmp_path: Path) -> None:
    from pyspark.sql.functions import udf

    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")

    @udf("int")
    def boom(v: int) -> int:
        if v == 2:
            raise ValueError("task fails")
        return v

    df = _rows(pspark, [(1, "1", "us"), (2, "1", "eu")]).withColumn("v", boom("v"))
    with pytest.raises(Exception, match="task fails"):
        df.write.partitionBy(*KEYS).parquet(str(loc))
    _sentinel(pspark, app, tmp_path)
    assert events_of(app, "lake", "events") == []
    assert not spool_files(loc)


def test_cancelled_job_announces_nothing(pspark: Any, app: Any, serve: Any,
                                         tmp_path: Path) -> None:
    from pyspark.sql.functions import udf

    loc, started = tmp_path / "events", tmp_path / "started"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    marker = str(started)

    @udf("int")
    def slow(v: int) -> int:
        Path(marker).touch()
        time.sleep(60)  # the task is killed long before this ends
        return v

    df = _rows(pspark, [(1, "1", "us"), (2, "1", "eu")]).withColumn("v", slow("v"))
    failure: list[BaseException] = []

    def write() -> None:
        pspark.sparkContext.setJobGroup("doomed", "to be cancelled", interruptOnCancel=True)
        try:
            df.write.partitionBy(*KEYS).parquet(str(loc))
        except Exception as exc:  # the cancellation
            failure.append(exc)

    t = threading.Thread(target=write)
    t.start()
    wait_until(started.exists, what="a task to start")
    pspark.sparkContext.cancelJobGroup("doomed")
    t.join(120)
    assert failure and not t.is_alive()
    _sentinel(pspark, app, tmp_path)
    assert events_of(app, "lake", "events") == []
    assert not spool_files(loc)


def test_failed_catalog_update_announces_nothing(pspark: Any, app: Any, serve: Any,
                                                 tmp_path: Path) -> None:
    """The job commits, then adding the partitions to the catalog fails (the table
    was dropped while the job ran): the command fails and nothing is announced."""
    from pyspark.sql.functions import udf

    loc, started, go = tmp_path / "ext", tmp_path / "started", tmp_path / "go"
    pspark.sql(f"CREATE TABLE ext (v INT, ds STRING, region STRING) USING parquet "
               f"PARTITIONED BY (ds, region) LOCATION '{loc}'")
    app.publisher.register_table("default", "ext", KEYS, location=f"file:{loc}")
    s_marker, g_marker = str(started), str(go)

    @udf("int")
    def gate(v: int) -> int:
        Path(s_marker).touch()
        deadline = time.monotonic() + 60
        while not Path(g_marker).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return v

    pspark.udf.register("gate", gate)
    failure: list[BaseException] = []

    def insert() -> None:
        try:
            pspark.sql("INSERT INTO ext PARTITION (ds='1', region) "
                       "SELECT gate(1), 'us'")
        except Exception as exc:
            failure.append(exc)

    t = threading.Thread(target=insert)
    t.start()
    wait_until(started.exists, what="the task to start")
    pspark.sql("DROP TABLE ext")      # external: the data stays, the catalog entry goes
    go.touch()
    t.join(120)
    assert failure and not t.is_alive()
    assert _parquet_files(loc), "the job itself committed its data"
    _sentinel(pspark, app, tmp_path)
    assert events_of(app, "default", "ext") == []
    assert not spool_files(loc)


def test_serve_down_job_succeeds_and_is_announced_later(
    pspark: Any, app: Any, writer_token: str, store_file: str, tmp_path: Path
) -> None:
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    pspark.conf.set("spark.partitionnotify.serveUrl", f"http://127.0.0.1:{free_port()}")
    pspark.conf.set("spark.partitionnotify.token", writer_token)
    try:
        (_rows(pspark, [(1, "1", "us"), (2, "1", "eu")]).write.partitionBy(*KEYS)
         .option("partitionnotify.markSetDone", "ds=1").parquet(str(loc)))   # succeeds
        wait_until(lambda: len(spool_files(loc)) == 1, what="the durable manifest")
        assert events_of(app, "lake", "events") == []
        serve = start_serve(store_file, tmp_path / "serve.log")
        try:
            col.wait_for(3)
            assert col.adds() == ["ds=1/region=eu", "ds=1/region=us"]
            assert col.dones() == ["ds=1"]
            wait_until(lambda: not spool_files(loc), what="the manifest to be removed")
            assert len(events_of(app, "lake", "events")) == 3
        finally:
            serve.stop()
    finally:
        pspark.conf.unset("spark.partitionnotify.serveUrl")
        pspark.conf.unset("spark.partitionnotify.token")
        sub.close()


def test_sub_directory_write_with_serve_down_is_spooled_where_serve_looks(
    pspark: Any, app: Any, writer_token: str, store_file: str, tmp_path: Path
) -> None:
    """A write into one partition directory (``.../events/ds=1`` with
    ``partitionBy("region")``): its manifest goes to the table's spool, which
    serve scans, not to ``ds=1/_partition_notify`` (which it never did)."""
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    pspark.conf.set("spark.partitionnotify.serveUrl", f"http://127.0.0.1:{free_port()}")
    pspark.conf.set("spark.partitionnotify.token", writer_token)
    try:
        pspark.createDataFrame([(1, "us"), (2, "eu")], "v INT, region STRING").write.partitionBy(
            "region").parquet(str(loc / "ds=1"))
        # and one without partitionBy, straight into a partition directory
        pspark.createDataFrame([(3,)], "v INT").write.parquet(str(loc / "ds=2" / "region=us"))
        wait_until(lambda: len(spool_files(loc)) == 2, what="the manifests in the table's spool")
        assert not (loc / "ds=1" / "_partition_notify").exists()
        serve = start_serve(store_file, tmp_path / "serve.log")
        try:
            col.wait_for(3)
            assert col.adds() == ["ds=1/region=eu", "ds=1/region=us", "ds=2/region=us"]
            wait_until(lambda: not spool_files(loc), what="the manifests to be removed")
            assert len(events_of(app, "lake", "events")) == 3
        finally:
            serve.stop()
    finally:
        pspark.conf.unset("spark.partitionnotify.serveUrl")
        pspark.conf.unset("spark.partitionnotify.token")
        sub.close()
