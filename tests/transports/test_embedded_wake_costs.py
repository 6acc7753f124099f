"""What a cross-process wake-up costs the embedded subscriber (issue 20, commit -> callback).

bench/cross_process_trace.py showed the subscriber process busy between
commits: the SQLite waker polled ``data_version`` every 0.2 ms for a whole
second after a write event that belonged to a commit already reported, and
the consumer read the log a second time after every message. Both competed
for the GIL with the read and the dispatcher that deliver the next message.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from partition_notify.store.wakeups import SETTLE_SECONDS, WAKE_SUFFIX, InotifyWaker

from partition_notify.app import build_app

WAIT = 30.0
#: Far beyond every wait below: a delivery within WAIT is a wake-up, not the fallback read.
POLL = 120.0


class CountingWaker(InotifyWaker):
    """The real waker; counts its ``data_version`` reads."""

    def __init__(self, database: Path, on_commit: Any) -> None:
        super().__init__(database, on_commit)
        self.reads = 0
        self.watching = threading.Event()
        self.settling = threading.Event()

    def _woken_if_changed(self, conn: sqlite3.Connection, last: int) -> int:
        self.reads += 1
        if self.reads == 1:  # follow()'s first read comes after its inotify watch began
            self.watching.set()
        if self.reads > 2:  # past the start: a write event began a settle
            self.settling.set()
        return super()._woken_if_changed(conn, last)


def test_one_commit_costs_the_sqlite_waker_a_bounded_number_of_reads(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.execute("PRAGMA cache_size=10")  # pages: the transaction spills to the WAL early
    woke = threading.Event()
    waker = CountingWaker(db, woke.set).start()
    try:
        # Not ``woke``: the start's wake-up comes before the inotify watch, and
        # writes made in between would never begin a settle (a loaded machine).
        assert waker.watching.wait(WAIT), "the waker never watched"
        woke.clear()
        conn.execute("BEGIN")
        for _ in range(50):
            conn.execute("INSERT INTO t VALUES (?)", (b"x" * 40_000,))
        # The spilled pages' writes start a settle; the commit's own writes then
        # queue behind it, as when a writer's WAL writes outlast the first wake.
        assert waker.settling.wait(WAIT), "the spill's WAL writes began no settle"
        start = waker.reads
        conn.execute("COMMIT")
        assert woke.wait(WAIT), "the commit was not heard"
        # Measuring what the waker does after the wake-up: the settle window is
        # a span of time, not an event to await.
        time.sleep(SETTLE_SECONDS + 0.2)
        reads = waker.reads - start
        assert reads <= 100, f"{reads} data_version reads for one commit"
    finally:
        waker.close(5)
        conn.close()


@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
def test_the_consumer_reads_the_log_once_per_commit(store_url: str) -> None:
    n = 10
    app = build_app(store_url=store_url, transport_url="embedded://",
                    poll_interval_seconds=POLL)
    # Another store object: its commits reach the subscriber as another process's do.
    other = build_app(store_url=store_url, transport_url="embedded://")
    reads: list[int] = []
    original = app.store.log.events_after

    def counted(*args: Any, **kwargs: Any) -> Any:
        batch = original(*args, **kwargs)
        reads.append(len(batch))
        return batch

    app.store.log.events_after = counted  # type: ignore[method-assign]
    got = threading.Semaphore(0)
    try:
        other.publisher.register_table("wake", "t", ["ds"])
        with app.subscriber() as sub:
            sub.subscribe(("wake", "t"), lambda _m: got.release(), history=False)
            before = len(reads)
            for i in range(n):
                other.publisher.send_mark_set_done("wake", "t", {"ds": str(i)})
                assert got.acquire(timeout=WAIT), f"message {i} never arrived"
            during = reads[before:]
        assert sum(during) == n
        # One read per commit; a wake-up that lands during a read may cost one more.
        assert len(during) <= n + 2, f"{len(during)} log reads for {n} commits: {during}"
    finally:
        other.close()
        app.close()


class TouchOnlyWaker(InotifyWaker):
    """The real waker without its WAL-write settle: only the wake file can wake it.

    ``watching`` is set at the first settle, which ``follow`` runs once its inotify
    watch exists: a commit before that would be seen by no event (the real waker's
    start settle catches it through data_version, which this one skips).
    """

    def __init__(self, database: Path, on_commit: Callable[[], None]) -> None:
        super().__init__(database, on_commit)
        self.watching = threading.Event()

    def _settle(self, conn: sqlite3.Connection, last: int, fd: int) -> int:
        self.watching.set()
        return last


def test_an_append_touches_the_wake_file_which_alone_wakes_a_reader(tmp_path: Path) -> None:
    # The settle reads data_version ever less often while a slow fsync runs;
    # the touch after the commit is the exact signal and needs no reads.
    db = tmp_path / "store.db"
    with build_app(store_url=f"sqlite:///{db}", transport_url="embedded://") as app:
        app.publisher.register_table("wake", "t", ["ds"])
        woke = threading.Event()
        waker = TouchOnlyWaker(db, woke.set).start()
        try:
            assert waker.watching.wait(WAIT), "the waker never set up its watch"
            woke.clear()
            app.publisher.send_mark_set_done("wake", "t", {"ds": "1"})
            assert (tmp_path / f"store.db{WAKE_SUFFIX}").exists()
            assert woke.wait(WAIT), "the append's touch did not wake the reader"
        finally:
            waker.close(5)
