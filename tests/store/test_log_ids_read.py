"""The subscriber's log check read (``EventLog.topic_ids_after``) on kept connections.

A quiet subscriber runs it once per live message (subscriber/verify.py), so it
is a driver statement on store/hot_read.py's kept connections. It must answer
as the SQLAlchemy statement it replaced did, in every thread when more threads
read than connections are kept, and PostgreSQL's generic plan for it must stay
an index range read once the log has grown.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from partition_notify.store import Store
from partition_notify.store.hot_read import MAX_KEPT
from partition_notify.store.repositories import TOPIC_IDS_AFTER
from sqlalchemy import text

from partition_notify.app import build_app
from tests.store.test_hot_read_plans import _rows_read

GROWN = 20_000


def _orm_read(store: Store, topic: str, after: int, upto: int) -> list[tuple[int, str, str]]:
    params = {"topic": topic, "after": after, "upto": upto, "limit": 1000}
    return [(int(s), str(m), str(k)) for s, m, k in store.log._db.read(TOPIC_IDS_AFTER, params)]


def test_the_ids_read_answers_as_the_statement_it_replaced_in_every_thread(
        store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds"])
        app.publisher.register_table("db", "u", ["ds"])
        for day in range(30):
            app.publisher.send_mark_set_done("db", "t", f"ds={day}")
            if day % 3 == 0:
                app.publisher.send_mark_set_done("db", "u", f"ds={day}")
        log = app.store.log
        ranges = [("hcat.db.t", a, b) for a, b in ((0, 30), (4, 9), (29, 529), (30, 40))]
        ranges += [("hcat.db.u", 0, 500), ("hcat.db.none", 0, 10)]
        want = [_orm_read(app.store, *r) for r in ranges]
        assert [len(w) for w in want] == [30, 5, 1, 0, 10, 0]
        assert want[1][0][0] == 5 and want[1][0][2] == "PARTITION_DONE"
        workers = 3 * MAX_KEPT  # the rest go through the engine's pool
        barrier = threading.Barrier(workers)

        def read(_: int) -> list[list[tuple[int, str, str]]]:
            barrier.wait(30)
            return [log.topic_ids_after(*r) for _ in range(20) for r in ranges][-len(ranges):]

        with ThreadPoolExecutor(workers) as pool:
            answers = list(pool.map(read, range(workers)))
    assert answers == [want] * workers


def test_the_ids_read_s_plan_does_not_outlive_the_log_s_growth(pg_store: Store) -> None:
    log = pg_store.log
    for _ in range(12):  # prepared on the first, generic from about the sixth
        assert log.topic_ids_after("hcat.d.t", 0, 500) == []
    with pg_store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
            "message_id, headers, body, created_at, attempts, rejections) "
            "SELECT g, 'hcat.d.t', g, 'PARTITION_DONE', 1, 'm' || g, '{}', 'b', 0, 0, 0 "
            "FROM generate_series(1, :n) AS g"), {"n": GROWN})
    found, read = _rows_read(pg_store, lambda: log.topic_ids_after(
        "hcat.d.t", GROWN - 3, GROWN + 497), "pn_events")
    assert found == [(GROWN - 2, f"m{GROWN - 2}", "PARTITION_DONE"),
                     (GROWN - 1, f"m{GROWN - 1}", "PARTITION_DONE"),
                     (GROWN, f"m{GROWN}", "PARTITION_DONE")]
    assert read <= 10, f"read {read} rows of pn_events for 3 events"

