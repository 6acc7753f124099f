"""Crash safety: a write whose driver died after Spark committed is finished later.

The faults are injected at the store boundary (a store that refuses the
append, as an unreachable database would) or by leaving a staging directory
as a killed driver leaves it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from partition_notify.publisher import Publisher
from partition_notify.writers import CommitIncompleteError, NotifyingWriter

from partition_notify.contract import AddPartitionMessage, SetDoneMessage
from partition_notify.core.errors import StoreError
from tests.spark.test_writers import KEYS, frame, rows_for, staging_entries

pytestmark = pytest.mark.spark


class StoreDownPublisher(Publisher):
    """A publisher whose store refuses the chosen operations."""

    def __init__(self, app: Any, *, fail: set[str]) -> None:
        super().__init__(app.store, app.transport, app.publisher.config)
        self.fail = fail
        self.app = app

    def announce_partitions(self, *a: Any, **kw: Any) -> list[AddPartitionMessage]:
        if "announce" in self.fail:
            raise StoreError("injected: store unreachable")
        return super().announce_partitions(*a, **kw)

    def send_mark_set_done(self, *a: Any, **kw: Any) -> SetDoneMessage:
        if "set_done" in self.fail:
            raise StoreError("injected: store unreachable")
        return super().send_mark_set_done(*a, **kw)


def location(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse" / "orders")


def writer_for(publisher: Any, tmp_path: Path, **kw: Any) -> NotifyingWriter:
    if isinstance(publisher, StoreDownPublisher):  # a bare Publisher: revisions explicitly
        kw.setdefault("revisions", publisher.app.revisions)
    return NotifyingWriter(publisher, "sales", "orders", partition_keys=KEYS,
                           location=location(tmp_path), **kw)


def logged(app: Any) -> list[Any]:
    from partition_notify.contract import decode

    return [decode(e.body) for e in app.store.log.events_after(0, 100_000)]


def age_locks(tmp_path: Path, seconds: float) -> None:
    """Make every lease look ``seconds`` old, as if its driver died that long ago."""
    past = time.time() - seconds
    for lock in (Path(location(tmp_path)) / "_pn_staging").glob("*/_pn_commit.lock"):
        os.utime(lock, (past, past))


def test_crash_before_the_log_is_recovered_by_recover(spark, spark_app, tmp_path):
    broken = writer_for(StoreDownPublisher(spark_app, fail={"announce"}), tmp_path)
    with pytest.raises(CommitIncompleteError, match="recover"):
        broken.write(frame(spark, rows_for(["20110228"], ["us", "eu"])),
                     mark_set_done="datestamp=20110228")
    # The data is in the table, the log is empty: exactly the crash window.
    assert spark.read.parquet(location(tmp_path)).count() == 6
    assert logged(spark_app) == []
    assert len(staging_entries(f"file:{location(tmp_path)}")) == 1

    healthy = writer_for(spark_app, tmp_path)
    assert healthy.recover(spark) == [], "a fresh lease is left alone"
    done = healthy.recover(spark, stale_after_seconds=0.0)
    assert len(done) == 1 and done[0].resumed
    msgs = logged(spark_app)
    assert [type(m).__name__ for m in msgs] == ["AddPartitionMessage"] * 2 + ["SetDoneMessage"]
    assert {m.partitions[0]["region"] for m in msgs[:2]} == {"us", "eu"}
    assert staging_entries(f"file:{location(tmp_path)}") == []
    assert healthy.recover(spark, stale_after_seconds=0.0) == [], "finished once"


def test_partly_logged_overwrite_is_finished_without_duplicates(spark, spark_app, tmp_path):
    writer_for(spark_app, tmp_path).write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    broken = writer_for(StoreDownPublisher(spark_app, fail={"set_done"}), tmp_path)
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us", "eu"], per=1)),
                     mode="overwrite", mark_set_done="datestamp=20110228")
    assert [type(m).__name__ for m in logged(spark_app)] == ["AddPartitionMessage"] * 4

    age_locks(tmp_path, 3600)
    # The next write to the table finishes the lapsed one first.
    result = writer_for(spark_app, tmp_path).write(frame(spark, rows_for(["20110301"], ["us"])))
    kinds = [type(m).__name__ for m in logged(spark_app)]
    assert kinds == ["AddPartitionMessage"] * 4 + ["SetDoneMessage", "AddPartitionMessage"]
    assert result.announced[0].partitions[0] == {"datestamp": "20110301", "region": "us"}
    assert spark.read.parquet(location(tmp_path)).where("datestamp = 20110228").count() == 2


def test_never_committed_staging_is_deleted_and_nothing_announced(spark, spark_app, tmp_path):
    writer = writer_for(spark_app, tmp_path)
    # A driver killed while Spark was writing leaves staged files and a lock, no manifest.
    staging = Path(location(tmp_path)) / "_pn_staging" / "20110228T000000-0123456789ab"
    frame(spark, rows_for(["20110228"], ["us"])).write.partitionBy(*KEYS).parquet(
        str(staging / "data"))
    (staging / "_pn_commit.lock").write_text("{}")
    assert writer.recover(spark) == [] and staging.exists(), "lease still fresh"
    age_locks(tmp_path, 3600)
    assert writer.recover(spark) == []
    assert not staging.exists()
    assert logged(spark_app) == []
    assert not list(Path(location(tmp_path)).glob("datestamp=*"))


def _snapshot_rows(spark: Any, app: Any, snap: Any) -> int:
    from partition_notify.writers.snapshot_read import read_snapshot

    return int(read_snapshot(spark, app, "sales", "orders", snapshot=snap).frame.count())


def test_recovery_commits_the_live_revision_it_announced_under(spark, spark_app, tmp_path):
    rm = spark_app.revisions
    broken = writer_for(StoreDownPublisher(spark_app, fail={"announce"}), tmp_path, revisions=rm)
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    (running,) = rm.running_transactions("sales.orders")

    done = writer_for(spark_app, tmp_path, revisions=rm).recover(spark, stale_after_seconds=0.0)
    assert [m.revision for m in done[0].announced] == [running.revision] * 2
    assert rm.running_transactions("sales.orders") == []
    snap = rm.create_snapshot("sales.orders")
    assert snap.includes(running.revision, "data"), "the original transaction committed"
    assert _snapshot_rows(spark, spark_app, snap) == 6


def test_recovery_after_the_revision_expired_commits_a_new_one(spark, spark_app, tmp_path):
    from partition_notify.revisions import RevisionManager, snapshot_partitions

    from tests.support.clock import FakeClock

    clock = FakeClock(time.time())
    rm = RevisionManager(spark_app.store, clock=clock)
    broken = writer_for(StoreDownPublisher(spark_app, fail={"set_done"}), tmp_path, revisions=rm)
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us", "eu"])),
                     mark_set_done="datestamp=20110228")
    (old,) = rm.running_transactions("sales.orders")
    clock.advance(old.keep_alive + 1)  # the driver is gone: nobody keeps it alive

    done = writer_for(spark_app, tmp_path, revisions=rm).recover(spark, stale_after_seconds=0.0)
    assert len(done) == 1 and done[0].set_done is not None
    new = done[0].set_done.revision
    assert new is not None and new > old.revision
    snap = rm.create_snapshot("sales.orders")
    assert old.revision in snap.aborted and snap.includes(new, "data")
    info = spark_app.publisher.table("sales", "orders")
    # Partitions logged under the expired revision before the failure moved to the new one.
    assert {p.revision for p in snapshot_partitions(spark_app.store, info, snap)} == {new}
    assert len(snapshot_partitions(spark_app.store, info, snap)) == 2
    assert _snapshot_rows(spark, spark_app, snap) == 6


def test_a_recovery_that_fails_is_continued_under_the_revision_it_adopted(spark, spark_app,
                                                                          tmp_path):
    from partition_notify.revisions import RevisionManager

    from tests.support.clock import FakeClock

    clock = FakeClock(time.time())
    rm = RevisionManager(spark_app.store, clock=clock)
    broken = writer_for(StoreDownPublisher(spark_app, fail={"announce"}), tmp_path, revisions=rm)
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us", "eu"])))
    (first,) = rm.running_transactions("sales.orders")
    clock.advance(first.keep_alive + 1)
    with pytest.raises(StoreError):  # recovery adopts a new revision, then fails too
        broken.recover(spark, stale_after_seconds=0.0)
    (second,) = rm.running_transactions("sales.orders")
    assert second.revision > first.revision
    staging = next((Path(location(tmp_path)) / "_pn_staging").iterdir())
    assert (staging / f"_pn_adopted.{second.revision}").exists()
    clock.advance(second.keep_alive + 1)

    done = writer_for(spark_app, tmp_path, revisions=rm).recover(spark, stale_after_seconds=0.0)
    final = done[0].revision
    assert final is not None and final > second.revision
    assert {m.revision for m in done[0].announced} == {final}
    snap = rm.create_snapshot("sales.orders")
    assert {first.revision, second.revision} <= snap.aborted and snap.includes(final, "data")
    assert _snapshot_rows(spark, spark_app, snap) == 6


def _data_files(tmp_path: Path) -> list[str]:
    root = Path(location(tmp_path))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet")
                  if "_pn_staging" not in p.parts)


def test_recovery_refuses_an_expired_overwrite_a_later_append_wrote_over(
        spark, spark_app, tmp_path):
    """Session 27: overwrite A placed and expired (its driver died before announcing),
    append B of the same partition committed later; A's recovery committed A as a new
    revision above B's (snapshots hid B's rows) and its re-retirement moved B's file
    into ``_pn_retired``. Refused now, before anything moves."""
    from partition_notify.revisions import RevisionManager

    from partition_notify.core.errors import ExpiredOverwriteOvertakenError
    from tests.support.clock import FakeClock

    clock = FakeClock(time.time())
    rm = RevisionManager(spark_app.store, clock=clock)
    broken = writer_for(StoreDownPublisher(spark_app, fail={"announce"}), tmp_path, revisions=rm)
    writer_for(spark_app, tmp_path, revisions=rm).write(
        frame(spark, rows_for(["20110228"], ["us"])))
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    (a,) = rm.running_transactions("sales.orders")
    clock.advance(a.keep_alive + 1)  # A's driver is gone
    b = writer_for(spark_app, tmp_path, revisions=rm).write(
        frame(spark, rows_for(["20110228"], ["us"], per=2)))
    assert b.revision is not None and b.revision > a.revision
    on_disk = _data_files(tmp_path)
    rows = _snapshot_rows(spark, spark_app, rm.create_snapshot("sales.orders"))

    with pytest.raises(ExpiredOverwriteOvertakenError, match=f"revision {b.revision} "):
        writer_for(spark_app, tmp_path, revisions=rm).recover(spark, stale_after_seconds=0.0)
    assert _data_files(tmp_path) == on_disk, "B's file moved aside"
    assert _snapshot_rows(spark, spark_app, rm.create_snapshot("sales.orders")) == rows
    assert rm.running_transactions("sales.orders") == []
