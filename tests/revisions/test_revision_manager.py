"""The revision manager's snapshot-isolation scenarios against SQLite and PostgreSQL.

Data is modelled as in the revision-manager design: every write of a cell is tagged with the
writer's revision, and a read returns the value of the highest revision the
snapshot includes.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from partition_notify.revisions import RevisionManager, Snapshot, WriteTransaction
from partition_notify.revisions.schema import RevisionTxnRow
from partition_notify.store import Store

from partition_notify.core.errors import ConflictError, NotFoundError, StoreError, ValidationError
from tests.support.clock import FakeClock

T = "news.articles"


class Cells:
    """A toy versioned table: (family, key) -> {revision: value}."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)

    def write(self, tx: WriteTransaction, family: str, key: str, value: str) -> None:
        assert family in tx.families
        self.cells[(family, key)][tx.revision] = value

    def read(self, snap: Snapshot, family: str, key: str) -> str | None:
        versions = self.cells[(family, key)]
        visible = snap.visible(versions, family)
        return versions[max(visible)] if visible else None


def test_jobs_a_b_c_snapshot_sees_a_not_b(rm: RevisionManager) -> None:
    data = Cells()
    a = rm.begin_write_transaction(T, ["cf"])
    b = rm.begin_write_transaction(T, ["cf"])
    assert b.revision > a.revision
    data.write(a, "cf", "x", "from A")
    rm.commit_write_transaction(a)
    data.write(b, "cf", "x", "from B")

    c = rm.create_snapshot(T)
    assert data.read(c, "cf", "x") == "from A"
    rm.commit_write_transaction(b)
    # Even after B finished, C's snapshot still reads A's value: repeatable.
    assert data.read(c, "cf", "x") == "from A"
    assert data.read(rm.create_snapshot(T), "cf", "x") == "from B"


def test_earlier_running_transaction_hides_later_commit(rm: RevisionManager) -> None:
    """The snapshot-isolation counter-example: A began first, B committed, then A writes x."""
    data = Cells()
    data.write(seed := rm.begin_write_transaction(T, ["cf"]), "cf", "x", "v0")
    rm.commit_write_transaction(seed)
    a = rm.begin_write_transaction(T, ["cf"])
    b = rm.begin_write_transaction(T, ["cf"])
    data.write(b, "cf", "x", "from B")
    rm.commit_write_transaction(b)

    c = rm.create_snapshot(T)
    assert c.revision("cf") == a.revision - 1
    first = data.read(c, "cf", "x")
    data.write(a, "cf", "x", "from A")
    rm.commit_write_transaction(a)
    assert data.read(c, "cf", "x") == first == "v0"


def test_long_running_transaction_holds_back_its_family_only(rm: RevisionManager) -> None:
    data = Cells()
    long_job = rm.begin_write_transaction(T, ["clusters"])
    same_family = rm.begin_write_transaction(T, ["clusters"])
    ingest = rm.begin_write_transaction(T, ["articles"])
    data.write(same_family, "clusters", "x", "cluster-7")
    data.write(ingest, "articles", "x", "breaking news")
    rm.commit_write_transaction(same_family)
    rm.commit_write_transaction(ingest)

    snap = rm.create_snapshot(T)
    # Held back: a committed write to the long job's family is invisible...
    assert snap.revision("clusters") == long_job.revision - 1
    assert data.read(snap, "clusters", "x") is None
    # ...while the unrelated family's write goes through.
    assert snap.revision("articles") == ingest.revision
    assert data.read(snap, "articles", "x") == "breaking news"

    rm.commit_write_transaction(long_job)
    later = rm.create_snapshot(T)
    assert data.read(later, "clusters", "x") == "cluster-7"
    assert later.revisions == {"articles": ingest.revision, "clusters": ingest.revision}


def test_transaction_over_two_families_holds_back_both(rm: RevisionManager) -> None:
    both = rm.begin_write_transaction(T, ["a", "b"])
    other = rm.begin_write_transaction(T, ["c"])
    rm.commit_write_transaction(other)
    snap = rm.create_snapshot(T)
    assert snap.revisions == {"a": both.revision - 1, "b": both.revision - 1, "c": other.revision}
    # A family nobody has declared has nothing running.
    assert snap.revision("never-written") == snap.latest_revision == other.revision


def test_keep_alive_extends_a_transaction(rm: RevisionManager, clock: FakeClock) -> None:
    kept = rm.begin_write_transaction(T, ["cf"], keep_alive=60)
    dropped = rm.begin_write_transaction(T, ["other"], keep_alive=60)
    clock.advance(50)
    kept = rm.keep_alive(kept)
    assert kept.expires_at == clock.now + 60
    clock.advance(50)  # 100 s since begin: past the original deadline
    snap = rm.create_snapshot(T)
    assert snap.revision("cf") == kept.revision - 1  # still running, still holding back
    assert dropped.revision in snap.aborted
    rm.commit_write_transaction(kept)
    assert rm.create_snapshot(T).includes(kept.revision, "cf")
    with pytest.raises(ConflictError, match="expired"):
        rm.commit_write_transaction(dropped)


