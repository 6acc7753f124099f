"""An overwrite whose placement began stays unabortable after a crash and a takeover
(SQLite + PostgreSQL, files on disk).

Defect (review of session 26): the abort refusal (``PlacedOverwriteAbortError``) looked at
the retirement rows (written with the lease's release) and at the table's lease naming
the write. An overwrite whose process died mid-placement, after some of the partition's
old files went to ``_pn_retired/<write_id>/``, has neither once another write took the
expired lease over (and released it): ``rev abort`` was accepted, and nothing rolls the
aborted revision back, so the moved files stayed aside for a revision no snapshot
includes. The taking of the lease now records on the write that its placement began
(``pn_revision_placing``), in the same transaction, before any rename; the refusal reads
it, and the write's recovery still places and commits it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from partition_notify.revisions import RevisionManager
from partition_notify.revisions.files import RevisionFiles

from partition_notify.cli import rev_commands
from partition_notify.core.errors import PlacedOverwriteAbortError
from tests.support.clock import FakeClock

T = "sales.orders"


class _Died(Exception):
    pass


def _table(rm: RevisionManager, files: RevisionFiles, root: Path) -> None:
    """Revision 1's file in d=1, committed."""
    tx = rm.begin_write_transaction(T, ["data"])
    files.record(T, tx.revision, "w0", lambda: ["d=1/part-w0.parquet"])
    (root / "d=1").mkdir(parents=True)
    (root / "d=1" / "part-w0.parquet").write_text("old rows")
    rm.commit_write_transaction(tx)


def _dies_mid_placement(files: RevisionFiles, root: Path, revision: int) -> None:
    """Overwrite wA of d=1 moves the old file aside, then its process dies (no release,
    no renewal): what writers/commit.py leaves behind."""
    files.record(T, revision, "wA", lambda: ["d=1/part-wA.parquet"])
    with pytest.raises(_Died), files.placing(T, revision, "wA", ["d=1"],
                                             retiring=True) as place:
        place.lease.release = lambda commit: None  # type: ignore[method-assign]  # killed
        place.lease._stop.set()  # its renewer dies with it
        keep = place.retire(["d=1"], "_pn_retired/wA")
        assert keep == {"d=1/part-wA.parquet"}
        (root / "d=1" / "_pn_retired" / "wA").mkdir(parents=True)
        (root / "d=1" / "part-w0.parquet").rename(
            root / "d=1" / "_pn_retired" / "wA" / "part-w0.parquet")
        raise _Died


def _another_write_places(rm: RevisionManager, files: RevisionFiles, root: Path) -> int:
    """Append wB to d=2 takes the expired lease over, places and commits."""
    b = rm.begin_write_transaction(T, ["data"], keep_alive=3600)
    files.record(T, b.revision, "wB", lambda: ["d=2/part-wB.parquet"])
    with files.placing(T, b.revision, "wB", ["d=2"]):
        (root / "d=2").mkdir(parents=True)
        (root / "d=2" / "part-wB.parquet").write_text("wB rows")
    rm.commit_write_transaction(b)
    return b.revision


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_aborting_a_crashed_overwrite_after_another_write_took_the_lease_is_refused(
        rm: RevisionManager, clock: FakeClock, tmp_path: Path) -> None:
    files, root = RevisionFiles(rm), tmp_path / "orders"
    _table(rm, files, root)
    a = rm.begin_write_transaction(T, ["data"], keep_alive=3600)
    _dies_mid_placement(files, root, a.revision)
    clock.advance(120)  # wA's lease expires
    _another_write_places(rm, files, root)
    on_disk = _listing(root)

    with pytest.raises(PlacedOverwriteAbortError,
                       match=f"revision {a.revision} of {T} .*write wA began placing"):
        rev_commands.abort(rm, T, a.revision)
    assert files.transaction(T, a.revision)[0] == "running"
    assert _listing(root) == on_disk


def test_the_crashed_overwrite_is_still_recovered_and_committed(
        rm: RevisionManager, clock: FakeClock, tmp_path: Path) -> None:
    """What its recovery does (writers/recovery.py): place again, then commit."""
    files, root = RevisionFiles(rm), tmp_path / "orders"
    _table(rm, files, root)
    a = rm.begin_write_transaction(T, ["data"], keep_alive=3600)
    _dies_mid_placement(files, root, a.revision)
    clock.advance(120)
    b = _another_write_places(rm, files, root)

    with files.placing(T, a.revision, "wA", ["d=1"], merge_begun=False,
                       retiring=True) as place:
        keep = place.retire(["d=1"], "_pn_retired/wA")
        assert keep == {"d=1/part-wA.parquet"}
        (root / "d=1" / "part-wA.parquet").write_text("new rows")
    rm.commit_write_transaction(a)

    assert files.visible(T, rm.create_snapshot(T)) == ["d=1/part-wA.parquet",
                                                        "d=2/part-wB.parquet"]
    assert files.visible(T, rm.create_snapshot(T, a.revision - 1)) == [
        "d=1/_pn_retired/wA/part-w0.parquet"]
    assert b > a.revision
    with pytest.raises(Exception, match="has committed"):
        rev_commands.abort(rm, T, a.revision)


def test_an_append_that_finished_placing_still_aborts(
        rm: RevisionManager, clock: FakeClock, tmp_path: Path) -> None:
    """The mark lasts from the lease's taking to its release with the rows: an append
    that placed (nothing retired) aborts as before, its rows skipped by snapshots."""
    files, root = RevisionFiles(rm), tmp_path / "orders"
    _table(rm, files, root)
    c = rm.begin_write_transaction(T, ["data"], keep_alive=3600)
    files.record(T, c.revision, "wC", lambda: ["d=1/part-wC.parquet"])
    with files.placing(T, c.revision, "wC", ["d=1"]):
        (root / "d=1" / "part-wC.parquet").write_text("appended")
    assert rev_commands.abort(rm, T, c.revision)["state"] == "aborted"


def test_migration_0024_marks_a_placement_cut_short_before_the_upgrade(
        rm: RevisionManager, clock: FakeClock, store_url: str, tmp_path: Path) -> None:
    """A store at 0023 whose lease still names a write that died mid-placement: after the
    upgrade its abort is refused even once another write takes the lease over."""
    from tests.support.migrations import downgraded

    files, root = RevisionFiles(rm), tmp_path / "orders"
    _table(rm, files, root)
    a = rm.begin_write_transaction(T, ["data"], keep_alive=3600)
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    with downgraded(store_url, "0023") as conn:
        conn.exec_driver_sql(
            "INSERT INTO pn_revision_placements (table_name, holder, token, acquired_at, "
            f"expires_at) VALUES ('{T}', 'wA', 'dead', {clock() - 90}, {clock() - 30})")
    _another_write_places(rm, files, root)
    with pytest.raises(PlacedOverwriteAbortError, match="write wA began placing"):
        rev_commands.abort(rm, T, a.revision)
