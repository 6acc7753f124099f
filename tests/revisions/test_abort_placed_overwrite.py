"""Aborting an overwrite whose files are placed is refused (SQLite + PostgreSQL, files on disk).

Defect (session 26): ``rev abort`` of an overwrite that had placed its files (retired
the partition's old files to ``_pn_retired/<write_id>/`` and merged its own) marked the
revision aborted. Nothing rolls an aborted revision's data back (docs/revisions.md, and
the revision manager's design: no rollback), so plain reads of the partition read the
aborted overwrite's rows and never the old ones again, housekeeping purged the
overwrite's rows and deleted its new files, and the retired files stayed in
``_pn_retired`` for good. The abort of such a write is now refused
(``PlacedOverwriteAbortError``): its data is in the table, its commit (or recovery)
makes it a committed revision. One whose placement is under way, or was cut short by a
crash (the table's lease still names it), is refused alike: its recovery places it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from partition_notify.revisions import RevisionManager
from partition_notify.revisions.files import RevisionFiles

from partition_notify.cli import rev_commands
from partition_notify.core.errors import (
    AbortedOverwriteError,
    ConflictError,
    PlacedOverwriteAbortError,
)
from tests.support.clock import FakeClock

T = "sales.orders"


def _first_write(rm: RevisionManager, files: RevisionFiles, tmp_path: Path) -> Path:
    """The table's location (beside the SQLite store), with revision 1's file in d=1."""
    root = tmp_path / "orders"
    tx = rm.begin_write_transaction(T, ["data"])
    files.record(T, tx.revision, "w0", lambda: ["d=1/part-w0.parquet"])
    (root / "d=1").mkdir(parents=True)
    (root / "d=1" / "part-w0.parquet").write_text("old rows")
    rm.commit_write_transaction(tx)
    return root


def _place_overwrite(files: RevisionFiles, root: Path, revision: int) -> None:
    """What writers/commit.py does for overwrite wA, with the renames on disk."""
    files.record(T, revision, "wA", lambda: ["d=1/part-wA.parquet"])
    with files.placing(T, revision, "wA", ["d=1"]) as place:
        keep = place.retire(["d=1"], "_pn_retired/wA")
        retired = root / "d=1" / "_pn_retired" / "wA"
        retired.mkdir(parents=True)
        for f in (root / "d=1").glob("part-*"):
            if f"d=1/{f.name}" not in keep:
                f.rename(retired / f.name)
        (root / "d=1" / "part-wA.parquet").write_text("new rows")


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_aborting_a_placed_overwrite_is_refused(rm: RevisionManager, tmp_path: Path) -> None:
    files = RevisionFiles(rm)
    root = _first_write(rm, files, tmp_path)
    a = rm.begin_write_transaction(T, ["data"])
    _place_overwrite(files, root, a.revision)
    on_disk = _listing(root)

    with pytest.raises(PlacedOverwriteAbortError,
                       match=f"revision {a.revision} of {T} .*write wA.* placed"):
        rev_commands.abort(rm, T, a.revision)

    assert files.transaction(T, a.revision)[0] == "running", "still committable"
    assert _listing(root) == on_disk
    rev_commands.commit(rm, T, a.revision)
    assert files.visible(T, rm.create_snapshot(T)) == ["d=1/part-wA.parquet"]


def test_aborting_an_overwrite_whose_placement_was_cut_short_is_refused(
        rm: RevisionManager, clock: FakeClock, tmp_path: Path) -> None:
    """The writer died mid-rename: no rows yet, but the table's lease still names it."""
    files = RevisionFiles(rm)
    root = _first_write(rm, files, tmp_path)
    a = rm.begin_write_transaction(T, ["data"], keep_alive=3600)
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])

    class Died(Exception):
        pass

    with pytest.raises(Died), files.placing(T, a.revision, "wA", ["d=1"]) as place:
        place.lease.release = lambda commit: None  # type: ignore[method-assign]  # killed
        (root / "d=1" / "_pn_retired" / "wA").mkdir(parents=True)
        (root / "d=1" / "part-w0.parquet").rename(
            root / "d=1" / "_pn_retired" / "wA" / "part-w0.parquet")
        raise Died
    place.lease._stop.set()  # its renewer dies with it
    clock.advance(120)       # and its lease expires

    with pytest.raises(PlacedOverwriteAbortError, match="placement"):
        rev_commands.abort(rm, T, a.revision)


def test_an_overwrite_not_yet_placed_still_aborts(rm: RevisionManager, tmp_path: Path) -> None:
    files = RevisionFiles(rm)
    root = _first_write(rm, files, tmp_path)
    a = rm.begin_write_transaction(T, ["data"])
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    assert rev_commands.abort(rm, T, a.revision)["state"] == "aborted"
    assert rev_commands.abort(rm, T, a.revision)["state"] == "aborted", "idempotent"
    assert _listing(root) == ["d=1/part-w0.parquet"]


def test_the_refusal_is_a_conflict(rm: RevisionManager) -> None:
    assert issubclass(PlacedOverwriteAbortError, ConflictError)


def test_an_overwrite_aborted_before_it_placed_is_never_placed(
        rm: RevisionManager, tmp_path: Path) -> None:
    """Its abort was allowed (nothing placed yet); its writer's commit step, or its
    recovery, must then not retire the partition for an aborted revision: refused
    before anything moves, like an overtaken write (its staged data is discarded)."""
    files = RevisionFiles(rm)
    root = _first_write(rm, files, tmp_path)
    a = rm.begin_write_transaction(T, ["data"])
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    rev_commands.abort(rm, T, a.revision)

    with pytest.raises(AbortedOverwriteError, match=f"revision {a.revision} .* aborted"), \
            files.placing(T, a.revision, "wA", ["d=1"], retiring=True):
        pytest.fail("an aborted overwrite retires the partition")
    assert _listing(root) == ["d=1/part-w0.parquet"]
    snap = rm.create_snapshot(T)
    assert files.visible(T, snap) == ["d=1/part-w0.parquet"]
