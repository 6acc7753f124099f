"""A transactional write's placement holds its table's lease, not the store (SQLite + PostgreSQL).

Defect (session 25): on SQLite ``RevisionFiles.placing`` held the database's write lock
(BEGIN IMMEDIATE) for as long as the write's files were being renamed, so every other
publish, announce or set-done on the store, of any table, waited for the whole
placement and failed past its busy timeout. The placement now takes a per-table lease
row in a short transaction, renames outside any transaction and releases the lease.
A placement held mid-way here is the real ``placing`` block (where writers/commit.py
renames) kept open on an event.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from partition_notify.revisions.files import RevisionFiles
from partition_notify.revisions.placement import PLACEMENT_LEASE_SECONDS, PlacementLease
from sqlalchemy import create_engine, inspect

from partition_notify.app import App, build_app
from partition_notify.core.errors import ConflictError, WriteOvertakenError
from tests.support.clock import FakeClock
from tests.support.migrations import downgraded

T = "sales.orders"
#: PN_CONNECT_TIMEOUT_SECONDS of these apps: the store's lock deadline is 3 x this.
CONNECT_TIMEOUT = 0.5


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


@pytest.fixture
def app(store_url: str, clock: FakeClock) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://", clock=clock,
                            connect_timeout_seconds=CONNECT_TIMEOUT)
    application.publisher.register_table("sales", "orders", ["d"])
    application.publisher.register_table("sales", "returns", ["d"])
    yield application
    application.close()


class HeldPlacement:
    """A placement of write ``write_id`` in a thread, held inside ``placing`` until released."""

    def __init__(self, files: RevisionFiles, revision: int, write_id: str,
                 partitions: list[str], *, overwrite: bool = False) -> None:
        self.placing, self.release = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.args = (files, revision, write_id, partitions, overwrite)
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"place {write_id}")
        self.lease: PlacementLease | None = None

    def _run(self) -> None:
        files, revision, write_id, partitions, overwrite = self.args
        try:
            with files.placing(T, revision, write_id, partitions) as place:
                self.lease = place.lease
                if overwrite:
                    place.retire(partitions, f"_pn_retired/{write_id}")
                self.placing.set()
                self.release.wait(60)  # the renames, for as long as the test holds them
        except BaseException as exc:
            self.error = exc
            self.placing.set()

    def __enter__(self) -> HeldPlacement:
        self.thread.start()
        assert self.placing.wait(30), "the placement began"
        assert self.error is None, self.error
        return self

    def renewals(self) -> int:
        assert self.lease is not None
        return self.lease.renewals

    def renewed_after(self, count: int) -> bool:
        """Whether the lease is renewed again after its ``count``-th renewal (within 30 s)."""
        assert self.lease is not None
        with self.lease.beat:
            return self.lease.beat.wait_for(lambda: self.lease is not None
                                            and self.lease.renewals > count, 30)

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def test_a_set_done_on_another_table_completes_while_a_placement_renames(app: App) -> None:
    files = RevisionFiles(app.revisions)
    tx = app.revisions.begin_write_transaction(T, ["data"])
    files.record(T, tx.revision, "w1", lambda: ["d=1/part-w1.parquet"])
    with HeldPlacement(files, tx.revision, "w1", ["d=1"], overwrite=True):
        started = time.monotonic()
        done = app.publisher.send_mark_set_done("sales", "returns", {"d": "1"})
        took = time.monotonic() - started
        assert took < 3 * CONNECT_TIMEOUT, took
        assert done.spec == "d=1"
    assert files.transaction(T, tx.revision)[0] == "running"


def test_a_placement_of_the_same_table_waits_for_the_lease_and_is_then_refused_if_overtaken(
        app: App) -> None:
    files = RevisionFiles(app.revisions)
    b = app.revisions.begin_write_transaction(T, ["data"])   # an append, begun first
    a = app.revisions.begin_write_transaction(T, ["data"])   # an overwrite, begun later
    files.record(T, b.revision, "wB", lambda: ["d=1/part-wB.parquet"])
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    ended = threading.Event()
    outcome: list[BaseException | None] = []

    def b_places() -> None:
        try:
            with files.placing(T, b.revision, "wB", ["d=1"]):
                outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)
        ended.set()

    with HeldPlacement(files, a.revision, "wA", ["d=1"], overwrite=True):
        waiter = threading.Thread(target=b_places, daemon=True)
        waiter.start()
        # Past the store's lock deadline (3 x CONNECT_TIMEOUT): B waits for the lease.
        assert not ended.wait(3 * 3 * CONNECT_TIMEOUT), outcome
    assert ended.wait(30)
    assert isinstance(outcome[0], WriteOvertakenError), outcome
    assert f"revision {a.revision} (write wA) overwrote partition d=1" in str(outcome[0])


def _dead_placement(store_url: str, revision: int, write_id: str) -> None:
    """A process that took ``T``'s placement lease for ``write_id`` and was SIGKILLed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.revisions.placement_worker", store_url, T,
         str(revision), write_id, "d=1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=Path(__file__).parents[2])
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"PLACING"
    finally:
        proc.kill()
        proc.wait(30)


