"""An overwrite that placed its files and then expired is never purged half-way
(SQLite + PostgreSQL, files on disk, the injected clock).

Defect (review of session 26): an overwrite whose files were placed (the partition's old
files in ``_pn_retired/<write_id>/``, its own in the partition) and whose writer died
before the commit expired; nobody ran its recovery. Past
``PN_REVISION_ABORT_RETENTION_SECONDS`` serve's purge of aborted revisions deleted its
files (the partition's only data in plain reads) and its rows, and left the old files in
``_pn_retired`` for ever with rows naming them nowhere a retention would reach; the Spark
vacuum job's ``remove_aborted_files`` deleted its files earlier still. Now such a
revision is recovered first: housekeeping adopts it into a committed revision (what its
recovery would have done to the revision), logged, and its retired files go a
retention later. One whose placement began and never finished is not purged (its files
and rows stay, logged at ERROR with what to run) until its recovery places it.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import pytest
from partition_notify.revisions.files import RevisionFiles
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


class _Died(Exception):
    pass


def _table(app: App, root: Path) -> RevisionFiles:
    """sales.orders at ``root``; revision 1's file in d=1, committed."""
    rm, files = app.revisions, RevisionFiles(app.revisions)
    app.publisher.register_table("sales", "orders", ["d"], location=str(root))
    tx = rm.begin_write_transaction(T, ["data"])
    files.record(T, tx.revision, "w0", lambda: ["d=1/part-w0.parquet"])
    (root / "d=1").mkdir(parents=True)
    (root / "d=1" / "part-w0.parquet").write_text("old rows")
    rm.commit_write_transaction(tx)
    return files


def _overwrite(files: RevisionFiles, clock: FakeClock, root: Path, *,
               dies_mid_placement: bool) -> int:
    """Overwrite wA of d=1 places (or dies mid-placement); its writer dies before the
    commit; its keep-alive runs out and the next transaction records it expired."""
    rm = files.manager
    a = rm.begin_write_transaction(T, ["data"], keep_alive=30)
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    try:
        with files.placing(T, a.revision, "wA", ["d=1"], retiring=True) as place:
            if dies_mid_placement:
                place.lease.release = lambda commit: None  # type: ignore[method-assign]
                place.lease._stop.set()
            place.retire(["d=1"], "_pn_retired/wA")
            (root / "d=1" / "_pn_retired" / "wA").mkdir(parents=True)
            (root / "d=1" / "part-w0.parquet").rename(
                root / "d=1" / "_pn_retired" / "wA" / "part-w0.parquet")
            if dies_mid_placement:
                raise _Died
            (root / "d=1" / "part-wA.parquet").write_text("new rows")
    except _Died:
        pass
    clock.advance(120)
    rm.abort_write_transaction(rm.begin_write_transaction(T, ["data"]))  # records the expiry
    assert files.transaction(T, a.revision)[0] == "expired"
    return a.revision


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _count(app: App, sql: str) -> int:
    with app.store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar() or 0)


