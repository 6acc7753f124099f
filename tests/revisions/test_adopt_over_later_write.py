"""An expired placed overwrite is not committed above a later write of its partitions
(SQLite + PostgreSQL, files on disk, the injected clock).

Defect (review of session 27): overwrite wA of d=1 placed its files (d=1's old file in
``_pn_retired/wA``) and expired before its commit; append wB of d=1 then committed at a
later revision. ``settle`` of wA (its writer's commit finding it expired) and its
recovery committed wA as a new revision above wB's: visibility follows revision order,
so the latest snapshot hid wB's committed rows, and the recovery's re-retirement at the
new revision moved wB's file into ``_pn_retired`` too. Housekeeping's ``adopt_placed``
already kept such an overwrite; now every path that adopts refuses it
(``ExpiredOverwriteOvertakenError``, naming the later write and the partition), and
nothing changes: wA stays expired, wB's rows and file stay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.model import WriteTransaction

from partition_notify.app import App
from partition_notify.core.errors import ConflictError, ExpiredOverwriteOvertakenError
from tests.revisions.test_purge_placed_overwrite import _listing, _table
from tests.support.clock import FakeClock, app_on_clock

T = "sales.orders"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


def _expired_overwrite_then_append(files: RevisionFiles, clock: FakeClock, root: Path,
                                   ) -> WriteTransaction:
    """wA overwrites d=1 (placed) and expires; wB appends to d=1 and commits above it."""
    rm = files.manager
    a = rm.begin_write_transaction(T, ["data"], keep_alive=30)
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    with files.placing(T, a.revision, "wA", ["d=1"], retiring=True) as place:
        place.retire(["d=1"], "_pn_retired/wA")
        (root / "d=1" / "_pn_retired" / "wA").mkdir(parents=True)
        (root / "d=1" / "part-w0.parquet").rename(
            root / "d=1" / "_pn_retired" / "wA" / "part-w0.parquet")
        (root / "d=1" / "part-wA.parquet").write_text("wA rows")
    clock.advance(120)  # wA's writer stalled: its keep-alive ran out
    b = rm.begin_write_transaction(T, ["data"])
    assert b.revision > a.revision
    files.record(T, b.revision, "wB", lambda: ["d=1/part-wB.parquet"])
    with files.placing(T, b.revision, "wB", ["d=1"]):
        (root / "d=1" / "part-wB.parquet").write_text("wB rows")
    rm.commit_write_transaction(b)
    assert files.transaction(T, a.revision)[0] == "expired"
    return a


def _unchanged(app: App, files: RevisionFiles, root: Path, a: int,
               on_disk: list[str], seen: list[str]) -> None:
    snap = app.revisions.create_snapshot(T)
    assert "d=1/part-wB.parquet" in files.visible(T, snap), "wB's committed rows hidden"
    assert files.visible(T, snap) == seen
    assert _listing(root) == on_disk, "files moved"
    assert (root / "d=1" / "part-wB.parquet").exists(), "plain reads lost wB's rows"
    assert files.transaction(T, a)[0] == "expired"


def test_settle_refuses_to_commit_an_expired_overwrite_above_a_later_append(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    root = tmp_path / "orders"
    files = _table(app, root)
    a = _expired_overwrite_then_append(files, clock, root)
    on_disk, seen = _listing(root), files.visible(T, app.revisions.create_snapshot(T))

    with pytest.raises(ExpiredOverwriteOvertakenError) as err:
        files.settle(a, table_id=None)  # wA's writer wakes up and commits
    message = str(err.value)
    assert f"revision {a.revision} of {T}" in message and "write wA" in message
    assert "write wB" in message and "partition d=1" in message
    assert "Write the partitions again" in message
    assert isinstance(err.value, ConflictError)
    _unchanged(app, files, root, a.revision, on_disk, seen)


def test_recovery_refuses_to_adopt_an_expired_overwrite_above_a_later_append(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    """What writers/recovery.py calls: ``check_adoptable`` before it places anything,
    ``adopt`` (into its new revision, or a new one) when it finishes."""
    root = tmp_path / "orders"
    files = _table(app, root)
    a = _expired_overwrite_then_append(files, clock, root)
    on_disk, seen = _listing(root), files.visible(T, app.revisions.create_snapshot(T))

    with pytest.raises(ExpiredOverwriteOvertakenError, match="write wB"):
        files.check_adoptable(T, [a.revision])
    live = app.revisions.begin_write_transaction(T, ["data"])
    with pytest.raises(ExpiredOverwriteOvertakenError, match="partition d=1"):
        files.adopt(T, [a.revision], table_id=None, into=live)
    with pytest.raises(ExpiredOverwriteOvertakenError):
        files.adopt(T, [a.revision], table_id=None)
    app.revisions.abort_write_transaction(live)
    _unchanged(app, files, root, a.revision, on_disk, seen)


def test_an_expired_overwrite_nothing_wrote_over_is_still_adopted(
        app: App, clock: FakeClock, tmp_path: Path) -> None:
    """Behaviour unchanged without a later write: settle commits a new revision."""
    root = tmp_path / "orders"
    files = _table(app, root)
    rm = app.revisions
    a = rm.begin_write_transaction(T, ["data"], keep_alive=30)
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    with files.placing(T, a.revision, "wA", ["d=1"], retiring=True) as place:
        place.retire(["d=1"], "_pn_retired/wA")
        (root / "d=1" / "part-wA.parquet").write_text("wA rows")
    clock.advance(120)
    files.check_adoptable(T, [a.revision])
    new = files.settle(a, table_id=None)
    assert new > a.revision
    assert files.visible(T, rm.create_snapshot(T)) == ["d=1/part-wA.parquet"]