def test_keep_alive_with_explicit_seconds(rm: RevisionManager, clock: FakeClock) -> None:
    tx = rm.begin_write_transaction(T, ["cf"], keep_alive=10)
    tx = rm.keep_alive(tx, seconds=300)
    clock.advance(200)
    assert [t.revision for t in rm.running_transactions(T)] == [tx.revision]
    clock.advance(101)
    assert rm.running_transactions(T) == []
    with pytest.raises(ConflictError, match="expired"):
        rm.keep_alive(tx)


def test_abandoned_transaction_expires_lazily(
    rm: RevisionManager, store: Store, clock: FakeClock
) -> None:
    abandoned = rm.begin_write_transaction(T, ["cf"], keep_alive=30)
    done = rm.begin_write_transaction(T, ["cf"], keep_alive=30)
    rm.commit_write_transaction(done)
    assert rm.create_snapshot(T).revision("cf") == abandoned.revision - 1

    clock.advance(31)
    snap = rm.create_snapshot(T)
    # Skipped by the snapshot, reported as aborted...
    assert snap.revision("cf") == done.revision
    assert snap.aborted == {abandoned.revision}
    assert not snap.includes(abandoned.revision, "cf")
    # ...but, as the seed decided, only recorded by the next begin.
    assert _state(store, abandoned) == ("running", None)
    rm.begin_write_transaction(T, ["cf"])
    assert _state(store, abandoned) == ("aborted", "expired")
    with pytest.raises(ConflictError, match="expired"):
        rm.commit_write_transaction(abandoned)
    with pytest.raises(ConflictError, match="expired"):
        rm.keep_alive(abandoned)


def test_everything_survives_a_restart(store_url: str, clock: FakeClock) -> None:
    first = Store.open(store_url, clock=clock)
    rm1 = RevisionManager(first, clock=clock)
    running = rm1.begin_write_transaction(T, ["cf"])
    aborted = rm1.begin_write_transaction(T, ["cf"])
    rm1.abort_write_transaction(aborted)
    first.close()

    second = Store.open(store_url, clock=clock)
    try:
        rm2 = RevisionManager(second, clock=clock)
        snap = rm2.create_snapshot(T)
        assert snap.revision("cf") == running.revision - 1
        assert snap.aborted == {aborted.revision}
        assert rm2.begin_write_transaction(T, ["cf"]).revision == aborted.revision + 1
        rm2.commit_write_transaction(running)  # a handle from before the restart
        assert rm2.create_snapshot(T).includes(running.revision, "cf")
    finally:
        second.close()


def test_revisions_are_per_table(rm: RevisionManager) -> None:
    assert rm.begin_write_transaction("db.one", ["cf"]).revision == 1
    assert rm.begin_write_transaction("db.one", ["cf"]).revision == 2
    assert rm.begin_write_transaction("db.two", ["cf"]).revision == 1
    assert rm.tables() == ["db.one", "db.two"]


def test_aborted_revisions_are_listed_and_excluded(rm: RevisionManager) -> None:
    data = Cells()
    ok = rm.begin_write_transaction(T, ["cf"])
    bad = rm.begin_write_transaction(T, ["cf"])
    data.write(ok, "cf", "x", "good")
    data.write(bad, "cf", "x", "half-written")
    rm.commit_write_transaction(ok)
    rm.abort_write_transaction(bad)
    snap = rm.create_snapshot(T)
    assert snap.revision("cf") == bad.revision
    assert snap.aborted == {bad.revision}
    assert data.read(snap, "cf", "x") == "good"
    assert rm.aborted_revisions(T) == [bad.revision]


def test_commit_and_abort_are_idempotent_and_final(rm: RevisionManager) -> None:
    a = rm.begin_write_transaction(T, ["cf"])
    rm.commit_write_transaction(a)
    rm.commit_write_transaction(a)
    with pytest.raises(ConflictError, match="has committed"):
        rm.abort_write_transaction(a)
    b = rm.begin_write_transaction(T, ["cf"])
    rm.abort_write_transaction(b)
    rm.abort_write_transaction(b)
    with pytest.raises(ConflictError, match="was aborted"):
        rm.commit_write_transaction(b)
    with pytest.raises(NotFoundError, match="no transaction 99"):
        rm.commit_write_transaction(WriteTransaction(T, 99, ("cf",), 1, 0, 1))
    with pytest.raises(NotFoundError, match="no transaction"):
        rm.commit_write_transaction(WriteTransaction("db.unknown", 1, ("cf",), 1, 0, 1))


