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


class _MeanwhilePublisher(Publisher):
    """A's publisher: ``meanwhile`` runs once, as A's commit step announces (after A
    placed its data, before it settles its revision)."""

    def __init__(self, app: App, meanwhile: Callable[[], None]) -> None:
        super().__init__(app.store, app.transport, app.publisher.config)
        self.meanwhile: Callable[[], None] | None = meanwhile

    def announce_partitions(self, *a: Any, **kw: Any) -> Any:
        run, self.meanwhile = self.meanwhile, None
        if run is not None:
            run()
        return super().announce_partitions(*a, **kw)


def test_a_write_whose_settle_is_refused_raises_the_refusal_not_a_recover_promise(
        spark, app, clock, tmp_path):
    """Overwrite A placed; its keep-alive ran out and append B of its partition committed
    before A settled. A's settle is refused (ExpiredOverwriteOvertakenError). The writer
    used to raise CommitIncompleteError saying recover() would finish the write, and
    recover() then raised the refusal; and every later write, recovering first, raised it
    too, so the partitions could not be written again as the refusal asks."""
    from partition_notify.writers import CommitIncompleteError, NotifyingWriter

    rm = app.revisions
    path_writer(app, tmp_path, revisions=rm).write(frame(spark, rows_for(["20110228"], ["us"])))
    later: list[Any] = []

    def b_writes() -> None:
        (a,) = rm.running_transactions(T)
        clock.advance(a.keep_alive + 1)
        later.append(path_writer(app, tmp_path, revisions=rm).write(
            frame(spark, rows_for(["20110228"], ["us"], per=2))))

    writer_a = NotifyingWriter(_MeanwhilePublisher(app, b_writes), "sales", "orders",
                               revisions=rm)
    with pytest.raises(ExpiredOverwriteOvertakenError) as err:
        writer_a.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    assert f"revision {later[0].revision} " in str(err.value), err.value
    assert not isinstance(err.value, CommitIncompleteError)
    [a_write] = _staging(tmp_path)
    notes = " ".join(getattr(err.value, "__notes__", []))
    assert a_write in notes and "recover() refuses it too" in notes, notes

    # What recover() says is what the write said.
    age_locks(tmp_path, 3600)
    with pytest.raises(ExpiredOverwriteOvertakenError, match=f"revision {later[0].revision} "):
        path_writer(app, tmp_path, revisions=rm).recover(spark, stale_after_seconds=0.0)
    # Writing the partitions again, as the refusal asks, is not stopped by A's staging
    # (its lease lapsed: the write's own recovery takes it and is refused).
    age_locks(tmp_path, 3600)
    again = path_writer(app, tmp_path, revisions=rm).write(
        frame(spark, rows_for(["20110228"], ["us"], per=4)), mode="overwrite")
    assert again.revision is not None and again.revision > later[0].revision
    assert spark.read.parquet(str(tmp_path / "warehouse" / "orders")).count() == 4
    assert _staging(tmp_path) == [a_write], "kept for an operator"


def _data_files(root: Path) -> set[str]:
    """Data files a plain read of the table serves (no ``_``/``.`` entry below)."""
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)}


def test_a_write_placed_between_recoverys_check_and_its_placement_is_not_moved_aside(
        spark, app, clock, tmp_path):
    """Overwrite A placed (its retirement recorded), its driver died before it marked
    the retirement done, and A expired. Its recovery checks that no later write put
    files into A's partition, then places A again (retiring again) at a new revision N.
    Append B began after that check and before N, and placed first: the retirement at N
    (keeping only files of revisions above N) used to move B's committed file into
    ``_pn_retired``, then the adoption refused A. The check is now also made when the
    recovery takes the placement lease, so B's file stays where its rows say."""
    from partition_notify.revisions.files import RevisionFiles
    from partition_notify.writers import CommitIncompleteError

    rm = app.revisions
    root = tmp_path / "warehouse" / "orders"
    path_writer(app, tmp_path, revisions=rm).write(frame(spark, rows_for(["20110228"], ["us"])))
    broken = writer_for(StoreDownPublisher(app, fail={"announce"}), tmp_path, revisions=rm)
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    (a,) = rm.running_transactions(T)
    [a_write] = _staging(tmp_path)
    (root / "_pn_staging" / a_write / "_pn_replaced").unlink()  # died before marking it
    clock.advance(a.keep_alive + 1)
    placed: list[Any] = []

    class _BDuringRecovery(RevisionFiles):
        def check_adoptable(self, table: str, old: Any) -> None:
            super().check_adoptable(table, old)
            if not placed:
                placed.append(path_writer(app, tmp_path, revisions=rm).write(
                    frame(spark, rows_for(["20110228"], ["us"], per=2))))
                placed.append(_data_files(root))

    recovering = path_writer(app, tmp_path, revisions=rm)
    assert recovering.files is not None
    recovering.files = _BDuringRecovery(recovering.files.manager)
    age_locks(tmp_path, 3600)
    with pytest.raises(ExpiredOverwriteOvertakenError) as err:
        recovering.recover(spark, stale_after_seconds=0.0)
    b, on_disk = placed
    assert f"revision {b.revision} " in str(err.value), err.value
    assert _data_files(root) == on_disk, "B's file moved aside"
    assert not list(root.rglob(f"_pn_retired/{b.write_id}")) and \
        not [p for p in root.rglob("_pn_retired/*/*.parquet") if "part" in p.name
             and p.name in {Path(f).name for f in on_disk}], "B's file moved aside"
    assert spark.read.parquet(str(root)).count() == 1 + 2


def test_a_write_begun_after_recovery_adopted_does_not_refuse_the_adoption(
        spark, app, clock, tmp_path):
    """Overwrite A placed and expired; its recovery began revision N to commit A as, and
    append C of A's partition began after N (revision above N) and placed before the
    adoption. Committed as N, A hides nothing of C (visibility follows revision order, and
    the recovery's retirement keeps files of revisions above N), yet the adoption was
    refused for any write above A's own revision: A stayed uncommitted for an operator."""
    from partition_notify.writers import CommitIncompleteError, NotifyingWriter

    rm = app.revisions
    root = tmp_path / "warehouse" / "orders"
    path_writer(app, tmp_path, revisions=rm).write(frame(spark, rows_for(["20110228"], ["us"])))
    broken = writer_for(StoreDownPublisher(app, fail={"announce"}), tmp_path, revisions=rm)
    with pytest.raises(CommitIncompleteError):
        broken.write(frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
    (a,) = rm.running_transactions(T)
    clock.advance(a.keep_alive + 1)
    later: list[Any] = []

    def c_writes() -> None:
        later.append(path_writer(app, tmp_path, revisions=rm).write(
            frame(spark, rows_for(["20110228"], ["us"], per=2))))

    recovering = NotifyingWriter(_MeanwhilePublisher(app, c_writes), "sales", "orders",
                                 revisions=rm)
    age_locks(tmp_path, 3600)
    [done] = recovering.recover(spark, stale_after_seconds=0.0)
    [c] = later
    assert done.revision is not None and c.revision is not None
    assert a.revision < done.revision < c.revision
    snap = rm.create_snapshot(T)
    assert snap.includes(done.revision, "data") and snap.includes(c.revision, "data")
    from partition_notify.writers.snapshot_read import read_snapshot

    assert read_snapshot(spark, app, "sales", "orders", snapshot=snap).frame.count() == 1 + 2
    assert spark.read.parquet(str(root)).count() == 1 + 2
    assert _staging(tmp_path) == []
