"""Marking events published (the mark flusher's and the relay's write), SQLite file and
PostgreSQL: the same rows' effects on both paths (SQLite's runs on the driver,
store/sqlite_writer.py), across more ids than one statement takes, and from two
threads at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from partition_notify.store import Store
from partition_notify.store.sqlite_writer import MARK_CHUNK
from sqlalchemy import text

from partition_notify.app import App, build_app


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logged(store_url: str) -> Iterator[tuple[Store, Clock, list[int]]]:
    """MARK_CHUNK + 7 events logged unpublished (the broker was down)."""
    clock = Clock()
    app: App = build_app(store_url=store_url, transport_url="embedded://")
    store = Store(app.store.engine, clock=clock)
    app.publisher.register_table("mk", "t", ["n"])
    info = app.store.catalog.get_table("mk", "t")
    drafts = [app.publisher._partition_draft(info, {"n": str(n)}, None, None)
              for n in range(MARK_CHUNK + 7)]
    ids = [m.event_id for m in store.log.append(drafts)]
    yield store, clock, ids
    store.log.close()
    app.close()


def _states(store: Store) -> dict[int, tuple[object, ...]]:
    with store.engine.connect() as conn:
        return {int(r[0]): tuple(r[1:]) for r in conn.execute(text(
            "SELECT event_id, published_at, lease_owner, lease_until, retry_at "
            "FROM pn_events ORDER BY event_id"))}


def test_marks_set_published_and_clear_lease_and_retry(
        logged: tuple[Store, Clock, list[int]]) -> None:
    store, clock, ids = logged
    assert [e.event_id for e in store.log.lease_unpublished("r", 10, 30)] == ids[:10]
    with store.engine.begin() as conn:  # one of them was refused and waits for its retry
        conn.execute(text("UPDATE pn_events SET retry_at = 5 WHERE event_id = :e"),
                     {"e": ids[1]})
    marked = ids[:3] + ids[5:MARK_CHUNK + 4]  # more than one statement's worth
    clock.now = 1_000_123.5
    store.log.mark_published(marked)
    states = _states(store)
    assert {i: states[i] for i in marked} == {i: (1_000_123.5, None, None, None) for i in marked}
    leased = {i: states[i] for i in ids[3:5]}
    assert leased == {i: (None, "r", clock.now - 123.5 + 30, None) for i in ids[3:5]}
    assert {i: states[i] for i in ids[MARK_CHUNK + 4:]} == {
        i: (None, None, None, None) for i in ids[MARK_CHUNK + 4:]}
    assert store.log.relay_lag()[0] == len(ids) - len(marked)


def test_marks_from_two_threads_at_once(logged: tuple[Store, Clock, list[int]]) -> None:
    store, _, ids = logged
    halves = [ids[0::2], ids[1::2]]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def mark(part: list[int]) -> None:
        start.wait()
        try:
            for event_id in part:  # one transaction each: many chances to overlap
                store.log.mark_published([event_id])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=mark, args=(h,)) for h in halves]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert all(state[0] is not None for state in _states(store).values())
