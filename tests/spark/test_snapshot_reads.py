"""Writes are revision transactions; readers get repeatable snapshot reads (issue 6)."""

from __future__ import annotations

import os

import pytest
from partition_notify.writers.snapshot_read import read_snapshot

from tests.spark.test_writers import frame, path_writer, rows_for


def _rows(df):
    return sorted(tuple(r) for r in df.select("id", "datestamp", "region").collect())


def test_writes_carry_revisions_and_snapshot_reads_repeat(spark, spark_app, tmp_path):
    revisions = spark_app.revisions
    writer = path_writer(spark_app, tmp_path, revisions=revisions)

    first = writer.write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    assert {m.revision for m in first.announced} == {first.announced[0].revision}
    assert first.announced[0].revision is not None

    snap = revisions.create_snapshot("sales.orders")
    before = _rows(read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap))
    assert {r[1:] for r in before} == {("20110228", "us"), ("20110228", "eu")}

    second = writer.write(frame(spark, rows_for(["20110301"], ["us"])))
    assert second.announced[0].revision > first.announced[0].revision

    again = _rows(read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap))
    assert again == before, "the same snapshot reads the same rows after a later commit"
    latest = read_snapshot(spark, spark_app, "sales", "orders")
    assert {r[1:] for r in _rows(latest)} == {("20110228", "us"), ("20110228", "eu"),
                                              ("20110301", "us")}


def test_a_failed_write_aborts_its_revision(spark, spark_app, tmp_path):
    from pyspark.sql import functions as F

    revisions = spark_app.revisions
    writer = path_writer(spark_app, tmp_path, revisions=revisions)
    ok = writer.write(frame(spark, rows_for(["20110228"], ["us"])))

    @F.udf("string")
    def boom(region: str | None) -> str | None:
        if region == "boom":
            raise RuntimeError("task failure injected by the test")
        return region

    bad = frame(spark, rows_for(["20110301"], ["boom"])).withColumn("region", boom("region"))
    with pytest.raises(Exception, match="task failure injected"):
        writer.write(bad)
    snap = revisions.create_snapshot("sales.orders")
    assert snap.revision("data") > ok.announced[0].revision, "the failed revision was used"
    assert snap.aborted, "the failed write's revision is recorded as aborted"
    assert {r[1:] for r in _rows(read_snapshot(spark, spark_app, "sales", "orders",
                                               snapshot=snap))} == {("20110228", "us")}


def _count(read) -> int:
    return read.frame.count()


def test_a_snapshot_returns_the_same_rows_after_an_append_into_its_partition(
        spark, spark_app, tmp_path):
    revisions = spark_app.revisions
    writer = path_writer(spark_app, tmp_path, revisions=revisions)
    writer.write(frame(spark, rows_for(["20110228"], ["us"])))
    snap = revisions.create_snapshot("sales.orders")
    assert _count(read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)) == 3

    again = writer.write(frame(spark, rows_for(["20110228"], ["us"])))
    assert again.announced == [], "an append into a known partition is not announced"
    assert _count(read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)) == 3
    assert _count(read_snapshot(spark, spark_app, "sales", "orders")) == 6


def test_a_snapshot_returns_the_same_rows_after_an_overwrite_of_its_partition(
        spark, spark_app, tmp_path):
    revisions = spark_app.revisions
    writer = path_writer(spark_app, tmp_path, revisions=revisions)
    writer.write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    snap = revisions.create_snapshot("sales.orders")
    before = _rows(read_snapshot(spark, spark_app, "sales", "orders",
                                 snapshot=snap).frame)
    assert len(before) == 6

    writer.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    again = read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)
    assert _rows(again.frame) == before, "3 rows of us stay 3 rows"
    assert again.snapshot == snap and any("/_pn_retired/" in f for f in again.files)
    latest = read_snapshot(spark, spark_app, "sales", "orders")
    assert _count(latest) == 1 + 3
    # Plain readers of the table directory see only the new data.
    table = str(tmp_path / "warehouse" / "orders")
    assert spark.read.parquet(table).where("region = 'us'").count() == 1


def test_a_snapshot_of_another_table_is_refused(spark, spark_app, tmp_path):
    from partition_notify.writers import NotifyingWriter

    from partition_notify.core.errors import ValidationError

    orders = path_writer(spark_app, tmp_path)
    returns = NotifyingWriter(spark_app, "sales", "returns", partition_keys=["datestamp", "region"],
                              location=str(tmp_path / "warehouse" / "returns"))
    orders.write(frame(spark, rows_for(["20110228"], ["us"])))
    for _ in range(2):
        returns.write(frame(spark, rows_for(["20110228"], ["us"])))
    of_returns = spark_app.revisions.create_snapshot("sales.returns")
    orders.write(frame(spark, rows_for(["20110301"], ["us"])))
    # Its revision 2 would cover orders' second write, which no snapshot of
    # orders taken at that time covers: rows that change under the reader.
    with pytest.raises(ValidationError, match=r"sales\.returns"):
        read_snapshot(spark, spark_app, "sales", "orders", snapshot=of_returns)


