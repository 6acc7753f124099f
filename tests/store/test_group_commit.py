"""Concurrent publishes share a commit on a real SQLite file, and each returns durable.

A raw connection holds SQLite's write lock while eight threads publish: the
first (the leader) waits for the lock with its own event, the other seven
queue behind it. Once the lock is released they must take two commits, not
eight, and every publish must return only once another connection can read
its event (the durability promise of one publish is unchanged).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from partition_notify.store.group_commit import GroupCommit

from partition_notify.app import build_app
from partition_notify.contract import SetDoneMessage
from partition_notify.core.errors import StoreError

THREADS = 8


def test_waiting_publishers_share_one_commit_and_return_durable(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with build_app(store_url=f"sqlite:///{path}", transport_url="embedded://") as app:
        app.publisher.register_table("gc", "t", ["ds"])
        group = app.store.log._group
        before = (group.commits, group.items)
        results: dict[int, tuple[SetDoneMessage, bool]] = {}
        errors: list[BaseException] = []

        def publish(i: int) -> None:
            try:
                msg = app.publisher.send_mark_set_done("gc", "t", f"ds={i}")
                # Read back on a connection of its own, right after the call returned.
                with sqlite3.connect(path) as other:
                    row = other.execute("SELECT message_id FROM pn_events WHERE event_id = ?",
                                        (msg.event_id,)).fetchone()
                results[i] = (msg, row is not None and row[0] == msg.message_id)
            except BaseException as exc:  # reported below
                errors.append(exc)

        lock = sqlite3.connect(path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        threads = [threading.Thread(target=publish, args=(i,)) for i in range(THREADS)]
        try:
            threads[0].start()
            # The leader took its own batch and waits for the lock; the rest queue.
            for t in threads[1:]:
                t.start()
            assert group.wait_queued(THREADS - 1, timeout=30), "publishers did not queue"
        finally:
            lock.execute("COMMIT")
            lock.close()
            for t in threads:
                t.join(60)
        assert not errors, errors
        assert (group.commits - before[0], group.items - before[1]) == (2, THREADS)
        assert all(durable for _, durable in results.values()), results
        ids = sorted(msg.event_id for msg, _ in results.values())
        assert len(set(ids)) == THREADS and ids == list(range(ids[0], ids[0] + THREADS))
        assert sorted(msg.spec for msg, _ in results.values()) == sorted(
            f"ds={i}" for i in range(THREADS))


def test_a_failing_item_fails_only_its_caller() -> None:
    gate = threading.Event()
    batches: list[list[int]] = []

    def run_batch(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        if list(items) == [0]:
            assert gate.wait(30)  # the leader's batch: held while the others queue
        if -1 in items:
            raise ValueError(f"bad item in {list(items)}")
        return [i * 10 for i in items]

    group: GroupCommit[int, int] = GroupCommit(run_batch, wait_seconds=30)
    out: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            out[i] = group.submit(i)
        except ValueError as exc:
            out[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in (0, 1, -1, 2)]
    threads[0].start()
    for t in threads[1:]:
        t.start()
    assert group.wait_queued(3, timeout=30)
    gate.set()
    for t in threads:
        t.join(30)
    assert out[0] == 0 and out[1] == 10 and out[2] == 20
    assert isinstance(out[-1], ValueError)
    # The shared batch failed as a whole, then each of its items ran alone.
    assert batches[0] == [0] and sorted(batches[1]) == [-1, 1, 2]
    assert sorted(b[0] for b in batches[2:]) == [-1, 1, 2] and all(len(b) == 1 for b in batches[2:])
    assert (group.commits, group.items) == (3, 3)


def test_a_follower_past_its_deadline_is_withdrawn_not_logged() -> None:
    gate, entered = threading.Event(), threading.Event()
    logged: list[int] = []

    def run_batch(items: Sequence[int]) -> list[int]:
        entered.set()
        assert gate.wait(30)
        logged.extend(items)
        return list(items)

    group: GroupCommit[int, int] = GroupCommit(run_batch, wait_seconds=0.2)
    leader = threading.Thread(target=group.submit, args=(1,))
    leader.start()
    assert entered.wait(30)  # the leader holds the commit
    with pytest.raises(StoreError, match="was not logged"):
        group.submit(2)
    gate.set()
    leader.join(30)
    assert group.submit(3) == 3
    assert logged == [1, 3]


def test_publishers_without_group_commit_each_run_their_own_transaction(
        tmp_path: Path) -> None:
    """``group_commit`` off (bench/durable_publish.py's "one commit each"): the
    publishing threads share the log's one SQLite writer connection, so each must
    have it to itself from BEGIN to COMMIT. They all start while another
    connection holds the write lock, so they contend for it at its release."""
    path = tmp_path / "store.db"
    per_thread = 25
    with build_app(store_url=f"sqlite:///{path}", transport_url="embedded://") as app:
        app.publisher.register_table("gc", "t", ["ds"])
        app.store.log.group_commit = False
        started = threading.Barrier(THREADS + 1, timeout=30)
        errors: list[BaseException] = []
        sent: list[SetDoneMessage] = []

        def publish(k: int) -> None:
            started.wait()
            try:
                for i in range(per_thread):
                    sent.append(app.publisher.send_mark_set_done("gc", "t", f"ds={k}_{i}"))
            except BaseException as exc:  # reported below
                errors.append(exc)

        lock = sqlite3.connect(path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        threads = [threading.Thread(target=publish, args=(k,)) for k in range(THREADS)]
        try:
            for t in threads:
                t.start()
            started.wait()
        finally:
            lock.execute("COMMIT")
            lock.close()
            for t in threads:
                t.join(60)
        assert not errors, errors[0]
        with sqlite3.connect(path) as other:
            logged = {m for m, in other.execute("SELECT message_id FROM pn_events")}
        assert len(sent) == THREADS * per_thread
        assert {m.message_id for m in sent} <= logged
