"""Real local Spark with the commit protocol jar, a real ``serve`` process, a subscriber.

The SparkSession here is this package's own (its commit protocol is a
session-wide setting), so run these files one at a time, not with tests/spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.http.support import HttpServe

ROOT = Path(__file__).resolve().parents[2]
JAR = ROOT / "writers" / "jvm" / "partition-notify-spark.jar"
#: Nothing listens on port 9 (discard) here: a POST fails at once.
DEAD_URL = "http://127.0.0.1:9"


def spark_flags(serve_url: str | None = None) -> dict[str, str]:
    from partition_notify.cli_spark import spark_settings

    return spark_settings(serve_url, None)


@pytest.fixture(scope="module")
def jar() -> Path:
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_jvm.sh")],
        env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=300,
    )
    require(built.returncode == 0 and JAR.is_file(), f"jar did not build: {built.stderr[-500:]}")
    return JAR


@pytest.fixture(scope="module")
def pspark(jar: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        require(False, f"pyspark is not installed: {exc}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warehouse = tmp_path_factory.mktemp("warehouse")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("partition-notify-protocol-tests")
        .config("spark.jars", str(jar))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        # Until a test's serve is up, nothing listens: delivery would go to the spool.
        .config("spark.partitionnotify.serveUrl", DEAD_URL)
        .config("spark.partitionnotify.timeoutMs", "2000")
    )
    for k, v in spark_flags().items():
        builder = builder.config(k, v)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # no Java, bad JAVA_HOME, ...
        require(False, f"Spark did not start: {exc}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


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
    from store.http_store import HttpStore

    return str(HttpStore(app.store).create_token("spark-jobs", "write")[1])


def start_serve(store_url: str, log: Path) -> HttpServe:
    return HttpServe(store_url, log, env_extra={"PN_SPARK_SPOOL_INTERVAL_SECONDS": "0.2"}).start()


@pytest.fixture
def serve(pspark: Any, store_file: str, writer_token: str, tmp_path: Path) -> Iterator[HttpServe]:
    """A real serve (HTTP API + manifest pick-up); the session posts to it."""
    s = start_serve(store_file, tmp_path / "serve.log")
    pspark.conf.set("spark.partitionnotify.serveUrl", s.base)
    pspark.conf.set("spark.partitionnotify.token", writer_token)
    # A spool serve does not scan: a failed POST cannot hide behind the fallback.
    unscanned = tmp_path / "unscanned-spool"
    pspark.conf.set("spark.partitionnotify.spoolDir", str(unscanned))
    yield s
    pspark.conf.set("spark.partitionnotify.serveUrl", DEAD_URL)
    pspark.conf.unset("spark.partitionnotify.token")
    pspark.conf.unset("spark.partitionnotify.spoolDir")
    s.stop()
    assert not unscanned.exists(), f"a POST failed: {sorted(unscanned.iterdir())}"


class Collector:
    """Messages of a subscription; ``on_add`` runs for each add-partition as it arrives."""

    def __init__(self, on_add: Any = None) -> None:
        self.messages: list[Any] = []
        self.on_add = on_add
        self.seen_by_on_add: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, msg: Any) -> None:
        if self.on_add is not None and msg.event_type == "ADD_PARTITION":
            self.seen_by_on_add.append(self.on_add(msg))
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def wait_for(self, n: int, timeout: float = 60.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self.messages)

    def adds(self) -> list[str]:
        return sorted(
            "/".join(f"{k}={v}" for k, v in m.partitions[0].items())
            for m in self.messages if m.event_type == "ADD_PARTITION"
        )

    def dones(self) -> list[str]:
        return [m.spec for m in self.messages
                if m.event_type == "PARTITION_DONE"]


def events_of(app: Any, db: str, table: str) -> list[Any]:
    """Every event logged for a table (the store is the ground truth of 'exactly once')."""
    topic = app.publisher.table(db, table).topic
    return [e for e in app.store.log.events_after(0, limit=100_000) if e.topic == topic]


def spool_files(location: Path) -> list[Path]:
    d = location / "_partition_notify"
    return sorted(d.glob("*.json")) if d.exists() else []


def wait_until(pred: Any, timeout: float = 60.0, what: str = "condition") -> None:
    """For file-system state only (no event to wait on): bounded, fine-grained polling."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)
