"""SNAPSHOT datasets with a real local Spark session."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from partition_notify.revisions.datasets import COMPLETE, FAILED, WRITING, SnapshotDatasets
from partition_notify.writers.snapshot_dataset import SnapshotDataset, expire_versions

from partition_notify.core.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    ValidationError,
)
from tests.support.clock import FakeClock

pytestmark = pytest.mark.spark
NAME = "warehouse.customers"


def rows(df: Any) -> dict[str, int]:
    return {r["key"]: r["value"] for r in df.collect()}


def frame(spark: Any, data: dict[str, int]) -> Any:
    return spark.createDataFrame(sorted(data.items()), "key string, value long")


@pytest.fixture
def ds(datasets: SnapshotDatasets, tmp_path: Path) -> SnapshotDataset:
    return SnapshotDataset.define(datasets, NAME, str(tmp_path / "customers"), min_versions=2)


def test_seed_example_reads_back_exactly(spark: Any, ds: SnapshotDataset) -> None:
    first = ds.write(frame(spark, {"x": 1, "y": 2, "z": 3}))
    assert first.current and first.state == COMPLETE
    assert rows(ds.read(spark)) == {"x": 1, "y": 2, "z": 3}

    # x unchanged, z updated, y deleted at the source.
    second = ds.write(frame(spark, {"x": 1, "z": 4}))
    assert second.version > first.version
    assert ds.current_version() == second.version
    assert rows(ds.read(spark)) == {"x": 1, "z": 4}
    assert rows(ds.read(spark, version=first.version)) == {"x": 1, "y": 2, "z": 3}
    assert Path(second.path).name == f"version={second.version}"


def test_readers_see_the_old_version_until_the_commit(spark: Any, ds: SnapshotDataset) -> None:
    ds.write(frame(spark, {"x": 1, "y": 2}))
    before = ds.read(spark)
    run = ds.start()
    run.write(frame(spark, {"x": 10}))
    assert Path(run.path, "_SUCCESS").exists()  # fully written, not yet current
    assert rows(ds.read(spark)) == {"x": 1, "y": 2}
    run.commit()
    assert rows(ds.read(spark)) == {"x": 10}
    # A DataFrame resolved before the flip keeps reading the version it resolved.
    assert rows(before) == {"x": 1, "y": 2}


def test_failing_spark_job_leaves_the_pointer_and_no_files(
    spark: Any, ds: SnapshotDataset, datasets: SnapshotDatasets
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    good = ds.write(frame(spark, {"x": 1}))

    def fail_on_7(v: int) -> int:
        if v == 7:
            raise ValueError("source row 7 is corrupt")
        return v

    bad = spark.range(0, 20, numPartitions=2).select(
        F.col("id").cast("string").alias("key"), F.udf(fail_on_7, LongType())("id").alias("value")
    )
    with pytest.raises(Exception, match="source row 7 is corrupt"):
        ds.write(bad)

    assert ds.current_version() == good.version
    assert rows(ds.read(spark)) == {"x": 1}
    failed = [v for v in datasets.versions(NAME) if v.state == FAILED]
    assert len(failed) == 1 and "corrupt" in (failed[0].error or "")
    assert not Path(failed[0].path).exists()
    snap = datasets.revisions.create_snapshot(NAME)
    assert failed[0].version in snap.aborted


def test_killed_writer_leaves_readers_on_the_old_version(
    spark: Any, ds: SnapshotDataset, datasets: SnapshotDatasets, store_url: str, clock: FakeClock
) -> None:
    good = ds.write(frame(spark, {"x": 1, "y": 2}))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.revisions.kill_worker", store_url, NAME],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        # The worker's JVM and Python workers, if any outlived it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, f"worker did not die by SIGKILL: {out}\n{err}"
    assert "UNEXPECTED" not in out
    version, path = out.split("RUN ", 1)[1].split()[:2]

    assert ds.current_version() == good.version
    assert rows(ds.read(spark)) == {"x": 1, "y": 2}
    assert Path(path).exists(), "the killed job should have left partial files"
    states = {v.version: v.state for v in datasets.versions(NAME)}
    assert states[int(version)] == WRITING

    # Its transaction is still within its keep-alive: retention leaves it alone...
    clock.now = time.time()
    assert expire_versions(datasets, spark=spark) == []
    assert Path(path).exists()
    # ...and removes it once the transaction has expired (counts as aborted).
    clock.now = time.time() + 61
    assert expire_versions(datasets, spark=spark) == [(NAME, int(version))]
    assert not Path(path).exists()
    assert rows(ds.read(spark)) == {"x": 1, "y": 2}


def test_a_late_run_never_moves_the_pointer_back(spark: Any, ds: SnapshotDataset) -> None:
    older, newer = ds.start(), ds.start()
    older.write(frame(spark, {"old": 1}))
    newer.write(frame(spark, {"new": 2}))
    assert newer.commit().current
    late = older.commit()
    assert late.state == COMPLETE and not late.current and late.superseded_at is not None
    assert rows(ds.read(spark)) == {"new": 2}


def test_retention_keeps_min_versions_even_after_the_ttl(
    spark: Any, datasets: SnapshotDatasets, tmp_path: Path, clock: FakeClock
) -> None:
    ds = SnapshotDataset.define(datasets, NAME, str(tmp_path / "d"), ttl_seconds=100,
                                min_versions=2)
    written = []
    for i in range(4):
        written.append(ds.write(frame(spark, {"k": i})))
        clock.advance(1000)
    v = [w.version for w in written]
    # Everything is far past the TTL: only the newest two survive.
    assert sorted(expire_versions(datasets, spark=spark)) == [(NAME, v[0]), (NAME, v[1])]
    assert [x.version for x in ds.versions()] == [v[3], v[2]]
    assert not Path(written[0].path).exists() and not Path(written[1].path).exists()
    assert rows(ds.read(spark, version=v[2])) == {"k": 2}

    # The runs stop for a long time: TTL alone would empty the dataset; min_versions won't.
    clock.advance(10 * 365 * 86400)
    assert expire_versions(datasets, spark=spark) == []
    assert rows(ds.read(spark)) == {"k": 3}


def test_ttl_keeps_recently_superseded_versions(
    spark: Any, datasets: SnapshotDatasets, tmp_path: Path, clock: FakeClock
) -> None:
    ds = SnapshotDataset.define(datasets, NAME, str(tmp_path / "d"), ttl_seconds=100,
                                min_versions=1)
    a = ds.write(frame(spark, {"k": 1}))
    clock.advance(1000)
    b = ds.write(frame(spark, {"k": 2}))  # supersedes a now: a's grace starts here
    clock.advance(50)
    assert expire_versions(datasets, spark=spark) == []
    assert rows(ds.read(spark, version=a.version)) == {"k": 1}  # a reader still on a is safe
    clock.advance(51)
    assert expire_versions(datasets, spark=spark) == [(NAME, a.version)]
    assert [x.version for x in ds.versions()] == [b.version]


def test_without_ttl_only_min_versions_are_kept(
    spark: Any, datasets: SnapshotDatasets, tmp_path: Path
) -> None:
    ds = SnapshotDataset.define(datasets, NAME, str(tmp_path / "d"), min_versions=1)
    a = ds.write(frame(spark, {"k": 1}))
    b = ds.write(frame(spark, {"k": 2}))
    assert expire_versions(datasets) == [(NAME, a.version)]  # local paths: no Spark needed
    assert [x.version for x in ds.versions()] == [b.version]


def test_new_version_is_announced(spark: Any, app: Any, tmp_path: Path) -> None:
    ds = SnapshotDataset.define(app, NAME, str(tmp_path / "d"))  # announces through app
    ds.register()
    v1 = ds.write(frame(spark, {"x": 1}))
    v2 = ds.write(frame(spark, {"x": 2}))
    assert v1.notify_error is None and v2.notify_error is None
    info = app.store.catalog.get_table("warehouse", "customers")
    parts = {p.spec: p for p in app.store.catalog.partitions(info)}
    assert set(parts) == {f"version={v1.version}", f"version={v2.version}"}
    assert parts[f"version={v2.version}"].revision == v2.version
    assert parts[f"version={v2.version}"].location == v2.path
    done = app.subscriber().wait_for_set_done(
        "warehouse", "customers", {"version": str(v2.version)}, timeout=30
    )
    assert done.revision == v2.version


def test_register_without_a_publisher_says_so(datasets: SnapshotDatasets, tmp_path: Path) -> None:
    ds = SnapshotDataset.define(datasets, NAME, str(tmp_path / "d"))
    with pytest.raises(ConfigurationError, match="publisher="):
        ds.register()


def test_definition_rules(datasets: SnapshotDatasets, tmp_path: Path) -> None:
    SnapshotDataset.define(datasets, NAME, str(tmp_path / "a"))
    with pytest.raises(ConflictError, match="cannot move"):
        SnapshotDataset.define(datasets, NAME, str(tmp_path / "b"))
    with pytest.raises(ValidationError, match="min_versions"):
        SnapshotDataset.define(datasets, NAME, str(tmp_path / "a"), ttl_seconds=10, min_versions=0)
    # inf and 1e300 were kept before session 18, and `dataset describe` printed
    # "ttlSeconds": Infinity, which is not JSON.
    for bad in (-1, 0, float("nan"), float("inf"), 1e300, "60"):
        with pytest.raises(ValidationError, match="ttl_seconds"):
            SnapshotDataset.define(datasets, NAME, str(tmp_path / "a"), ttl_seconds=bad)
    with pytest.raises(NotFoundError, match="not defined"):
        SnapshotDataset.open(datasets, "warehouse.other")
    with pytest.raises(NotFoundError, match="no complete version"):
        SnapshotDataset.open(datasets, NAME).resolve()


@pytest.mark.parametrize("location", ["relpath", "data/customers", "./c", "../c"])
def test_a_relative_location_is_refused(datasets: SnapshotDatasets, location: str) -> None:
    # It would resolve against each process's own working directory: the writer's
    # Spark JVM writes one place, `serve` expires (deletes) versions in another.
    with pytest.raises(ValidationError, match="absolute"):
        SnapshotDataset.define(datasets, NAME, location)
    with pytest.raises(NotFoundError):
        SnapshotDataset.open(datasets, NAME)


def test_absolute_paths_and_uris_are_locations(datasets: SnapshotDatasets, tmp_path: Path) -> None:
    for i, location in enumerate([str(tmp_path / "a"), f"file:{tmp_path}/b",
                                  "hdfs://nn:8020/data/c", "s3a://bucket/d"]):
        assert SnapshotDataset.define(datasets, f"db.t{i}", location).location == location


@pytest.mark.parametrize("df", [None, [("a", 1)], "select 1"])
def test_writing_something_that_is_not_a_dataframe_starts_no_run(ds: SnapshotDataset,
                                                                  df: Any) -> None:
    with pytest.raises(ValidationError, match="DataFrame"):
        ds.write(df)
    assert ds.versions() == [], "no failed version recorded for an argument error"


@pytest.mark.parametrize("name, expected", [
    ("bad name", "<db>.<table>"),  # was defined; its first version then failed to announce
    ("customers", "<db>.<table>"),
    ("db.", "<db>.<table>"),
    ("db.t-1", "illegal character"),
    ("Warehouse.Customers", "spelt warehouse.customers"),
])
def test_a_dataset_name_that_cannot_be_announced_is_refused_at_define(
        datasets: SnapshotDatasets, tmp_path: Path, name: str, expected: str) -> None:
    # A version becomes current, then its announcement on <db>.<table> fails: the
    # name must be a table name the catalog accepts, spelt as the catalog spells it.
    with pytest.raises(ValidationError, match=re.escape(expected)):
        SnapshotDataset.define(datasets, name, str(tmp_path / "a"))
    assert datasets.names() == []


def test_the_cli_refuses_a_dataset_name_in_one_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    out = subprocess.run([sys.executable, "-m", "partition_notify.cli", "--store-url", store,
                          "dataset", "define", "bad name", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "'bad name'" in out.stderr
