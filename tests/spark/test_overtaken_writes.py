"""A write overtaken by a later revision's overwrite of its partition.

Defect (session 24): revisions are handed out when a write begins, data is placed
when it commits. An append begun first (revision B) whose commit step placed its
files after an overwrite begun later (revision A > B) had retired the partition
left the store's rows and the files disagreeing: recorded before A's retire, its
rows said "moved to ``_pn_retired/<A>/``" while the files sat in the partition
(snapshots at B failed with PATH_NOT_FOUND; the vacuum marked them removed and
they stayed, read by every plain read of the table); recorded after, the files
sat in the partition the overwrite had replaced, rows A's snapshot hid but the
table's directory served. Now placement and retirement are serialised per
table and such a write is refused (WriteOvertakenError), its revision aborted,
nothing of it placed. Real Spark, real files, real SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.repositories import RevisionUnitOfWork
from partition_notify.writers.snapshot_read import read_snapshot

from partition_notify.app import App, build_app
from partition_notify.core.errors import ConflictError
from partition_notify.serve.housekeeping import purge_all
from tests.spark.test_writers import frame, path_writer, rows_for
from tests.support.clock import FakeClock

pytestmark = pytest.mark.spark

T = "sales.orders"
PART = Path("datestamp=20110228") / "region=us"
#: Past the documented default PN_RETIRED_FILE_RETENTION_SECONDS (7 days).
PAST_RETENTION = 7 * 86400 + 1


class _Interleaved(RevisionFiles):
    """B's file bookkeeping: ``meanwhile`` (A's whole overwrite) runs when B's commit
    step records its files, before or after the record itself."""

    def __init__(self, base: RevisionFiles, meanwhile: Callable[[], None], *,
                 before_record: bool) -> None:
        super().__init__(base.manager)
        self.meanwhile = meanwhile
        self.before_record = before_record

    def record(self, table: str, revision: int, write_id: str,
               listing: Callable[[], Iterable[str]]) -> int:
        if self.before_record:
            self.meanwhile()
        n = super().record(table, revision, write_id, listing)
        if not self.before_record:
            self.meanwhile()
        return n


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


def _data_files(root: Path) -> set[str]:
    """Data files Spark's plain read of the table serves (no ``_``/``.`` entry below)."""
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)}


def _live_rows(app: App, root: Path) -> tuple[set[str], set[str]]:
    """(paths rows name as live, paths rows name as retired), committed revisions only."""
    aborted = set(app.revisions.aborted_revisions(T))
    with RevisionUnitOfWork(app.store.engine, write=False) as uow:
        rows = [r for r in uow.files.up_to(T, 10**9)
                if r.revision not in aborted and r.removed_at is None]
        return ({r.path for r in rows if r.retired_to is None},
                {r.path for r in rows if r.retired_to is not None})


def _assert_rows_match_files(app: App, root: Path) -> None:
    """What the rows say is where the files are: every file a row names exists, every
    data file a plain read serves is named by a live row."""
    live, retired = _live_rows(app, root)
    missing = sorted(p for p in live | retired if not (root / p).exists())
    assert missing == [], f"rows name files that are not there: {missing}"
    unnamed = sorted(_data_files(root) - live)
    assert unnamed == [], f"files served by a plain read that no live row names: {unnamed}"


@pytest.mark.parametrize("before_record", [True, False], ids=["a-before-b-records",
                                                              "a-after-b-records"])
