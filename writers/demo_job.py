"""The Spark job of the README demo: two writes, each marking a set done on success."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from partition_notify.writers.spark_errors import is_spark_error, spark_reason

from partition_notify.core.errors import ConfigurationError

if TYPE_CHECKING:
    from partition_notify.writers.writer import HasPublisher
    from pyspark.sql import DataFrame, SparkSession


def write_demo_partitions(
    app: HasPublisher,
    db: str,
    table: str,
    day: str,
    regions: Sequence[str],
    location: str,
    progress: Callable[[str], None],
) -> None:
    from partition_notify.writers import NotifyingWriter

    spark = _local_spark()
    writer = NotifyingWriter(
        app, db, table, location=location, partition_keys=["datestamp", "region"], progress=True
    )

    def orders(for_regions: Sequence[str]) -> DataFrame:
        rows = [(i, float(i % 97), day, r) for r in for_regions for i in range(1000)]
        return spark.createDataFrame(
            rows, "order_id long, amount double, datestamp string, region string"
        )

    first, rest = regions[0], list(regions[1:])
    progress(
        f"Spark job 1 writes region={first}, set-done datestamp={day}/region={first} on success"
    )
    result = writer.write(orders([first]), mark_set_done=f"datestamp={day}/region={first}")
    progress(f"job 1 committed: {len(result.announced)} partition(s) announced")
    progress(f"Spark job 2 writes region={','.join(rest)}, set-done datestamp={day} on success")
    result = writer.write(orders(rest), mark_set_done=f"datestamp={day}")
    progress(f"job 2 committed: {len(result.announced)} partition(s) announced")
    count = spark.read.parquet(location).where(f"datestamp = '{day}'").count()
    progress(f"readers see {count} rows for datestamp={day}")
    spark.stop()


def _local_spark() -> SparkSession:
    """A quiet SparkSession: local[2] when run with python, the cluster under spark-submit."""
    import os
    import sys

    try:
        from pyspark import SparkConf
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise ConfigurationError(
            f"the demo's Spark job needs PySpark ({exc}): pip install 'partition-notify[spark]', "
            "or run the demo with --no-spark"
        ) from None
    builder = (
        SparkSession.builder.appName("partition-notify-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # our progress line instead
        .config("spark.log.level", "ERROR")
        .config("spark.sql.shuffle.partitions", "4")
    )
    if not SparkConf().contains("spark.master"):
        # Run directly with python: local Spark. Under spark-submit, its --master wins.
        builder = builder.master("local[2]")
    # Python workers must use this interpreter (it has pyarrow), not PATH's python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: we start the JVM
        _check_java()
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        if not is_spark_error(exc):
            raise
        raise ConfigurationError(
            f"local Spark did not start ({spark_reason(exc)}); or run the demo with --no-spark"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _check_java() -> None:
    """Spark's launcher finds Java as this does; without it, it prints shell errors and
    PySpark a traceback, after seconds. Say so at once, in one line."""
    import os
    import shutil
    from pathlib import Path

    home = os.environ.get("JAVA_HOME")
    if home and not os.access(Path(home) / "bin" / "java", os.X_OK):
        problem = f"JAVA_HOME={home!r:.200} has no bin/java"
    elif not home and shutil.which("java") is None:
        problem = "no java on PATH and JAVA_HOME is not set"
    else:
        return
    raise ConfigurationError(
        f"the demo's Spark job needs Java 17 or later: {problem}; set JAVA_HOME to a JDK, "
        "or run the demo with --no-spark"
    )
