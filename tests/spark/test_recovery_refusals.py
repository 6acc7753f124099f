"""Refused recoveries and refused settles of transactional writes (real Spark, real files,
SQLite and PostgreSQL stores).

An expired overwrite that placed and that a later write put files into is never
committed above it (``ExpiredOverwriteOvertakenError``, revisions/adoption.py). These
tests pin what the writer and recovery tell the caller then, and that the other stale
writes under the location are still completed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from partition_notify.publisher import Publisher
from partition_notify.revisions.repositories import RevisionUnitOfWork

from partition_notify.app import App, build_app
from partition_notify.core.errors import ExpiredOverwriteOvertakenError
from tests.spark.test_recovery import StoreDownPublisher, age_locks, logged, writer_for
from tests.spark.test_writers import frame, path_writer, rows_for
from tests.support.clock import FakeClock

pytestmark = pytest.mark.spark

T = "sales.orders"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


@pytest.fixture
def app(store_url: str, clock: FakeClock) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://", clock=clock)
    yield application
    application.close()


def _staging(tmp_path: Path) -> list[str]:
    root = tmp_path / "warehouse" / "orders" / "_pn_staging"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_recover_completes_the_other_stale_writes_then_raises_the_refusal(
        spark, app, clock, tmp_path):
    """Overwrite A placed and expired, append B of its partition committed since: A is
    refused. Append C (another partition, its driver died before announcing) is stale
    under the same location too: the same recover() completes C, then raises A's refusal
    with a note of what it did."""
    rm = app.revisions
    path_writer(app, tmp_path, revisions=rm).write(frame(spark, rows_for(["20110228"], ["us"])))
    broken = writer_for(StoreDownPublisher(app, fail={"announce"}), tmp_path, revisions=rm)
    from partition_notify.writers import CommitIncompleteError

    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    (a,) = rm.running_transactions(T)
    [a_write] = _staging(tmp_path)
    clock.advance(a.keep_alive + 1)  # A's driver is gone
    b = path_writer(app, tmp_path, revisions=rm).write(
        frame(spark, rows_for(["20110228"], ["us"], per=2)))
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110301"], ["eu"], per=2)))
    (c,) = rm.running_transactions(T)
    assert b.revision is not None and a.revision < b.revision < c.revision
    assert len(_staging(tmp_path)) == 2

    age_locks(tmp_path, 3600)
    with pytest.raises(ExpiredOverwriteOvertakenError, match=f"revision {b.revision} ") as err:
        path_writer(app, tmp_path, revisions=rm).recover(spark, stale_after_seconds=0.0)
    assert any("1 other write(s)" in n and "were completed; 1 refused in all" in n
               for n in getattr(err.value, "__notes__", [])), err.value
    assert _staging(tmp_path) == [a_write], "C finished, A kept for an operator"
    assert rm.running_transactions(T) == []
    snap = rm.create_snapshot(T)
    assert snap.includes(c.revision, "data") and a.revision in snap.aborted
    announced = [m for m in logged(app) if type(m).__name__ == "AddPartitionMessage"]
    assert [(m.partitions[0]["datestamp"], m.revision) for m in announced][-1] \
        == ("20110301", c.revision)
