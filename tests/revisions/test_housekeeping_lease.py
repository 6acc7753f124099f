"""Housekeeping deletes an aborted write's files only when no placement of the table runs
(SQLite + PostgreSQL, files on disk).

Defect (session 26): ``purge_aborted`` (serve's housekeeping) and
``remove_aborted_files`` (the Spark vacuum job) deleted an aborted write's files
without the table's placement lease, so they raced a placement renaming files of
the same partitions (a file being retired or merged could go under it). Now the
deletion takes the lease for its transaction, without waiting: a table whose lease a
live placement holds is skipped this run (files and rows stay) and done next run.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.placement import PlacementLease
from partition_notify.revisions.retention import remove_aborted_files
from partition_notify.revisions.vacuum import FileRemover, LocalFiles
from partition_notify.store.uow import UnitOfWork
from sqlalchemy import text

from partition_notify.app import App
from partition_notify.serve.housekeeping import purge_all
from tests.support.clock import FakeClock, app_on_clock

T = "sales.orders"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


def _aborted_write(app: App, root: Path) -> Path:
    """An aborted append's recorded file in ds=1, on disk, past the abort retention."""
    rm, files = app.revisions, RevisionFiles(app.revisions)
    app.publisher.register_table("sales", "orders", ["ds"], location=str(root))
    tx = rm.begin_write_transaction(T, ["data"])
    files.record(T, tx.revision, "w2", lambda: ["ds=1/part-w2.parquet"])
    path = root / "ds=1" / "part-w2.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PAR1 w2")
    rm.abort_write_transaction(tx)
    return path


def _held_lease(app: App) -> PlacementLease:
    """Write w3's placement of the table, renaming now (a real lease, renewed)."""
    return PlacementLease.take(app.store.engine, app.revisions.clock, T, "w3",
                               lambda uow: None, wait_seconds=0)


def _rows(app: App) -> int:
    with app.store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM pn_revision_files")).scalar() or 0)


def test_serve_skips_a_table_whose_placement_lease_is_held(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    path = _aborted_write(app, tmp_path / "orders")
    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    lease = _held_lease(app)
    try:
        purged = purge_all(app, 10, None)
        assert path.exists(), "deleted while a placement of the table was renaming"
        assert purged.revision_txns == 0 and _rows(app) == 1, "rows stay for the next run"
    finally:
        lease.release(None)
    purged = purge_all(app, 10, None)
    assert not path.exists() and purged.revision_txns == 1 and _rows(app) == 0


def test_serve_takes_over_an_expired_lease(app: App, clock: FakeClock, tmp_path: Path) -> None:
    path = _aborted_write(app, tmp_path / "orders")
    lease = _held_lease(app)
    lease._stop.set()  # its writer died: no renewal
    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    purge_all(app, 10, None)
    assert not path.exists()


def test_the_vacuum_job_skips_a_table_whose_placement_lease_is_held(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    path = _aborted_write(app, root)
    clock.advance(10)
    now = clock()
    write_uow = partial(UnitOfWork, app.store.engine, write=True)
    remover = FileRemover(lambda table: LocalFiles(root))
    lease = _held_lease(app)
    try:
        remove_aborted_files(write_uow, remover, T, now - 1, now, batch_size=10)
        assert path.exists(), "deleted while a placement of the table was renaming"
    finally:
        lease.release(None)
    remove_aborted_files(write_uow, remover, T, now - 1, now, batch_size=10)
    assert not path.exists()
