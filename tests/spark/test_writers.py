"""NotifyingWriter against a real local Spark, the embedded transport and a SQLite store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from partition_notify.writers import NotifyingWriter

from partition_notify.contract import AddPartitionMessage, SetDoneMessage, spec
from partition_notify.core.errors import InvalidSpecError, UnknownTableError, ValidationError
from tests.spark.helpers import Collector, count_data_files, local_path

pytestmark = pytest.mark.spark

KEYS = ["datestamp", "region"]
# A value that needs escaping in a path, one with a space, and a null.
REGIONS = ["us", "eu/west:1", "a b", None]


def rows_for(dates: list[str], regions: list[str | None], per: int = 3) -> list[tuple[Any, ...]]:
    return [(i, float(i), d, r) for d in dates for r in regions for i in range(per)]


def frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, "id INT, amount DOUBLE, datestamp STRING, region STRING")


def path_writer(app: Any, tmp_path: Path, **kw: Any) -> NotifyingWriter:
    return NotifyingWriter(app, "sales", "orders", partition_keys=KEYS,
                           location=str(tmp_path / "warehouse" / "orders"), **kw)


def expected_spec(d: str, r: str | None) -> dict[str, str]:
    return {"datestamp": d, "region": r if r is not None else spec.HIVE_DEFAULT_PARTITION}


def staging_entries(location: str) -> list[str]:
    staging = local_path(location) / "_pn_staging"
    return sorted(os.listdir(staging)) if staging.exists() else []


def test_n_partitions_give_n_messages_after_the_data_is_readable(spark, spark_app, tmp_path):
    writer = path_writer(spark_app, tmp_path)
    dates = ["20110227", "20110228"]
    collector = Collector()
    sub = spark_app.subscriber().subscribe(("sales", "orders"), collector)
    try:
        result = writer.write(frame(spark, rows_for(dates, REGIONS)))
        n = len(dates) * len(REGIONS)
        messages = collector.wait_for(n)
    finally:
        sub.close()

    assert len(messages) == n and all(isinstance(m, AddPartitionMessage) for m in messages)
    want = [expected_spec(d, r) for d in dates for r in REGIONS]
    got = [m.partitions[0] for m in messages]
    assert sorted(got, key=spec.canonical) == sorted(want, key=spec.canonical)
    assert all(list(p) == KEYS for p in got), "values in the table's key order"
    assert len(result.announced) == n and len(result.partitions) == n
    root = result.announced[0].locations[0].rsplit("/", 2)[0]
    for m in messages:
        loc = m.locations[0]
        assert loc == f"{root}/{spec.path(m.partitions[0], KEYS)}"
        assert collector.files_at_receipt[loc] > 0, f"{loc} had no data when announced"
    # Every partition reads back through Spark with its rows.
    df = spark.read.parquet(root)
    assert df.count() == len(rows_for(dates, REGIONS))
    from pyspark.sql import functions as F

    one = spark.read.parquet(f"{root}/datestamp=20110228/region=eu%2Fwest%3A1")
    assert one.count() == 3
    nulls = df.where(F.col("region").isNull()).count()
    assert nulls == 2 * 3, "null partition values read back as null"
    assert staging_entries(root) == []
    stored = spark_app.store.catalog.partitions(spark_app.publisher.table("sales", "orders"))
    assert len(stored) == n


def test_a_failing_task_publishes_nothing_and_cleans_up(spark, spark_app, tmp_path):
    from pyspark.sql import functions as F

    writer = path_writer(spark_app, tmp_path)
    before = spark_app.store.log.max_event_id()

    @F.udf("string")
    def explode_on_boom(region: str | None) -> str | None:
        if region == "boom":
            raise RuntimeError("task failure injected by the test")
        return region

    rows = rows_for(["20110301"], ["us", "eu", "boom", "ap"], per=50)
    df = frame(spark, rows).withColumn("region", explode_on_boom("region"))
    with pytest.raises(Exception, match="task failure injected"):
        writer.write(df, mark_set_done="datestamp=20110301")

    assert spark_app.store.log.max_event_id() == before, "nothing logged, nothing published"
    info = spark_app.publisher.table("sales", "orders")
    assert spark_app.store.catalog.partitions(info) == []
    assert spark_app.subscriber().set_done_history("sales", "orders") == []
    table = tmp_path / "warehouse" / "orders"
    assert staging_entries(f"file:{table}") == []
    assert not list(table.glob("datestamp=*")), "no partition became visible"


def test_set_done_fires_only_when_the_whole_write_succeeded(spark, spark_app, tmp_path):
    from pyspark.sql import functions as F

    writer = path_writer(spark_app, tmp_path)
    subscriber = spark_app.subscriber()
    result = writer.write(frame(spark, rows_for(["20110228"], ["us", "eu"])),
                          mark_set_done="datestamp=20110228")
    assert isinstance(result.set_done, SetDoneMessage)
    got = subscriber.wait_for_set_done("sales", "orders", "datestamp=20110228/region=us",
                                       timeout=10)
    assert got.spec == "datestamp=20110228"

    bad = F.udf(lambda r: r if r != "eu" else 1 // 0, "string")
    failing = frame(spark, rows_for(["20110301"], ["us", "eu"])).withColumn("region", bad("region"))
    with pytest.raises(Exception, match="ZeroDivisionError"):
        writer.write(failing, mark_set_done="datestamp=20110301")
    specs = [m.spec for m in subscriber.set_done_history("sales", "orders")]
    assert specs == ["datestamp=20110228"]


def test_set_done_spec_is_validated_before_any_data_is_written(spark, spark_app, tmp_path):
    writer = path_writer(spark_app, tmp_path)
    df = frame(spark, rows_for(["20110228"], ["us"]))
    with pytest.raises(InvalidSpecError, match="unknown key"):
        writer.write(df, mark_set_done="day=20110228")
    with pytest.raises(ValidationError, match="mode"):
        writer.write(df, mode="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="lacks partition column"):
        writer.write(df.drop("region"))
    assert not (tmp_path / "warehouse" / "orders").exists(), "nothing touched the table"
    assert spark_app.store.log.max_event_id() == 0


def test_unregistered_table_without_keys_is_refused(spark, spark_app):
    with pytest.raises(UnknownTableError, match="partition_keys"):
        NotifyingWriter(spark_app, "sales", "nowhere")


def test_append_adds_data_without_reannouncing_and_overwrite_replaces(spark, spark_app,
                                                                      tmp_path):
    writer = path_writer(spark_app, tmp_path)
    first = writer.write(frame(spark, rows_for(["20110228"], ["us", "eu"], per=2)))
    assert len(first.announced) == 2
    second = writer.write(frame(spark, rows_for(["20110228"], ["us", "ap"], per=2)))
    # us existed: its rows are added, no new message; ap is new.
    assert [m.partitions[0]["region"] for m in second.announced] == ["ap"]
    root = first.announced[0].locations[0].rsplit("/", 2)[0]
    counts = {r.region: r["count"] for r in
              spark.read.parquet(root).groupBy("region").count().collect()}
    assert counts == {"us": 4, "eu": 2, "ap": 2}

    # An explicit revision is the caller's own running transaction (it commits it).
    tx = spark_app.revisions.begin_write_transaction("sales.orders", ["data"])
    third = writer.write(frame(spark, rows_for(["20110228"], ["us"], per=5)), mode="overwrite",
                         revision=tx.revision)
    assert [m.partitions[0]["region"] for m in third.announced] == ["us"]
    assert third.announced[0].revision == tx.revision
    counts = {r.region: r["count"] for r in
              spark.read.parquet(root).groupBy("region").count().collect()}
    assert counts == {"us": 5, "eu": 2, "ap": 2}, "only the written partition was replaced"
    info = spark_app.publisher.table("sales", "orders")
    us = spark_app.store.catalog.partition(info, "datestamp=20110228/region=us")
    assert us is not None and us.revision == tx.revision


def test_empty_write_sends_no_add_partition_but_the_set_done(spark, spark_app, tmp_path):
    writer = path_writer(spark_app, tmp_path)
    empty = frame(spark, []).where("id < 0")
    result = writer.write(empty, mark_set_done="datestamp=20110305")
    assert result.partitions == [] and result.announced == []
    assert result.set_done is not None and result.set_done.spec == "datestamp=20110305"
    assert spark_app.store.log.max_event_id() == 1


def test_catalog_table(spark, spark_app, tmp_path):
    spark.sql("CREATE DATABASE IF NOT EXISTS pn_cat")
    spark.sql("DROP TABLE IF EXISTS pn_cat.orders")
    spark.sql("CREATE TABLE pn_cat.orders (id INT, amount DOUBLE, datestamp STRING, "
              "region STRING) USING parquet PARTITIONED BY (datestamp, region)")
    try:
        writer = NotifyingWriter(spark_app, "sales", "orders_cat", catalog_table="pn_cat.orders",
                                 spark=spark)
        # Column order differs from the table's; the writer maps by name.
        df = frame(spark, rows_for(["20110228"], ["us", "eu/west:1", None, "o'neil"])).select(
            "region", "datestamp", "amount", "id")
        result = writer.write(df, mark_set_done="datestamp=20110228")
        assert len(result.announced) == 4
        assert spark.table("pn_cat.orders").count() == 12
        table = spark.table("pn_cat.orders")
        assert table.where(table.region == "o'neil").count() == 3
        shown = {r[0] for r in spark.sql("SHOW PARTITIONS pn_cat.orders").collect()}
        assert shown == {"datestamp=20110228/region=us",
                         "datestamp=20110228/region=eu%2Fwest%3A1",
                         "datestamp=20110228/region=o%27neil",
                         "datestamp=20110228/region=__HIVE_DEFAULT_PARTITION__"}
        info = spark_app.publisher.table("sales", "orders_cat")
        assert info.partition_keys == ("datestamp", "region")
        # Appending into a partition the catalog knows: data added, nothing re-announced.
        again = writer.write(frame(spark, rows_for(["20110228"], ["us"])))
        assert again.announced == []
        assert spark.table("pn_cat.orders").where("region = 'us'").count() == 6
        with pytest.raises(ValidationError, match="does not match catalog table"):
            writer.write(frame(spark, rows_for(["20110228"], ["us"])).drop("amount"))
    finally:
        spark.sql("DROP TABLE IF EXISTS pn_cat.orders")


@pytest.mark.slow
def test_thousand_partition_dynamic_write(spark, spark_app, tmp_path):
    from pyspark.sql import functions as F

    writer = NotifyingWriter(spark_app, "sales", "events", partition_keys=["bucket"],
                             location=str(tmp_path / "events"))
    collector = Collector()
    sub = spark_app.subscriber().subscribe(("sales", "events"), collector)
    try:
        df = (spark.range(0, 20_000, numPartitions=2)
              .withColumn("bucket", (F.col("id") % 1000).cast("string")))
        result = writer.write(df, mark_set_done="bucket=999")
        messages = collector.wait_for(1001)
    finally:
        sub.close()
    adds = [m for m in messages if isinstance(m, AddPartitionMessage)]
    assert len(adds) == 1000 and len(result.partitions) == 1000
    assert {m.partitions[0]["bucket"] for m in adds} == {str(i) for i in range(1000)}
    assert isinstance(messages[-1], SetDoneMessage), "the set-done comes after every partition"
    assert all(count_data_files(m.locations[0]) > 0 for m in adds)
    assert spark.read.parquet(str(tmp_path / "events")).count() == 20_000
