"""Retired files on a non-local FileSystem are deleted by a Spark job (writers/vacuum.py).

Defect (found in session 23): ``serve`` deletes an overwrite's retired files
(``<partition>/_pn_retired/<write_id>/``) past ``PN_RETIRED_FILE_RETENTION_SECONDS``
only in local locations. On ``hdfs://``, ``s3a://`` (where Spark tables live) it
marked the overwrite dealt with and the files stayed forever. Now ``serve``
leaves those tables' rows alone and ``vacuum_retired`` deletes the files through
the location's Hadoop FileSystem from a Spark job.

The table lives on ``viewfs://``: Hadoop's own non-local FileSystem (a mount
table, here onto a local directory), so the FileSystem calls are Hadoop's, not
the OS's, and ``serve`` sees a location that is not local, as with HDFS.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from partition_notify.writers import NotifyingWriter
from partition_notify.writers.snapshot_read import read_snapshot

from partition_notify.app import build_app
from partition_notify.core.errors import SnapshotFilesRemovedError
from partition_notify.serve.housekeeping import purge_all
from tests.spark.test_writers import KEYS, frame, rows_for


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.select("id", "datestamp", "region").collect())


def _viewfs(spark: Any, local: Path) -> str:
    """A viewfs:// mount of ``local`` (its own name: Hadoop caches FileSystems by it)."""
    mount = f"pn{uuid.uuid4().hex[:10]}"
    local.mkdir(parents=True)
    spark.sparkContext._jsc.hadoopConfiguration().set(
        f"fs.viewfs.mounttable.{mount}.link./wh", f"file://{local}")
    return f"viewfs://{mount}/wh"


def test_retired_files_on_a_non_local_filesystem_are_deleted_by_the_spark_job(
        spark: Any, spark_app: Any, tmp_path: Path) -> None:
    local = tmp_path / "wh"
    location = f"{_viewfs(spark, local)}/orders"
    revisions = spark_app.revisions
    writer = NotifyingWriter(spark_app, "sales", "orders", partition_keys=KEYS,
                             location=location, revisions=revisions)
    writer.write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    snap = revisions.create_snapshot("sales.orders")
    writer.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    pinned = read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)
    retired = [local / f.split("/wh/", 1)[1] for f in pinned.files if "/_pn_retired/" in f]
    assert retired and all(p.is_file() for p in retired), pinned.files
    latest = _rows(read_snapshot(spark, spark_app, "sales", "orders").frame)

    later = time.time() + 8 * 86400  # past the 7-day default retention
    with build_app(store_url=str(spark_app.settings.store_url), transport_url="embedded://",
                   clock=lambda: later) as serve:
        assert purge_all(serve, 100, None).revision_files == 0  # not local: not serve's
        assert all(p.is_file() for p in retired)
        from partition_notify.writers import vacuum_retired

        assert vacuum_retired(serve, "sales", "orders", spark=spark) == len(retired)
        assert vacuum_retired(serve, "sales", "orders", spark=spark) == 0  # dealt with
    assert not any(p.exists() for p in retired)
    assert not retired[0].parent.exists(), "the empty _pn_retired/<write id> is removed"
    with pytest.raises(SnapshotFilesRemovedError, match="PN_RETIRED_FILE_RETENTION_SECONDS"):
        read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)
    spark.catalog.clearCache()
    assert _rows(read_snapshot(spark, spark_app, "sales", "orders").frame) == latest


def test_within_the_retention_the_spark_job_deletes_nothing(
        spark: Any, spark_app: Any, tmp_path: Path) -> None:
    location = f"{_viewfs(spark, tmp_path / 'wh')}/orders"
    revisions = spark_app.revisions
    writer = NotifyingWriter(spark_app, "sales", "orders", partition_keys=KEYS,
                             location=location, revisions=revisions)
    writer.write(frame(spark, rows_for(["20110228"], ["us"])))
    snap = revisions.create_snapshot("sales.orders")
    writer.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    from partition_notify.writers import vacuum_retired

    assert vacuum_retired(spark_app, "sales", "orders", spark=spark) == 0
    again = read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)
    assert again.frame.count() == 3, "the pinned snapshot still reads the retired rows"


def test_an_aborted_writes_files_there_are_deleted_by_the_spark_job_too(
        spark: Any, spark_app: Any, tmp_path: Path) -> None:
    """A write aborted after its files were placed (a crash in the commit step): no
    snapshot reads them, plain readers of the directory do; serve cannot delete them."""
    from partition_notify.revisions.files import RevisionFiles

    local = tmp_path / "wh"
    location = f"{_viewfs(spark, local)}/orders"
    spark_app.publisher.register_table("sales", "orders", KEYS, location=location)
    rm = spark_app.revisions
    tx = rm.begin_write_transaction("sales.orders", ["data"])
    rel = "datestamp=20110228/region=us/part-w9.parquet"
    RevisionFiles(rm).record("sales.orders", tx.revision, "w9", lambda: [rel])
    (local / "orders" / rel).parent.mkdir(parents=True)
    (local / "orders" / rel).write_bytes(b"PAR1")
    rm.abort_write_transaction(tx)

    later = time.time() + 8 * 86400
    with build_app(store_url=str(spark_app.settings.store_url), transport_url="embedded://",
                   clock=lambda: later) as serve:
        assert purge_all(serve, 100, None).revision_files == 0
        assert (local / "orders" / rel).is_file()
        from partition_notify.writers import vacuum_retired

        assert vacuum_retired(serve, "sales", "orders", spark=spark) == 1
    assert not (local / "orders" / rel).exists()