def test_a_placed_expired_overwrite_is_recovered_not_purged(
        app: App, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "orders"
    files = _table(app, root)
    a = _overwrite(files, clock, root, dies_mid_placement=False)

    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    with caplog.at_level(logging.INFO):
        purge_all(app, 10, None)

    assert "housekeeping committed 1 expired placed overwrite(s); 0 kept" in caplog.messages
    assert _listing(root) == ["d=1/_pn_retired/wA/part-w0.parquet", "d=1/part-wA.parquet"], \
        "the partition's data (wA's rows, what plain reads read) was deleted"
    snap = app.revisions.create_snapshot(T)
    assert files.visible(T, snap) == ["d=1/part-wA.parquet"], "committed: snapshots agree"
    assert any(f"revision {a} of {T}" in r.getMessage() and "write wA" in r.getMessage()
               and "commits it as revision" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]

    clock.advance(app.settings.retired_file_retention_seconds + 1)
    purge_all(app, 10, None)
    assert _listing(root) == ["d=1/part-wA.parquet"], "the retired file left for ever"
    assert not (root / "d=1" / "_pn_retired").exists()
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 0


def test_the_vacuum_job_keeps_a_placed_expired_overwrites_files(
        app: App, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``remove_aborted_files`` (writers/vacuum.py, for tables serve cannot reach) deletes
    aborted writes' files a file retention after: not a placed overwrite's."""
    root = tmp_path / "orders"
    files = _table(app, root)
    a = _overwrite(files, clock, root, dies_mid_placement=False)
    clock.advance(app.settings.retired_file_retention_seconds + 1)
    now = clock()
    write_uow = partial(UnitOfWork, app.store.engine, write=True)
    with caplog.at_level(logging.WARNING):
        remove_aborted_files(write_uow, FileRemover(lambda table: LocalFiles(root)), T,
                             now - app.settings.retired_file_retention_seconds, now,
                             batch_size=10)
    assert (root / "d=1" / "part-wA.parquet").exists(), "plain reads lost the partition"
    assert any(f"revision {a} of {T}" in r.getMessage() and "kept" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_an_unfinished_placement_is_not_purged_until_recovered(
        app: App, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "orders"
    files = _table(app, root)
    a = _overwrite(files, clock, root, dies_mid_placement=True)
    on_disk = _listing(root)

    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    with caplog.at_level(logging.ERROR):
        purged = purge_all(app, 10, None)
    assert _listing(root) == on_disk
    assert purged.revision_txns == 1, "only the empty transaction that recorded the expiry"
    assert files.transaction(T, a)[0] == "expired", "its record stays"
    assert any(f"revision {a} of {T}" in r.getMessage() and "write wA" in r.getMessage()
               and "recover" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]

    # Its recovery (writers/recovery.py): a new revision places it again, adopts the old.
    rm = app.revisions
    tx = rm.begin_write_transaction(T, ["data"])
    with files.placing(T, tx.revision, "wA", ["d=1"], retiring=True) as place:
        place.retire(["d=1"], "_pn_retired/wA")
        (root / "d=1" / "part-wA.parquet").write_text("new rows")
    files.adopt(T, [a], table_id=None, into=tx)
    assert files.visible(T, rm.create_snapshot(T)) == ["d=1/part-wA.parquet"]

    clock.advance(app.settings.revision_abort_retention_seconds
                  + app.settings.retired_file_retention_seconds + 1)
    purge_all(app, 10, None)
    assert _listing(root) == ["d=1/part-wA.parquet"]
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 0


def test_an_append_cut_short_goes_like_any_aborted_write(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    """An append moves only its own files: past the retention they and its rows go,
    its placement record with them (nothing of another revision lies aside)."""
    root = tmp_path / "orders"
    files = _table(app, root)
    rm = app.revisions
    c = rm.begin_write_transaction(T, ["data"], keep_alive=30)
    files.record(T, c.revision, "wC", lambda: ["d=1/part-wC.parquet"])
    with pytest.raises(_Died), files.placing(T, c.revision, "wC", ["d=1"]) as place:
        place.lease.release = lambda commit: None  # type: ignore[method-assign]
        place.lease._stop.set()
        (root / "d=1" / "part-wC.parquet").write_text("appended")
        raise _Died
    clock.advance(120)
    rm.abort_write_transaction(rm.begin_write_transaction(T, ["data"]))
    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    purge_all(app, 10, None)
    assert _listing(root) == ["d=1/part-w0.parquet"]
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 0
    assert _count(app, "SELECT count(*) FROM pn_revision_placing") == 0


def test_a_recovery_cut_short_keeps_both_revisions(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    """The recovery of the expired overwrite places at a new revision and dies too: its
    files are still tagged with the first, so neither revision is purged."""
    root = tmp_path / "orders"
    files = _table(app, root)
    a = _overwrite(files, clock, root, dies_mid_placement=True)
    rm = app.revisions
    m = rm.begin_write_transaction(T, ["data"], keep_alive=30)
    with pytest.raises(_Died), files.placing(T, m.revision, "wA", ["d=1"],
                                             retiring=True) as place:
        place.lease.release = lambda commit: None  # type: ignore[method-assign]
        place.lease._stop.set()
        raise _Died
    on_disk = _listing(root)
    clock.advance(120)
    rm.abort_write_transaction(rm.begin_write_transaction(T, ["data"]))
    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    purge_all(app, 10, None)
    assert _listing(root) == on_disk
    assert files.transaction(T, a)[0] == files.transaction(T, m.revision)[0] == "expired"


def test_an_overwrite_a_later_write_placed_over_is_not_committed_under_it(
        app: App, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Append wB (a later revision) placed into d=1 after wA; committing wA now, as a
    revision above wB's, would hide wB's committed rows from every later snapshot.
    Kept instead (files and rows), logged."""
    root = tmp_path / "orders"
    files = _table(app, root)
    a = _overwrite(files, clock, root, dies_mid_placement=False)
    rm = app.revisions
    b = rm.begin_write_transaction(T, ["data"])
    files.record(T, b.revision, "wB", lambda: ["d=1/part-wB.parquet"])
    with files.placing(T, b.revision, "wB", ["d=1"]):
        (root / "d=1" / "part-wB.parquet").write_text("wB rows")
    rm.commit_write_transaction(b)
    on_disk = _listing(root)
    seen = files.visible(T, rm.create_snapshot(T))

    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    with caplog.at_level(logging.ERROR):
        purge_all(app, 10, None)
    assert _listing(root) == on_disk
    assert files.visible(T, rm.create_snapshot(T)) == seen, "wB's rows hidden"
    assert "d=1/part-wB.parquet" in seen
    assert files.transaction(T, a)[0] == "expired"
    assert any(f"revision {a} of {T}" in r.getMessage() and "later write" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
