"""Aborted revision transactions are purged after a retention; snapshot reads stay the same.

Defect (audit 22): ``pn_revision_txns`` kept one row per aborted run for ever and
every snapshot read lists them all (``Snapshot.aborted``), so snapshot reads got
slower for ever; the ``pn_revision_files`` / ``pn_revision_replacements`` rows
of aborted writes stayed too. ``serve``'s housekeeping now drops an aborted
transaction ``PN_REVISION_ABORT_RETENTION_SECONDS`` after it ended, with the
file rows of its revision, unless an announced partition still carries that
revision (``snapshot_partitions`` must go on leaving it out). Real SQLite and
PostgreSQL, the injected clock: the retention passes without waiting.
"""

from __future__ import annotations

import pytest
from partition_notify.revisions import snapshot_partitions
from partition_notify.revisions.files import RevisionFiles
from sqlalchemy import text

from partition_notify.app import App
from partition_notify.serve.housekeeping import purge_all
from tests.support.clock import FakeClock, app_on_clock

T = "sales.orders"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


def _count(app: App, sql: str) -> int:
    with app.store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar() or 0)


def _parquet(write: str, *partitions: str) -> list[str]:
    return [f"{p}/part-{write}.parquet" for p in partitions]


def test_aborted_transactions_and_their_file_rows_go_after_the_retention(
        app: App, clock: FakeClock) -> None:
    rm, files = app.revisions, RevisionFiles(app.revisions)
    info = app.publisher.register_table("sales", "orders", ["ds"])
    first = rm.begin_write_transaction(T, ["data"])
    files.record(T, first.revision, "w1", lambda: _parquet("w1", "ds=1", "ds=2"))
    app.publisher.announce_partitions("sales", "orders", [{"ds": "1"}, {"ds": "2"}],
                                      revision=first.revision)
    rm.commit_write_transaction(first)
    for i in range(23):  # failed runs: some recorded files (and an overwrite) first
        tx = rm.begin_write_transaction(T, ["data"], keep_alive=0.01)
        if i % 2:
            files.record(T, tx.revision, f"f{i}", lambda i=i: _parquet(f"f{i}", "ds=3"))
            files.retire(T, tx.revision, f"f{i}", ["ds=3"], f"_pn_retired/f{i}")
            # A placed overwrite cannot be aborted (PlacedOverwriteAbortError): its
            # writer died and it expired (recorded so by the next begin).
            clock.advance(0.02)
        else:
            rm.abort_write_transaction(tx)
    held = rm.begin_write_transaction(T, ["data"])  # its announcement outlives it
    app.publisher.announce_partitions("sales", "orders", [{"ds": "9"}], revision=held.revision)
    rm.abort_write_transaction(held)
    pinned = rm.create_snapshot(T, revision=held.revision)
    before = files.visible(T, pinned), [p.spec for p in snapshot_partitions(
        app.store, info, pinned)]
    assert before == (["ds=1/part-w1.parquet", "ds=2/part-w1.parquet"], ["ds=1", "ds=2"])
    assert len(pinned.aborted) == 24

    clock.advance(app.settings.revision_abort_retention_seconds - 10)
    purge_all(app, 10, None)
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 24, "not old enough yet"

    clock.advance(20)
    purged = purge_all(app, 10, None)
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 1, (
        "only the aborted revision an announced partition still carries stays")
    assert purged.revision_txns == 23
    # The 11 placed overwrites that expired are committed (revision_purge.adopted), not
    # purged: their files are the partition's data (test_purge_placed_overwrite.py).
    assert _count(app, "SELECT count(*) FROM pn_revision_files") == 2 + 11, (
        "w1's files and the adopted overwrites'")
    assert _count(app, "SELECT count(*) FROM pn_revision_replacements "
                       "WHERE committed_at IS NOT NULL") == 11
    assert _count(app, "SELECT count(*) FROM pn_revision_replacements") == 11
    # Committed in their order: the latest snapshot reads the last one's ds=3, as plain
    # reads do (it moved the earlier ones' files aside).
    assert files.visible(T, rm.create_snapshot(T)) == [
        "ds=1/part-w1.parquet", "ds=2/part-w1.parquet", "ds=3/part-f21.parquet"]
    again = rm.create_snapshot(T, revision=held.revision)
    assert again.aborted == {held.revision}
    after = files.visible(T, again), [p.spec for p in snapshot_partitions(
        app.store, info, again)]
    assert after == before, "a snapshot pinned at the old revision reads the same"
    assert (files.visible(T, pinned), [p.spec for p in snapshot_partitions(
        app.store, info, pinned)]) == before, "and so does the snapshot handed out before"


def test_a_stopping_serve_ends_the_revision_purge_between_batches(
        app: App, clock: FakeClock) -> None:
    rm = app.revisions
    for _ in range(30):
        rm.abort_write_transaction(rm.begin_write_transaction(T, ["data"]))
    clock.advance(app.settings.revision_abort_retention_seconds + 1)
    purged = purge_all(app, 10, lambda: False)
    assert purged.revision_txns == 10
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 20
    purge_all(app, 10, None)
    assert _count(app, "SELECT count(*) FROM pn_revision_txns") == 0
    assert rm.create_snapshot(T).aborted == frozenset()
