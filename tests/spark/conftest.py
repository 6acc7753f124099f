"""One local SparkSession for the whole test session (starting Spark costs seconds).

Spark is a required service: in CI (``CI=true``) a Spark that cannot start
fails the tests; on a laptop they are skipped with the reason.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ci import require
from tests.support.markers import uses


@pytest.fixture(scope="session")
@uses("spark")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        require(False, f"pyspark is not installed: {exc}")
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # Python workers (UDFs in the tests) must run this interpreter, not "python3".
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        session = (
            SparkSession.builder.master("local[2]")
            .appName("partition-notify-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.warehouse.dir", str(warehouse))
            .getOrCreate()
        )
    except Exception as exc:  # the JVM failed to start: no Java, bad JAVA_HOME, ...
        require(False, f"Spark did not start: {exc}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spark_app(tmp_path: Path) -> Iterator[Any]:
    """An embedded-transport app on a fresh SQLite store."""
    from partition_notify.app import build_app

    app = build_app(store_url=f"sqlite:///{tmp_path}/store.db", transport_url="embedded://")
    yield app
    app.close()
