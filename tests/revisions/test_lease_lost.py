"""A placement whose lease is lost renames no more (SQLite + PostgreSQL, Spark's local FS).

Defect (session 26): a holder whose renewals failed for a whole lease (the store
unreachable, its lease row locked) went on renaming: only a renewal that *succeeded*
in finding the lease gone set ``lost``, and nothing read it before the release. By
then another write may have taken the lease over and be renaming in the same
partitions. Now a lease not renewed for a whole lease (or found taken over) is lost,
in memory, and the holder checks it before each rename (``HadoopFs.retire_files`` /
``merge_into`` ``guard``, as writers/commit.py passes it): it stops, the placement
raises, its recovery places the write again.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.placement import PlacementLease
from partition_notify.writers.hadoop import HadoopFs
from sqlalchemy import text

from partition_notify.app import App, build_app
from partition_notify.core.errors import ConflictError
from tests.support.clock import FakeClock

pytestmark = pytest.mark.spark

T = "sales.orders"
#: The store's lock deadline is 3 x this: a renewal blocked on the lease row gives up then.
CONNECT_TIMEOUT = 0.5
#: Short, so that it runs out while the test holds the lease row (renewals every 0.2 s).
LEASE = 0.8


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://",
                            clock=FakeClock(1_800_000_000.0),
                            connect_timeout_seconds=CONNECT_TIMEOUT)
    yield application
    application.close()


def _partition(root: Path) -> list[str]:
    (root / "d=1").mkdir(parents=True)
    for i in range(3):
        (root / "d=1" / f"part-w0-{i}.parquet").write_bytes(b"PAR1 old")
    return _names(root)


def _names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _lost(lease: PlacementLease) -> bool:
    """Waits (30 s at most) for the holder to learn it lost its lease."""
    with lease.beat:
        return lease.beat.wait_for(lambda: lease.lost is not None, 30)


class RowLocked:
    """Another transaction holds ``T``'s lease row (on SQLite: the database's write lock)."""

    def __init__(self, app: App) -> None:
        self.app, self.locked, self.done = app, threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        engine = self.app.store.engine
        if engine.dialect.name == "sqlite":  # a plain connection: its own BEGIN IMMEDIATE
            raw = sqlite3.connect(str(engine.url.database), isolation_level=None)
            try:
                raw.execute("BEGIN IMMEDIATE")
                self.locked.set()
                self.done.wait(60)
                raw.execute("ROLLBACK")
            finally:
                raw.close()
            return
        with engine.connect() as conn:
            conn.execute(text("SELECT holder FROM pn_revision_placements "
                              "WHERE table_name = :t FOR UPDATE"), {"t": T})
            self.locked.set()
            self.done.wait(60)
            conn.rollback()

    def __enter__(self) -> RowLocked:
        self.thread.start()
        assert self.locked.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(30)


def _place_after_loss(app: App, spark: Any, root: Path, lose: Any) -> None:
    files = RevisionFiles(app.revisions, lease_seconds=LEASE)
    tx = app.revisions.begin_write_transaction(T, ["data"], keep_alive=3600)
    files.record(T, tx.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    staged = root.parent / "staging"
    (staged / "d=1").mkdir(parents=True)
    (staged / "d=1" / "part-wA.parquet").write_bytes(b"PAR1 new")
    fs = HadoopFs(spark, str(root))
    with pytest.raises(ConflictError, match="taken over"), \
            files.placing(T, tx.revision, "wA", ["d=1"]) as place:
        keep = place.retire(["d=1"], "_pn_retired/wA")
        with lose(app, place.lease):
            assert _lost(place.lease), "the holder never learnt it lost its lease"
            try:
                fs.retire_files(str(root), ["d=1"], "_pn_retired/wA", keep=keep,
                                guard=place.lease.check)
            finally:
                with pytest.raises(ConflictError, match="taken over"):
                    fs.merge_into(str(staged), str(root), 1, guard=place.lease.check)


@pytest.mark.parametrize("how", ["renewals-fail", "taken-over"])
def test_a_holder_that_lost_its_lease_renames_nothing_more(
        app: App, spark: Any, tmp_path: Path, how: str) -> None:
    root = tmp_path / "orders"
    before = _partition(root)

    class Lose:
        def __init__(self, app: App, lease: PlacementLease) -> None:
            self.app, self.lease = app, lease
            self.locked = RowLocked(app) if how == "renewals-fail" else None

        def __enter__(self) -> Lose:
            if self.locked is not None:
                self.locked.__enter__()  # every renewal now waits, then fails
            else:  # another write took it over after it expired
                with self.app.store.engine.begin() as conn:
                    conn.execute(text("UPDATE pn_revision_placements SET holder = 'wB', "
                                      "token = 'other' WHERE table_name = :t"), {"t": T})
            return self

        def __exit__(self, *exc: object) -> None:
            if self.locked is not None:
                self.locked.__exit__()

    _place_after_loss(app, spark, root, Lose)
    assert _names(root) == before, "a file moved after the lease was lost"
    assert not (root / "_temporary").exists() or not any((root / "_temporary").rglob("*"))
