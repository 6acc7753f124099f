"""Every kind of Spark write announces exactly the partitions it wrote, once each.

Plain Spark code, no partition-notify call in the job: the session only has
the commit protocol jar and its two settings. Delivery: spool + real serve.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spark_protocol.helpers import Collector, events_of, spool_files

KEYS = ["ds", "region"]


def _rows(spark: Any, rows: list[tuple[int, str, str]]) -> Any:
    return spark.createDataFrame(rows, "v INT, ds STRING, region STRING")


def _expect(app: Any, col: Collector, db: str, table: str, adds: list[str],
            dones: list[str] = ()) -> None:  # type: ignore[assignment]
    col.wait_for(len(adds) + len(dones))
    assert col.adds() == sorted(adds)
    assert col.dones() == list(dones)
    # The store agrees: nothing more was logged for this table.
    assert len(events_of(app, db, table)) == len(adds) + len(dones)


def test_path_write_with_set_done_option(pspark: Any, app: Any, serve: Any,
                                         tmp_path: Path) -> None:
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    df = _rows(pspark, [(1, "20110228", "us"), (2, "20110228", "eu"), (3, "20110301", "us")])
    (df.write.partitionBy(*KEYS).option("partitionnotify.markSetDone", "ds=20110228")
     .parquet(str(loc)))
    _expect(app, col, "lake", "events",
            ["ds=20110228/region=eu", "ds=20110228/region=us", "ds=20110301/region=us"],
            ["ds=20110228"])
    # set-done comes after every add-partition of the job
    assert col.messages[-1].event_type == "PARTITION_DONE"
    assert not spool_files(loc)  # delivered over HTTP: no manifest left behind
    sub.close()


def test_unregistered_path_is_left_alone_and_logged_once(
    pspark: Any, app: Any, serve: Any, tmp_path: Path
) -> None:
    nobody, loc = tmp_path / "nobody", tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    for v in (1, 2):
        _rows(pspark, [(v, "20110228", "us")]).write.mode("append").partitionBy(
            *KEYS).parquet(str(nobody))
    # The listener delivers in order: once this one is in, both above were answered.
    _rows(pspark, [(3, "20110228", "us")]).write.partitionBy(*KEYS).parquet(str(loc))
    _expect(app, col, "lake", "events", ["ds=20110228/region=us"])
    assert serve.text().count("matches no registered table") == 1, serve.text()[-2000:]
    assert not spool_files(nobody)   # answered "ignored" (200), not an error to spool
    assert len(events_of(app, "lake", "events")) == 1
    sub.close()


def _catalog_partitions(spark: Any, table: str) -> set[str]:
    return {r[0] for r in spark.sql(f"SHOW PARTITIONS {table}").collect()}


def test_save_as_table_insert_into_and_sql(pspark: Any, app: Any, serve: Any) -> None:
    wh = Path(pspark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    loc = wh / "orders"
    app.publisher.register_table("default", "orders", KEYS, location=f"file:{loc}")
    # A subscriber that reads the catalog when told a partition exists.
    col = Collector(on_add=lambda m: "/".join(f"{k}={v}" for k, v in m.partitions[0].items())
                    in _catalog_partitions(pspark, "default.orders"))
    sub = app.subscriber().subscribe(("default", "orders"), col)

    _rows(pspark, [(1, "20110228", "us"), (2, "20110228", "eu")]).write.partitionBy(
        *KEYS).saveAsTable("orders")                       # CTAS: new table
    want = ["ds=20110228/region=eu", "ds=20110228/region=us"]
    _expect(app, col, "default", "orders", want)

    _rows(pspark, [(3, "20110301", "us")]).write.insertInto("orders")
    want.append("ds=20110301/region=us")
    _expect(app, col, "default", "orders", want)

    _rows(pspark, [(4, "20110302", "us")]).write.mode("append").partitionBy(
        *KEYS).saveAsTable("orders")
    want.append("ds=20110302/region=us")
    _expect(app, col, "default", "orders", want)

    pspark.sql("INSERT INTO orders PARTITION (ds='20110303', region='us') SELECT 5")  # static
    want.append("ds=20110303/region=us")
    _expect(app, col, "default", "orders", want)

    pspark.sql("INSERT INTO orders PARTITION (ds='20110304', region) "
               "SELECT 6, 'eu' UNION ALL SELECT 7, 'jp'")         # dynamic
    want += ["ds=20110304/region=eu", "ds=20110304/region=jp"]
    _expect(app, col, "default", "orders", want)

    # appending into partitions that exist: not re-announced (as the Python writer)
    pspark.sql("INSERT INTO orders PARTITION (ds='20110304', region='eu') SELECT 8")
    pspark.sql("INSERT INTO orders PARTITION (ds='20110305', region='us') SELECT 9")
    want.append("ds=20110305/region=us")
    _expect(app, col, "default", "orders", want)

    assert col.seen_by_on_add and all(col.seen_by_on_add), col.seen_by_on_add
    sub.close()


def test_insert_overwrite_static_and_dynamic_mode(pspark: Any, app: Any, serve: Any) -> None:
    pspark.sql("CREATE TABLE ow (v INT, ds STRING, region STRING) USING parquet "
               "PARTITIONED BY (ds, region)")
    loc = Path(pspark.sql("DESCRIBE TABLE EXTENDED ow").where("col_name = 'Location'")
               .collect()[0][1].removeprefix("file:"))
    app.publisher.register_table("default", "ow", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("default", "ow"), col)
    pspark.sql("INSERT INTO ow PARTITION (ds='1', region) SELECT 1, 'us' UNION ALL SELECT 2, 'eu'")
    _expect(app, col, "default", "ow", ["ds=1/region=eu", "ds=1/region=us"])

    # static mode: the matching partitions are replaced and re-announced (new revision of data)
    pspark.sql("INSERT OVERWRITE ow PARTITION (ds='1', region='us') SELECT 3")
    _expect(app, col, "default", "ow", ["ds=1/region=eu", "ds=1/region=us", "ds=1/region=us"])

    pspark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    pspark.conf.set("spark.partitionnotify.markSetDone", "ds=1")
    try:
        pspark.sql("INSERT OVERWRITE ow PARTITION (ds, region) SELECT 4, '1', 'eu'")
    finally:
        pspark.conf.unset("spark.sql.sources.partitionOverwriteMode")
        pspark.conf.unset("spark.partitionnotify.markSetDone")
    _expect(app, col, "default", "ow",
            ["ds=1/region=eu", "ds=1/region=eu", "ds=1/region=us", "ds=1/region=us"], ["ds=1"])
    # dynamic overwrite replaced only ds=1/region=eu: ds=1/region=us still has its row
    assert pspark.sql("SELECT v FROM ow WHERE region = 'us'").collect()[0][0] == 3
    # a re-announce is told apart from a duplicate: replace, and the job's revision
    bodies = [b for b in _bodies(app, "default", "ow") if b["eventType"] == "ADD_PARTITION"]
    assert [b.get("replace", False) for b in bodies] == [False, False, True, True]
    revisions = [b["revision"] for b in bodies]
    assert all(isinstance(r, int) for r in revisions), revisions
    assert revisions[0] == revisions[1] < revisions[2] < revisions[3]
    sub.close()


def test_catalog_table_is_resolved_by_name(pspark: Any, app: Any, serve: Any) -> None:
    """Registered without a location: only the catalog name found in the command's
    plan can identify it (CTAS runs as SaveAsV1TableCommand in Spark 4)."""
    app.publisher.register_table("default", "by_name", KEYS)
    col = Collector()
    sub = app.subscriber().subscribe(("default", "by_name"), col)
    _rows(pspark, [(1, "1", "us")]).write.partitionBy(*KEYS).saveAsTable("by_name")   # CTAS
    _expect(app, col, "default", "by_name", ["ds=1/region=us"])
    pspark.sql("INSERT INTO by_name PARTITION (ds='2', region='eu') SELECT 2")
    _expect(app, col, "default", "by_name", ["ds=1/region=us", "ds=2/region=eu"])
    sub.close()


def _table_location(spark: Any, table: str) -> Path:
    row = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'").collect()
    return Path(row[0][1].removeprefix("file:"))


def _bodies(app: Any, db: str, table: str) -> list[dict[str, Any]]:
    import json

    return [json.loads(e.body) for e in events_of(app, db, table)]


def test_custom_location_partition_announces_the_whole_job(
    pspark: Any, app: Any, serve: Any, tmp_path: Path
) -> None:
    """The JVM carries the partition values of a custom-location partition: the
    server does not guess them from a path that does not name them."""
    pspark.sql("CREATE TABLE cust (v INT, ds STRING, region STRING) USING parquet "
               "PARTITIONED BY (ds, region)")
    loc = _table_location(pspark, "cust")
    app.publisher.register_table("default", "cust", KEYS, location=f"file:{loc}")
    elsewhere = tmp_path / "archive" / "us-copy"
    pspark.sql(f"ALTER TABLE cust ADD PARTITION (ds='1', region='us') LOCATION '{elsewhere}'")
    col = Collector()
    sub = app.subscriber().subscribe(("default", "cust"), col)
    pspark.conf.set("spark.partitionnotify.markSetDone", "ds=1")
    try:
        pspark.sql("INSERT INTO cust PARTITION (ds='1', region) "
                   "SELECT 1, 'us' UNION ALL SELECT 2, 'eu'")
    finally:
        pspark.conf.unset("spark.partitionnotify.markSetDone")
    _expect(app, col, "default", "cust", ["ds=1/region=eu", "ds=1/region=us"], ["ds=1"])
    us = next(m for m in col.messages if m.event_type == "ADD_PARTITION"
              and m.partitions[0]["region"] == "us")
    assert us.locations == [f"file:{elsewhere}"]
    assert list(elsewhere.glob("*.parquet"))   # Spark did write there
    sub.close()


def test_write_into_one_partition_directory(pspark: Any, app: Any, serve: Any,
                                            tmp_path: Path) -> None:
    """No partitionBy: the output path itself is the partition."""
    loc = tmp_path / "orders"
    app.publisher.register_table("lake", "orders", ["datestamp", "region"],
                                 location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "orders"), col)
    pspark.createDataFrame([(1,)], "v INT").write.parquet(str(loc / "datestamp=20260102/region=us"))
    col.wait_for(1)
    assert col.adds() == ["datestamp=20260102/region=us"]
    # the same directory again (append): nothing new to announce
    pspark.createDataFrame([(2,)], "v INT").write.mode("append").parquet(
        str(loc / "datestamp=20260102/region=us"))
    pspark.createDataFrame([(3,)], "v INT").write.parquet(str(loc / "datestamp=20260103/region=us"))
    col.wait_for(2)
    assert col.adds() == ["datestamp=20260102/region=us", "datestamp=20260103/region=us"]
    assert len(events_of(app, "lake", "orders")) == 2
    sub.close()


def test_static_overwrite_announces_the_partitions_it_deleted(
    pspark: Any, app: Any, serve: Any, tmp_path: Path
) -> None:
    """Spark's static overwrite deletes every partition under the path: each one not
    written again is dropped (DROP_PARTITION), no longer present, and announced
    again when a later write brings it back."""
    loc = tmp_path / "snap"
    app.publisher.register_table("lake", "snap", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "snap"), col)
    _rows(pspark, [(1, "1", "us"), (2, "1", "eu"), (3, "2", "us")]).write.partitionBy(
        *KEYS).parquet(str(loc))
    col.wait_for(3)
    _rows(pspark, [(4, "1", "us"), (5, "3", "us")]).write.mode("overwrite").partitionBy(
        *KEYS).parquet(str(loc))
    col.wait_for(7)
    assert col.drops() == ["ds=1/region=eu", "ds=2/region=us"]
    assert col.adds() == ["ds=1/region=eu", "ds=1/region=us", "ds=1/region=us",
                          "ds=2/region=us", "ds=3/region=us"]
    # the drops come first: a consumer never sees a partition dropped after its re-add
    assert [m.event_type for m in col.messages[3:5]] == ["DROP_PARTITION"] * 2
    reader = app.subscriber()
    assert not reader.is_partition_present("lake", "snap", {"ds": "2", "region": "us"})
    assert reader.is_partition_present("lake", "snap", {"ds": "1", "region": "us"})
    _rows(pspark, [(6, "2", "us")]).write.mode("append").partitionBy(*KEYS).parquet(str(loc))
    col.wait_for(8)
    assert col.messages[-1].event_type == "ADD_PARTITION"
    assert col.messages[-1].partitions == [{"ds": "2", "region": "us"}]
    assert len(events_of(app, "lake", "snap")) == 8
    sub.close()


def test_sql_whole_table_insert_overwrite_drops(pspark: Any, app: Any, serve: Any) -> None:
    pspark.sql("CREATE TABLE wt (v INT, ds STRING, region STRING) USING parquet "
               "PARTITIONED BY (ds, region)")
    loc = _table_location(pspark, "wt")
    app.publisher.register_table("default", "wt", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("default", "wt"), col)
    pspark.sql("INSERT INTO wt SELECT 1, '1', 'us' UNION ALL SELECT 2, '1', 'eu'")
    col.wait_for(2)
    pspark.sql("INSERT OVERWRITE TABLE wt SELECT 3, '2', 'us'")
    col.wait_for(5)
    assert col.drops() == ["ds=1/region=eu", "ds=1/region=us"]
    assert col.adds() == ["ds=1/region=eu", "ds=1/region=us", "ds=2/region=us"]
    assert not app.subscriber().is_partition_present("default", "wt", {"ds": "1", "region": "us"})
    # ALTER TABLE ... DROP PARTITION: no write job, the listener tells it
    pspark.sql("INSERT INTO wt SELECT 4, '2', 'eu'")
    pspark.sql("ALTER TABLE wt DROP PARTITION (ds='2', region='us'), "
               "PARTITION (ds='2', region='eu')")
    col.wait_for(8)
    assert col.drops() == ["ds=1/region=eu", "ds=1/region=us", "ds=2/region=eu", "ds=2/region=us"]
    assert {m.reason for m in col.messages[-2:]} == {"drop"}
    pspark.sql("INSERT INTO wt SELECT 5, '2', 'us'")             # written again: announced
    col.wait_for(9)
    assert col.messages[-1].event_type == "ADD_PARTITION"
    assert app.subscriber().is_partition_present("default", "wt", "ds=2/region=us")
    assert len(events_of(app, "default", "wt")) == 9
    sub.close()


def test_hdfs_locations_match_with_and_without_the_default_port(
    pspark: Any, app: Any, serve: Any, tmp_path: Path
) -> None:
    """Spark reports the path as given (``hdfs://nn/x`` or ``hdfs://nn:8020/x``); the
    registered location may spell it the other way. ``hdfs://`` is a local-disk test
    filesystem here (tests/spark_protocol/jvm/LocalHdfs.java)."""
    hconf = pspark.sparkContext._jsc.hadoopConfiguration()
    hconf.set("fs.hdfs.impl", "io.partitionnotify.test.LocalHdfs")
    ported, bare = tmp_path / "ported", tmp_path / "bare"
    app.publisher.register_table("lake", "ported", KEYS, location=f"hdfs://localhost:8020{ported}")
    app.publisher.register_table("lake", "bare", KEYS, location=f"hdfs://LocalHost{bare}")
    cols = {t: Collector() for t in ("ported", "bare")}
    subs = [app.subscriber().subscribe(("lake", t), c) for t, c in cols.items()]
    try:
        _rows(pspark, [(1, "1", "us")]).write.partitionBy(*KEYS).parquet(
            f"hdfs://localhost{ported}")
        _rows(pspark, [(2, "2", "eu")]).write.partitionBy(*KEYS).parquet(
            f"hdfs://localhost:8020{bare}")
        _expect(app, cols["ported"], "lake", "ported", ["ds=1/region=us"])
        _expect(app, cols["bare"], "lake", "bare", ["ds=2/region=eu"])
        assert cols["bare"].messages[0].locations[0].startswith("hdfs://localhost:8020/")
        assert list(ported.glob("ds=1/region=us/*.parquet"))   # the test filesystem is local
    finally:
        hconf.unset("fs.hdfs.impl")
        for s in subs:
            s.close()