def test_a_snapshot_handed_over_as_json_reads_as_the_snapshot(spark, spark_app, tmp_path):
    from partition_notify.core.errors import ValidationError

    writer = path_writer(spark_app, tmp_path)
    writer.write(frame(spark, rows_for(["20110228"], ["us"])))
    snap = spark_app.revisions.create_snapshot("sales.orders")
    writer.write(frame(spark, rows_for(["20110301"], ["us"])))
    as_json = snap.to_dict()  # what `partition-notify rev snapshot` prints
    read = read_snapshot(spark, spark_app, "sales", "orders", snapshot=as_json)
    assert {r[1:] for r in _rows(read)} == {("20110228", "us")}
    for bad in ("sales.orders", 7, {"table": "sales.orders"}):
        with pytest.raises(ValidationError, match="snapshot"):
            read_snapshot(spark, spark_app, "sales", "orders", snapshot=bad)


def test_an_explicit_revision_must_be_a_running_transaction_of_the_table(spark, spark_app,
                                                                         tmp_path):
    from partition_notify.core.errors import ConflictError, NotFoundError

    revisions = spark_app.revisions
    writer = path_writer(spark_app, tmp_path)
    writer.write(frame(spark, rows_for(["20110228"], ["us"])))
    tx = revisions.begin_write_transaction("sales.orders", ["data"])
    revisions.commit_write_transaction(tx)
    snap = revisions.create_snapshot("sales.orders")
    before = _rows(read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap))
    # Files tagged with a committed revision would appear in snapshots already
    # taken; a number never allocated, in some later writer's transaction.
    with pytest.raises(ConflictError, match="committed"):
        writer.write(frame(spark, rows_for(["20110301"], ["us"])), revision=tx.revision)
    with pytest.raises(NotFoundError, match="no transaction 424242"):
        writer.write(frame(spark, rows_for(["20110302"], ["us"])), revision=424242)
    after = _rows(read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap))
    assert after == before, "the snapshot still reads the same rows"
    assert spark_app.store.log.max_event_id() == 1, "nothing announced"


def test_retired_files_go_after_the_retention_and_the_pinned_read_says_so(
        spark, spark_app, tmp_path):
    """A real transactional overwrite; then serve's housekeeping, a retention later
    (another App on the same store, its clock 8 days on), deletes the retired files:
    the snapshot pinned before the overwrite fails naming the setting, latest reads
    the same rows as before the purge."""
    import time

    from partition_notify.app import build_app
    from partition_notify.core.errors import SnapshotFilesRemovedError
    from partition_notify.serve.housekeeping import purge_all

    revisions = spark_app.revisions
    writer = path_writer(spark_app, tmp_path, revisions=revisions)
    writer.write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    snap = revisions.create_snapshot("sales.orders")
    writer.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    pinned = read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)
    retired = [f for f in pinned.files if "/_pn_retired/" in f]
    assert retired
    latest = _rows(read_snapshot(spark, spark_app, "sales", "orders").frame)

    later = time.time() + 8 * 86400
    with build_app(store_url=str(spark_app.settings.store_url), transport_url="embedded://",
                   clock=lambda: later) as serve:
        assert purge_all(serve, 100, None).revision_files == len(retired)
    assert not any(os.path.exists(f.removeprefix("file:")) for f in retired)
    with pytest.raises(SnapshotFilesRemovedError, match="PN_RETIRED_FILE_RETENTION_SECONDS"):
        read_snapshot(spark, spark_app, "sales", "orders", snapshot=snap)
    spark.catalog.clearCache()
    assert _rows(read_snapshot(spark, spark_app, "sales", "orders").frame) == latest


def test_an_overwrite_leaves_a_later_revisions_write_where_it_lands(spark, spark_app, tmp_path):
    """Two writers of one partition: an overwrite (revision A) and an append begun
    after it (revision B > A) whose files were recorded (commit step 0) but not yet
    moved in when A's overwrite retired the partition. B's files are newer than A:
    they stay in the partition, and every snapshot from B on reads them there."""
    import glob
    import shutil

    from partition_notify.revisions.files import RevisionFiles

    revisions = spark_app.revisions
    writer = path_writer(spark_app, tmp_path, revisions=revisions)
    writer.write(frame(spark, rows_for(["20110228"], ["us"])))           # 3 rows, committed
    part = tmp_path / "warehouse" / "orders" / "datestamp=20110228" / "region=us"
    tx_a = revisions.begin_write_transaction("sales.orders", ["data"])
    tx_b = revisions.begin_write_transaction("sales.orders", ["data"])
    # B's Spark job wrote its file into its staging directory and recorded it.
    staged = tmp_path / "b-staging"
    spark.createDataFrame([(100, "20110228", "us")], ["id", "datestamp", "region"]) \
        .drop("datestamp", "region").coalesce(1).write.parquet(str(staged))
    b_file = glob.glob(str(staged / "part-*.parquet"))[0]
    b_name = "part-b-" + os.path.basename(b_file)
    RevisionFiles(revisions).record("sales.orders", tx_b.revision, "wB",
                                    lambda: [f"datestamp=20110228/region=us/{b_name}"])
    # A overwrites the partition with 1 row and commits.
    writer.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite",
                 revision=tx_a.revision)
    revisions.commit_write_transaction(tx_a)
    # B's job commit moves its file in, then B commits.
    shutil.move(b_file, part / b_name)
    revisions.commit_write_transaction(tx_b)

    latest = read_snapshot(spark, spark_app, "sales", "orders")
    mine = [f for f in latest.files if f.endswith(b_name)]
    assert mine == [f"file:{part / b_name}"], latest.files  # in the partition, not retired
    assert _count(latest) == 1 + 1, "A's one row and B's one row"
