"""The log follower's cursor hand-over (what an AssetWatcher trigger relies on).

Real stores (SQLite, PostgreSQL). A watcher with a cursor gets a set-done only
after its cursor has durably moved past it, read back through a second app
on the same store (another engine, another connection); twins on one cursor
get it once; and a watcher holds at most one event taken and not yet handed
on, so a trigger cancelled with events still queued could lose one at most.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest

WAIT_SECONDS = 30.0


@pytest.fixture
def apps(store_url: str) -> Iterator[tuple[Any, Any]]:
    from partition_notify.app import build_app

    writer = build_app(store_url=store_url, transport_url="embedded://")
    reader = build_app(store_url=store_url, transport_url="embedded://")
    writer.publisher.register_table("sales", "orders", ["datestamp"])
    yield writer, reader
    reader.close()
    writer.close()


def _cursor_at(app: Any, name: str) -> int:
    from partition_notify.store.cursors import Cursors

    cur = Cursors(app.store).get(name)
    return -1 if cur is None else cur.event_id


def _follower(app: Any) -> Any:
    from partition_notify.integrations.follow import LogFollower

    return LogFollower(app.store, poll_interval_seconds=0.05)


def _watch(app: Any, name: str | None, got: queue.Queue[tuple[Any, int]],
           probe: Any = None) -> Any:
    from partition_notify.integrations.follow import Watch
    from partition_notify.store.cursors import Cursors

    start = Cursors(app.store).open(name).event_id if name else 0

    def deliver(msg: Any) -> None:  # the follower's thread
        got.put((msg, probe(msg) if probe else -1))

    return Watch(frozenset({"sales.orders"}), start, deliver, cursor=name)


def test_the_cursor_is_durable_before_the_watcher_sees_the_event(
        apps: tuple[Any, Any]) -> None:
    writer, reader = apps
    got: queue.Queue[tuple[Any, int]] = queue.Queue()
    follower = _follower(reader)
    try:
        follower.add(_watch(reader, "c1", got, lambda m: _cursor_at(writer, "c1")))
        writer.publisher.send_mark_set_done("sales", "orders", "datestamp=20110228")
        msg, seen_by_other_engine = got.get(timeout=WAIT_SECONDS)
        assert seen_by_other_engine == msg.event_id  # committed before the hand-over
    finally:
        follower.close()


def test_twins_on_one_cursor_get_each_set_done_once(apps: tuple[Any, Any]) -> None:
    writer, reader = apps
    got: queue.Queue[tuple[Any, int]] = queue.Queue()
    follower = _follower(reader)
    try:
        twins = [_watch(reader, "twin", got), _watch(reader, "twin", got)]
        for w in twins:
            follower.add(w)
        seen = []
        for day in ("20110301", "20110302", "20110303"):
            writer.publisher.send_mark_set_done("sales", "orders", f"datestamp={day}")
            seen.append(got.get(timeout=WAIT_SECONDS)[0])
            for w in twins:
                if w.busy:
                    follower.resume(w)
        # One thread hands each event to both twins before reading the next, so a
        # second copy of an earlier event would have been queued before the last one.
        assert [m.partition_spec["datestamp"] for m in seen] == [
            "20110301", "20110302", "20110303"]
        assert got.empty() and sum(w.delivered for w in twins) == 3
        assert _cursor_at(writer, "twin") == seen[-1].event_id
    finally:
        follower.close()


def test_a_watcher_holds_one_taken_event_until_it_resumes(apps: tuple[Any, Any]) -> None:
    writer, reader = apps
    got: queue.Queue[tuple[Any, int]] = queue.Queue()
    plain: queue.Queue[tuple[Any, int]] = queue.Queue()
    follower = _follower(reader)
    try:
        watch = _watch(reader, "one", got)
        follower.add(watch)
        follower.add(_watch(reader, None, plain))
        for day in ("20110401", "20110402", "20110403"):
            writer.publisher.send_mark_set_done("sales", "orders", f"datestamp={day}")
        ids = [plain.get(timeout=WAIT_SECONDS)[0].event_id for _ in range(3)]
        # The follower has read all three; the cursor watcher took only the first.
        first, _ = got.get(timeout=WAIT_SECONDS)
        assert first.event_id == ids[0] and got.empty()
        assert _cursor_at(writer, "one") == ids[0]
        seen = [first.event_id]
        for _ in range(2):
            follower.resume(watch)
            seen.append(got.get(timeout=WAIT_SECONDS)[0].event_id)
            assert _cursor_at(writer, "one") == seen[-1]
        assert seen == ids
    finally:
        follower.close()