def test_an_append_overtaken_by_a_later_overwrite_is_refused(spark, app, clock, tmp_path,
                                                             before_record):
    root = tmp_path / "warehouse" / "orders"
    revisions = app.revisions
    first = path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110228"], ["us"])))              # 3 rows, committed
    r0 = first.revision
    overwrite: dict[str, Any] = {}

    def a_overwrites() -> None:   # begun after B (A > B), committed before B places
        result = path_writer(app, tmp_path, revisions=revisions).write(
            frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite")
        overwrite["revision"] = result.revision

    b = path_writer(app, tmp_path, revisions=revisions)
    assert b.files is not None
    b.files = _Interleaved(b.files, a_overwrites, before_record=before_record)
    refused: ConflictError | None = None
    try:
        b.write(frame(spark, [(100 + i, float(i), "20110228", "us") for i in range(5)]))
    except ConflictError as exc:
        refused = exc
    a = overwrite["revision"]
    assert r0 is not None and a > r0 + 1, "B's revision lies between the first write and A"

    _assert_rows_match_files(app, root)
    plain = _rows(spark.read.parquet(str(root)))
    assert plain == [(0, "20110228", "us")], "the table holds exactly A's data"
    assert _rows(read_snapshot(spark, app, "sales", "orders").frame) == plain
    for at in range(r0, a):      # every revision below A reads the first write's rows
        snap = revisions.create_snapshot(T, at)
        assert len(_rows(read_snapshot(spark, app, "sales", "orders", snapshot=snap).frame)) \
            == 3, at
    from partition_notify.core.errors import WriteOvertakenError

    assert isinstance(refused, WriteOvertakenError), refused
    assert f"revision {a}" in str(refused) and "datestamp=20110228/region=us" in str(refused)
    assert revisions.running_transactions(T) == [], "B's revision is aborted, not left open"
    assert not list((root / "_pn_staging").glob("*")), "B's staged files are gone"

    # The vacuum deletes what the rows call retired, and only that.
    clock.advance(PAST_RETENTION)
    purge_all(app, 10, None)
    assert not (root / PART / "_pn_retired").exists()
    assert _rows(spark.read.parquet(str(root))) == plain
    assert _data_files(root) == _live_rows(app, root)[0]


class _DriverDied(RuntimeError):
    pass


def test_recovery_refuses_an_overwrite_overtaken_while_its_driver_was_dead(
        spark, app, tmp_path, caplog):
    """B (an overwrite this time) recorded its files, its driver died before placing
    them; A (begun later) overwrote the partition and committed; B's recovery is
    refused and logged, the other writes' recovery and the table are unaffected."""
    import logging

    from partition_notify.writers import CommitIncompleteError

    from tests.spark.test_recovery import age_locks

    root = tmp_path / "warehouse" / "orders"
    revisions = app.revisions
    r0 = path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110228"], ["us"]))).revision

    def dies() -> None:
        raise _DriverDied("the driver died before placing its data")

    b = path_writer(app, tmp_path, revisions=revisions)
    assert b.files is not None
    b.files = _Interleaved(b.files, dies, before_record=False)
    with pytest.raises(CommitIncompleteError):
        b.write(frame(spark, [(100 + i, float(i), "20110228", "us") for i in range(5)]),
                mode="overwrite")
    a = path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110228"], ["us"], per=1)), mode="overwrite").revision
    assert r0 is not None and a is not None and a > r0 + 1

    age_locks(tmp_path, 3600)
    with caplog.at_level(logging.ERROR):
        done = path_writer(app, tmp_path, revisions=revisions).recover(
            spark, stale_after_seconds=0.0)
    assert done == []
    assert any(f"was overtaken: revision {a}" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    assert any("overtaken by a later overwrite" in r.getMessage()
               and getattr(r, "pn_event", None) == "write.discarded_overtaken"
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert revisions.running_transactions(T) == [], "B's revision is aborted"
    assert not list((root / "_pn_staging").glob("*"))
    _assert_rows_match_files(app, root)
    assert _rows(spark.read.parquet(str(root))) == [(0, "20110228", "us")]
    for at in range(r0, a):
        snap = revisions.create_snapshot(T, at)
        assert len(_rows(read_snapshot(spark, app, "sales", "orders", snapshot=snap).frame)) \
            == 3, at


def test_recovery_discards_an_overwrite_aborted_before_it_placed(spark, app, tmp_path, caplog):
    """Session 26: B (an overwrite) recorded its files and its driver died before placing
    them; an operator aborted B (``rev abort``: allowed, nothing placed). Its recovery
    used to place it anyway: plain reads of the partition then read B's rows, the old
    ones sat in ``_pn_retired`` for a revision no snapshot includes, and nothing would
    ever put them back. Now it is refused (AbortedOverwriteError), logged, discarded."""
    import logging

    from partition_notify.writers import CommitIncompleteError

    from partition_notify.cli import rev_commands
    from tests.spark.test_recovery import age_locks

    root = tmp_path / "warehouse" / "orders"
    revisions = app.revisions
    path_writer(app, tmp_path, revisions=revisions).write(
        frame(spark, rows_for(["20110228"], ["us"])))

    def dies() -> None:
        raise _DriverDied("the driver died before placing its data")

    b = path_writer(app, tmp_path, revisions=revisions)
    assert b.files is not None
    b.files = _Interleaved(b.files, dies, before_record=False)
    with pytest.raises(CommitIncompleteError):
        b.write(frame(spark, [(100 + i, float(i), "20110228", "us") for i in range(5)]),
                mode="overwrite")
    [running] = revisions.running_transactions(T)
    rev_commands.abort(revisions, T, running.revision)

    age_locks(tmp_path, 3600)
    with caplog.at_level(logging.ERROR):
        done = path_writer(app, tmp_path, revisions=revisions).recover(
            spark, stale_after_seconds=0.0)
    assert done == []
    assert any("aborted on request before it placed" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    # Review of session 26: the discard said "overtaken by a later overwrite" for it.
    discards = [r for r in caplog.records if "not placed" in r.getMessage()]
    assert discards and all("overtaken" not in r.getMessage() for r in discards), \
        [r.getMessage() for r in discards]
    assert any("aborted on request" in r.getMessage()
               and getattr(r, "pn_event", None) == "write.discarded_aborted"
               for r in discards), [r.getMessage() for r in discards]
    assert not list((root / "_pn_staging").glob("*"))
    assert not list(root.rglob("_pn_retired")), "nothing retired"
    assert _rows(spark.read.parquet(str(root))) == [
        (i, "20110228", "us") for i in range(3)], "the plain read keeps r0's rows"
