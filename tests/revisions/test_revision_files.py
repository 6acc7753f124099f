"""Files per revision, snapshot visibility and settling a writer's revision (SQLite + PostgreSQL).

The Spark tests (tests/spark/test_snapshot_reads.py, test_long_writes.py,
test_recovery.py) drive the same code through real writes; these pin the
rules on both backends.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from partition_notify.revisions import RevisionManager, snapshot_partitions
from partition_notify.revisions.files import RevisionFiles
from partition_notify.store import Store

from partition_notify.core.errors import ConflictError
from tests.support.clock import FakeClock

T = "sales.orders"


def files_of(write: str, *partitions: str) -> list[str]:
    return [f"{p}/part-{write}.parquet" for p in partitions]


def test_a_snapshot_lists_the_same_files_after_appends_and_overwrites(
        store: Store, rm: RevisionManager) -> None:
    files = RevisionFiles(rm)
    first = rm.begin_write_transaction(T, ["data"])
    files.record(T, first.revision, "w1", lambda: files_of("w1", "d=1", "d=2"))
    rm.commit_write_transaction(first)
    held = rm.create_snapshot(T)
    assert files.visible(T, held) == ["d=1/part-w1.parquet", "d=2/part-w1.parquet"]

    append = rm.begin_write_transaction(T, ["data"])
    files.record(T, append.revision, "w2", lambda: files_of("w2", "d=1"))
    assert files.record(T, append.revision, "w2", lambda: pytest.fail("listed twice")) == 0
    rm.commit_write_transaction(append)
    over = rm.begin_write_transaction(T, ["data"])
    files.record(T, over.revision, "w3", lambda: files_of("w3", "d=1"))
    files.retire(T, over.revision, "w3", ["d=1"], "_pn_retired/w3")
    files.retire(T, over.revision, "w3", ["d=1"], "_pn_retired/w3")  # a resumed commit
    failed = rm.begin_write_transaction(T, ["data"])
    files.record(T, failed.revision, "w4", lambda: files_of("w4", "d=2"))
    rm.abort_write_transaction(failed)
    running = rm.begin_write_transaction(T, ["data"])
    files.record(T, running.revision, "w5", lambda: files_of("w5", "d=2"))
    rm.commit_write_transaction(over)

    # The old snapshot: the same files, found where the overwrite moved them.
    assert files.visible(T, held) == ["d=1/_pn_retired/w3/part-w1.parquet",
                                      "d=2/part-w1.parquet"]
    latest = rm.create_snapshot(T)
    assert files.visible(T, latest) == ["d=1/part-w3.parquet", "d=2/part-w1.parquet"], (
        "the overwrite hides w1 and w2 in d=1; aborted w4 and running w5 are not covered")


def test_settle_commits_a_live_transaction_and_adopts_an_expired_one(
        app: Any, clock: FakeClock) -> None:
    store, pub = app.store, app.publisher
    info = pub.register_table("sales", "orders", ["d"])
    rm = RevisionManager(store, clock=clock)
    files = RevisionFiles(rm)

    live = rm.begin_write_transaction(T, ["data"], keep_alive=10)
    assert files.settle(live, table_id=info.id) == live.revision
    assert files.transaction(T, live.revision) == ("committed", None)

    late = rm.begin_write_transaction(T, ["data"], keep_alive=10)
    files.record(T, late.revision, "w2", lambda: files_of("w2", "d=1"))
    pub.announce_partitions("sales", "orders", [{"d": "1"}], revision=late.revision)
    clock.advance(11)  # published, but the keep-alive ran out before the commit
    new = files.settle(late, table_id=info.id)
    assert new > late.revision
    snap = rm.create_snapshot(T)
    assert late.revision in snap.aborted and snap.includes(new, "data")
    assert [p.revision for p in snapshot_partitions(store, info, snap)] == [new]
    assert files.visible(T, snap) == ["d=1/part-w2.parquet"]

    refused = rm.begin_write_transaction(T, ["data"])
    rm.abort_write_transaction(refused)
    with pytest.raises(ConflictError, match="aborted"):
        files.settle(refused, table_id=info.id)
    assert files.transaction(T, refused.revision) == ("aborted", None)


def test_the_heartbeat_stops_on_keyboard_interrupt(rm: RevisionManager) -> None:
    tx = rm.begin_write_transaction(T, ["data"], keep_alive=30)
    with pytest.raises(KeyboardInterrupt), rm.kept_alive(tx, interval=0.01) as keeper:
        assert keeper.refreshed.wait(10), "the heartbeat renewed the transaction"
        raise KeyboardInterrupt
    assert not any(t.name.startswith("keep-alive") for t in threading.enumerate())
