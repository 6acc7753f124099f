"""An overwrite whose driver died mid-placement, its lease since taken over: not
abortable, finished by its recovery (real Spark, real files, SQLite and PostgreSQL).

Defect (review of session 26): ``rev abort`` refused an overwrite that had placed (its
retirement rows) or whose placement the table's lease still named. One whose driver
died after moving some of the partition's old files to ``_pn_retired/<write_id>/`` had
neither once another write took its expired lease over: the abort was accepted, so its
recovery refused it (aborted before it placed) and the moved files stayed aside for a
revision no snapshot includes, the partition's plain read short of them. The placement
is now recorded on the write when it takes the lease (``pn_revision_placing``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from partition_notify.revisions.files import Placement, RevisionFiles
from partition_notify.writers.snapshot_read import read_snapshot

from partition_notify.app import App, build_app
from partition_notify.cli import rev_commands
from partition_notify.core.errors import PlacedOverwriteAbortError
from tests.spark.test_writers import frame, path_writer, rows_for
from tests.support.clock import FakeClock

pytestmark = pytest.mark.spark

T = "sales.orders"


class _DriverDied(RuntimeError):
    pass


class _DiesAfterOneRename(RevisionFiles):
    """The driver dies after the first rename of its placement: no release, no renewal."""

    def placing(self, *args: Any, **kw: Any) -> Any:  # type: ignore[override]
        inner = super().placing(*args, **kw)

        class _Cm:
            def __enter__(self) -> Placement:
                place = inner.__enter__()
                place.lease.release = lambda commit: None  # type: ignore[method-assign]
                place.lease._stop.set()
                calls = [0]

                def check() -> None:
                    calls[0] += 1
                    if calls[0] > 1:
                        raise _DriverDied("the driver died mid-placement")
                place.lease.check = check  # type: ignore[method-assign]
                return place

            def __exit__(self, *exc: Any) -> Any:
                return inner.__exit__(*exc)
        return _Cm()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


@pytest.fixture
def app(store_url: str, clock: FakeClock) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://", clock=clock)
    yield application
    application.close()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r[0], str(r[1]), r[2]) for r in df.select("id", "datestamp", "region").collect())


def test_a_cut_short_overwrite_is_not_aborted_and_its_recovery_finishes_it(
        spark, app, clock, tmp_path):
    from partition_notify.writers import CommitIncompleteError

    from tests.spark.test_recovery import age_locks

    root = tmp_path / "warehouse" / "orders"
    revisions = app.revisions
    r0 = path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110228"], ["us"], per=6)).repartition(3)).revision
    old = sorted(p.name for p in (root / "datestamp=20110228" / "region=us").glob("*.parquet"))
    assert len(old) >= 2, old

    b = path_writer(app, tmp_path, revisions=revisions)
    assert b.files is not None
    b.files = _DiesAfterOneRename(b.files.manager)
    new = [(100 + i, float(i), "20110228", "us") for i in range(5)]
    with pytest.raises(CommitIncompleteError):
        b.write(frame(spark, new), mode="overwrite")
    [running] = revisions.running_transactions(T)
    assert list(root.rglob("_pn_retired/*/*.parquet")), "one old file moved aside"

    clock.advance(120)  # B's placement lease expires; an append elsewhere takes it over
    path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110301"], ["eu"], per=1)))

    with pytest.raises(PlacedOverwriteAbortError, match="began placing"):
        rev_commands.abort(revisions, T, running.revision)

    age_locks(tmp_path, 3600)
    done = path_writer(app, tmp_path, revisions=revisions).recover(spark, stale_after_seconds=0.0)
    assert [d.revision for d in done] == [running.revision]
    assert revisions.running_transactions(T) == []
    assert _rows(spark.read.parquet(str(root))) == [
        (0, "20110301", "eu"), *((i, "20110228", "us") for i in range(100, 105))]
    snap = revisions.create_snapshot(T, r0)
    assert len(_rows(read_snapshot(spark, app, "sales", "orders", snapshot=snap).frame)) == 6


def test_a_cut_short_overwrite_overtaken_since_leaves_no_file_outside_the_rows(
        spark, app, clock, tmp_path):
    """Overwrite A died after moving one old file to ``_pn_retired/<A>/`` (no rows: they
    commit with the release); overwrite B of the same partition took the expired lease
    and retired the rest, its rows naming ``_pn_retired/<B>/`` for every old file. A's
    recovery is refused (overtaken) and discarded: the file A moved used to stay in
    ``_pn_retired/<A>/`` for good, where no row names it (no retention deletes it, and
    the snapshot before B read a path that was not there)."""
    from partition_notify.revisions.repositories import RevisionUnitOfWork
    from partition_notify.writers import CommitIncompleteError

    from tests.spark.test_recovery import age_locks

    root = tmp_path / "warehouse" / "orders"
    revisions = app.revisions
    r0 = path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110228"], ["us"], per=6)).repartition(3)).revision
    a = path_writer(app, tmp_path, revisions=revisions)
    assert a.files is not None
    a.files = _DiesAfterOneRename(a.files.manager)
    with pytest.raises(CommitIncompleteError):
        a.write(frame(spark, [(100 + i, float(i), "20110228", "us") for i in range(5)]),
                mode="overwrite")
    [a_dir] = {p.parent for p in root.rglob("_pn_retired/*/*.parquet")}
    clock.advance(120)  # A's placement lease expires; overwrite B takes it over
    path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")

    age_locks(tmp_path, 3600)
    assert path_writer(app, tmp_path, revisions=revisions).recover(
        spark, stale_after_seconds=0.0) == []
    assert not list(a_dir.glob("*.parquet")), "A's moved file left where no row names it"
    with RevisionUnitOfWork(app.store.engine, write=False) as uow:
        named = {r.path for r in uow.files.up_to(T, 10**9) if r.revision == r0}
    assert len(named) >= 2 and all((root / p).exists() for p in named), \
        sorted(p for p in named if not (root / p).exists())
    snap = revisions.create_snapshot(T, r0)
    assert len(_rows(read_snapshot(spark, app, "sales", "orders", snapshot=snap).frame)) == 6
