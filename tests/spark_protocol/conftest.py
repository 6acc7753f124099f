"""Real local Spark with the commit protocol jar, a real ``serve`` process, a subscriber.

The SparkSession here is this package's own (its commit protocol is a
session-wide setting), so run these files one at a time, not with tests/spark.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.support import HttpServe
from tests.spark_protocol.helpers import (
    DEAD_URL,
    JAR,
    ROOT,
    finish_deliveries,
    spark_flags,
    start_serve,
)
from tests.support.ci import require
from tests.support.markers import uses

#: Until a test's serve is up, the driver gives up on (the dead) serve after this.
DEAD_TIMEOUT_MS = 2000


def _driver_default_timeout_ms() -> int:
    """Settings.DEFAULT_TIMEOUT_MS in writers/jvm: read from the source, not copied."""
    src = ROOT / "writers" / "jvm" / "src" / "io" / "partitionnotify" / "spark" / "Settings.java"
    found = re.search(r"DEFAULT_TIMEOUT_MS = ([\d_]+);", src.read_text())
    assert found, f"no DEFAULT_TIMEOUT_MS in {src}"
    return int(found.group(1).replace("_", ""))


DEFAULT_TIMEOUT_MS = _driver_default_timeout_ms()


@pytest.fixture(scope="module")
def jar() -> Path:
    # Built against the core venv's PySpark 4 whichever venv runs the tests: one jar serves
    # Spark 3.5 and 4 (the .venv-spark35 run proves it on 3.5).
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_jvm.sh")],
        env={**os.environ, "PYTHON": str(ROOT / ".venv" / "bin" / "python")},
        capture_output=True, text=True, timeout=300,
    )
    require(built.returncode == 0 and JAR.is_file(), f"jar did not build: {built.stderr[-500:]}")
    return JAR


@pytest.fixture(scope="session")
def test_jar() -> Path:
    """tests/spark_protocol/jvm (a local-disk ``hdfs://`` filesystem), for matching tests.

    A fixed path: the first session of the process puts it on the driver's class path."""
    out = ROOT / "build" / "test-jars" / "partition-notify-spark-tests.jar"
    src = sorted((ROOT / "tests" / "spark_protocol" / "jvm").rglob("*.java"))
    if out.is_file() and all(s.stat().st_mtime < out.stat().st_mtime for s in src):
        return out
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    classes = out.parent / "classes"
    built = subprocess.run(
        ["javac", "--release", "17", "-nowarn", "-cp", f"{jars}/*", "-d", str(classes),
         *map(str, src)], capture_output=True, text=True, timeout=300)
    require(built.returncode == 0, f"test jar did not build: {built.stderr[-500:]}")
    subprocess.run(["jar", "--create", "--file", str(out), "-C", str(classes), "."],
                   check=True, timeout=120)
    return out


@pytest.fixture(scope="module")
@uses("spark")
def pspark(jar: Path, test_jar: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        require(False, f"pyspark is not installed: {exc}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warehouse = tmp_path_factory.mktemp("warehouse")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("partition-notify-protocol-tests")
        .config("spark.jars", f"{jar},{test_jar}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        # Until a test's serve is up, nothing listens: delivery would go to the spool.
        .config("spark.partitionnotify.serveUrl", DEAD_URL)
        .config("spark.partitionnotify.timeoutMs", str(DEAD_TIMEOUT_MS))
    )
    for k, v in spark_flags().items():
        builder = builder.config(k, v)
    import pyspark

    if pyspark.__version__.startswith("3."):
        # PySpark 3.5 hands a reused Python worker whose socket a failed or killed UDF task
        # closed to the next task ("SocketException: Socket is closed" in PythonRunner),
        # which fails the writes after test_failures' failing and cancelled tasks.
        builder = builder.config("spark.python.worker.reuse", "false")
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # no Java, bad JAVA_HOME, ...
        require(False, f"Spark did not start: {exc}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def mapp(store_url: str, tmp_path: Path) -> Iterator[Any]:
    """An app (SQLite and PostgreSQL) with lake.events (ds, region) registered at a
    local location: manifests applied without Spark."""
    from partition_notify.app import build_app

    a = build_app(store_url=store_url, transport_url="embedded://")
    a.publisher.register_table("lake", "events", ["ds", "region"],
                               location=f"file://{tmp_path}/events/")
    yield a
    a.close()


@pytest.fixture
def store_file(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/store.db"


@pytest.fixture
def app(store_file: str) -> Iterator[Any]:
    from partition_notify.app import build_app

    a = build_app(store_url=store_file, transport_url="embedded://")
    yield a
    a.close()


@pytest.fixture
def writer_token(app: Any) -> str:
    from partition_notify.http.store import HttpStore

    return str(HttpStore(app.store).create_token("spark-jobs", "write")[1])


@pytest.fixture
def serve(pspark: Any, store_file: str, writer_token: str, tmp_path: Path) -> Iterator[HttpServe]:
    """A real serve (HTTP API + manifest pick-up); the session posts to it."""
    s = start_serve(store_file, tmp_path / "serve.log")
    pspark.conf.set("spark.partitionnotify.serveUrl", s.base)
    pspark.conf.set("spark.partitionnotify.token", writer_token)
    # A spool serve does not scan: a failed POST cannot hide behind the fallback.
    unscanned = tmp_path / "unscanned-spool"
    pspark.conf.set("spark.partitionnotify.spoolDir", str(unscanned))
    # The product's deadline, not the session's short one (meant for a dead serve): on a
    # loaded CI machine serve took over 2 s to answer a commit it had applied, and the
    # driver spooled a duplicate (test_delivery: a slow answer within the deadline).
    pspark.conf.set("spark.partitionnotify.timeoutMs", str(DEFAULT_TIMEOUT_MS))
    yield s
    finish_deliveries(pspark)
    pspark.conf.set("spark.partitionnotify.timeoutMs", str(DEAD_TIMEOUT_MS))
    pspark.conf.set("spark.partitionnotify.serveUrl", DEAD_URL)
    pspark.conf.unset("spark.partitionnotify.token")
    pspark.conf.unset("spark.partitionnotify.spoolDir")
    s.stop()
    assert not unscanned.exists(), f"a POST failed: {sorted(unscanned.iterdir())}"
