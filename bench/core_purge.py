"""Purge of expired set-done rows while a writer keeps publishing.

    PYTHONPATH=. python bench/core_purge.py [--rows 1000000] [--batch-size 5000]
        [--backend sqlite|postgresql|both] [--writer process|thread]

Loads --rows expired set-done rows (plus --keep unexpired ones) straight into
the retention table, then runs Store.retention.purge_expired (the serve job's call)
while a writer publishes set-done messages through the real Publisher
(embedded transport) as fast as it can, each publish timed. By default the
writer is another process, as a Spark job's publisher would be; --writer
thread shares this process (and its GIL) instead.

Goals: purge <= 10 s for 1,000,000 rows; no publish blocked > 100 ms.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import threading
import time
from typing import Any

from core_common import (
    analyze,
    backends,
    body_factory,
    bulk_load_set_done,
    machine_note,
    pct,
    plain_canonical,
    scratch_store_url,
    summary_ms,
)
from sqlalchemy import text

KEYS = ["ds", "region"]
DAY = 86400.0


def writer_loop(url: str, started: Any, stop: Any, out: Any) -> None:
    """Publish set-done messages until ``stop``; send back (start, latency, lock wait)."""
    from sqlalchemy import event

    from partition_notify.app import build_app

    samples: list[tuple[float, float, float]] = []
    with build_app(store_url=url, transport_url="embedded://") as app:
        # Time spent acquiring the write lock: on SQLite, the BEGIN IMMEDIATE
        # statement (PostgreSQL writers take no lock the purge holds).
        waited = [0.0]
        begun: list[float] = []

        @event.listens_for(app.store.engine, "before_cursor_execute")
        def _before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.startswith("BEGIN IMMEDIATE"):
                begun.append(time.perf_counter())

        @event.listens_for(app.store.engine, "after_cursor_execute")
        def _after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            # A writer polls for the lock (store.engine.LOCK_POLL_SECONDS): time
            # from its first attempt to the one that succeeded.
            if statement.startswith("BEGIN IMMEDIATE") and begun:
                waited[0] += time.perf_counter() - begun[0]
                begun.clear()

        i = 0
        started.set()
        while not stop.is_set():
            t0 = time.time()
            p0 = time.perf_counter()
            waited[0] = 0.0
            app.publisher.send_mark_set_done("bench", "live", {"ds": f"w{i}", "region": "us"})
            samples.append((t0, time.perf_counter() - p0, waited[0]))
            i += 1
    out.put(samples)


def run(backend: str, rows: int, keep: int, batch_size: int, writer: str,
        settle: float, pause: float) -> None:
    from partition_notify.publisher import Publisher, PublisherConfig
    from partition_notify.store import Store
    from partition_notify.transports.embedded import EmbeddedTransport

    print(f"\n== {backend}: purge {rows:,} expired rows (batch {batch_size:,}), "
          f"{keep:,} unexpired kept, writer in a {writer}, pause {pause * 1000:g} ms ==")
    with scratch_store_url(backend) as url:
        store = Store.open(url)
        try:
            pub = Publisher(store, EmbeddedTransport(store), PublisherConfig())
            expired = pub.register_table("bench", "expired", KEYS, retention_seconds=int(DAY))
            pub.register_table("bench", "live", KEYS, retention_seconds=int(30 * DAY))
            make = body_factory(expired)
            now = time.time()

            def gen():
                for i in range(rows + keep):
                    values = {"ds": f"2020{i // 100:06d}", "region": f"r{i % 100:02d}"}
                    # The first `keep` rows were published recently: not expired.
                    published = now - 60 if i < keep else now - 2 * DAY
                    yield (expired.id, plain_canonical(values), i + 1,
                           make(values, i + 1, published, published + DAY), published,
                           published + DAY)

            t = time.perf_counter()
            bulk_load_set_done(store, gen(), progress=backend)
            print(f"  loaded in {time.perf_counter() - t:.1f} s; analyzing")
            analyze(store)

            if writer == "process":
                ctx = multiprocessing.get_context("spawn")
                started, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
                worker: Any = ctx.Process(target=writer_loop, args=(url, started, stop, out))
            else:
                started, stop = threading.Event(), threading.Event()
                import queue

                out = queue.Queue()
                worker = threading.Thread(target=writer_loop, args=(url, started, stop, out))
            worker.start()
            if not started.wait(120):
                raise SystemExit("writer did not start")
            time.sleep(settle)  # baseline: publishes with no purge running

            batch_ends: list[float] = []
            purge_start = time.time()
            p0 = time.perf_counter()
            def between() -> None:
                batch_ends.append(time.time())
                if pause:
                    time.sleep(pause)

            purged = store.retention.purge_expired(batch_size=batch_size, between_batches=between)
            purge_seconds = time.perf_counter() - p0
            purge_end = time.time()

            time.sleep(settle)
            stop.set()
            samples: list[tuple[float, float, float]] = out.get(timeout=120)
            worker.join(60)

            with store.engine.connect() as conn:
                left_expired = conn.execute(text(
                    "SELECT count(*) FROM pn_set_done WHERE expires_at <= :n"),
                    {"n": purge_start}).scalar_one()
                kept = conn.execute(text(
                    "SELECT count(*) FROM pn_set_done WHERE table_id = :t"),
                    {"t": expired.id}).scalar_one()
        finally:
            store.close()

    bounds = [purge_start, *batch_ends, purge_end]
    batch_secs = [b - a for a, b in itertools.pairwise(bounds)]
    during = [lat for t0, lat, _ in samples if purge_start <= t0 + lat and t0 <= purge_end]
    lock_waits = [w for t0, lat, w in samples if purge_start <= t0 + lat and t0 <= purge_end]
    before = [lat for t0, lat, _ in samples if t0 + lat < purge_start]
    print(f"  purge: {purged:,} rows in {purge_seconds:.2f} s "
          f"({purged / max(purge_seconds, 1e-9):,.0f} rows/s), {len(batch_secs)} batches; "
          f"goal <= 10 s: {'MET' if purge_seconds <= 10 else 'MISSED'}")
    print(f"  batch duration (incl. pause): {summary_ms(batch_secs)}")
    print(f"  left: {left_expired:,} expired rows; {kept:,} unexpired rows of {keep:,} kept")
    if before:
        print(f"  publish latency before purge: {summary_ms(before)}")
    if during:
        slow = sum(1 for lat in during if lat > 0.1)
        print(f"  publish latency during purge: {summary_ms(during)}")
        print(f"  publishes during purge: {len(during):,}, over 100 ms: {slow}; goal max <= "
              f"100 ms: {'MET' if max(during) <= 0.1 else 'MISSED'} (p99 "
              f"{pct(during, 99) * 1000:.1f} ms)")
        if backend == "sqlite":
            blocked = sum(1 for w in lock_waits if w > 0.1)
            print(f"  of which waiting for the write lock: {summary_ms(lock_waits)}; "
                  f"lock waits over 100 ms: {blocked}")
    else:
        print("  no publish overlapped the purge")
    print(f"  {machine_note()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keep", type=int, default=10_000)
    ap.add_argument("--batch-size", type=int, default=5000)
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--writer", choices=["process", "thread"], default="process")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds of publishing before and after the purge")
    ap.add_argument("--pause-ms", type=float, default=0.0,
                    help="sleep between batches (the between_batches hook of "
                         "Store.retention.purge_expired), "
                         "so writers waiting on SQLite's lock get in")
    args = ap.parse_args()
    for backend in backends(args.backend):
        run(backend, args.rows, args.keep, args.batch_size, args.writer, args.settle,
            args.pause_ms / 1000)


if __name__ == "__main__":
    main()
