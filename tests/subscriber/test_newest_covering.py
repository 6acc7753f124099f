"""A waiter gets the NEWEST retained covering set-done, not the oldest.

A set done again (a backfill, a re-run at a newer revision: docs/revisions.md)
carries the revision downstream jobs read at; a late waiter handed the first
one read stale data. Real store: SQLite and PostgreSQL (``store_url``).
"""

from __future__ import annotations

import queue
from collections.abc import Iterator

import pytest

from partition_notify.app import App, build_app
from partition_notify.contract import AnyMessage, SetDoneMessage, spec


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


def _done_twice(app: App) -> tuple[SetDoneMessage, SetDoneMessage]:
    """``datestamp=1`` done at revision 1, then the narrower ``datestamp=1/region=us`` at 2."""
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    a = app.publisher.send_mark_set_done("sales", "orders", "datestamp=1", revision=1)
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=2", revision=9)
    b = app.publisher.send_mark_set_done("sales", "orders", "datestamp=1/region=us",
                                         revision=2)
    return a, b


def test_the_store_s_newest_covering_is_the_latest_completion(app: App) -> None:
    a, b = _done_twice(app)
    info = app.store.catalog.get_table("sales", "orders")
    wanted = spec.covering_specs(spec.parse("datestamp=1/region=us"))
    newest = app.store.retention.newest_covering(info, wanted)
    assert newest is not None and SetDoneMessage.model_validate_json(newest).event_id == b.event_id
    # The whole history stays in event order (the deadline checker reads the first).
    bodies = app.store.retention.set_done_covering(info, wanted)
    assert [SetDoneMessage.model_validate_json(x).event_id for x in bodies] == [a.event_id,
                                                                                 b.event_id]
    # Only the broader set covers region=eu: its one completion.
    eu = spec.covering_specs(spec.parse("datestamp=1/region=eu"))
    found = app.store.retention.newest_covering(info, eu)
    assert found is not None and SetDoneMessage.model_validate_json(found).event_id == a.event_id
    assert app.store.retention.newest_covering(info, spec.covering_specs({"datestamp": "3"})) \
        is None


def test_wait_for_set_done_answers_the_newest(app: App) -> None:
    a, b = _done_twice(app)
    with app.subscriber() as sub:
        for timeout in (0, 5):
            got = sub.wait_for_set_done("sales", "orders", "datestamp=1/region=us", timeout)
            assert (got.event_id, got.revision) == (b.event_id, 2)
        got = sub.wait_for_set_done("sales", "orders", "datestamp=1/region=eu", 0)
        assert (got.event_id, got.revision) == (a.event_id, 1)


def test_watch_newest_delivers_the_newest_then_live(app: App) -> None:
    a, b = _done_twice(app)
    seen: queue.Queue[AnyMessage] = queue.Queue()
    with app.subscriber() as sub:
        w = sub.watch_set_done("sales", "orders", "datestamp=1/region=us", seen.put,
                               newest=True, timeout=10)
        first = seen.get(timeout=10)
        assert isinstance(first, SetDoneMessage) and first.event_id == b.event_id
        c = app.publisher.send_mark_set_done("sales", "orders", "datestamp=1", revision=3)
        assert seen.get(timeout=10).event_id == c.event_id
        assert seen.empty()
        w.close()
        # Without newest=True the history is every retained one, in order.
        everything: queue.Queue[AnyMessage] = queue.Queue()
        h = sub.watch_set_done("sales", "orders", "datestamp=1/region=us", everything.put,
                               timeout=10)
        got = [everything.get(timeout=10).event_id for _ in range(3)]
        h.close()
    assert got == [a.event_id, b.event_id, c.event_id]


def test_expect_wait_answers_the_newest(app: App) -> None:
    _, b = _done_twice(app)
    got = app.deadlines.wait_for_set_done("sales", "orders", "datestamp=1/region=us", 5)
    assert (got.event_id, got.revision) == (b.event_id, 2)
