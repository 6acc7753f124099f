"""Event ids are gap-free and in commit order under concurrent writers.

Threads share one store; processes ('spawn') each open their own. A follower
reads the log by cursor while they write: if an id ever became visible after
a larger one, the follower would skip it and the final check would fail.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import defaultdict

from partition_notify.store import Store
from sqlalchemy import text

from partition_notify.app import build_app
from tests.store._writer_process import write

THREADS, PER_THREAD = 8, 200
PROCESSES, PER_PROCESS = 4, 200
# Every 10th write announces 3 partitions (3 ids in one transaction).
EVENTS_PER_WRITER = lambda n: (n - (n + 9) // 10) + 3 * ((n + 9) // 10)  # noqa: E731


class Follower(threading.Thread):
    """Follows the log by cursor on its own engine, as the embedded consumer does."""

    def __init__(self, url: str, expected: int) -> None:
        super().__init__(daemon=True)
        self.store = Store.open(url, upgrade=False)
        self.expected = expected
        self.seen: list[int] = []
        self.out_of_order: list[tuple[int, int]] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        cursor = 0
        try:
            while len(self.seen) < self.expected and not self.stop.is_set():
                batch = self.store.log.events_after(cursor, 500)
                for ev in batch:
                    if ev.event_id <= cursor:
                        self.out_of_order.append((cursor, ev.event_id))
                    cursor = max(cursor, ev.event_id)
                    self.seen.append(ev.event_id)
                if not batch:
                    self.stop.wait(0.002)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.store.close()


def _register(url: str) -> None:
    with build_app(store_url=url, transport_url="embedded://") as app:
        for t in ("t0", "t1"):
            app.publisher.register_table("ids", t, ["ds", "n"])


def _check_log(url: str, expected: int) -> None:
    store = Store.open(url, upgrade=False)
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT event_id, topic, topic_seq FROM pn_events ORDER BY event_id")).all()
            nxt = conn.execute(text(
                "SELECT next_value FROM pn_sequence WHERE name = 'event'")).scalar_one()
    finally:
        store.close()
    ids = [r[0] for r in rows]
    assert ids == list(range(1, expected + 1)), "event ids have a gap or a duplicate"
    assert nxt == expected + 1
    per_topic: dict[str, list[int]] = defaultdict(list)
    for _, topic, seq in rows:
        per_topic[topic].append(seq)
    assert set(per_topic) == {"hcat.ids.t0", "hcat.ids.t1"}
    for topic, seqs in per_topic.items():
        # Gap-free per topic, and in event-id (commit) order.
        assert seqs == list(range(1, len(seqs) + 1)), f"topic_seq of {topic} not gap-free"


def _assert_follower(follower: Follower, expected: int) -> None:
    follower.join(120)
    assert not follower.is_alive(), f"follower saw {len(follower.seen)} of {expected}"
    assert follower.error is None, follower.error
    assert follower.out_of_order == []
    assert follower.seen == list(range(1, expected + 1))


def test_gap_free_ids_under_threads(store_url):
    _register(store_url)
    expected = THREADS * EVENTS_PER_WRITER(PER_THREAD)
    follower = Follower(store_url, expected)
    errors: list[BaseException] = []
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        start = threading.Barrier(THREADS)

        def writer(w: int) -> None:
            try:
                start.wait(30)
                for i in range(PER_THREAD):
                    table = ("t0", "t1")[i % 2]
                    if i % 10 == 0:
                        app.publisher.announce_partitions(
                            "ids", table, [f"ds=w{w}_{i}/n={n}" for n in range(3)])
                    else:
                        app.publisher.send_mark_set_done("ids", table, f"ds=w{w}_{i}")
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(THREADS)]
        follower.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not any(t.is_alive() for t in threads), "writer threads did not finish"
    assert errors == []
    _assert_follower(follower, expected)
    _check_log(store_url, expected)


def test_gap_free_ids_under_processes(store_url):
    _register(store_url)
    expected = PROCESSES * EVENTS_PER_WRITER(PER_PROCESS)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    procs = [ctx.Process(target=write, args=(store_url, w, PER_PROCESS, barrier))
             for w in range(PROCESSES)]
    follower = Follower(store_url, expected)
    follower.start()
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(300)
        assert [p.exitcode for p in procs] == [0] * PROCESSES
    except BaseException:
        follower.stop.set()
        raise
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(10)
    _assert_follower(follower, expected)
    _check_log(store_url, expected)
