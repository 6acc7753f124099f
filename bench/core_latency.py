"""Embedded transport: publish -> subscriber callback latency, p50/p99.

    PYTHONPATH=. python bench/core_latency.py [--n 1000] [--backend sqlite|postgresql|both]
        [--poll-interval 0.02]

same process   Publisher and Subscriber share one Store: the commit wakes the
               consumer at once.
cross process  the Subscriber runs in another process on the same database and
               learns of commits by polling the log every --poll-interval s.

Latency is measured from just before Publisher.send_mark_set_done to the
callback, one message at a time (the next is sent once the last arrived).
The publish call itself (validate, one commit) is reported separately.

On SQLite the same-process run is done at ``synchronous=NORMAL`` and at the
default ``FULL`` (fsync of the WAL at every commit: durable at commit),
alternating rounds on fresh stores, and the FULL/NORMAL ratio of the medians
is printed: the price of the durability promise.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import threading
import time
from typing import Any

from core_common import backends, machine_note, scratch_store_url, summary_ms

TIMEOUT = 30.0


def subscriber_process(url: str, poll: float, ready: Any, out: Any, stop: Any) -> None:
    from partition_notify.app import build_app

    with build_app(store_url=url, transport_url="embedded://",
                   poll_interval_seconds=poll) as app, app.subscriber() as sub:
        sub.subscribe(("bench", "lat"),
                      lambda m: out.put((m.message_id, time.time())), history=False)
        ready.set()
        stop.wait(3600)


def same_process(url: str, n: int, poll: float,
                 synchronous: str | None = None) -> tuple[list[float], list[float]]:
    from partition_notify.app import build_app

    extra = {} if synchronous is None else {"sqlite_synchronous": synchronous}
    with build_app(store_url=url, transport_url="embedded://",
                   poll_interval_seconds=poll, **extra) as app:
        app.publisher.register_table("bench", "lat", ["ds"])
        arrived: dict[str, float] = {}
        cond = threading.Condition()

        def on_message(msg: Any) -> None:
            t = time.perf_counter()
            with cond:
                arrived[msg.message_id] = t
                cond.notify_all()

        latency: list[float] = []
        publish: list[float] = []
        with app.subscriber() as sub:
            sub.subscribe(("bench", "lat"), on_message, history=False)
            for i in range(n + 50):
                t0 = time.perf_counter()
                msg = app.publisher.send_mark_set_done("bench", "lat", f"ds={i}")
                t1 = time.perf_counter()
                with cond:
                    if not cond.wait_for(lambda m=msg: m.message_id in arrived, TIMEOUT):
                        raise SystemExit(f"message {i} not delivered in {TIMEOUT} s")
                if i >= 50:  # warm-up
                    latency.append(arrived[msg.message_id] - t0)
                    publish.append(t1 - t0)
    label = f" [{synchronous}]" if synchronous else ""
    print(f"  same process{label}  publish->callback: {summary_ms(latency)}")
    print(f"  same process{label}  publish call:      {summary_ms(publish)}")
    return latency, publish


def sqlite_synchronous_cost(n: int, poll: float, rounds: int = 2) -> None:
    """NORMAL vs FULL side by side: alternating rounds, fresh store each, pooled samples."""
    pooled: dict[str, tuple[list[float], list[float]]] = {"NORMAL": ([], []), "FULL": ([], [])}
    for _ in range(rounds):
        for level, (lat, pub) in pooled.items():
            with scratch_store_url("sqlite") as url:
                got_lat, got_pub = same_process(url, n, poll, synchronous=level)
            lat += got_lat
            pub += got_pub
    med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in pooled.items()}
    print(f"  synchronous   p50 publish call: NORMAL {med['NORMAL'][1] * 1000:.3f} ms, "
          f"FULL {med['FULL'][1] * 1000:.3f} ms -> FULL/NORMAL "
          f"{med['FULL'][1] / med['NORMAL'][1]:.2f}x")
    print(f"  synchronous   p50 publish->callback: NORMAL {med['NORMAL'][0] * 1000:.3f} ms, "
          f"FULL {med['FULL'][0] * 1000:.3f} ms -> FULL/NORMAL "
          f"{med['FULL'][0] / med['NORMAL'][0]:.2f}x")


def cross_process(url: str, n: int, poll: float) -> None:
    from partition_notify.app import build_app

    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=subscriber_process, args=(url, poll, ready, out, stop))
    proc.start()
    try:
        if not ready.wait(120):
            raise SystemExit("subscriber process did not start")
        latency: list[float] = []
        with build_app(store_url=url, transport_url="embedded://") as app:
            for i in range(n + 50):
                t0 = time.time()
                msg = app.publisher.send_mark_set_done("bench", "lat", f"ds=x{i}")
                got_id, t_recv = out.get(timeout=TIMEOUT)
                if got_id != msg.message_id:
                    raise SystemExit(f"expected {msg.message_id}, got {got_id}")
                if i >= 50:
                    latency.append(t_recv - t0)
        print(f"  cross process publish->callback: {summary_ms(latency)} "
              f"(poll every {poll * 1000:g} ms)")
    finally:
        stop.set()
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--poll-interval", type=float, default=0.02)
    ap.add_argument("--no-cross-process", action="store_true")
    args = ap.parse_args()
    for backend in backends(args.backend):
        print(f"\n== {backend}: {args.n:,} set-done messages, one at a time ==")
        if backend == "sqlite":
            sqlite_synchronous_cost(args.n, args.poll_interval)
        with scratch_store_url(backend) as url:
            same_process(url, args.n, args.poll_interval)
            if not args.no_cross_process:
                cross_process(url, args.n, args.poll_interval)
        print(f"  {machine_note()}")


if __name__ == "__main__":
    main()
