"""One local SparkSession for the whole test session (starting Spark costs seconds).

Spark is a required service: in CI (``CI=true``) a Spark that cannot start
fails the tests; on a laptop they are skipped with the reason.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require


@pytest.fixture(scope="session")
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


class Collector:
    """Messages of one subscription, with what was on disk when each arrived."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.files_at_receipt: dict[str, int] = {}
        self._cond = threading.Condition()

    def __call__(self, msg: Any) -> None:
        for loc in getattr(msg, "locations", []) or []:
            self.files_at_receipt[loc] = count_data_files(loc)
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def wait_for(self, n: int, timeout: float = 30.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self.messages)


def local_path(location: str) -> Path:
    assert location.startswith("file:"), location
    return Path(location[len("file:"):])


def count_data_files(location: str) -> int:
    """Parquet files in a partition directory (tests only: the table is on local disk)."""
    return len(list(local_path(location).glob("*.parquet")))
