"""When Spark itself refuses a write, the user gets our error, not a JVM trace.

Each refusal names the argument, its value (cut short) and what was
expected, is raised before Spark runs where that is cheap (the format, the
location), keeps Spark's exception as ``__cause__`` and says Spark's one
line, not its stack. Nothing is announced, no manifest or staging stays
behind, and the next write to the table works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from partition_notify.core import errors
from partition_notify.core.errors import (
    ConfigurationError,
    InvalidSpecError,
    PartitionNotifyError,
    ValidationError,
)
from tests.spark.test_writers import frame, path_writer, rows_for, staging_entries

pytestmark = pytest.mark.spark


def table_dir(tmp_path: Path) -> Path:
    return tmp_path / "warehouse" / "orders"


def assert_nothing_left(app: Any, tmp_path: Path) -> None:
    assert app.store.log.max_event_id() == 0, "nothing logged, nothing announced"
    assert app.revisions.running_transactions("sales.orders") == []
    assert staging_entries(f"file:{table_dir(tmp_path)}") == [], "no staging, no manifest"
    assert not list(table_dir(tmp_path).glob("datestamp=*")), "no partition became visible"


def assert_one_line(exc: BaseException) -> None:
    text = str(exc)
    assert "\n" not in text and "\tat " not in text, text
    assert len(text) < 1200, text
    assert exc.__cause__ is not None, "Spark's exception is kept as the cause"


def test_an_unknown_format_is_refused_before_spark_runs(spark, spark_app, tmp_path):
    bad = path_writer(spark_app, tmp_path, format="parquett")
    df = frame(spark, rows_for(["20110228"], ["us"]))
    with pytest.raises(ValidationError) as caught:
        bad.write(df)
    text = str(caught.value)
    assert (
        "format" in text and "'parquett'" in text and "parquet" in text.replace("parquett", "")
    ), text
    assert "DATA_SOURCE_NOT_FOUND" in text or "data source" in text, "Spark's one line"
    assert_one_line(caught.value)
    assert not table_dir(tmp_path).exists(), "Spark never ran: the table was not touched"
    assert_nothing_left(spark_app, tmp_path)
    result = path_writer(spark_app, tmp_path).write(df)
    assert len(result.announced) == 1


@pytest.mark.parametrize(
    "value", ["x" * 260, "é" * 130, "/" * 90], ids=["ascii", "two-byte", "escaped"]
)
def test_a_partition_value_too_long_for_a_directory_name_is_named(
    spark, spark_app, tmp_path, value
):
    # region=<value> must fit one path component (255 bytes on ext4, HDFS, APFS):
    # 130 two-byte letters are 260 bytes, 90 slashes escape to 270 (%2F each).
    writer = path_writer(spark_app, tmp_path)
    rows = rows_for(["20110228"], ["us"]) + rows_for(["20110228"], [value])
    with pytest.raises(InvalidSpecError) as caught:
        writer.write(frame(spark, rows), mark_set_done="datestamp=20110228")
    text = str(caught.value)
    assert "region" in text and "255" in text, text
    assert repr(value[:20])[1:-1] in text, "the value, cut short"
    assert value not in text
    assert_one_line(caught.value)
    assert_nothing_left(spark_app, tmp_path)
    assert spark_app.subscriber().set_done_history("sales", "orders") == []
    result = writer.write(frame(spark, rows_for(["20110228"], ["us", "x" * 240])))
    assert len(result.announced) == 2, "a value that fits is written"


def test_a_location_that_cannot_be_written_is_named_before_spark_runs(spark, spark_app, tmp_path):
    # Root ignores permissions, so the location sits below a regular file:
    # the file system refuses to make the directory, as it would without permission.
    (tmp_path / "afile").write_text("not a directory")
    where = str(tmp_path / "afile" / "orders")
    from partition_notify.writers import NotifyingWriter

    writer = NotifyingWriter(
        spark_app, "sales", "orders", partition_keys=["datestamp", "region"], location=where
    )
    with pytest.raises(ConfigurationError) as caught:
        writer.write(frame(spark, rows_for(["20110228"], ["us"])))
    text = str(caught.value)
    assert "location" in text and "afile/orders" in text and "sales.orders" in text, text
    assert "not a directory" in text.lower(), "Spark's (Hadoop's) one line"
    assert_one_line(caught.value)
    assert spark_app.store.log.max_event_id() == 0
    assert spark_app.revisions.running_transactions("sales.orders") == []
    assert (tmp_path / "afile").read_text() == "not a directory"


def test_a_failing_job_is_our_error_with_sparks_one_line(spark, spark_app, tmp_path):
    from pyspark.sql import functions as F

    writer = path_writer(spark_app, tmp_path)

    @F.udf("string")
    def boom(region: str | None) -> str | None:
        raise RuntimeError("task failure injected by the test")

    df = frame(spark, rows_for(["20110301"], ["us"])).withColumn("region", boom("region"))
    with pytest.raises(errors.SparkWriteError) as caught:
        writer.write(df, mark_set_done="datestamp=20110301")
    text = str(caught.value)
    assert "sales.orders" in text and "task failure injected by the test" in text, text
    assert "nothing was published" in text
    assert_one_line(caught.value)
    assert isinstance(caught.value, PartitionNotifyError)
    assert_nothing_left(spark_app, tmp_path)
    result = writer.write(frame(spark, rows_for(["20110301"], ["us"])))
    assert len(result.announced) == 1
