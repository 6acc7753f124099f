"""Fixtures of the revision-manager and SNAPSHOT-dataset tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from partition_notify.revisions import RevisionManager
from partition_notify.revisions.datasets import SnapshotDatasets
from partition_notify.store import Store

from tests.support.ci import require
from tests.support.clock import FakeClock
from tests.support.markers import uses


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(store_url: str, clock: FakeClock) -> Iterator[Store]:
    s = Store.open(store_url, clock=clock)
    yield s
    s.close()


@pytest.fixture
def rm(store: Store, clock: FakeClock) -> RevisionManager:
    return RevisionManager(store, clock=clock)


@pytest.fixture
def datasets(rm: RevisionManager) -> SnapshotDatasets:
    """SNAPSHOT datasets over ``rm`` (what ``app.datasets`` is, on the test's clock)."""
    return SnapshotDatasets(rm)


@pytest.fixture(scope="session")
@uses("spark")
def spark() -> Iterator[Any]:
    """The one local Spark session of the run.

    Named like the Spark tests' fixture and built with ``getOrCreate`` so
    that both get the same JVM session when run together.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - the venv has pyspark
        require(False, f"pyspark is not installed: {exc}")
        raise
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("partition-notify-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    yield session
    session.stop()
