"""A scheduler asks for the latest snapshot and gets exactly the covered partitions."""

from __future__ import annotations

from typing import Any

from partition_notify.revisions import RevisionManager, snapshot_partitions


def test_snapshot_partitions_are_those_of_covered_committed_revisions(app: Any) -> None:
    pub, store = app.publisher, app.store
    info = pub.register_table("sales", "orders", ["ds"])
    rm = RevisionManager(store)
    t = "sales.orders"

    done = rm.begin_write_transaction(t, ["data"])
    slow = rm.begin_write_transaction(t, ["data"])
    failed = rm.begin_write_transaction(t, ["data"])
    later = rm.begin_write_transaction(t, ["data"])
    for tx, ds in [(done, "d1"), (slow, "d2"), (failed, "d3"), (later, "d4")]:
        pub.announce_partitions("sales", "orders", [{"ds": ds}], revision=tx.revision)
    pub.announce_partitions("sales", "orders", [{"ds": "untracked"}])  # no revision
    rm.commit_write_transaction(done)
    rm.abort_write_transaction(failed)
    rm.commit_write_transaction(later)

    held = rm.create_snapshot(t)
    assert [p.spec for p in snapshot_partitions(store, info, held)] == ["ds=d1"]
    rm.commit_write_transaction(slow)
    # The old snapshot is repeatable; a new one covers everything committed.
    assert [p.spec for p in snapshot_partitions(store, info, held)] == ["ds=d1"]
    latest = rm.create_snapshot(t)
    assert [p.spec for p in snapshot_partitions(store, info, latest)] == ["ds=d1", "ds=d2", "ds=d4"]
