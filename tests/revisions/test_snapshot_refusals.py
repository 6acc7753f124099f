"""A SNAPSHOT dataset's write that Spark refuses is our error of one line, not a JVM trace.

Spark's exception stays the ``__cause__``; the run fails, its files are gone
and the pointer does not move.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from partition_notify.revisions.datasets import FAILED, SnapshotDatasets
from partition_notify.writers.snapshot_dataset import SnapshotDataset

from partition_notify.core import errors
from tests.revisions.test_snapshot_dataset import NAME, frame, rows

pytestmark = pytest.mark.spark


def assert_one_line(exc: BaseException) -> None:
    assert "\n" not in str(exc) and "\tat " not in str(exc), str(exc)
    assert exc.__cause__ is not None, "Spark's exception is kept as the cause"


def test_a_location_spark_cannot_write_names_the_dataset_and_path(
    spark: Any, datasets: SnapshotDatasets, tmp_path: Path
) -> None:
    # Root ignores permissions: a regular file where a directory must be refuses the same way.
    (tmp_path / "afile").write_text("not a directory")
    ds = SnapshotDataset.define(datasets, NAME, str(tmp_path / "afile" / "customers"))
    # Refused before Spark runs the job (a probe in the location, tests/spark/
    # test_permission_denied.py): the expectation is said, not only Hadoop's reason.
    with pytest.raises(errors.ConfigurationError) as caught:
        ds.write(frame(spark, {"x": 1}))
    text = str(caught.value)
    assert NAME in text and "afile/customers" in text, text
    assert "not a directory" in text.lower(), "Hadoop's reason"
    assert "expected a directory this process may create and write files in" in text
    assert_one_line(caught.value)
    assert ds.current_version() is None
    assert [v.state for v in ds.versions()] == [FAILED]


def test_a_failing_job_is_our_error_and_the_next_run_works(
    spark: Any, datasets: SnapshotDatasets, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    ds = SnapshotDataset.define(datasets, NAME, str(tmp_path / "customers"))
    first = ds.write(frame(spark, {"x": 1}))

    @F.udf("long")
    def boom(value: int) -> int:
        raise RuntimeError("task failure injected by the test")

    with pytest.raises(errors.SparkWriteError) as caught:
        ds.write(frame(spark, {"x": 2}).withColumn("value", boom("value")))
    assert "task failure injected by the test" in str(caught.value)
    assert_one_line(caught.value)
    assert ds.current_version() == first.version
    assert rows(ds.read(spark)) == {"x": 1}
    assert ds.write(frame(spark, {"x": 3})).current
    assert rows(ds.read(spark)) == {"x": 3}