def test_snapshot_at_a_given_revision(rm: RevisionManager, store: Store) -> None:
    # Registered but untouched: the empty snapshot (an unknown name is refused).
    store.catalog.register_table("news", "articles", ["ds"], topic="t", retention_seconds=60)
    assert rm.create_snapshot(T) == Snapshot(T, {}, 0)
    with pytest.raises(NotFoundError, match="no revisions"):
        rm.create_snapshot(T, 1)
    r1 = rm.begin_write_transaction(T, ["cf"])
    rm.commit_write_transaction(r1)
    r2 = rm.begin_write_transaction(T, ["cf", "cf2"])
    r3 = rm.begin_write_transaction(T, ["cf"])
    rm.abort_write_transaction(r3)

    at1 = rm.create_snapshot(T, r1.revision)
    assert at1.revisions == {"cf": 1, "cf2": 1} and at1.latest_revision == 1
    with pytest.raises(ConflictError, match=r"transaction 2 .* still running"):
        rm.create_snapshot(T, r3.revision)
    rm.commit_write_transaction(r2)
    at3 = rm.create_snapshot(T, r3.revision)
    assert at3.aborted == {r3.revision} and at3.revision("cf") == 3
    with pytest.raises(NotFoundError, match="not been allocated"):
        rm.create_snapshot(T, 4)
    with pytest.raises(ValidationError):
        rm.create_snapshot(T, -1)


def test_snapshot_round_trips_as_json(rm: RevisionManager) -> None:
    tx = rm.begin_write_transaction(T, ["cf"])
    rm.abort_write_transaction(tx)
    snap = rm.create_snapshot(T)
    assert Snapshot.from_dict(snap.to_dict()) == snap
    assert WriteTransaction.from_dict(tx.to_dict()) == tx
    with pytest.raises(ValidationError, match="not a snapshot"):
        Snapshot.from_dict({"table": T})


@pytest.mark.parametrize(
    ("table", "families", "keep_alive", "match"),
    [
        ("", ["cf"], None, "table name"),
        (" t", ["cf"], None, "table name"),
        ("x" * 261, ["cf"], None, "at most 260"),
        (T, [], None, "at least one column family"),
        (T, "cf", None, "list of names"),
        (T, [""], None, "family ''"),
        (T, ["cf"], 0, "keep_alive"),
        (T, ["cf"], float("inf"), "keep_alive"),
    ],
)
def test_bad_input_is_rejected_before_anything_is_stored(
    rm: RevisionManager, table: str, families: object, keep_alive: float | None, match: str
) -> None:
    with pytest.raises(ValidationError, match=match):
        rm.begin_write_transaction(table, families, keep_alive=keep_alive)  # type: ignore[arg-type]
    assert rm.tables() == []


def test_database_errors_are_store_errors(tmp_path: object) -> None:
    from partition_notify.store import make_engine

    unmigrated = make_engine(f"sqlite:///{tmp_path}/empty.db")
    with pytest.raises(StoreError, match="no such table"):
        RevisionManager(unmigrated).begin_write_transaction(T, ["cf"])
    with pytest.raises(StoreError, match="no such table"):
        RevisionManager(unmigrated).create_snapshot(T)


def test_kept_alive_thread_extends_while_a_write_runs(
    rm: RevisionManager, clock: FakeClock
) -> None:
    tx = rm.begin_write_transaction(T, ["cf"], keep_alive=60)
    clock.advance(55)
    with rm.kept_alive(tx, interval=0.01) as keeper:
        assert keeper.refreshed.wait(10), "no keep-alive within 10 s"
    assert keeper.error is None
    assert rm.running_transactions(T)[0].expires_at == clock.now + 60
    clock.advance(30)  # past the begin's deadline, within the refreshed one
    rm.commit_write_transaction(tx)


def _state(store: Store, tx: WriteTransaction) -> tuple[str, str | None]:
    from sqlalchemy.orm import Session

    with Session(store.engine) as s:
        row = s.get(RevisionTxnRow, (tx.table, tx.revision))
        assert row is not None
        return row.state, row.reason


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), 1e300, "60", True])
def test_keep_alive_must_be_seconds_in_range(rm: RevisionManager, seconds: object) -> None:
    # 1e300 was accepted before session 18: a deadline no time.monotonic() reaches.
    with pytest.raises(ValidationError, match="keep_alive must be a positive number of seconds"):
        rm.begin_write_transaction(T, ["cf"], keep_alive=seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize("families", [None, 5, [["a"]]])
def test_families_that_are_not_a_list_of_names_are_refused(rm: RevisionManager,
                                                           families: object) -> None:
    with pytest.raises(ValidationError, match="famil"):
        rm.begin_write_transaction(T, families)  # type: ignore[arg-type]
    assert rm.tables() == []


@pytest.mark.parametrize("tx", [None, 7, {"table": T, "revision": 1}])
def test_finishing_something_that_is_not_a_transaction_names_it(rm: RevisionManager,
                                                                tx: object) -> None:
    rm.begin_write_transaction(T, ["a"])
    for finish in (rm.commit_write_transaction, rm.abort_write_transaction, rm.keep_alive):
        with pytest.raises(ValidationError, match="WriteTransaction"):
            finish(tx)  # type: ignore[arg-type]
    assert [t.revision for t in rm.running_transactions(T)] == [1]