def test_a_dead_writers_lease_is_taken_over_once_it_expires(
        app: App, store_url: str, clock: FakeClock) -> None:
    files = RevisionFiles(app.revisions)
    a = app.revisions.begin_write_transaction(T, ["data"])
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    _dead_placement(store_url, a.revision, "wA")
    c = app.revisions.begin_write_transaction(T, ["data"])
    files.record(T, c.revision, "wC", lambda: ["d=1/part-wC.parquet"])
    with pytest.raises(ConflictError, match=f"placement lease of {T} is held by write wA"), \
            files.placing(T, c.revision, "wC", ["d=1"], wait_seconds=0):
        pytest.fail("placed while the lease was live")

    # Past the lease the worker took on its own (real) clock.
    clock.advance(time.time() - clock() + PLACEMENT_LEASE_SECONDS + 1)
    with files.placing(T, c.revision, "wC", ["d=1"], wait_seconds=0):
        pass  # C's files land in d=1 under the lease it took over
    # The dead overwrite retired nothing in the store (its rows commit with the
    # release); its recovery retires again and keeps the later write's files.
    with files.placing(T, a.revision, "wA", ["d=1"], wait_seconds=0) as place:
        keep = place.retire(["d=1"], "_pn_retired/wA")
    assert keep == {"d=1/part-wA.parquet", "d=1/part-wC.parquet"}
    app.revisions.commit_write_transaction(a)
    app.revisions.commit_write_transaction(c)
    assert files.visible(T, app.revisions.create_snapshot(T)) == ["d=1/part-wA.parquet",
                                                                  "d=1/part-wC.parquet"]


def test_the_recovery_of_the_dead_write_takes_its_own_lease_at_once(
        app: App, store_url: str) -> None:
    files = RevisionFiles(app.revisions)
    a = app.revisions.begin_write_transaction(T, ["data"])
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    _dead_placement(store_url, a.revision, "wA")
    # Only one process resumes a write (its staging lock): the lease is its own.
    with files.placing(T, a.revision, "wA", ["d=1"], wait_seconds=0) as place:
        assert place.retire(["d=1"], "_pn_retired/wA") == {"d=1/part-wA.parquet"}


def test_a_long_placement_renews_its_lease(app: App, clock: FakeClock) -> None:
    lease = 0.4  # renewed every lease/4 of real time; expiry is on the store's clock
    files = RevisionFiles(app.revisions, lease_seconds=lease)
    a = app.revisions.begin_write_transaction(T, ["data"])
    c = app.revisions.begin_write_transaction(T, ["data"])
    with HeldPlacement(files, a.revision, "wA", ["d=1"]) as held:
        for _ in range(3):   # 0.9 s of store time in all, more than twice the lease
            renewed = held.renewals()
            clock.advance(0.3)
            assert held.renewed_after(renewed), "the lease was renewed"
        with pytest.raises(ConflictError, match="held by write wA"), \
                files.placing(T, c.revision, "wC", ["d=1"], wait_seconds=0):
            pytest.fail("placed while the lease was live")
    with files.placing(T, c.revision, "wC", ["d=1"], wait_seconds=0):
        pass  # released


def test_migration_0019_upgrades_a_0018_store_and_downgrades_again(
        app: App, store_url: str) -> None:
    files = RevisionFiles(app.revisions)
    a = app.revisions.begin_write_transaction(T, ["data"])
    files.record(T, a.revision, "wA", lambda: ["d=1/part-wA.parquet"])
    with downgraded(store_url, "0018") as conn:
        assert not inspect(conn).has_table("pn_revision_placements")
    # Upgraded to head on leaving the block: what the next start of anything does.
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            assert inspect(conn).has_table("pn_revision_placements")
    finally:
        engine.dispose()
    with files.placing(T, a.revision, "wA", ["d=1"], wait_seconds=0) as place:
        assert place.retire(["d=1"], "_pn_retired/wA") == {"d=1/part-wA.parquet"}
    app.revisions.commit_write_transaction(a)
    assert files.visible(T, app.revisions.create_snapshot(T)) == ["d=1/part-wA.parquet"]
